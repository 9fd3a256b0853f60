"""A file that goes with the model (a draft model, a projector): its name, Choose… and Remove."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QWidget

from app.errors import LayerdeckError

from .document import Document


class AttachedFile(QWidget):
    """One row: the file's name (or what is missing), Choose… (a file dialog in the model's folder) and Remove.

    ``opener(path)`` reads the file (raising a LayerdeckError, OSError or ValueError with the reason) and
    ``attach(obj or None)`` makes it the session's; :meth:`set_path` does both and returns the error shown."""

    def __init__(self, document: Document, title: str, file_filter: str, tip: str,
                 opener: Callable[[str], Any], attach: Callable[[Any], object], error: Callable[[str], None],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.doc = document
        self.title, self.file_filter = title, file_filter
        self.opener, self.attach, self.error = opener, attach, error
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.name = QLabel()
        self.name.setWordWrap(True)
        self.choose = QPushButton("Choose…")
        self.choose.setToolTip(tip)
        self.remove = QPushButton("Remove")
        row.addWidget(self.name, 1)
        row.addWidget(self.choose)
        row.addWidget(self.remove)
        self.choose.clicked.connect(self._choose)
        self.remove.clicked.connect(lambda: self.set_path(None))

    def _choose(self) -> None:
        start = os.path.dirname(os.fspath(self.doc.model.path)) if not self.doc.model.is_demo else ""
        path, _ = QFileDialog.getOpenFileName(self, self.title, start, self.file_filter)
        if path:
            self.set_path(path)

    def set_path(self, path: str | None) -> str | None:
        """Open ``path`` and attach it (None: detach). Returns the error shown, or None."""
        if path is None:
            self.attach(None)
            return None
        try:
            obj = self.opener(path)
        except (LayerdeckError, OSError, ValueError) as exc:
            self.error(str(exc))
            return str(exc)
        self.attach(obj)
        return None

    def show_state(self, opened_name: str | None, opened_path: str | None, wanted: str | None, none: str) -> None:
        """The name of the open file, or the one the plan names but is not open, or ``none``."""
        if opened_name is not None:
            self.name.setText(opened_name)
        elif wanted:
            self.name.setText(f"{os.path.basename(wanted)} (not open)")
        else:
            self.name.setText(none)
        self.name.setToolTip(opened_path or wanted or "")
        self.remove.setEnabled(opened_name is not None or bool(wanted))
