"""A lane's memory gauge: stacked weights, KV cache, compute buffer and margin against capacity."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsObject

from app.memory.estimator import DeviceMemory
from app.units import fmt_bytes

from . import style


class GaugeItem(QGraphicsObject):
    """Drawn in the lane header. ``preview`` (a DeviceMemory) is drawn as an outline over the current bar."""

    def __init__(self, width: float, height: float = 14, parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.w, self.h = width, height
        self.mem: DeviceMemory | None = None
        self.preview: DeviceMemory | None = None
        self.capacity: int | None = None
        self.margin = 0
        self.over = False
        self.verification = ""  # "verified by llama.cpp", "estimated"... (app.memory.learned.Verification.describe)
        self.setAcceptHoverEvents(True)

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(0, 0, self.w, self.h)

    def set_values(self, mem: DeviceMemory | None, capacity: int | None, margin: int, over: bool = False) -> None:
        """``over``: the session's verdict that this lane is over capacity (drawn red past the margin)."""
        self.mem, self.capacity, self.margin, self.over = mem, capacity, margin, over
        self.setToolTip(self.describe())
        self.update()

    def set_verification(self, text: str) -> None:
        if text != self.verification:
            self.verification = text
            self.setToolTip(self.describe())
            self.update()

    def set_preview(self, mem: DeviceMemory | None) -> None:
        self.preview = mem
        self.setToolTip(self.describe())
        self.update()

    def scale_max(self) -> float:
        totals = [self.capacity or 0]
        if self.mem:
            totals.append(self.mem.total)
        if self.preview:
            totals.append(self.preview.total)
        return max(max(totals), 1)

    def describe(self) -> str:
        m = self.mem
        if m is None:
            return "no estimate"
        lines = [f"weights {fmt_bytes(m.model)}", f"KV cache {fmt_bytes(m.kv)}"]
        if m.recurrent:
            lines.append(f"recurrent state {fmt_bytes(m.recurrent)}")
        lines.append(f"compute buffer {fmt_bytes(m.compute)}")
        if m.output:
            lines.append(f"output buffer {fmt_bytes(m.output)}")
        if m.draft:
            lines.append(f"draft model or MTP context (weights, KV cache, buffers) {fmt_bytes(m.draft)}")
        if m.projector:
            lines.append(f"projector (weights, compute buffers) {fmt_bytes(m.projector)}")
        lines.append(f"total {fmt_bytes(m.total)}")
        if self.verification:
            lines.append(self.verification)
        if self.capacity:
            lines.append(f"capacity {fmt_bytes(self.capacity)}, margin {fmt_bytes(self.margin)}")
            lines.append(f"free after margin {fmt_bytes(self.capacity - self.margin - m.total)}")
        if self.preview is not None:
            d = self.preview.total - m.total
            lines.append(f"after the drop: {fmt_bytes(self.preview.total)} ({'+' if d >= 0 else ''}{fmt_bytes(d)})")
        return "\n".join(lines)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        rect = self.boundingRect()
        pal = QApplication.palette()
        base = pal.color(QPalette.ColorRole.Base)
        painter.fillRect(rect, base.darker(108))
        scale = self.w / self.scale_max()
        m = self.preview or self.mem
        x = 0.0
        if m is not None:
            for value, color in ((m.model, style.GAUGE_WEIGHTS), (m.context, style.GAUGE_KV),
                                 (m.compute + m.output, style.GAUGE_COMPUTE), (m.draft, style.GAUGE_DRAFT),
                                 (m.projector, style.GAUGE_PROJECTOR)):
                w = value * scale
                painter.fillRect(QRectF(x, 0, w, self.h), color)
                x += w
        if self.capacity:
            cap_x = self.capacity * scale
            margin_x = max(0.0, (self.capacity - self.margin) * scale)
            painter.fillRect(QRectF(margin_x, 0, cap_x - margin_x, self.h),
                             QBrush(style.GAUGE_MARGIN, Qt.BrushStyle.BDiagPattern))
            if m is not None and self.over:
                painter.fillRect(QRectF(margin_x, 0, max(0.0, x - margin_x), self.h), style.GAUGE_OVER)
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Text), 1.5))
            painter.drawLine(int(cap_x) - 1, -3, int(cap_x) - 1, int(self.h) + 3)
        if self.preview is not None and self.mem is not None:
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2, Qt.PenStyle.DashLine))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(QRectF(0, 0, self.mem.total * scale, self.h))
        painter.setPen(QPen(pal.color(QPalette.ColorRole.Mid)))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(rect)
        if self.verification.startswith("verified"):  # llama.cpp's own figures: a green edge
            painter.setPen(QPen(style.GAUGE_VERIFIED, 2))
            painter.drawRect(rect.adjusted(1, 1, -1, -1))
