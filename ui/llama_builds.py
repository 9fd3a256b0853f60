"""Every llama.cpp build found or installed, with its backends and devices; "Use" and "Remove".

Shown in Settings. The list is gathered off the GUI thread (:func:`app.llamacpp.find.find_all` runs
``--version``/``--list-devices``/``--help``, cached per binary). "Use" hands the build's folder to the
caller (Settings puts it in its folder field) and marks it current for the command line too; "Remove"
deletes one of Layerdeck's own installs (never the current one).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from .worker import run_in_background

COLUMNS = ("", "Version", "Found", "Backends", "Devices", "Folder")


class LlamaBuildsWidget(QWidget):
    def __init__(self, configured: Callable[[], str], on_use: Callable[[str], None], parent: QWidget | None = None):
        super().__init__(parent)
        self.configured = configured
        self.on_use = on_use
        self.builds: list = []
        self.current: Path | None = None
        self._seq = 0
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        head = self.table.horizontalHeader()
        for i, width in enumerate((None, 300, 150, None, 170)):
            if width is None:
                head.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
            else:
                head.setSectionResizeMode(i, QHeaderView.ResizeMode.Interactive)
                head.resizeSection(i, width)
        head.setStretchLastSection(True)
        self.table.setMinimumHeight(140)
        self.table.itemSelectionChanged.connect(self._selection)
        lay.addWidget(self.table)
        row = QHBoxLayout()
        self.note = QLabel("Looking for llama.cpp builds…")
        self.note.setWordWrap(True)
        self.use_btn = QPushButton("Use")
        self.use_btn.setToolTip("Make this build the one Layerdeck runs")
        self.use_btn.clicked.connect(self._use)
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.setToolTip("Delete this Layerdeck install (not the current one)")
        self.remove_btn.clicked.connect(self._remove)
        self.refresh_btn = QPushButton("Refresh")
        self.refresh_btn.clicked.connect(self.refresh)
        row.addWidget(self.note, 1)
        for b in (self.use_btn, self.remove_btn, self.refresh_btn):
            row.addWidget(b)
        lay.addLayout(row)
        self._selection()
        self.refresh()

    def refresh(self) -> None:
        from app.llamacpp.find import current_folder, find_all

        configured = self.configured() or None
        self._seq += 1
        seq = self._seq
        self.note.setText("Looking for llama.cpp builds…")

        def job():
            return find_all(configured), current_folder(configured)

        def done(result) -> None:
            if seq == self._seq and isValid(self.table):
                self.show_builds(*result)

        def failed(exc) -> None:
            if seq == self._seq and isValid(self.note):
                self.note.setText(f"Could not look for llama.cpp: {exc}")

        run_in_background(job, done, failed)

    def show_builds(self, builds: list, current: Path | None) -> None:
        from app.llamacpp.find import OLDEST_SUPPORTED_BUILD, is_current

        self.builds, self.current = builds, current
        self.table.setRowCount(len(builds))
        for r, b in enumerate(builds):
            devices = ", ".join(
                f"{d.name} ({d.total_mib // 1024} GiB)" if d.total_mib >= 1024 else d.name for d in b.devices
            ) or ("CPU only" if b.features.get("list_devices") else "not listed")
            version = b.label() if b.usable else "does not run: " + "; ".join(b.problems)
            if b.installed:
                version = f"{b.installed} · {version}"
            if b.usable and not b.supported:
                version += f" — not supported (older than b{OLDEST_SUPPORTED_BUILD} or lacking -ot/--list-devices)"
            found = ", ".join(b.sources)
            cells = (
                "●" if is_current(b, current) else "",
                version,
                found,
                ", ".join(b.backends),
                devices,
                str(b.folder),
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                tip = "\n".join([text, *b.missing()]) if c == 1 and b.usable else text
                item.setToolTip(tip)
                self.table.setItem(r, c, item)
        n = len(builds)
        self.note.setText(
            f"{n} llama.cpp build{'s' if n != 1 else ''} found; ● = current."
            if n
            else "No llama.cpp found. Download one from the banner in the main window, or choose a folder above."
        )
        self._selection()

    def _selected(self):
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        return self.builds[rows[0].row()] if rows and rows[0].row() < len(self.builds) else None

    def _selection(self) -> None:
        from app.llamacpp.find import is_current

        b = self._selected()
        self.use_btn.setEnabled(b is not None and b.usable)
        self.remove_btn.setEnabled(b is not None and b.installed is not None and not is_current(b, self.current))

    def _use(self) -> None:
        from app.llamacpp import store

        b = self._selected()
        if b is None:
            return
        store.set_current(b.folder)
        self.on_use(str(b.folder))
        self.refresh()

    def _remove(self) -> None:
        from app.errors import LayerdeckError
        from app.llamacpp.install import remove

        b = self._selected()
        if b is None or b.installed is None:
            return
        try:
            remove(b.installed, Path(self.configured()) if self.configured() else None)
        except (LayerdeckError, OSError) as exc:
            QMessageBox.warning(self, "Cannot remove", str(exc))
            return
        self.refresh()
