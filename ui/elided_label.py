"""A one-line label that elides its text to the room it gets (the full text is its tooltip); it never asks for
more width than a few characters, so a long sentence cannot widen the window."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar, QWidget


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(min(60, super().minimumSizeHint().width()), super().minimumSizeHint().height())

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def setText(self, text: str) -> None:  # noqa: N802
        super().setText(text)
        self._sync_tip()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._sync_tip()

    def _sync_tip(self) -> None:
        self.setToolTip(self.text() if self.is_elided() else "")

    def paintEvent(self, event) -> None:  # noqa: N802
        p = QPainter(self)
        r = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, r.width())
        p.setPen(self.palette().color(self.foregroundRole()))
        p.drawText(r, int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), shown)


class ElidingStatusBar(QStatusBar):
    """A status bar whose temporary messages end in "…" where they do not fit (QStatusBar cuts them off
    mid-word); the full message is the tooltip."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._full = ""
        self.messageChanged.connect(lambda text: text or self.setToolTip(""))  # a cleared message, no stale tip

    def currentMessage(self) -> str:  # noqa: N802
        """The whole message on show (what it says), not the elided text that is drawn."""
        return self._full if super().currentMessage() else ""

    def showMessage(self, text: str, timeout: int = 0) -> None:  # noqa: N802
        self._full = text
        self.setToolTip(text)
        permanent = sum(c.width() for c in self.findChildren(QWidget) if c.parent() is self and c.isVisible())
        room = max(80, self.width() - permanent - 24)
        super().showMessage(self.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room), timeout)
