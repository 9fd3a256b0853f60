"""The exported command for the current placement, always current; copy, save and import."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit,
                               QPushButton, QVBoxLayout, QWidget)

from app.errors import LayerdeckError
from app.llamacpp.capabilities import UNKNOWN
from app.placement.export import InexpressibleError
from app.command.formats import render

from .document import Document

SHELLS = [("bash / zsh", "bash"), ("PowerShell", "powershell"), ("Windows cmd", "cmd"),
          ("llama-swap YAML", "yaml"), ("Environment variables", "env"), ("Ollama Modelfile", "ollama")]


class CommandPanel(QWidget):
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
        self.copy_btn.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.text.toPlainText()))
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
            text = render(cmd.argv, fmt, name=self.doc.model.path.stem, n_layers=self.doc.model.params.n_layer)
        except (InexpressibleError, LayerdeckError) as exc:  # LayerdeckError: a path this format cannot carry
            self.text.setPlainText(f"# cannot export: {exc}")
            self.notes.setText("")
            return
        self.text.setPlainText(text)
        notes = list(cmd.notes)
        if self.doc.model.is_demo:
            notes.insert(0, "Demo model: the path is a placeholder; open a real GGUF to launch it.")
        self.notes.setText("\n".join(notes))

    def _save(self) -> None:
        fmt = self.shell.currentData()
        ext = {"bash": "sh", "powershell": "ps1", "cmd": "cmd", "yaml": "yaml", "env": "sh", "ollama": "Modelfile"}[fmt]
        path, _ = QFileDialog.getSaveFileName(self, "Save command", f"run-{self.doc.model.path.stem}.{ext}")
        if path:
            self.save_to(path, fmt)

    def save_to(self, path: str, fmt: str) -> None:
        """Write the command as a file: a .cmd file in cmd's batch-file form (``%`` doubled, ``!`` literal), not
        the prompt's; a shell script with its shebang and the run bit."""
        text = self.text.toPlainText()
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
        """Load the placement a pasted command means. Returns an error sentence, or None on success."""
        try:
            warnings = self.doc.import_command(text)
        except (LayerdeckError, ValueError) as exc:
            return str(exc)
        if warnings:
            return "Imported, with warnings: " + "; ".join(warnings)
        return None

    def _import_dialog(self) -> None:
        dlg = QDialog(self)
        dlg.setWindowTitle("Import a llama.cpp command")
        lay = QVBoxLayout(dlg)
        lay.addWidget(QLabel("Paste a llama-server / llama-cli command (bash, PowerShell or cmd; --fit output works too):"))
        edit = QPlainTextEdit()
        lay.addWidget(edit)
        msg = QLabel()
        msg.setWordWrap(True)
        lay.addWidget(msg)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        lay.addWidget(buttons)

        def accept() -> None:
            err = self.import_text(edit.toPlainText())
            if err and not err.startswith("Imported"):
                msg.setText(f"<span style='color:#D64541'>{err}</span>")
                return
            dlg.accept()

        buttons.accepted.connect(accept)
        buttons.rejected.connect(dlg.reject)
        dlg.resize(720, 360)
        dlg.exec()
