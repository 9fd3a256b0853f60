"""File > Open from Hugging Face…: open a model by name or URL from its header alone, or list a repository.

``ORG/REPO`` lists the repository's quantizations (one row each, a split set as one), reads every header
and auto-fits each on the window's devices: file size, fits or not, what is left per device, predicted
speeds, what goes where (the table sorts by any column). Quantizations the repository does not have (the
"Predict" field: ``common``, ``all``, ``none`` or a list of types) follow as *predicted* rows, from the header
of its highest-precision file by llama-quantize's rules (:mod:`app.remote.predicted`). A double click (or
Open) puts a quantization on the board as a header-only model (a predicted one marked predicted). Download
fetches a real quantization (every shard, resumable, size and SHA-256 checked; :mod:`app.remote.download`)
into the data folder or the folder chosen, with speed and time left, then opens the file; Copy command puts
the launch command with ``-hf ORG/REPO:QUANT`` on the clipboard (llama.cpp downloads it itself).
``hf://ORG/REPO/FILE.gguf``, ``ORG/REPO:QUANT`` or an https:// URL opens that model directly. Reading runs off the GUI thread with progress and Cancel; errors are shown as the
core words them (:mod:`app.remote.errors`).
"""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.cli.repo import RepoPlan, RepoRow, plan_repo
from app.errors import LayerdeckError
from app.lanes import CPU, to_llama_name
from app.llamacpp.load_check import UNCHECKED, LoadCheck
from app.memory.settings import LlamaSettings
from app.remote import RemoteCancelled, RemoteNameError, RemoteOptions, open_remote, parse_name
from app.remote.download import DownloadProgress, default_folder, download_quant
from app.remote.load_check import check_remote
from app.remote.predicted import COMMON_TYPES, parse_targets
from app.units import MiB, fmt_bytes

from .worker import run_in_background


class _Num(QTableWidgetItem):
    """A cell that sorts by its number, not its text."""

    def __init__(self, text: str, value: float | None):
        super().__init__(text)
        self.value = float("-inf") if value is None else value
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other):  # noqa: D105
        return self.value < getattr(other, "value", float("-inf"))


