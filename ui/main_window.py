"""The main window: opens a model and shows its summary and blocks.

The board (lanes, drag and drop, gauges) lands here in its own issue; for now
the window shows what :mod:`app.model` reads, so every part below it is real.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QFileDialog, QLabel, QMainWindow, QMessageBox, QSplitter, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from app.inspect_cmd import render_text
from app.model import GGUFError, Model, open_model
from app.units import fmt_bytes, fmt_count

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.model: Model | None = None
        self.setWindowTitle("Layerdeck")
        self.setAcceptDrops(True)
        self._summary = QLabel("Open a GGUF model (File ▸ Open, or drop a file here) to see its layers and experts.")
        self._summary.setWordWrap(True)
        self._summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self._summary.setMargin(12)
        self._tree = QTreeWidget()
        self._tree.setHeaderLabels(["Block", "Size", "Tensors"])
        self._tree.setColumnWidth(0, 260)
        self._tree.setColumnWidth(1, 110)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lay = QVBoxLayout(left)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._summary)
        splitter.addWidget(left)
        splitter.addWidget(self._tree)
        splitter.setSizes([420, 860])
        self.setCentralWidget(splitter)
        self._build_menus()
        self.statusBar().showMessage("Ready")

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        open_act = QAction("&Open model…", self)
        open_act.setShortcut(QKeySequence.StandardKey.Open)
        open_act.triggered.connect(self._choose_file)
        file_menu.addAction(open_act)
        file_menu.addSeparator()
        quit_act = QAction("&Quit", self)
        quit_act.setShortcut(QKeySequence.StandardKey.Quit)
        quit_act.triggered.connect(self.close)
        file_menu.addAction(quit_act)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)")
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> bool:
        try:
            model = open_model(path)
        except GGUFError as exc:
            QMessageBox.warning(self, "Cannot open model", str(exc))
            self.statusBar().showMessage(f"Could not open {Path(path).name}")
            return False
        self.show_model(model)
        return True

    def show_model(self, model: Model) -> None:
        self.model = model
        p = model.params
        self.setWindowTitle(f"{model.path.name} — Layerdeck")
        self._summary.setText(
            f"<h3>{model.path.name}</h3>"
            f"<p><b>{p.arch}</b> · {p.file_type_name} · {fmt_bytes(model.file_size)}<br>"
            f"{fmt_count(model.n_params)} parameters, {fmt_count(model.n_params_active)} active per token<br>"
            f"{p.n_layer} layers"
            + (f" · {p.n_expert} experts, {p.n_expert_used} used" if p.is_moe else "")
            + (f", {p.n_expert_shared} shared" if p.n_expert_shared else "")
            + f"<br>context {p.n_ctx_train:,} tokens</p><p>Quantization: "
            + ", ".join(f"{q.type_name} {fmt_bytes(q.nbytes)}" for q in model.quant_mix())
            + "</p>"
        )
        self._tree.clear()
        for b in model.blocks:
            item = QTreeWidgetItem([b.label, fmt_bytes(b.nbytes), str(len(b.tensors))])
            item.setToolTip(0, "\n".join(f"{t.name}  {t.type_name}  {fmt_bytes(t.nbytes)}" for t in b.tensors[:20]))
            for t in b.tensors:
                QTreeWidgetItem(item, [t.name, fmt_bytes(t.nbytes), t.type_name])
            self._tree.addTopLevelItem(item)
        self.statusBar().showMessage(render_text(model).splitlines()[0])

    # drag a .gguf onto the window to open it
    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if event.mimeData().hasUrls() and any(u.toLocalFile().lower().endswith(".gguf") for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.toLocalFile().lower().endswith(".gguf"):
                self.open_path(url.toLocalFile())
                break
