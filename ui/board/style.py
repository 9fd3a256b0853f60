"""Colours and sizes of the board, readable on light and dark palettes."""

from __future__ import annotations

from PySide6.QtGui import QColor

from app.model import Role

# Blocks: the Okabe-Ito palette (readable with every common colour-vision deficiency).
ROLE_COLORS = {
    Role.ATTN: QColor("#0072B2"),  # blue
    Role.FFN: QColor("#009E73"),  # bluish green
    Role.EXPERTS: QColor("#E69F00"),  # orange
    Role.SSM: QColor("#CC79A7"),  # reddish purple
    Role.INPUT: QColor("#56B4E9"),  # sky blue
    Role.OUTPUT: QColor("#56B4E9"),
    Role.GLOBAL: QColor("#999999"),
    Role.OTHER: QColor("#999999"),
}
PART_COLORS = {"gate": QColor("#E69F00"), "up": QColor("#F5C15C"), "down": QColor("#B07A00"),
               "gate_up": QColor("#E69F00")}
#: What each block colour means (the legend and the guide).
ROLE_LEGEND = [(Role.ATTN, "attention"), (Role.FFN, "dense FFN"), (Role.EXPERTS, "routed experts"),
               (Role.SSM, "SSM / recurrent"), (Role.INPUT, "embeddings / output"), (Role.OTHER, "other")]
ROLE_SHORT = {Role.ATTN: "attn", Role.FFN: "ffn", Role.EXPERTS: "exp", Role.SSM: "ssm", Role.INPUT: "embd",
              Role.OUTPUT: "out", Role.GLOBAL: "glob", Role.OTHER: "oth"}

# Gauge segments: hues no block uses, told apart by lightness as well as hue.
GAUGE_WEIGHTS = QColor("#6E6E6E")  # grey: the blocks' bytes, whatever their role
GAUGE_KV = QColor("#F0E442")  # yellow
GAUGE_COMPUTE = QColor("#332288")  # indigo
GAUGE_MARGIN = QColor(150, 150, 150, 90)  # hatched: the free memory kept on each device
GAUGE_OVER = QColor("#D55E00")  # vermillion: over capacity (drawn past the margin line)
GAUGE_VERIFIED = QColor("#3A9E5C")  # green edge: every figure of the lane is llama.cpp's own (a dry run's)
GAUGE_DRAFT = QColor("#AA4499")  # purple: the draft model's weights, KV cache and buffers (-md)
GAUGE_PROJECTOR = QColor("#DDCC77")  # sand: the multimodal projector's weights and buffers (--mmproj)
GAUGE_LEGEND = [(GAUGE_WEIGHTS, "weights"), (GAUGE_KV, "KV cache"), (GAUGE_COMPUTE, "compute buffers"),
                (GAUGE_DRAFT, "draft model"), (GAUGE_PROJECTOR, "projector"), (GAUGE_MARGIN, "margin (kept free)"),
                (GAUGE_OVER, "over capacity")]
#: the draft model's blocks (-md): its own colour, hatched, never dragged (placed by -ngld, -devd, -otd)
DRAFT_BLOCK = QColor(170, 68, 153, 150)
#: the projector's weights (--mmproj): its own colour, hatched, moved with --no-mmproj-offload / -mmdev
PROJECTOR_BLOCK = QColor(221, 204, 119, 170)
LANE_OVER_BG = QColor(213, 94, 0, 40)
LANE_TARGET_BG = QColor(0, 114, 178, 45)
LANE_REFUSED = QColor(213, 94, 0, 120)

LANE_HEADER_H = 46
BLOCK_H = 24
ROW_GAP = 4
#: the layer ruler under each row of blocks: its height and the least room between two numbers
RULER_H = 10
RULER_MIN_GAP = 16
LAYER_GAP = 3
MIN_BLOCK_W = 7
#: the lowest a tiny block is drawn (its area stays honest to its bytes down to this floor)
MIN_BLOCK_H = 6
LANE_PAD = 8
LABEL_W = 240