class RemoteDialog(QDialog):
    """The dialog; ``window`` is the main window (its devices, host memory and bandwidth, margin and
    ``show_model``)."""

    def __init__(self, window, parent=None):
        super().__init__(parent or window)
        self.window_ = window
        self.setWindowTitle("Open from Hugging Face")
        self.resize(980, 460)
        self.cancel_flag: threading.Event | None = None
        self.rows: list[RepoRow] = []
        self.repo = ""
        self.dest: str | None = None  # None: default_folder(repo)
        self._last_progress: DownloadProgress | None = None
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.name = QLineEdit()
        self.name.setPlaceholderText(
            "ORG/REPO (list its quantizations), ORG/REPO:QUANT, hf://ORG/REPO/FILE.gguf or https://…/model.gguf"
        )
        self.name.returnPressed.connect(self.start)
        top.addWidget(self.name, 1)
        top.addWidget(QLabel("Predict:"))
        self.predict = QLineEdit("common")
        self.predict.setMaximumWidth(170)
        self.predict.setToolTip(
            "Quantizations the repository does not have, predicted from its highest-precision file by "
            f"llama-quantize's rules: common ({', '.join(COMMON_TYPES)}), all, none, or types separated by commas"
        )
        self.predict.returnPressed.connect(self.start)
        top.addWidget(self.predict)
        self.go = QPushButton("Read")
        self.go.clicked.connect(self.start)
        top.addWidget(self.go)
        lay.addLayout(top)
        self.status = QLabel(
            "Only the headers are read (a few MB each), never the weights. Gated repositories "
            "need HF_TOKEN (or `hf auth login`)."
        )
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        prog = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        prog.addWidget(self.progress, 1)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setEnabled(False)
        self.cancel_btn.clicked.connect(self.cancel)
        prog.addWidget(self.cancel_btn)
        lay.addLayout(prog)
        self.table = QTableWidget(0, 0)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.verticalHeader().setVisible(False)
        self.table.cellDoubleClicked.connect(lambda r, c: self.open_row(r))
        lay.addWidget(self.table, 1)
        bottom = QHBoxLayout()
        self.notes = QLabel("")
        self.notes.setWordWrap(True)
        bottom.addWidget(self.notes, 1)
        self.open_btn = QPushButton("Open on the board")
        self.open_btn.setEnabled(False)
        self.open_btn.clicked.connect(lambda: self.open_row(self.table.currentRow()))
        bottom.addWidget(self.open_btn)
        self.download_btn = QPushButton("Download")
        self.download_btn.setEnabled(False)
        self.download_btn.clicked.connect(lambda: self.download_row(self.table.currentRow()))
        bottom.addWidget(self.download_btn)
        self.copy_btn = QPushButton("Copy command")
        self.copy_btn.setEnabled(False)
        self.copy_btn.setToolTip("The launch command of this placement with -hf ORG/REPO:QUANT: llama.cpp "
                                 "downloads the model itself")
        self.copy_btn.clicked.connect(lambda: self.copy_command(self.table.currentRow()))
        bottom.addWidget(self.copy_btn)
        self.folder_btn = QPushButton("Folder…")
        self.folder_btn.clicked.connect(self.choose_folder)
        bottom.addWidget(self.folder_btn)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        bottom.addWidget(close)
        lay.addLayout(bottom)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self._show_folder()

    # ------------------------------------------------------------------ selection, folder

    def row_of(self, table_row: int) -> RepoRow | None:
        item = self.table.item(table_row, 0) if table_row >= 0 else None
        return None if item is None else self.rows[item.data(Qt.ItemDataRole.UserRole)]

    def _selection_changed(self) -> None:
        r = self.row_of(self.table.currentRow())
        busy = self.cancel_btn.isEnabled()
        self.open_btn.setEnabled(r is not None and not busy)
        real = r is not None and not r.predicted
        self.download_btn.setEnabled(real and not busy)
        self.copy_btn.setEnabled(real and r.session is not None and bool(r.hf_name))
        why = "" if r is None or real else (
            "A predicted quantization: the repository has no such file (quantize the source yourself, or pick "
            "a file of the repository)")
        self.download_btn.setToolTip(why or "Download every file of this quantization (resumes a cut download), "
                                     "check its size and SHA-256, then open it")

    def _folder(self) -> str:
        return self.dest or (str(default_folder(self.repo)) if self.repo else str(default_folder("ORG/REPO")))

    def _show_folder(self) -> None:
        self.folder_btn.setToolTip(f"Downloads go to {self._folder()}")

    def choose_folder(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Download into", self._folder())
        if chosen:
            self.dest = chosen
            self._show_folder()
            self.status.setText(f"Downloads go to {chosen}.")

    # ------------------------------------------------------------------ reading

    def _busy(self, busy: bool) -> None:
        self.go.setEnabled(not busy)
        self.name.setEnabled(not busy)
        self.predict.setEnabled(not busy)
        self.cancel_btn.setEnabled(busy)
        self.folder_btn.setEnabled(not busy)
        if busy:
            self.progress.setRange(0, 0)  # busy until the first progress report
        self._selection_changed()

    def _options(self) -> RemoteOptions:
        self.cancel_flag = threading.Event()
        return RemoteOptions(cancel=self.cancel_flag)

    def start(self) -> None:
        text = self.name.text().strip()
        if not text:
            return
        try:
            name = parse_name(text if "/" not in text or "://" in text or ":" in text else "hf://" + text)
        except RemoteNameError as exc:
            self.status.setText(exc.message)
            return
        if name is None:
            self.status.setText(f"{text!r} is not a repository or model name.")
            return
        if name.kind == "quant" and not name.quant:
            self._list_repo(name.repo)
        else:
            self._open(name.display)

    def _list_repo(self, repo: str) -> None:
        w = self.window_
        lanes = list(getattr(w, "devices", []) or [])
        doc = getattr(w, "doc", None)
        settings = doc.placement.settings if doc is not None else LlamaSettings(n_ctx=8192)
        host = getattr(w, "host_capacity", None)
        bw = getattr(w, "host_bandwidth", None)
        margin = (w.margin_spin.value() << 20) if hasattr(w, "margin_spin") else 1024 * MiB
        try:
            targets = parse_targets(self.predict.text().strip() or "none")
        except LayerdeckError as exc:
            self.status.setText(f"Predict: {exc.message}")
            return
        info = RepoPlan()
        options = self._options()
        self._busy(True)
        self.status.setText(f"Reading {repo}: the file list, then each quantization's header…")

        def job(progress):
            return plan_repo(
                repo,
                lanes,
                settings,
                host=host,
                host_bw=bw,
                margin=margin,
                options=options,
                progress=progress,
                keep_models=True,
                predict=targets,
                info=info,
            )

        def progress(done: int, total: int) -> None:
            self.progress.setRange(0, total)
            self.progress.setValue(done)
            self.progress.setFormat(f"{done} of {total} read")

        run_in_background(job, lambda result: self._listed(repo, lanes, settings, result, info), self._failed,
                          progress)

    def _listed(self, repo: str, lanes, settings, result, info: RepoPlan | None = None) -> None:
        self._busy(False)
        rows, notes = result
        self.rows = rows
        self.repo = repo
        self._show_folder()
        names = [to_llama_name(d.name) for d in lanes] + [to_llama_name(CPU)]
        heads = ["Quant", "Kind", "Size", "Fits"] + [f"Left {n}" for n in names] + ["tg tok/s", "pp tok/s", "Where"]
        self.table.setSortingEnabled(False)
        self.table.clear()
        self.table.setColumnCount(len(heads))
        self.table.setHorizontalHeaderLabels(heads)
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            first = QTableWidgetItem(r.quant)
            first.setData(Qt.ItemDataRole.UserRole, i)
            if r.predicted:
                tip = (f"Predicted: no such file in {repo}. {r.quant} as llama-quantize would write it from "
                       f"{info.source_file if info else 'the repository'}'s header"
                       + (f"\n{r.imatrix_note}" if r.imatrix_note else ""))
            else:
                tip = "\n".join(r.files)
            first.setToolTip(tip + (f"\n\n{r.error}" if r.error else ""))
            kind = QTableWidgetItem("predicted" if r.predicted else "file")
            kind.setToolTip(tip)
            cells = [
                first,
                kind,
                _Num(fmt_bytes(r.size) if r.size is not None else "?", r.size),
                QTableWidgetItem("yes" if r.fits else "no"),
            ]
            for n in names:
                left = r.left.get(n)
                cells.append(_Num(f"{left / MiB:,.0f} MiB" if left is not None else "-", left))
            cells.append(_Num(f"{r.tg:.1f}" if r.tg is not None else "-", r.tg))
            cells.append(_Num(f"{r.pp:.0f}" if r.pp is not None else "-", r.pp))
            cells.append(QTableWidgetItem(r.where or (r.error or "")))
            for c, item in enumerate(cells):
                if not r.fits:
                    item.setForeground(Qt.GlobalColor.darkRed)
                elif r.predicted:
                    item.setForeground(Qt.GlobalColor.darkBlue)
                if r.predicted:
                    f = QFont(item.font())
                    f.setItalic(True)
                    item.setFont(f)
                self.table.setItem(i, c, item)
        self.table.setSortingEnabled(True)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(len(heads) - 1, QHeaderView.ResizeMode.Stretch)
        real = [r for r in rows if not r.predicted]
        pred = [r for r in rows if r.predicted]
        fits = sum(r.fits for r in real)
        text = (f"{repo}: {len(real)} quantization{'s' if len(real) != 1 else ''}, {fits} fit "
                f"on {', '.join(names)} at {settings.n_ctx:,} tokens of context")
        if pred:
            text += f"; {len(pred)} predicted ({sum(r.fits for r in pred)} fit)"
        self.status.setText(text + ". Double-click one to open it on the board.")
        self.notes.setText("\n".join(notes))

    def _open(self, name: str) -> None:
        options = self._options()
        self._busy(True)
        self.status.setText(f"Reading the header of {name}…")

        llama_dir = self.window_.settings.value("llama_dir") or None if hasattr(self.window_, "settings") else None

        def job(progress):
            options.progress = progress
            model, read = open_remote(name, options)
            verdict = check_remote(read, llama_dir)  # llama.cpp loads stand-ins: the header, a hole for the data
            verdict.raise_if_refused(name)
            return model, verdict

        def progress(done: int, total: int) -> None:
            self.progress.setRange(0, max(total, 1) // 1024)
            self.progress.setValue(done // 1024)
            self.progress.setFormat(f"{done / MiB:.1f} MiB read")

        run_in_background(job, lambda result: self._show(*result), self._failed, progress)

    def _failed(self, exc: Exception) -> None:
        self._busy(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        if isinstance(exc, RemoteCancelled):  # a download's says where the part is kept
            self.status.setText("Cancelled." + (f" {exc.message}" if "kept in" in exc.message else ""))
        elif isinstance(exc, LayerdeckError):
            self.status.setText(exc.message + (f" {exc.hint}" if exc.hint else ""))
        else:
            self.status.setText(f"Internal error: {type(exc).__name__}: {exc}")

    def cancel(self) -> None:
        if self.cancel_flag is not None:
            self.cancel_flag.set()
            self.status.setText("Cancelling…")

    # ------------------------------------------------------------------ opening

    def open_row(self, row: int) -> None:
        r = self.row_of(row)
        if r is None:
            return
        if r.model is None:
            QMessageBox.warning(self, "Cannot open", r.error or "This quantization's header could not be read.")
            return
        if r.predicted:
            self._show(r.model, LoadCheck(UNCHECKED, f"predicted ({r.model.predicted_from}): there is no such "
                                          "file for llama.cpp to check"))
        else:
            self._show(r.model)

    def copy_command(self, row: int) -> None:
        r = self.row_of(row)
        if r is None or r.predicted or r.session is None or not r.hf_name:
            return
        try:
            text = r.session.export("bash", model_path=r.hf_name)
        except LayerdeckError as exc:
            self.status.setText(f"No command: {exc.message}")
            return
        QGuiApplication.clipboard().setText(text)
        self.status.setText(f"Copied the command for {r.quant} (llama.cpp downloads it with -hf): "
                            + text.splitlines()[0][:160])

    def download_row(self, row: int) -> None:
        r = self.row_of(row)
        if r is None or r.predicted or self.cancel_btn.isEnabled():
            return
        name = r.hf_name or r.name
        dest = self._folder()
        options = self._options()
        self._busy(True)
        self._last_progress = None
        self.status.setText(f"Downloading {r.quant} ({fmt_bytes(r.size) if r.size else 'size unknown'}) "
                            f"into {dest}…")

        def job(progress):
            def report(p: DownloadProgress) -> None:
                self._last_progress = p  # read by the GUI thread in shown()
                progress(p.done // 1024, max(p.total, 1) // 1024)

            return download_quant(name, dest, options=options, progress=report)

        def shown(done: int, total: int) -> None:
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(min(done, total))
            p = self._last_progress
            if p is not None:
                self.progress.setFormat(p.text())

        run_in_background(job, lambda res: self._downloaded(r, res), self._failed, shown)

    def _downloaded(self, r: RepoRow, res) -> None:
        self._busy(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setFormat("done")
        where = res.paths[0].parent
        self.status.setText(f"Downloaded {r.quant} into {where} ({fmt_bytes(res.fetched)} fetched"
                            + (f", {fmt_bytes(res.resumed)} resumed" if res.resumed else "")
                            + (", already there" if res.already and not res.fetched else "") + "); opening it…")
        self.downloaded = res
        w = self.window_
        if hasattr(w, "open_path"):
            self.accept()
            w.open_path(str(res.paths[0]))

    def _show(self, model, verdict: LoadCheck | None = None) -> None:
        """Put ``model`` on the board; ``verdict`` is llama.cpp's load check (None: a repository row, not checked)."""
        self._busy(False)
        w = self.window_
        confirm = getattr(w, "_confirm_leave", None)
        if confirm is not None and not confirm():
            return
        try:
            w.show_model(model)
        except LayerdeckError as exc:
            self.status.setText(exc.message)
            return
        if hasattr(w, "show_load_check"):
            w.show_load_check(verdict or LoadCheck(UNCHECKED, "a row of the repository table: open it by name "
                                                   "to have llama.cpp check it"))
        if model.predicted_from:
            w.statusBar().showMessage(f"Opened a predicted quantization: {model.predicted_from}, by llama-quantize's "
                                      "rules (no such file: header only)", 10000)
        else:
            w.statusBar().showMessage(
                f"Opened {model.source} (header only: download it, or export the command with "
                "-hf so llama.cpp downloads it)",
                10000,
            )
        self.accept()

    def reject(self) -> None:
        self.cancel()
        super().reject()


def open_remote_dialog(window) -> RemoteDialog:
    """Show the dialog (non-modal) for ``window``: one per window, kept (a read that is being cancelled still
    reports to it), its last table still there when it is shown again."""
    dlg = getattr(window, "_remote_dialog", None)
    if dlg is None:
        dlg = window._remote_dialog = RemoteDialog(window)
    dlg.show()

    return dlg
