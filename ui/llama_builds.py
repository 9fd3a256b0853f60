"""Every llama.cpp build found or installed, with its backends and devices; "Use", "Remove" and "Build".

Shown in Settings. "Build" compiles the pinned llama.cpp from source for the backend chosen beside it
(:func:`app.llamacpp.build.ensure_built`): the backends whose toolchain is missing say what is missing and
how to get it, the estimate is shown before starting, the bar follows CMake's percentages, Cancel stops the
compilers (what was compiled is kept and the next build resumes), and "Log" opens the build log. The list is gathered off the GUI thread (:func:`app.llamacpp.find.find_all` runs
``--version``/``--list-devices``/``--help``, cached per binary). "Use" hands the build's folder to the
caller (Settings puts it in its folder field) and marks it current for the command line too; "Remove"
deletes one of Layerdeck's own installs (never the current one).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from .worker import run_in_background

COLUMNS = ("", "Version", "Found", "Backends", "Devices", "Folder")

BACKEND_LABELS = {"cpu": "CPU", "vulkan": "Vulkan", "cuda": "CUDA", "rocm": "ROCm", "metal": "Metal"}


# --------------------------------------------------------------------------- building from source


@dataclass(frozen=True)
class BackendChoice:
    backend: str
    missing: str | None  # why it cannot be built here (with how to get what is missing), or None
    estimate: str  # "about 14 min on 2 CPU cores (...)"
    log_path: Path | None


def backend_choices() -> list[BackendChoice]:
    """Every backend this OS can build, with what its toolchain lacks (runs CMake/NVML look-ups: off the GUI thread)."""
    from app.errors import LayerdeckError
    from app.llamacpp import build

    out = []
    for b in build.BACKENDS:
        if b == "metal" and sys.platform != "darwin":
            continue
        missing = None
        log_path = None
        try:
            p = build.plan(b)
            log_path = p.root / "build.log"
        except LayerdeckError as exc:
            missing = exc.message + (f". {exc.hint[:1].upper()}{exc.hint[1:]}" if exc.hint else "")
        out.append(BackendChoice(b, missing, build.estimate_text(b), log_path))
    return out


def best_backend(choices: list[BackendChoice], gpus: tuple[str, ...]) -> str:
    """The fastest buildable backend for this machine's GPU vendors (``releases.this_machine().gpus``)."""
    ok = {c.backend for c in choices if c.missing is None}
    for backend, vendor in (("cuda", "nvidia"), ("rocm", "amd"), ("metal", "apple")):
        if backend in ok and vendor in gpus:
            return backend
    if "vulkan" in ok and gpus:
        return "vulkan"
    return "cpu"


def fill_backend_box(box: QComboBox, choices: list[BackendChoice], selected: str) -> None:
    box.clear()
    for c in choices:
        label = BACKEND_LABELS.get(c.backend, c.backend)
        box.addItem(label if c.missing is None else f"{label} (cannot build here)", c.backend)
        i = box.count() - 1
        box.setItemData(i, c.missing or f"Build with the {label} backend: {c.estimate}", Qt.ItemDataRole.ToolTipRole)
    i = box.findData(selected)
    box.setCurrentIndex(max(i, 0))
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    box.adjustSize()


class _BuildRelay(QObject):
    progress = Signal(object)


def start_build(
    backend: str,
    relay: _BuildRelay,
    on_done: Callable[[object], None],
    on_failed: Callable[[Exception], None],
) -> threading.Event:
    """Build ``backend`` off the GUI thread and make it current; progress arrives through ``relay`` (at most ~5 a
    second). Returns the event that cancels it."""
    from app.llamacpp.build import ensure_built
    from app.llamacpp.install import use

    from .worker import run_in_background

    cancel = threading.Event()
    last = [0.0, None]

    def progress(p) -> None:
        now = time.monotonic()
        key = (p.stage, p.step, None if p.fraction is None else round(p.fraction, 2))
        if key != last[1] or now - last[0] > 0.2:
            last[0], last[1] = now, key
            relay.progress.emit(p)

    def job():
        folder = ensure_built(backend=backend, progress=progress, cancel=cancel)
        return use(str(folder))

    run_in_background(job, on_done, on_failed)
    return cancel


def progress_text(p) -> str:
    step = f"step {p.step} of {p.steps}: " if p.steps > 1 else ""
    return step + p.text()


class BuildLogDialog(QDialog):
    """The build log, followed while it grows; "Open folder" shows it in the file manager."""

    MAX_CHARS = 400_000

    def __init__(self, path: Path, parent: QWidget | None = None):
        super().__init__(parent)
        self.path = Path(path)
        self.setWindowTitle(f"llama.cpp build log — {self.path.name}")
        self.resize(900, 520)
        lay = QVBoxLayout(self)
        self.where = QLabel(str(self.path))
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.where)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        lay.addWidget(self.text, 1)
        row = QHBoxLayout()
        self.open_btn = QPushButton("Open folder")
        self.open_btn.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.path.parent))))
        close = QPushButton("Close")
        close.clicked.connect(self.accept)
        row.addStretch(1)
        row.addWidget(self.open_btn)
        row.addWidget(close)
        lay.addLayout(row)
        self._size = -1
        self.reload()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.reload)
        self.timer.start(1000)

    def reload(self) -> None:
        try:
            size = self.path.stat().st_size
        except OSError:
            self.text.setPlainText(f"No build log yet: {self.path} does not exist (no build has run for this backend).")
            return
        if size == self._size:
            return
        self._size = size
        with open(self.path, "rb") as fh:
            if size > self.MAX_CHARS:
                fh.seek(size - self.MAX_CHARS)
            data = fh.read().decode("utf-8", "replace")
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 2
        self.text.setPlainText(data if size <= self.MAX_CHARS else "…\n" + data)
        if at_end:
            bar.setValue(bar.maximum())


