"""The board's legend: what each block colour and each gauge segment means, in one line that wraps."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QSizePolicy

from . import style


def _swatch(color: QColor, text: str, hatched: bool = False) -> str:
    rgb = color.name()
    border = "1px dashed #888" if hatched else f"1px solid {color.darker(140).name()}"
    return f"<span style='background-color:{rgb}; border:{border}'>&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{text}"


def legend_html() -> str:
    blocks = " &nbsp; ".join(_swatch(style.ROLE_COLORS[role], name) for role, name in style.ROLE_LEGEND)
    gauge = " &nbsp; ".join(_swatch(c, name, hatched=(c is style.GAUGE_MARGIN)) for c, name in style.GAUGE_LEGEND)
    return (
        f"<b>Blocks</b> (width = bytes): {blocks} &nbsp;&nbsp; <b>Gauge</b>: {gauge} &nbsp;&nbsp; "
        "<b>x% of token time</b>: that device's share of each token · F1: guide"
    )


class Legend(QLabel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("board-legend")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setText(legend_html())
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setContentsMargins(6, 2, 6, 2)
        self.setToolTip(
            "Block colours: what the tensors are. Gauge: how a device's memory is used. Help → Guide "
            "to the board (F1) says more."
        )
