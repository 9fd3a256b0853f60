"""The multimodal projector (--mmproj): its file, where it runs, its memory on the lanes."""

from __future__ import annotations

import os

from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.model.projector import open_projector
from app.units import fmt_bytes

from .attached_file import AttachedFile
from .document import Document

AUTO = "auto (the first of -dev, else the first GPU)"
ON_CPU = "CPU (--no-mmproj-offload)"


class ProjectorPanel(QWidget):
    """The projector file and where it runs (``--mmproj``, ``--no-mmproj-offload``, ``-mmdev``,
    ``--image-max-tokens``), each change one undoable edit, and what it takes on which device."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self.doc = document
        self._updating = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        lay.addWidget(QLabel("<b>Vision / audio projector</b> (--mmproj)"))
        self.row = AttachedFile(
            document, "Projector (mmproj) file", "GGUF projectors (*.gguf)",
            "The mmproj-*.gguf file published with the model (image or audio input)",
            open_projector, self.doc.session.set_projector,
            lambda why: self.info.setText(f"<span style='color:#D64541'>The projector could not be opened: "
                                          f"{why}</span>"))
        self.file, self.choose, self.remove = self.row.name, self.row.choose, self.row.remove
        lay.addWidget(self.row)
        form = QFormLayout()
        self.where = QComboBox()
        self.where.setToolTip("-mmdev / --no-mmproj-offload: the device the projector's weights and graph use")
        form.addRow("Runs on", self.where)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(0, 1 << 20)
        self.max_tokens.setSpecialValueText("the file's default")
        self.max_tokens.setToolTip("--image-max-tokens: the most tokens an image may take (dynamic-resolution "
                                   "encoders only); it sizes the projector's compute buffer")
        form.addRow("Image tokens at most", self.max_tokens)
        lay.addLayout(form)
        self.info = QLabel()
        self.info.setWordWrap(True)
        lay.addWidget(self.info)
        lay.addStretch(1)
        self.where.currentTextChanged.connect(self._apply)
        self.max_tokens.editingFinished.connect(self._apply)
        self.doc.changed.connect(self.refresh)
        self.refresh()

    def set_projector_path(self, path: str | None) -> str | None:
        """Open ``path`` as the projector (None: no projector). Returns the error shown, or None."""
        return self.row.set_path(path)

    def refresh(self) -> None:
        self._updating = True
        s = self.doc.placement.settings
        proj = self.doc.session.projector
        has = proj is not None
        self.row.show_state(proj.title if has else None, os.fspath(proj.path) if has else None, s.mmproj,
                            "no projector")
        self.where.setEnabled(has)
        self.max_tokens.setEnabled(has)
        names = [AUTO] + [d.name for d in self.doc.devices] + [ON_CPU]
        if [self.where.itemText(i) for i in range(self.where.count())] != names:
            self.where.clear()
            self.where.addItems(names)
        if not s.mmproj_offload or s.mmproj_device == "none":
            self.where.setCurrentText(ON_CPU)
        else:
            self.where.setCurrentText(s.mmproj_device if s.mmproj_device in names else AUTO)
        self.max_tokens.setValue(s.image_max_tokens or 0)
        self.info.setText(self._summary())
        self._updating = False

    def _summary(self) -> str:
        est = self.doc.estimate
        pm = est.projector if est is not None else None
        if pm is None:
            if self.doc.placement.settings.mmproj and self.doc.session.projector is None:
                return ("<span style='color:#C98A00'>The plan names a projector that is not open: its memory is "
                        "not counted. Choose it again.</span>")
            return "<span style='color:gray'>No projector: the model takes text only.</span>"
        compute = ", ".join(f"{d} {fmt_bytes(n)}" for d, n in pm.compute.items() if n) or "none"
        text = f"On {pm.device}: weights {fmt_bytes(pm.weights)}; compute buffers {compute}."
        if len(pm.encoders) > 1:  # one clip context per encoder, each with its own buffers
            text += "<br>" + "; ".join(
                f"{kind} ({ptype}): " + (", ".join(f"{d} {fmt_bytes(n)}" for d, n in own.items()) or "not counted")
                for kind, ptype, own in pm.encoders)
        if not pm.exact:
            text += "<br><span style='color:#C98A00'>" + " ".join(pm.notes) + "</span>"
        return text

    def _apply(self, *_) -> None:
        if self._updating or self.doc.session.projector is None:
            return
        where = self.where.currentText()
        n = self.max_tokens.value()
        self.doc.set_settings(
            mmproj_offload=where != ON_CPU,
            mmproj_device=None if where in (AUTO, ON_CPU) else where,
            image_max_tokens=n or None,
        )
