"""The board: one lane per device, the model's blocks on them, drag and drop between lanes.

Blocks are sized by bytes (one scale for all lanes, so a GPU lane's width is
its capacity) and coloured by role. Dragging is done by hand on mouse
press/move/release rather than with ``QDrag``, so the gauges can preview the
drop at every movement and tests can drive a real mouse drag with ``QTest``.
A drop is one undo step; a drop llama.cpp cannot express is refused with
the reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QFont, QFontMetrics, QKeySequence, QPainter, QPalette, QPen
from PySide6.QtWidgets import (
    QApplication,
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QMenu,
    QToolTip,
)

from app.model import BlockId, Role
from app.placement import CPU, MIXED
from app.units import fmt_bytes

from ..document import Document
from . import style
from .gauge import GaugeItem

log = logging.getLogger(__name__)

MIME_BLOCKS = "application/x-layerdeck-blocks"


@dataclass
class ItemInfo:
    id: str
    layer: int | None
    role: Role
    part: str | None
    nbytes: int
    label: str
    nextn: bool = False


class BlockItem(QGraphicsRectItem):
    """A block or expert part. Painted by Qt itself (brush, pen): no Python call per block per repaint."""

    def __init__(self, info: ItemInfo):
        super().__init__()
        self.info = info
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, True)
        self.setAcceptHoverEvents(True)
        self.pinned = False
        color = QColor(style.PART_COLORS.get(info.part) if info.part else style.ROLE_COLORS[info.role])
        self.solid = QColor(color)
        if info.nextn:
            color.setAlpha(90)  # a NextN/MTP block: not loaded unless MTP speculation is on (set_loaded)
        self.color = color
        self.setBrush(QBrush(color))
        self._normal_pen = QPen(color.darker(140), 1)
        self.setPen(self._normal_pen)
        self.text = QGraphicsSimpleTextItem(self)
        f = QFont()
        f.setPointSizeF(7.5)
        self.text.setFont(f)
        light = 0.2126 * color.redF() + 0.7152 * color.greenF() + 0.0722 * color.blueF() > 0.45
        self.text.setBrush(QBrush(QColor("black" if light else "white")))
        self.pin_mark = QGraphicsEllipseItem(0, 0, 5, 5, self)
        self.pin_mark.setBrush(QBrush(QColor("white")))
        self.pin_mark.setPen(QPen(QColor("black"), 1))
        self.pin_mark.setVisible(False)

    def set_loaded(self, loaded: bool) -> None:
        """A NextN/MTP block drawn solid while llama.cpp loads it (draft-mtp), faded while it skips it."""
        color = QColor(self.solid)
        if not loaded:
            color.setAlpha(90)
        if color != self.color:
            self.color = color
            self.setBrush(QBrush(color))

    def set_pinned(self, pinned: bool) -> None:
        if pinned != self.pinned:
            self.pinned = pinned
            self.pin_mark.setVisible(pinned)

    def itemChange(self, change, value):  # noqa: N802
        if change == QGraphicsItem.GraphicsItemChange.ItemSelectedHasChanged:
            pal = QApplication.palette()
            self.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2.5) if value else self._normal_pen)
        return super().itemChange(change, value)

    def set_geometry(self, x: float, y: float, w: float, h: float) -> None:
        if self.rect().width() != w or self.rect().height() != h:
            self.setRect(0, 0, w, h)
            self.pin_mark.setPos(w - 7, 2)
            label = self.info.label
            if w < len(label) * 5.2 + 4 and self.info.layer is not None:
                label = str(self.info.layer)  # a narrow block still shows its layer number
            self.text.setVisible(w >= len(label) * 5.2 + 4 and h >= 14)
            self.text.setText(label)
            self.text.setPos(3, (h - 11) / 2)
        if self.pos().x() != x or self.pos().y() != y:
            self.setPos(x, y)



class DraftItem(QGraphicsRectItem):
    """The draft model's weights on one lane (-md): one hatched block per run of its layers there, sized by
    bytes like the main model's blocks, never selected or dragged (the draft is placed by -ngld, -devd and
    -otd, set in Settings)."""

    def __init__(self, fill: QColor = style.DRAFT_BLOCK, edge: QColor = style.GAUGE_DRAFT):
        super().__init__()
        self.setAcceptHoverEvents(True)
        self.setBrush(QBrush(fill, Qt.BrushStyle.Dense4Pattern))
        self.setPen(QPen(edge.darker(130), 1.2, Qt.PenStyle.DashLine))
        self.text = QGraphicsSimpleTextItem(self)
        f = QFont()
        f.setPointSizeF(7.5)
        self.text.setFont(f)
        self.label = ""

    def set_geometry(self, x: float, y: float, w: float, h: float, label: str) -> None:
        self.setRect(0, 0, w, h)
        self.setPos(x, y)
        self.label = label
        self.text.setBrush(QBrush(QApplication.palette().color(QPalette.ColorRole.Text)))
        self.text.setText(label)
        self.text.setVisible(w >= len(label) * 5.2 + 4)
        self.text.setPos(3, (h - 11) / 2)


def _extra_slot(true_w: float, width: float, x: float, row_y: float) -> tuple[float, float, float]:
    """Width and place of a block drawn after the model's (the draft's, the projector's): a wider gap first,
    onto the next row when it does not fit. Returns (w, x, row_y)."""
    w = min(max(style.MIN_BLOCK_W, true_w), width - 2 * style.LANE_PAD)
    x += style.LAYER_GAP * 3
    if x + w > width - style.LANE_PAD and x > style.LANE_PAD:
        x = style.LANE_PAD
        row_y += style.BLOCK_H + style.ROW_GAP + style.RULER_H
    return w, x, row_y


def draft_runs(layer_device: list[str], lane: str) -> list[tuple[int, int]]:
    """The draft's layer ranges (first, last) on ``lane``; index n_layer is its output layer."""
    runs: list[tuple[int, int]] = []
    for il, dev in enumerate(layer_device):
        if dev != lane:
            continue
        if runs and runs[-1][1] == il - 1:
            runs[-1] = (runs[-1][0], il)
        else:
            runs.append((il, il))
    return runs