def show_build_log(path: Path, parent: QWidget | None = None) -> BuildLogDialog:
    dlg = BuildLogDialog(path, parent)
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dlg.show()
    return dlg


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
        brow = QHBoxLayout()
        brow.addWidget(QLabel("Build from source:"))
        self.backend_box = QComboBox()
        self.backend_box.addItem("CPU", "cpu")
        self.backend_box.currentIndexChanged.connect(self._backend_changed)
        self.build_btn = QPushButton("Build")
        self.build_btn.clicked.connect(self.build)
        self.build_bar = QProgressBar()
        self.build_bar.setRange(0, 1000)
        self.build_bar.setTextVisible(True)
        self.build_bar.hide()
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel_build)
        self.cancel_btn.hide()
        self.log_btn = QPushButton("Log")
        self.log_btn.setToolTip("Show the build log of the chosen backend")
        self.log_btn.clicked.connect(self.show_log)
        for w in (self.backend_box, self.build_btn, self.build_bar, self.cancel_btn, self.log_btn):
            brow.addWidget(w)
        brow.setStretchFactor(self.build_bar, 1)
        brow.addStretch(0)
        lay.addLayout(brow)
        self.build_note = QLabel()
        self.build_note.setWordWrap(True)
        self.build_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.build_note)
        self.choices: list[BackendChoice] = []
        self.cancel_event: threading.Event | None = None
        self.log_dialog: BuildLogDialog | None = None
        self._relay = _BuildRelay(self)
        self._relay.progress.connect(self._build_progress)
        self._selection()
        self.refresh()
        self.look_for_toolchains()

    # ------------------------------------------------------------------ building

    def look_for_toolchains(self) -> None:
        from app.llamacpp.releases import this_machine

        def job():
            return backend_choices(), this_machine().gpus

        def done(result) -> None:
            if not isValid(self.backend_box):
                return
            self.choices, gpus = result
            fill_backend_box(self.backend_box, self.choices, best_backend(self.choices, gpus))
            self._backend_changed()

        def failed(exc) -> None:
            if isValid(self.build_note):
                self.build_note.setText(f"Could not look for compilers: {exc}")

        run_in_background(job, done, failed)

    def _choice(self) -> BackendChoice | None:
        backend = self.backend_box.currentData()
        return next((c for c in self.choices if c.backend == backend), None)

    def _backend_changed(self, *_args) -> None:
        c = self._choice()
        if self.cancel_event is not None:
            return
        if c is None:
            self.build_note.setText("")
        elif c.missing:
            text = c.missing[:1].upper() + c.missing[1:]
            self.build_note.setText(f"<span style='color:#c0392b'>{text}</span>")
        else:
            self.build_note.setText(f"{BACKEND_LABELS.get(c.backend, c.backend)} build from source: {c.estimate}.")
        self.build_btn.setEnabled(c is not None and c.missing is None)

    def build(self) -> None:
        c = self._choice()
        if c is None or c.missing:
            return
        self.build_btn.setEnabled(False)
        self.backend_box.setEnabled(False)
        self.build_bar.setRange(0, 0)
        self.build_bar.show()
        self.cancel_btn.show()
        self.cancel_btn.setEnabled(True)
        self.build_note.setText(f"Building {BACKEND_LABELS.get(c.backend, c.backend)} ({c.estimate})…")
        self.cancel_event = start_build(c.backend, self._relay, self._built, self._build_failed)

    def _build_progress(self, p) -> None:
        if not isValid(self.build_bar):
            return
        if p.fraction is None:
            self.build_bar.setRange(0, 0)
        else:
            self.build_bar.setRange(0, 1000)
            self.build_bar.setValue(int(1000 * p.fraction))
        self.build_note.setText(progress_text(p))

    def cancel_build(self) -> None:
        if self.cancel_event is not None:
            self.cancel_event.set()
            self.cancel_btn.setEnabled(False)
            self.build_note.setText("Cancelling: stopping the compilers…")

    def _build_done(self) -> None:
        self.cancel_event = None
        self.build_bar.hide()
        self.cancel_btn.hide()
        self.backend_box.setEnabled(True)
        self.build_btn.setEnabled(True)

    def _built(self, build) -> None:
        if not isValid(self.build_bar):
            return
        self._build_done()
        self.build_note.setText(f"Built and made current: {build.label()} in {build.folder}")
        self.on_use(str(build.folder))
        self.refresh()

    def _build_failed(self, exc) -> None:
        from app.errors import LayerdeckError

        if not isValid(self.build_bar):
            return
        self._build_done()
        text = exc.message + (f" {exc.hint}" if exc.hint else "") if isinstance(exc, LayerdeckError) else repr(exc)
        self.build_note.setText(f"<span style='color:#c0392b'>{text[:1].upper() + text[1:]}</span>")

    def show_log(self) -> None:
        from app.llamacpp.build import log_path

        c = self._choice()
        path = c.log_path if c is not None and c.log_path is not None else None
        if path is None:
            try:
                path = log_path(self.backend_box.currentData() or "cpu")
            except Exception as exc:  # noqa: BLE001 - an unknown GPU architecture: no log for it
                QMessageBox.information(self, "No build log", str(exc))
                return
        self.log_dialog = show_build_log(path, self)

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
