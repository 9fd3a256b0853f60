"""Colours and sizes of the board, readable on light and dark palettes."""

from __future__ import annotations

from PySide6.QtGui import QColor

from app.model import Role

ROLE_COLORS = {
    Role.ATTN: QColor("#4C78A8"),
    Role.FFN: QColor("#59A89C"),
    Role.EXPERTS: QColor("#E8833A"),
    Role.SSM: QColor("#9C6BB0"),
    Role.INPUT: QColor("#5B9E4D"),
    Role.OUTPUT: QColor("#5B9E4D"),
    Role.GLOBAL: QColor("#8C8C8C"),
    Role.OTHER: QColor("#8C8C8C"),
}
PART_COLORS = {"gate": QColor("#E8833A"), "up": QColor("#F2A65A"), "down": QColor("#C8692A"),
               "gate_up": QColor("#E8833A")}
ROLE_SHORT = {Role.ATTN: "attn", Role.FFN: "ffn", Role.EXPERTS: "exp", Role.SSM: "ssm", Role.INPUT: "embd",
              Role.OUTPUT: "out", Role.GLOBAL: "glob", Role.OTHER: "oth"}

GAUGE_WEIGHTS = QColor("#4C78A8")
GAUGE_KV = QColor("#54A24B")
GAUGE_COMPUTE = QColor("#E8833A")
GAUGE_MARGIN = QColor(150, 150, 150, 90)
GAUGE_OVER = QColor("#D64541")
LANE_OVER_BG = QColor(214, 69, 65, 40)
LANE_TARGET_BG = QColor(76, 120, 168, 45)

LANE_HEADER_H = 46
BLOCK_H = 24
ROW_GAP = 4
LAYER_GAP = 3
MIN_BLOCK_W = 7
LANE_PAD = 8
LABEL_W = 240
