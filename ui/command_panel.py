"""The exported command for the current placement, always current; copy, save and import."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.command.argv import mask_secrets
from app.command.formats import render
from app.errors import LayerdeckError
from app.llamacpp.capabilities import UNKNOWN
from app.placement.export import InexpressibleError

from .document import Document
from .feedback import copy_with_feedback
from .worker import run_in_background

SHELLS = [("bash / zsh", "bash"), ("PowerShell", "powershell"), ("Windows cmd", "cmd"),
          ("llama-swap YAML", "yaml"), ("Environment variables", "env"), ("Ollama Modelfile", "ollama")]


class CommandPanel(QWidget):
    #: (model path, command text): open that model and import the command onto it
    open_model_requested = Signal(str, str)

    def __init__(self, document: Document, parent=None, rpc: list[str] | None = None, program: str | None = None):
        super().__init__(parent)
        self.doc = document
        self.rpc = rpc or []
        self.program = program
        self.caps = UNKNOWN  # what the configured llama-server accepts (set by the main window)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        top = QHBoxLayout()
        top.addWidget(QLabel("<b>llama.cpp command</b>"))
        self.shell = QComboBox()
        for label, key in SHELLS:
            self.shell.addItem(label, key)
        top.addWidget(self.shell)
        top.addStretch(1)
        self.copy_btn = QPushButton("Copy")
        self.save_btn = QPushButton("Save…")
        self.import_btn = QPushButton("Import command…")
        for b in (self.copy_btn, self.save_btn, self.import_btn):
            top.addWidget(b)
        lay.addLayout(top)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        lay.addWidget(self.text)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        lay.addWidget(self.notes)
        self.shell.currentIndexChanged.connect(self.refresh)
        self.copy_btn.clicked.connect(self.copy)
        self.save_btn.clicked.connect(self._save)
        self.import_btn.clicked.connect(self._import_dialog)
        self.doc.changed.connect(self.refresh)
        self.refresh()

    def _rpc(self) -> list[str]:
        # every host, in detection order, even unused ones: llama.cpp numbers RPC devices by their place in --rpc
        return self.rpc or self.doc.rpc_endpoints()

    def argv(self) -> list[str]:
        model_path = str(self.doc.model.path)
        return self.doc.command(model_path=model_path, rpc=self._rpc(), program=self.program, caps=self.caps).argv

    def refresh(self) -> None:
        fmt = self.shell.currentData()
        try:
            cmd = self.doc.command(rpc=self._rpc(), program=self.program, caps=self.caps)
            # the API key never shows on screen (Copy and Save write the real one)
            text = render(mask_secrets(cmd.argv), fmt, name=self.doc.model.path.stem,
                          n_layers=self.doc.model.params.n_layer)
        except (InexpressibleError, LayerdeckError) as exc:  # LayerdeckError: a path this format cannot carry
            self.text.setPlainText(f"# cannot export: {exc}")
            self.notes.setText("")
            return
        self.text.setPlainText(text)
        notes = list(cmd.notes)
        if self.doc.model.is_demo:
            notes.insert(0, "Demo model: the path is a placeholder; open a real GGUF to launch it.")
        elif self.doc.model.source:
            notes.insert(0, f"Header only ({self.doc.model.source}): llama.cpp downloads the model itself (-hf/-mu).")
        elif self.doc.model.predicted_from:  # app.remote.predicted / --as: no such file yet
            notes.insert(0, f"Predicted ({self.doc.model.predicted_from}): no such file; -m names the file "
                            "llama-quantize would write.")
        self.notes.setText("\n".join(notes))

    def _real_text(self, fmt: str) -> str:
        """The command as shown, but with the real API key (the display masks it)."""
        try:
            cmd = self.doc.command(rpc=self._rpc(), program=self.program, caps=self.caps)
            return render(cmd.argv, fmt, name=self.doc.model.path.stem, n_layers=self.doc.model.params.n_layer)
        except (InexpressibleError, LayerdeckError):
            return self.text.toPlainText()

    def copy(self) -> None:
        """Copy the command, and say so on the button for two seconds."""
        copy_with_feedback(self.copy_btn, self._real_text(self.shell.currentData()))

    def _save(self) -> None:
        fmt = self.shell.currentData()
        ext = {"bash": "sh", "powershell": "ps1", "cmd": "cmd", "yaml": "yaml", "env": "sh", "ollama": "Modelfile"}[fmt]
        path, _ = QFileDialog.getSaveFileName(self, "Save command", f"run-{self.doc.model.path.stem}.{ext}")
        if path:
            self.save_to(path, fmt)

    def save_to(self, path: str, fmt: str) -> None:
        """Write the command as a file: a .cmd file in cmd's batch-file form (``%`` doubled, ``!`` literal), not
        the prompt's; a shell script with its shebang and the run bit."""
        text = self._real_text(fmt)
        if fmt == "cmd":
            try:
                cmd = self.doc.command(rpc=self._rpc(), program=self.program, caps=self.caps)
                text = render(cmd.argv, "cmd-batch", env=cmd.env or None)
            except (InexpressibleError, LayerdeckError) as exc:
                text = f"rem cannot export: {exc}"
        elif fmt in ("bash", "env"):
            text = "#!/usr/bin/env bash\n" + text
        Path(path).write_text(text + "\n", encoding="utf-8")
        if fmt in ("bash", "env"):
            os.chmod(path, 0o755)

    def import_text(self, text: str) -> str | None:
        """Load the placement a pasted command means. Returns an error sentence, or the warnings ("Imported,
        with warnings: ..."), or None when it was taken as it is. :attr:`last_import` says what was kept."""
        self.last_import = None
        try:
            res = self.doc.import_command_full(text)
        except (LayerdeckError, ValueError) as exc:
            return str(exc)
        self.last_import = res
        if res.warnings:
            return "Imported, with warnings: " + "; ".join(res.warnings)
        return None

    def import_dialog(self) -> ImportDialog:
        return ImportDialog(self)

    def _import_dialog(self) -> None:
        self.import_dialog().exec()


