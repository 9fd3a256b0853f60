"""Context and KV cache settings: every change re-estimates all lanes at once."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.memory.compute import APPROXIMATE, UNCHECKED
from app.memory.kv import CACHE_TYPE_BLOCKS
from app.units import fmt_bytes

from .document import Document

CTX_STOPS = [512, 1024, 2048, 4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 131072, 196608, 262144]


def _uncertain(note: str) -> bool:
    """A note that says part of the estimate is assumed or approximate, not just explained."""
    return (
        note.startswith((APPROXIMATE, UNCHECKED, "compute buffers of "))
        or (note.startswith("memory of ") and " is unknown" in note)
    )


class KvPanel(QWidget):
    def __init__(self, document: Document, parent=None):
        super().__init__(parent)
        self.doc = document
        self._updating = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        title = QLabel("<b>Context and KV cache</b>")
        lay.addWidget(title)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.ctx_slider = QSlider(Qt.Orientation.Horizontal)
        self.ctx_spin = QSpinBox()
        self.ctx_spin.setRange(256, 4_194_304)
        self.ctx_spin.setSingleStep(1024)
        self.ctx_spin.setSuffix(" tokens")
        row = QHBoxLayout()
        row.addWidget(self.ctx_slider, 3)
        row.addWidget(self.ctx_spin, 2)
        form.addRow("Context", row)
        self.np_spin = QSpinBox()
        self.np_spin.setRange(-1, 256)
        self.np_spin.setSpecialValueText("auto (4, unified)")
        form.addRow("Parallel slots", self.np_spin)
        self.kvu = QCheckBox("Unified KV cache")
        self.kvu.setToolTip("-kvu: the slots share one cache (each may use all of it) instead of one share each")
        form.addRow("", self.kvu)
        self.ctk = QComboBox()
        self.ctv = QComboBox()
        for combo in (self.ctk, self.ctv):
            combo.addItems(list(CACHE_TYPE_BLOCKS))
        form.addRow("K cache type", self.ctk)
        form.addRow("V cache type", self.ctv)
        self.fa = QComboBox()
        self.fa.addItems(["auto", "on", "off"])
        form.addRow("Flash attention", self.fa)
        self.ub = QComboBox()
        self.ub.addItems(["128", "256", "512", "1024", "2048", "4096"])
        form.addRow("Micro-batch (-ub)", self.ub)
        lay.addLayout(form)
        self.info = QLabel()
        self.info.setWordWrap(True)
        lay.addWidget(self.info)
        lay.addStretch(1)
        self.ctx_slider.valueChanged.connect(self._slider_moved)
        self.ctx_spin.editingFinished.connect(self._apply)
        self.np_spin.valueChanged.connect(self._apply)
        self.kvu.toggled.connect(self._apply)
        for combo in (self.ctk, self.ctv, self.fa, self.ub):
            combo.currentTextChanged.connect(self._apply)
        self.doc.changed.connect(self.refresh)
        self.refresh()

    def _stops(self) -> list[int]:
        train = self.doc.model.params.n_ctx_train or 131072
        stops = sorted({s for s in CTX_STOPS if s <= train} | {train})
        return stops

    def refresh(self) -> None:
        self._updating = True
        s = self.doc.placement.settings
        stops = self._stops()
        ctx = s.n_ctx or self.doc.model.params.n_ctx_train
        self.ctx_slider.setRange(0, len(stops) - 1)
        self.ctx_slider.setValue(min(range(len(stops)), key=lambda i: abs(stops[i] - ctx)))
        self.ctx_spin.setValue(ctx)
        self.np_spin.setValue(s.n_parallel if s.n_parallel and s.n_parallel > 0 else -1)
        self.kvu.setChecked(s.eff_kv_unified)
        self.kvu.setEnabled(s.n_parallel is not None and s.n_parallel > 0)
        self.ctk.setCurrentText(s.type_k)
        self.ctv.setCurrentText(s.type_v)
        self.fa.setCurrentText(s.flash_attn)
        self.ub.setCurrentText(str(s.n_ubatch))
        est = self.doc.estimate
        if est is not None:
            kv = sum(d.kv for d in est.devices)
            sh = est.shape
            from html import escape

            # what the estimate could not know exactly (approximate compute, RPC memory unknown) stands out
            notes = "".join(f"<br><span style='color:{'#C98A00' if _uncertain(n) else 'gray'}'>{escape(n)}</span>"
                            for n in est.notes)
            # which of these figures are llama.cpp's own (a dry run's, app.memory.learned)
            ver = getattr(self.doc, "verification", None)
            if ver is not None and ver.verified:
                for kind, label in (("context", "KV cache"), ("compute", "compute buffers")):
                    devs = [d for d, kinds in ver.verified.items() if kind in kinds]
                    if devs:
                        notes += (f"<br><span style='color:#3A9E5C'>{label} of {escape(', '.join(devs))}: "
                                  "verified by llama.cpp</span>")
            # a hybrid's recurrent state is part of its context memory too (MiniMax-01 at 4 slots: 1.09 GiB of
            # lightning-attention state next to 320 MiB of KV), whatever the context length
            rs = sum(d.recurrent for d in est.devices)
            state = (f"; recurrent state {fmt_bytes(rs)} ({max(1, sh.n_seq)} "
                     f"{'sequence' if max(1, sh.n_seq) == 1 else 'sequences'}, any context length)" if rs else "")
            self.info.setText(f"KV cache {fmt_bytes(kv)} for {sh.n_ctx:,} cells"
                              + (f" ({sh.n_stream} streams)" if sh.n_stream > 1 else "")
                              + (f"; sliding-window layers keep {sh.size_swa:,}" if sh.size_swa else "")
                              + state + notes)
        else:
            self.info.setText(f"<span style='color:#D64541'>{self.doc.estimate_error}</span>")
        self._updating = False

    def _slider_moved(self, i: int) -> None:
        if self._updating:
            return
        self.ctx_spin.setValue(self._stops()[i])
        self._apply()

    def _apply(self, *_) -> None:
        if self._updating:
            return
        np_ = self.np_spin.value()
        self.doc.set_settings(
            n_ctx=self.ctx_spin.value(),
            n_parallel=np_ if np_ > 0 else -1,
            kv_unified=self.kvu.isChecked() if np_ > 0 else None,
            type_k=self.ctk.currentText(),
            type_v=self.ctv.currentText(),
            flash_attn=self.fa.currentText(),
            n_ubatch=int(self.ub.currentText()),
        )