class LaneItem(QGraphicsRectItem):
    def __init__(self, lane: str, width: float):
        super().__init__()
        self.lane = lane
        self.title = QGraphicsSimpleTextItem(self)
        f = QFont()
        f.setBold(True)
        self.title.setFont(f)
        self.subtitle = QGraphicsSimpleTextItem(self)
        self.status = QGraphicsSimpleTextItem(self)
        self.gauge = GaugeItem(max(100.0, width - style.LABEL_W - 200), 14, self)
        self.target = False
        self.refused = False  # the drag over it would be refused: drawn hatched, never as accepting
        self.over = False
        self.ruler: list[QGraphicsSimpleTextItem] = []  # layer numbers under the rows of blocks

    def set_ruler(self, ticks: list[tuple[float, float, int]]) -> None:
        """Layer numbers at (x, y) in the lane: where a layer's first block starts, as many as fit."""
        for item in self.ruler[len(ticks):]:
            item.setParentItem(None)
            if item.scene() is not None:
                item.scene().removeItem(item)
        del self.ruler[len(ticks):]
        pal = QApplication.palette()
        for i, (x, y, layer) in enumerate(ticks):
            if i == len(self.ruler):
                item = QGraphicsSimpleTextItem(self)
                f = QFont()
                f.setPointSizeF(6.5)
                item.setFont(f)
                self.ruler.append(item)
            item = self.ruler[i]
            item.setBrush(QBrush(pal.color(QPalette.ColorRole.PlaceholderText)))
            item.setText(str(layer))
            item.setPos(x, y)

    def set_status(self, text: str, tip: str | None = None) -> None:
        """The status line, elided to the lane's width (never wider); the full text is the tooltip."""
        room = max(60.0, self.rect().width() - style.LABEL_W - 8)
        fm = QFontMetrics(self.status.font())
        shown = fm.elidedText(text, Qt.TextElideMode.ElideRight, int(room))
        self.status.setText(shown)
        self.full_status = text
        self.setToolTip(tip if tip is not None else (text if shown != text else ""))

    def paint(self, painter: QPainter, option, widget=None) -> None:
        r = self.rect()
        pal = QApplication.palette()
        painter.fillRect(r, pal.color(QPalette.ColorRole.AlternateBase))
        if self.over:
            painter.fillRect(r, style.LANE_OVER_BG)
        if self.refused:
            painter.fillRect(r, QBrush(style.LANE_REFUSED, Qt.BrushStyle.BDiagPattern))
        elif self.target:
            painter.fillRect(r, style.LANE_TARGET_BG)
        painter.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1))
        painter.drawRect(r)


