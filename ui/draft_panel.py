"""Speculative decoding: a draft model (-md) with its own flags, its memory on the lanes and its speed."""

from __future__ import annotations

import os

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.memory.estimator import LLAMA_MTP_ARCHS
from app.memory.kv import CACHE_TYPE_BLOCKS, SHARED_KV_ARCHS
from app.memory.settings import NGL_ALL, NGL_AUTO
from app.model import open_model
from app.units import fmt_bytes

from .attached_file import AttachedFile
from .document import Document

SAME_DEVICES = "same as the model"


MTP_TIP = ("llama-server loads the NextN/MTP layers too and runs them in a second context that drafts for the "
           "model: no draft file needed. Its K/V cache types are the draft's.")


class DraftPanel(QWidget):
    """The draft model's file and flags (-md, -ngld, -devd, -ctkd/-ctvd, --spec-draft-n-max), each change one
    undoable edit; the acceptance rate the speed assumes; what the draft costs and gains."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self.doc = document
        self._updating = False
        outer = QHBoxLayout(self)
        outer.setContentsMargins(8, 6, 8, 6)
        lay = QVBoxLayout()
        outer.addLayout(lay, 1)
        lay.addWidget(QLabel("<b>Speculative decoding</b> with a draft model (-md) or the model's own MTP layers"))
        self.row = AttachedFile(
            document, "Draft model", "GGUF models (*.gguf)",
            "A small model of the same family and vocabulary (-md), e.g. Qwen3-0.6B for Qwen3-8B",
            open_model, self.doc.session.set_draft,
            lambda why: self.info.setText(f"<span style='color:#D64541'>The draft model could not be opened: "
                                          f"{why}</span>"))
        self.file, self.choose, self.remove = self.row.name, self.row.choose, self.row.remove
        lay.addWidget(self.row)
        self.mtp = QCheckBox("Draft with the model's own MTP layers (--spec-type draft-mtp)")
        self.mtp.setToolTip(MTP_TIP)
        lay.addWidget(self.mtp)
        form = QFormLayout()
        right = QFormLayout()
        cols = QHBoxLayout()
        cols.addLayout(form, 1)
        cols.addLayout(right, 1)
        lay.addLayout(cols)
        self.ngl = QSpinBox()
        self.ngl.setRange(-1, 512)
        self.ngl.setSpecialValueText("auto (all)")  # -1: llama.cpp's default, every layer on the devices
        self.ngl.setToolTip("-ngld: how many of the draft's layers (the output layer counts) go on the devices")
        form.addRow("Draft GPU layers", self.ngl)
        self.dev = QComboBox()
        self.dev.setToolTip("-devd: the devices the draft uses (default: the model's own)")
        form.addRow("Draft devices", self.dev)
        self.ctk, self.ctv = QComboBox(), QComboBox()
        for combo in (self.ctk, self.ctv):
            combo.addItems(list(CACHE_TYPE_BLOCKS))
        self.ctk.setToolTip("-ctkd: the draft's own K cache type (the model's -ctk is not inherited)")
        self.ctv.setToolTip("-ctvd: the draft's own V cache type")
        right.addRow("Draft K cache", self.ctk)
        right.addRow("Draft V cache", self.ctv)
        self.n_max = QSpinBox()
        self.n_max.setRange(0, 64)
        self.n_max.setToolTip("--spec-draft-n-max: tokens drafted a step (each slot reserves that many more "
                              "output rows in the model's context)")
        form.addRow("Drafted tokens", self.n_max)
        self.accept = QDoubleSpinBox()
        self.accept.setRange(0.0, 1.0)
        self.accept.setSingleStep(0.05)
        self.accept.setDecimals(2)
        self.accept.setToolTip("The share of drafted tokens the model accepts: it depends on the pair and the text. "
                               "llama-server logs the measured rate; set yours here (a speed assumption only).")
        right.addRow("Acceptance rate", self.accept)
        self.info = QLabel()
        self.info.setWordWrap(True)
        lay.addWidget(self.info)
        lay.addStretch(1)
        self.ngl.valueChanged.connect(self._apply)
        self.n_max.valueChanged.connect(self._apply)
        for combo in (self.dev, self.ctk, self.ctv):
            combo.currentTextChanged.connect(self._apply)
        self.accept.valueChanged.connect(self._accept_changed)
        self.mtp.toggled.connect(self._mtp_toggled)
        self.doc.changed.connect(self.refresh)
        self.refresh()

    # ------------------------------------------------------------------ file

    def set_draft_path(self, path: str | None) -> str | None:
        """Open ``path`` as the draft (None: no draft). Returns the error shown, or None."""
        return self.row.set_path(path)

    # ------------------------------------------------------------------ view

    def refresh(self) -> None:
        self._updating = True
        s = self.doc.placement.settings
        draft = self.doc.session.draft_model
        has = draft is not None
        self.row.show_state(draft.path.name if has else None, os.fspath(draft.path) if has else None, s.draft_model,
                            "no draft model")
        p = self.doc.model.params
        can_mtp = bool(p.nextn_layers) and p.arch in LLAMA_MTP_ARCHS and not has
        mtp = "draft-mtp" in s.spec_types
        # Gemma 4's assistant drafts through draft-mtp (set with the file) and reads the model's own caches
        assistant = has and draft.params.arch in SHARED_KV_ARCHS
        self.mtp.setEnabled((can_mtp or mtp) and not assistant)
        self.mtp.setChecked(mtp)
        # (the tooltip from the constant: reading it back would keep a reason given for an earlier file)
        self.mtp.setToolTip(MTP_TIP if (can_mtp or mtp) and not assistant else
                            "Gemma 4's assistant drafts through --spec-type draft-mtp, set with the file" if assistant
                            else "This model has no MTP layers llama.cpp can draft with" if not has else
                            "A draft model (-md) is in use; remove it to draft with the MTP layers")
        for w in (self.ngl, self.dev):
            w.setEnabled(has)
        self.accept.setEnabled(has or mtp)  # the MTP speed is predicted at the rate set here too
        self.n_max.setEnabled(has or mtp)
        for w in (self.ctk, self.ctv):  # the assistant has no cache: -ctkd/-ctvd change nothing it allocates
            w.setEnabled((has or mtp) and not assistant)
        top = draft.params.n_layer + 1 if has else 512
        self.ngl.setRange(-1, top)
        self.ngl.setValue(top if s.draft_n_gpu_layers == NGL_ALL else min(s.draft_n_gpu_layers, top))
        names = [SAME_DEVICES] + [d.name for d in self.doc.devices] + ["none (CPU)"]
        if [self.dev.itemText(i) for i in range(self.dev.count())] != names:
            self.dev.clear()
            self.dev.addItems(names)
        devd = s.draft_devices
        self.dev.setCurrentText(SAME_DEVICES if not devd else "none (CPU)" if devd == ["none"] else devd[0])
        self.ctk.setCurrentText(s.draft_type_k)
        self.ctv.setCurrentText(s.draft_type_v)
        self.n_max.setValue(s.spec_draft_n_max)
        self.accept.setValue(self.doc.session.draft_acceptance)
        self.info.setText(self._summary())
        self._updating = False

    def _summary(self) -> str:
        est = self.doc.estimate
        if est is None or est.draft is None:
            s = self.doc.placement.settings
            if s.draft_model and self.doc.session.draft_model is None:
                return ("<span style='color:#C98A00'>The plan names a draft model that is not open: its memory is "
                        "not counted. Choose it again.</span>")
            return "<span style='color:gray'>No draft: llama-server decodes with the model alone.</span>"
        where = ", ".join(f"{d.name} {fmt_bytes(d.total)}" for d in est.draft.devices if d.total)
        if self.doc.session.draft_model is None:  # the MTP context on the model's own NextN layers
            text = (f"The MTP draft context needs {where} (its KV cache, compute; the NextN layers' weights count "
                    "as the model's).")
            spec = self.doc.session.speculative  # app.speed.speculative.mtp_decode at the acceptance set here
            if spec is not None and spec.mtp:
                color = "#3A9E5C" if spec.speedup >= 1.0 else "#C98A00"
                text += f"<br><span style='color:{color}'>{spec.text()}</span>"
            else:
                text += " The speed with MTP drafting is not predicted for this placement."
            text += "".join(f"<br><span style='color:gray'>{n}</span>" for n in est.notes
                            if "not sized" in n or "snapshots" in n)
            return text
        shared = self.doc.session.draft_model.params.arch in SHARED_KV_ARCHS
        cache = "no KV cache of its own: it reads the model's last two layers' caches" if shared else "its own KV cache"
        text = f"The draft needs {where} (weights, {cache}, compute)."
        spec = self.doc.session.speculative
        if spec is not None:
            color = "#3A9E5C" if spec.speedup >= 1.0 else "#C98A00"
            text += f"<br><span style='color:{color}'>{spec.text()}</span>"
            text += "".join(f"<br><span style='color:gray'>{n}</span>" for n in spec.notes)
        else:  # no figure: the spec type does not draft with this file, or the speed model cannot say (logged)
            text += "<br><span style='color:gray'>The speed with this draft is not predicted.</span>"
        # a DFlash head: what the target extracts for it, a type inferred from the file, a graph not replayed
        text += "".join(f"<br><span style='color:gray'>{n}</span>" for n in est.notes
                        if n.startswith(("DFlash head", "no --spec-type given")) or "its compute graph is not" in n)
        return text

    # ------------------------------------------------------------------ edits

    def _apply(self, *_) -> None:
        if self._updating:
            return
        if self.doc.session.draft_model is None:
            if "draft-mtp" in self.doc.placement.settings.spec_types:  # the MTP context's own flags
                self.doc.set_settings(draft_type_k=self.ctk.currentText(), draft_type_v=self.ctv.currentText(),
                                      spec_draft_n_max=self.n_max.value())
            return
        dev = self.dev.currentText()
        ngl = self.ngl.value()
        self.doc.set_settings(
            draft_n_gpu_layers=NGL_AUTO if ngl < 0 else ngl,
            draft_devices=None if dev == SAME_DEVICES else ["none"] if dev.startswith("none") else [dev],
            draft_type_k=self.ctk.currentText(),
            draft_type_v=self.ctv.currentText(),
            spec_draft_n_max=self.n_max.value(),
        )

    def _mtp_toggled(self, on: bool) -> None:
        if self._updating:
            return
        types = [t for t in self.doc.placement.settings.spec_types if t != "draft-mtp"]
        self.doc.set_settings(spec_types=types + ["draft-mtp"] if on else types)

    def _accept_changed(self, value: float) -> None:
        if not self._updating:
            self.doc.session.set_draft_acceptance(value)
            self.info.setText(self._summary())