class ImportDialog(QDialog):
    """Paste a command; every warning is shown and the dialog stays open until read. Flags Layerdeck does
    not place become the launch's extra arguments (said so); a command naming another model offers to open
    it with the command applied."""

    def __init__(self, panel: CommandPanel):
        super().__init__(panel)
        self.panel = panel
        self.setWindowTitle("Import a llama.cpp command")
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Paste a llama-server / llama-cli command (bash, PowerShell or cmd; --fit output works "
                             "too):"))
        self.edit = QPlainTextEdit()
        lay.addWidget(self.edit)
        self.msg = QLabel()
        self.msg.setWordWrap(True)
        self.msg.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.msg)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Import")
        self.open_other = self.buttons.addButton("Open that model", QDialogButtonBox.ButtonRole.ActionRole)
        self.open_other.setVisible(False)
        self.open_other.clicked.connect(self._open_other)
        lay.addWidget(self.buttons)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        self.imported = False
        self.reading = False  # a command is being read in the background
        self.resize(720, 380)

    def _accept(self) -> None:
        if self.imported:  # the warnings were read
            self.accept()
            return
        # reading the command matches every -ot pattern against the tensor names (up to half a second each for
        # a hostile one): off the GUI thread; the result is applied here, as one edit
        text = self.edit.toPlainText()
        self.ok.setEnabled(False)
        self.edit.setReadOnly(True)
        self.msg.setText("Reading the command…")
        self.reading = True
        run_in_background(lambda: self.panel.doc.prepare_import(text), self._prepared, self._failed)

    def _failed(self, exc: Exception) -> None:
        self.reading = False
        self.ok.setEnabled(True)
        self.edit.setReadOnly(False)
        self.panel.last_import = None
        self.msg.setText(f"<span style='color:#D64541'>{escape(str(exc))}</span>")

    def _prepared(self, prep) -> None:
        try:
            res = self.panel.doc.apply_import(prep)
        except (LayerdeckError, ValueError) as exc:
            self._failed(exc)
            return
        self.reading = False
        self.ok.setEnabled(True)
        self.edit.setReadOnly(False)
        self.panel.last_import = res
        if not res.warnings and not res.extra:
            self.accept()
            return
        self.imported = True
        lines = [escape(w) for w in res.warnings]
        if res.extra:
            lines.append("Kept for the launch (Server tab → Launch options): <code>"
                         + escape(" ".join(mask_secrets(list(res.extra)))) + "</code>")
        self.msg.setText("<b>Imported.</b><ul>" + "".join(f"<li>{x}</li>" for x in lines) + "</ul>")
        self.ok.setText("Close")
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setVisible(False)
        if res.other_model and res.model and Path(res.model).is_file():
            self.open_other.setText(f"Open {Path(res.model).name} instead")
            self.open_other.setVisible(True)

    def _open_other(self) -> None:
        res = self.panel.last_import
        if res is not None and res.model:
            if self.panel.doc.history.undo_label == "Import command":
                self.panel.doc.undo()  # the settings meant for that model leave this one
            self.panel.open_model_requested.emit(res.model, self.edit.toPlainText())
        self.accept()