class BoardView(QGraphicsView):
    selection_changed = Signal(list)   # selected item ids
    hovered = Signal(str)              # a line about what is under the mouse
    #: a drop was refused: (reason, the part that could move instead or [], its lane, that part in words)
    drop_refused = Signal(str, list, str, str)

    def __init__(self, document: Document, parent=None):
        super().__init__(parent)
        self.doc = document
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setAcceptDrops(False)  # file drops go to the main window
        self.opened: set[str] = set()          # expert blocks opened into parts
        self.blocks: dict[str, BlockItem] = {}
        self.lanes: dict[str, LaneItem] = {}
        self.drafts: dict[str, DraftItem] = {}  # the draft model's weights per lane (-md)
        self.projector_item: DraftItem | None = None  # the projector's weights on its lane (--mmproj)
        self._press: QPointF | None = None
        self._dragging: list[str] | None = None
        self._drag_source: str | None = None
        self._target: str | None = None
        self._ghost: QGraphicsRectItem | None = None
        self._anchor: str | None = None
        self._refusal: str | None = None
        #: blocks drawn this many times wider than "lane width = capacity" (Ctrl+wheel, Ctrl++ / Ctrl+- / Ctrl+0);
        #: a zoomed lane wraps into more rows, so a 94-layer model's small blocks get readable labels
        self.zoom = 1.0
        self.scene().selectionChanged.connect(self._selection_changed)
        self.doc.changed.connect(self.relayout)
        self.doc.preview_changed.connect(self._show_preview)
        self.doc.opinion_changed.connect(self._refresh_headers)
        self._build_actions()
        self.relayout()

    # ------------------------------------------------------------------ items

    def item_infos(self) -> list[ItemInfo]:
        out = []
        for b in self.doc.model.blocks:
            short = style.ROLE_SHORT[b.role]
            label = short if b.layer is None else f"{b.layer} {short}"
            if b.role is Role.EXPERTS and b.id in self.opened:
                for part in sorted(b.parts, key=["gate", "up", "down", "gate_up"].index):
                    out.append(ItemInfo(str(BlockId(b.layer, b.role, part)), b.layer, b.role, part, b.part_bytes(part),
                                        f"{b.layer} {part}", b.nextn))
            else:
                out.append(ItemInfo(b.id, b.layer, b.role, None, b.nbytes, label, b.nextn))
        return out

    def _selection_changed(self) -> None:
        self.selection_changed.emit(self.selected_ids())

    def selected_ids(self) -> list[str]:
        return [it.info.id for it in self.scene().selectedItems() if isinstance(it, BlockItem)]

    def select_ids(self, ids) -> None:
        ids = set(ids)
        for bid, it in self.blocks.items():
            it.setSelected(bid in ids)

    def lane_of(self, item_id: str) -> str:
        dev = self.doc.placement.device_of(item_id)
        return CPU if dev == MIXED else dev

    # ------------------------------------------------------------------ layout

    def _scale(self, width: float, infos: list[ItemInfo], lanes_of: dict[str, str]) -> float:
        caps = [self.doc.capacity(d.name) or 0 for d in self.doc.devices]
        per_lane: dict[str, int] = {}
        for info in infos:
            lane = lanes_of[info.id]
            per_lane[lane] = per_lane.get(lane, 0) + info.nbytes
        ref = max(caps) if caps and max(caps) > 0 else max(per_lane.values(), default=1) / 2
        return max(1e-12, self.zoom * (width - 2 * style.LANE_PAD) / max(ref, 1))

    def relayout(self) -> None:
        width = max(640, self.viewport().width() - 2)
        infos = self.item_infos()
        lanes_of = {info.id: self.lane_of(info.id) for info in infos}
        scale = self._scale(width, infos, lanes_of)
        lanes = self.doc.placement.lanes
        for name in list(self.lanes):
            if name not in lanes:
                self.scene().removeItem(self.lanes.pop(name))
        for name in list(self.drafts):
            if name not in lanes:
                self.scene().removeItem(self.drafts.pop(name))
        wanted = {i.id for i in infos}
        for bid in list(self.blocks):
            if bid not in wanted:
                self.scene().removeItem(self.blocks.pop(bid))
        by_lane: dict[str, list[ItemInfo]] = {name: [] for name in lanes}
        for info in infos:
            by_lane.setdefault(lanes_of[info.id], []).append(info)
        est = self.doc.estimate
        y = 0.0
        pinned = self.doc.placement.pinned
        mtp_on = self.doc.placement.settings.load_mtp
        for name in lanes:
            lane = self.lanes.get(name)
            if lane is None:
                lane = self.lanes[name] = LaneItem(name, width)
                lane.setZValue(-1)
                self.scene().addItem(lane)
            lane.gauge.w = max(100.0, width - style.LABEL_W - 230)
            x, row_y = style.LANE_PAD, style.LANE_HEADER_H
            last_layer = None
            ticks: list[tuple[float, float, int]] = []
            last_tick = -1e9
            for info in by_lane.get(name, []):
                true_w = info.nbytes * scale
                w = min(max(style.MIN_BLOCK_W, true_w), width - 2 * style.LANE_PAD)  # zoomed: never past the lane
                # a block narrower than the floor is drawn lower instead, so its area stays honest to its bytes
                h = style.BLOCK_H if true_w >= style.MIN_BLOCK_W else max(
                    style.MIN_BLOCK_H, style.BLOCK_H * true_w / style.MIN_BLOCK_W)
                if last_layer is not None and info.layer != last_layer:
                    x += style.LAYER_GAP
                if x + w > width - style.LANE_PAD and x > style.LANE_PAD:
                    x = style.LANE_PAD
                    row_y += style.BLOCK_H + style.ROW_GAP + style.RULER_H
                    last_tick = -1e9
                if info.layer is not None and info.layer != last_layer and x - last_tick >= style.RULER_MIN_GAP:
                    ticks.append((x, row_y + style.BLOCK_H, info.layer))
                    last_tick = x
                item = self.blocks.get(info.id)
                if item is None:
                    item = self.blocks[info.id] = BlockItem(info)
                    self.scene().addItem(item)
                item.info = info
                if info.nextn:
                    item.set_loaded(mtp_on)
                item.set_pinned(info.id in pinned)
                item.set_geometry(x, y + row_y + style.BLOCK_H - h, w, h)
                x += w + 1
                last_layer = info.layer
            x, row_y = self._place_draft(name, est, scale, width, x, y, row_y)
            x, row_y = self._place_projector(name, est, scale, width, x, y, row_y)
            lane_h = row_y + style.BLOCK_H + style.RULER_H + style.LANE_PAD
            lane.setRect(0, 0, width, lane_h)
            lane.set_ruler(ticks)
            lane.setPos(0, y)
            self._update_lane_header(lane, est)
            y += lane_h + 6
        self.scene().setSceneRect(0, 0, width, y)

    def _place_draft(self, name: str, est, scale: float, width: float, x: float, y: float, row_y: float):
        """The draft model's block on lane ``name`` after the main model's blocks (wrapping like them); returns
        the new (x, row_y)."""
        draft = est.draft if est is not None else None
        mem = next((d for d in draft.devices if d.name == name), None) if draft is not None else None
        item = self.drafts.get(name)
        if mem is None or mem.model <= 0:
            if item is not None:
                self.scene().removeItem(self.drafts.pop(name))
            return x, row_y
        if item is None:
            item = self.drafts[name] = DraftItem()
            self.scene().addItem(item)
        w, x, row_y = _extra_slot(mem.model * scale, width, x, row_y)
        n_layer = len(draft.placement.layer_device) - 1
        runs = draft_runs(draft.placement.layer_device, name)
        where = ", ".join(
            ("output" if a == n_layer else f"{a}" if a == b else f"{a}-{min(b, n_layer - 1)}"
             + (" + output" if b == n_layer else ""))
            for a, b in runs
        )
        drafter = self.doc.session.draft_model
        label = f"draft {where}" if where else "draft"
        item.set_geometry(x, y + row_y, w, style.BLOCK_H, label)
        item.setToolTip(
            f"Draft model {drafter.path.name if drafter else ''} (-md) on {name}: "
            f"{'layers ' + where if where else 'token embeddings'}\n"
            f"weights {fmt_bytes(mem.model)}, KV cache {fmt_bytes(mem.context)}, compute {fmt_bytes(mem.compute)}"
            f"{', output ' + fmt_bytes(mem.output) if mem.output else ''}\n"
            "Placed by its own flags (-ngld, -devd, -otd in Settings), not by dragging."
        )
        return x + w + 1, row_y

    def _place_projector(self, name: str, est, scale: float, width: float, x: float, y: float, row_y: float):
        """The projector's weights as a block on the lane llama.cpp puts it (--mmproj): moved by
        --no-mmproj-offload and -mmdev (the Projector tab), not by dragging."""
        pm = est.projector if est is not None else None
        item = self.projector_item
        if pm is None or pm.weights <= 0 or pm.device not in self.doc.placement.lanes:
            if item is not None:
                self.scene().removeItem(item)
                self.projector_item = None
            return x, row_y
        if pm.device != name:
            return x, row_y
        if item is None:
            item = self.projector_item = DraftItem(style.PROJECTOR_BLOCK, style.GAUGE_PROJECTOR)
            self.scene().addItem(item)
        w, x, row_y = _extra_slot(pm.weights * scale, width, x, row_y)
        proj = self.doc.session.projector
        item.set_geometry(x, y + row_y, w, style.BLOCK_H, "projector")
        compute = ", ".join(f"{d} {fmt_bytes(n)}" for d, n in pm.compute.items() if n)
        item.setToolTip(
            f"Projector {proj.title if proj else ''} (--mmproj) on {name}\n"
            f"weights {fmt_bytes(pm.weights)}, compute buffers {compute or '0'}"
            + ("" if pm.exact else " (approximate: use Verify)")
            + "\nRuns where --no-mmproj-offload / -mmdev say (the Projector tab), not by dragging."
        )
        return x + w + 1, row_y

    def _update_lane_header(self, lane: LaneItem, est) -> None:
        name = lane.lane
        dev = next((d for d in self.doc.devices if d.name == name), None)
        cap = self.doc.capacity(name)
        mem = None
        if est is not None:
            mem = next((d for d in est.devices if d.name == name), None)
        margin = self.doc.margin_of(name)
        lane.title.setText(name if name != CPU else "CPU (host RAM)")
        lane.title.setPos(8, 5)
        desc = {"rpc": "RPC host", "planned": "planned", "gpu": "GPU", "igpu": "integrated GPU"}.get(
            dev.kind if dev else "", "")
        if dev is not None and dev.endpoint:
            desc = dev.endpoint
        lane.subtitle.setText(f"{desc}  {fmt_bytes(cap) if cap else 'capacity unknown'}".strip())
        lane.subtitle.setPos(8, 25)
        lane.gauge.setPos(style.LABEL_W, 8)
        used = mem.total if mem else 0
        overflow = self.doc.overflow_of(name, est) if est is not None else None
        over = overflow is not None
        lane.gauge.set_values(mem or None, cap, margin, over)
        ver = self.doc.verification
        lane.gauge.set_verification(ver.describe(name) if ver is not None and mem is not None else "")
        lane.over = over
        text = f"{fmt_bytes(used)} / {fmt_bytes(cap)}" if cap else fmt_bytes(used)
        dec = self.doc.decode
        if dec is not None:
            secs = dec.device_seconds.get(name, 0.0)
            if secs >= 5e-5:
                text += f" · {secs * 1000:.1f} ms/token ({100 * secs / dec.seconds_per_token:.0f}% of token time)"
        if overflow is not None:  # the advice first: it is what must not be cut off on a narrow window
            advice = f"over by {fmt_bytes(overflow.excess)}" + (f": move {overflow.hint}" if overflow.hint else "")
            text = f"{advice} · {text}"
        # which figures are llama.cpp's (app.memory.learned): last, so the figures and advice come first
        mark = ""
        ver = self.doc.verification
        if ver is not None and mem is not None and not self.doc.model.is_demo:
            status = ver.status(name)
            moved = ver.corrected.get(name, 0)
            mark = {"verified": "   ✓ verified by llama.cpp", "partly": "   partly verified by llama.cpp"}.get(
                status, "   estimated")
            if status != "estimated" and moved:
                mark += f" ({'+' if moved > 0 else ''}{moved / 2**20:.0f} MiB)"
        op = self.doc.opinion
        if op is not None:
            row = op.row(name)
            if row is not None:
                theirs = (row.model + row.context + row.compute) << 20
                text += f"   llama.cpp dry run: {fmt_bytes(theirs)} (model {row.model}, context {row.context}, " \
                        f"compute {row.compute} MiB)"
        lane.set_status(text + mark)
        pal = QApplication.palette()
        lane.status.setBrush(QBrush(style.GAUGE_OVER if over else pal.color(QPalette.ColorRole.Text)))
        lane.status.setPos(style.LABEL_W, 26)
        lane.title.setBrush(QBrush(pal.color(QPalette.ColorRole.Text)))
        lane.subtitle.setBrush(QBrush(pal.color(QPalette.ColorRole.PlaceholderText)))
        lane.update()

    def _refresh_headers(self) -> None:
        for lane in self.lanes.values():
            self._update_lane_header(lane, self.doc.estimate)

    def _tooltip(self, info: ItemInfo) -> str:
        m = self.doc.model
        if info.part:
            blk = m.index.block_of_item(info.id)
            tensors = blk.parts[info.part]
        else:
            blk = m.block(info.id)
            tensors = blk.tensors
        p = m.params
        if info.role is Role.EXPERTS and p.n_expert:
            per_token = info.nbytes * p.n_expert_used // p.n_expert
            read = f"read per token: {fmt_bytes(per_token)} ({p.n_expert_used} of {p.n_expert} experts)"
        elif info.role is Role.INPUT:
            read = "read per token: one row per token"
        else:
            read = f"read per token: all {fmt_bytes(info.nbytes)}"
        lines = [f"<b>{info.label}</b> on {self.doc.placement.device_of(info.id)} — {fmt_bytes(info.nbytes)}", read]
        if info.nextn:
            idx = m.index
            pos = [idx.tensor_pos[t.name] for t in tensors if t.name in idx.tensor_pos]
            skipped = sum(1 for i in pos if idx.skipped[i])
            if self.doc.placement.settings.load_mtp:
                lines.append("NextN/MTP layer: loaded for MTP speculation (--spec-type draft-mtp), counted")
            elif skipped == len(pos):
                lines.append("NextN/MTP layer: not loaded unless MTP speculation is on")
            elif not skipped:
                lines.append(
                    "NextN/MTP layer, but loaded even without MTP speculation (llama.cpp skips only other parts of "
                    "this layer): counted"
                )
            else:
                # step35, hy_v3: their loaders skip only part of the MTP block (NEXTN_SKIPPED_ONLY)
                lines.append(
                    f"NextN/MTP layer: {len(pos) - skipped} of {len(pos)} tensors load even without MTP "
                    "speculation (llama.cpp skips only the rest); they are counted"
                )
        lines += [f"{t.name} &nbsp; {t.type_name} &nbsp; {fmt_bytes(t.nbytes)}" for t in tensors[:12]]
        if len(tensors) > 12:
            lines.append(f"... and {len(tensors) - 12} more")
        return "<br>".join(lines)

    def viewportEvent(self, event) -> bool:  # noqa: N802
        # tooltips are built when asked for, not on every relayout (they name up to a dozen tensors each)
        if event.type() == QEvent.Type.ToolTip:
            block = self._block_at(event.pos())
            if block is not None:
                QToolTip.showText(event.globalPos(), self._tooltip(block.info), self.viewport())
                return True
            lane = self.lane_at(self.mapToScene(event.pos()))
            if lane is not None and self.lanes[lane].gauge.isUnderMouse():
                QToolTip.showText(event.globalPos(), self.lanes[lane].gauge.describe(), self.viewport())
                return True
        return super().viewportEvent(event)

    def _show_preview(self, est) -> None:
        for name, lane in self.lanes.items():
            mem = None
            if est is not None:
                mem = next((d for d in est.devices if d.name == name), None)
                if mem is None:
                    from app.memory.estimator import DeviceMemory

                    mem = DeviceMemory(name)
            lane.gauge.set_preview(mem)
            if est is not None and self.doc.estimate is not None:
                cur = next((d for d in self.doc.estimate.devices if d.name == name), None)
                delta = (mem.total if mem else 0) - (cur.total if cur else 0)
                if delta:
                    cap = self.doc.capacity(name)
                    speed = ""
                    if self.doc.preview_decode is not None and self.doc.decode is not None:
                        dv = self.doc.preview_decode.tokens_per_s - self.doc.decode.tokens_per_s
                        speed = f", {'+' if dv >= 0 else ''}{dv:.1f} tok/s"
                    lane.set_status(f"{fmt_bytes(mem.total)} / {fmt_bytes(cap) if cap else '?'}   "
                                    f"({'+' if delta > 0 else ''}{fmt_bytes(delta)}{speed} if dropped)")
            elif est is None:
                self._update_lane_header(lane, self.doc.estimate)

    # ------------------------------------------------------------------ mouse: selection and drag

    def lane_at(self, scene_pos: QPointF) -> str | None:
        for name, lane in self.lanes.items():
            if lane.sceneBoundingRect().contains(scene_pos):
                return name
        return None

    def _block_at(self, view_pos) -> BlockItem | None:
        for it in self.items(view_pos):
            if isinstance(it, BlockItem):
                return it
            if isinstance(it, QGraphicsSimpleTextItem) and isinstance(it.parentItem(), BlockItem):
                return it.parentItem()
        return None

    def mousePressEvent(self, event) -> None:  # noqa: N802
        block = self._block_at(event.position().toPoint())
        if event.button() != Qt.MouseButton.LeftButton or block is None:
            super().mousePressEvent(event)
            return
        mods = event.modifiers()
        bid = block.info.id
        if mods & Qt.KeyboardModifier.ControlModifier:
            block.setSelected(not block.isSelected())
        elif mods & Qt.KeyboardModifier.ShiftModifier and self._anchor in self.blocks:
            order = [i.id for i in self.item_infos()]
            a, b = sorted((order.index(self._anchor), order.index(bid)))
            self.select_ids(order[a:b + 1])
        elif not block.isSelected():
            self.scene().clearSelection()
            block.setSelected(True)
        if not mods & Qt.KeyboardModifier.ShiftModifier:
            self._anchor = bid
        self._press = event.position()
        event.accept()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        if self._press is None:
            super().mouseMoveEvent(event)
            block = self._block_at(event.position().toPoint())
            if block is not None:
                self.hovered.emit(f"{block.info.label}: {fmt_bytes(block.info.nbytes)} on "
                                  f"{self.doc.placement.device_of(block.info.id)}")
            return
        if self._dragging is None:
            if (event.position() - self._press).manhattanLength() < QApplication.startDragDistance():
                return
            self._start_drag()
        self._drag_to(self.mapToScene(event.position().toPoint()))

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if self._dragging is not None:
            self._drop(self.mapToScene(event.position().toPoint()))
            event.accept()
            return
        self._press = None
        super().mouseReleaseEvent(event)

    def _start_drag(self) -> None:
        ids = self.selected_ids()
        if not ids:
            self._press = None
            return
        self._dragging = ids
        self._drag_source = self.lane_of(ids[0])
        self._ghost = QGraphicsRectItem(0, 0, 80, style.BLOCK_H)
        self._ghost.setBrush(QColor(76, 120, 168, 120))
        self._ghost.setPen(QPen(QColor("#4C78A8"), 1, Qt.PenStyle.DashLine))
        self._ghost.setZValue(10)
        label = QGraphicsSimpleTextItem(f"{len(ids)} block{'s' if len(ids) > 1 else ''}", self._ghost)
        label.setPos(4, 4)
        self.scene().addItem(self._ghost)
        self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)

    def _drag_to(self, pos: QPointF) -> None:
        if self._ghost is not None:
            self._ghost.setPos(pos + QPointF(8, 8))
        lane = self.lane_at(pos)
        if lane == self._target:
            return
        if self._target in self.lanes:
            old = self.lanes[self._target]
            old.target = old.refused = False
            old.update()
            self._update_lane_header(old, self.doc.estimate)
        self._target = lane
        self._nearest = None
        self._refusal = self.doc.preview(self._dragging, lane) if lane else self.doc.preview([], None)
        if lane is not None:
            item = self.lanes[lane]
            item.target, item.refused = not self._refusal, bool(self._refusal)
            item.update()
        if self._refusal and lane is not None:
            self._nearest = self.doc.nearest_drop(self._dragging, lane)
            text = f"Cannot drop here: {self._refusal}"
            if self._nearest is not None:
                text = f"Cannot drop all here; release to move {self._nearest[1]} instead. ({self._refusal})"
            self.lanes[lane].set_status(text, f"Cannot drop here: {self._refusal}")
            self.lanes[lane].status.setBrush(QBrush(style.GAUGE_OVER))
            self.hovered.emit(f"Cannot drop here: {self._refusal}")
        elif lane:
            self.hovered.emit(f"Drop {len(self._dragging)} block(s) on {lane}")

    def _drop(self, pos: QPointF) -> None:
        ids, lane = self._dragging or [], self.lane_at(pos)
        refusal, nearest = self._refusal, getattr(self, "_nearest", None)
        self._end_drag()
        if lane is not None and ids:
            if refusal and lane == self.lane_at(pos):
                self.refuse(ids, lane, refusal, nearest)
                return
            self.drop_mime(self.mime_for(ids), lane)

    def refuse(self, ids: list[str], lane: str, reason: str, nearest=None) -> None:
        """Say why a drop was refused (on the lane and to the window), with the nearest drop that works."""
        if nearest is None:
            nearest = self.doc.nearest_drop(ids, lane)
        sub, words = nearest if nearest is not None else ([], "")
        self.drop_refused.emit(reason, list(sub), lane, words)
        self.doc.say(f"Cannot drop on {lane}: {reason}")

    def _end_drag(self) -> None:
        if self._ghost is not None:
            self.scene().removeItem(self._ghost)
        self._ghost = None
        if self._target in self.lanes:
            self.lanes[self._target].target = self.lanes[self._target].refused = False
            self.lanes[self._target].update()
        self._target = self._dragging = self._press = None
        self._refusal = None
        self.viewport().unsetCursor()
        self.doc.preview([], None)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.key() == Qt.Key.Key_Escape and self._dragging is not None:
            self._end_drag()
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------------ drops and moves

    @staticmethod
    def mime_for(ids: list[str]) -> QMimeData:
        mime = QMimeData()
        mime.setData(MIME_BLOCKS, "\n".join(ids).encode())
        return mime

    def drop_mime(self, mime: QMimeData, lane: str) -> bool:
        """Move the blocks named in ``mime`` to ``lane``: one undo step, or a refusal with the reason."""
        if not mime.hasFormat(MIME_BLOCKS):
            return False
        ids = [x for x in bytes(mime.data(MIME_BLOCKS)).decode().split("\n") if x]
        ids_moving = [i for i in ids if self.doc.placement.device_of(i) != lane]
        if ids_moving:
            _trial, why = self.doc.check_move(ids_moving, lane)
            if why:
                self.refuse(ids_moving, lane, why)
                return False
        ok = self.doc.move(ids, lane)
        if ok:
            self.select_ids(ids)
        return ok

    def move_selection(self, lane: str) -> bool:
        ids = self.selected_ids()
        return bool(ids) and self.drop_mime(self.mime_for(ids), lane)

    def select_experts(self, first: int, last: int) -> None:
        ids = [i.id for i in self.item_infos() if i.role is Role.EXPERTS and i.layer is not None
               and first <= i.layer <= last]
        self.select_ids(ids)

    def toggle_open(self, block_id: str) -> None:
        base = self.doc.model.index.block_of_item(block_id).id
        if base in self.opened:
            self.opened.discard(base)
        else:
            self.opened.add(base)
        self.relayout()

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802
        block = self._block_at(event.position().toPoint())
        if block is not None and block.info.role is Role.EXPERTS:
            self.toggle_open(block.info.id)
            return
        super().mouseDoubleClickEvent(event)

    ZOOM_MIN, ZOOM_MAX = 1.0, 128.0

    def set_zoom(self, zoom: float) -> None:
        zoom = min(self.ZOOM_MAX, max(self.ZOOM_MIN, zoom))
        if zoom != self.zoom:
            self.zoom = zoom
            self.relayout()
        self.hovered.emit(f"Zoom {self.zoom * 100:.0f}%" + (" (Ctrl+0: lane width = capacity again)"
                                                             if self.zoom != 1 else ": lane width = capacity"))

    def wheelEvent(self, event) -> None:  # noqa: N802
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.set_zoom(self.zoom * (1.25 if event.angleDelta().y() > 0 else 0.8))
            event.accept()
            return
        super().wheelEvent(event)

    def _build_actions(self) -> None:
        for keys, fn in ((("Ctrl++", "Ctrl+="), lambda: self.set_zoom(self.zoom * 1.25)),
                         (("Ctrl+-",), lambda: self.set_zoom(self.zoom / 1.25)),
                         (("Ctrl+0",), lambda: self.set_zoom(1.0))):
            zoom_act = QAction(self)
            zoom_act.setShortcuts([QKeySequence(k) for k in keys])
            zoom_act.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            zoom_act.triggered.connect(fn)
            self.addAction(zoom_act)
        self.lane_actions: list[QAction] = []
        for i in range(9):
            act = QAction(self)
            act.setShortcut(QKeySequence(f"Alt+{i + 1}"))
            act.triggered.connect(lambda _=False, i=i: self._move_to_index(i))
            self.addAction(act)
            self.lane_actions.append(act)

    def _move_to_index(self, i: int) -> None:
        lanes = self.doc.placement.lanes
        if i < len(lanes):
            self.move_selection(lanes[i])

    def contextMenuEvent(self, event) -> None:  # noqa: N802
        block = self._block_at(event.pos())
        if block is not None and not block.isSelected():
            self.scene().clearSelection()
            block.setSelected(True)
        ids = self.selected_ids()
        menu = QMenu(self)
        if ids:
            move = menu.addMenu(f"Move {len(ids)} block{'s' if len(ids) > 1 else ''} to")
            for i, lane in enumerate(self.doc.placement.lanes):
                act = move.addAction(f"{lane}\tAlt+{i + 1}" if i < 9 else lane)
                act.triggered.connect(lambda _=False, lane=lane: self.move_selection(lane))
            pinned = all(i in self.doc.placement.pinned for i in ids)
            menu.addAction("Unpin" if pinned else "Pin (auto-fit leaves it alone)",
                           lambda: self.doc.set_pinned(ids, not pinned))
            if block is not None and block.info.role is Role.EXPERTS:
                menu.addAction("Close experts" if block.info.part else "Open experts into gate/up/down",
                               lambda: self.toggle_open(block.info.id))
        menu.addSeparator()
        for text, handler in getattr(self, "preset_actions", []):
            menu.addAction(text, handler)
        menu.exec(event.globalPos())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.relayout()
