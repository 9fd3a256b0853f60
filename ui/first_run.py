"""The first-run banner: when no usable llama.cpp is found, say so once and offer Download, Build, Choose a folder.

The banner looks for llama.cpp off the GUI thread (:func:`app.llamacpp.find.find_all`); when nothing
usable is there it appears at the top of the main window with three buttons:

* **Download** names the release asset chosen for this machine (and why, in its tooltip); the download
  runs off the GUI thread with a progress bar, speed, time left and Cancel. Nothing is downloaded
  before the click. The release is the official latest one unless ``LAYERDECK_LLAMA_RELEASE_URL`` (or
  the ``release_url`` argument) names a mirror.
* **Build from source** builds the pinned llama.cpp (:func:`app.llamacpp.build.ensure_built`) for the
  backend chosen beside it (the fastest one whose compiler is here is preselected; one whose toolchain is
  missing says what is missing and how to get it), with a time estimate from the backend and the number of
  CPU cores, a bar that follows CMake's percentages, Cancel (the compilers stop; what was compiled is kept
  and the next build resumes) and "Build log" one click away.
* **Choose a folder…** takes a folder that holds ``llama-server``.

Whatever succeeds becomes the Settings folder and the current build; a failure leaves everything as it
was and shows its one-line message in the banner.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.errors import LayerdeckError
from app.units import fmt_bytes

from .worker import run_in_background

log = logging.getLogger(__name__)

RELEASE_URL_ENV = "LAYERDECK_LLAMA_RELEASE_URL"


def build_minutes(cores: int | None = None, backend: str = "cpu") -> int:
    """About how long building the four tools takes (:func:`app.llamacpp.build.estimate_minutes`: the CPU build
    12-15 min on 2 cores, measured; shorter with more)."""
    from app.llamacpp.build import estimate_minutes

    return estimate_minutes(backend, cores)


class _Relay(QObject):
    progress = Signal(object)


def _message(exc: BaseException) -> str:
    if isinstance(exc, LayerdeckError):
        return exc.message + (f" {exc.hint}" if exc.hint else "")
    log.error("llama.cpp set-up failed", exc_info=exc)
    return f"internal error ({type(exc).__name__}: {exc})"


class FirstRunBanner(QFrame):
    """The banner; ``installed(folder)`` is emitted when a build has been set up and made current."""

    installed = Signal(str)
    shown = Signal(bool)  # the banner appeared (True) or was closed (False)

    def __init__(self, settings: QSettings, release_url: str | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        from app.llamacpp.releases import OFFICIAL_RELEASE_URL

        self.settings = settings
        self.release_url = release_url or os.environ.get(RELEASE_URL_ENV) or OFFICIAL_RELEASE_URL
        self.choice = None
        self.cancel_event: threading.Event | None = None
        self.busy = False
        self.setObjectName("first-run-banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#first-run-banner { background: palette(alternate-base); border: 1px solid palette(mid); }")
        lay = QVBoxLayout(self)
        self.title = QLabel(
            "<b>llama.cpp was not found on this computer.</b> Layerdeck needs it to check "
            "placements, name your GPUs and launch models."
        )
        self.title.setWordWrap(True)
        self.detail = QLabel("Looking for the latest llama.cpp release…")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.title)
        lay.addWidget(self.detail)
        row = QHBoxLayout()
        self.download_btn = QPushButton("Download")
        self.download_btn.setEnabled(False)
        self.download_btn.clicked.connect(self.download)
        self.build_btn = QPushButton()
        self.build_btn.clicked.connect(self.build)
        self.backend_box = QComboBox()
        self.backend_box.addItem("CPU", "cpu")
        self.backend_box.setToolTip("The backend to build; the fastest one whose compiler is here is preselected")
        self.backend_box.currentIndexChanged.connect(self._backend_changed)
        self.choices: list = []
        self.build_log_path = None
        self.log_btn = QPushButton("Build log")
        self.log_btn.setToolTip("Show the log of the build from source")
        self.log_btn.clicked.connect(self.show_log)
        self.log_btn.hide()
        self._backend_changed()
        self.folder_btn = QPushButton("Choose a folder…")
        self.folder_btn.setToolTip("A folder that already holds llama-server")
        self.folder_btn.clicked.connect(self.choose_folder)
        self.close_btn = QPushButton("Not now")
        self.close_btn.clicked.connect(self.dismiss)
        for b in (self.download_btn, self.build_btn, self.backend_box, self.folder_btn, self.log_btn):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(self.close_btn)
        lay.addLayout(row)
        prog = QHBoxLayout()
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.status = QLabel()
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        prog.addWidget(self.bar, 1)
        prog.addWidget(self.status, 2)
        prog.addWidget(self.cancel_btn)
        self.progress_row = QWidget()
        self.progress_row.setLayout(prog)
        self.progress_row.hide()
        lay.addWidget(self.progress_row)
        self._relay = _Relay()
        self._relay.progress.connect(self._show_progress)
        from .llama_builds import _BuildRelay

        self._build_relay = _BuildRelay(self)
        self._build_relay.progress.connect(self._show_build_progress)
        self.setVisible(False)

    def reveal(self) -> None:
        self.setVisible(True)
        self.shown.emit(True)

    def dismiss(self) -> None:
        self.setVisible(False)
        self.shown.emit(False)

    # ------------------------------------------------------------------ looking

    def check(self, on_done=None) -> None:
        """Look for llama.cpp off the GUI thread; show the banner (once) when nothing usable is found."""
        from app.llamacpp.find import find_all

        configured = self.settings.value("llama_dir") or None

        def done(builds) -> None:
            usable = [b for b in builds if b.usable]
            if not usable:
                self.reveal()
                self.fetch_release()
                self.look_for_toolchains()
            if on_done is not None:
                on_done(builds)

        run_in_background(lambda: find_all(configured), done, lambda exc: (self.reveal(), self._fail(exc)))

    def fetch_release(self) -> None:
        """Read the release and pick the asset for this machine (no download)."""
        from app.llamacpp import releases

        url = self.release_url
        self.download_btn.setEnabled(False)
        self.download_btn.setText("Download")
        self.detail.setText("Looking for the latest llama.cpp release…")

        def job():
            release = releases.fetch_release(url)
            machine = releases.this_machine()
            return releases.choose(release, machine), machine

        def done(result) -> None:
            choice, machine = result
            self.choice = choice
            self.download_btn.setEnabled(True)
            self.download_btn.setText(
                f"Download {choice.release.tag} {choice.backend.upper() if choice.backend != 'cpu' else 'CPU'} "
                f"({fmt_bytes(choice.download_bytes)})"
            )
            names = " + ".join(a.name for a in choice.assets)
            self.download_btn.setToolTip(f"{names}\n{choice.reason}")
            notes = "".join(f"<br>Note: {n}" for n in choice.notes)
            self.detail.setText(
                f"Recommended for this computer ({machine.describe()}): <b>{names}</b> — {choice.reason}.{notes}"
            )

        def failed(exc) -> None:
            self.choice = None
            self.download_btn.setEnabled(True)
            self.download_btn.setText("Download (try again)")
            self.detail.setText(f"The llama.cpp release could not be read: {_message(exc)}")

        run_in_background(job, done, failed)

    def look_for_toolchains(self) -> None:
        """Which backends can be built here (off the GUI thread); preselect the fastest for this machine's GPU."""
        from app.llamacpp.releases import this_machine

        from .llama_builds import backend_choices, best_backend, fill_backend_box

        def job():
            return backend_choices(), this_machine().gpus

        def done(result) -> None:
            if self.busy:
                return
            self.choices, gpus = result
            fill_backend_box(self.backend_box, self.choices, best_backend(self.choices, gpus))
            self._backend_changed()

        run_in_background(job, done, lambda exc: log.warning("could not look for compilers: %s", exc))

    def _choice(self):
        backend = self.backend_box.currentData() or "cpu"
        return next((c for c in self.choices if c.backend == backend), None)

    def _backend_changed(self, *_args) -> None:
        from .llama_builds import BACKEND_LABELS

        backend = self.backend_box.currentData() or "cpu"
        label = BACKEND_LABELS.get(backend, backend)
        self.build_btn.setText(f"Build from source (about {build_minutes(backend=backend)} min, {label})")
        c = self._choice()
        if c is not None and c.missing:
            self.build_btn.setToolTip(f"{label} cannot be built here: {c.missing}")
        else:
            from app.llamacpp.build import estimate_text

            self.build_btn.setToolTip(
                f"Compile the llama.cpp version Layerdeck is tested with, {label} and RPC backends "
                f"(needs CMake and a C++ compiler): {estimate_text(backend)}"
            )

    # ------------------------------------------------------------------ actions

    def _set_busy(self, busy: bool, cancellable: bool = True) -> None:
        self.busy = busy
        for b in (self.download_btn, self.build_btn, self.backend_box, self.folder_btn, self.close_btn):
            b.setEnabled(not busy)
        self.progress_row.setVisible(busy)
        self.cancel_btn.setVisible(cancellable)

    def download(self) -> None:
        if self.choice is None:
            self.fetch_release()
            return
        from app.llamacpp.install import install

        choice = self.choice
        self.cancel_event = cancel = threading.Event()
        self._set_busy(True)
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.status.setText(f"Downloading {choice.asset.name}…")
        self._t0 = time.monotonic()
        relay = self._relay
        run_in_background(
            lambda: install(choice, progress=relay.progress.emit, cancel=cancel), self._installed, self._fail
        )

    def _show_progress(self, p) -> None:
        if p.total:
            self.bar.setValue(int(1000 * p.done / p.total))
        self.status.setText(p.text())

    def cancel(self) -> None:
        if self.cancel_event is not None:
            self.cancel_event.set()
            self.status.setText("Cancelling…")

    def build(self) -> None:
        from .llama_builds import BACKEND_LABELS, start_build

        backend = self.backend_box.currentData() or "cpu"
        c = self._choice()
        if c is not None and c.missing:
            self._fail_text(f"{BACKEND_LABELS.get(backend, backend)} cannot be built here: {c.missing}")
            return
        if c is not None and c.log_path is not None:
            self.build_log_path = c.log_path
        self.log_btn.setVisible(self.build_log_path is not None)
        self._set_busy(True, cancellable=True)
        self.backend_box.setEnabled(False)
        self.bar.setRange(0, 0)  # until CMake prints its first percentage
        self.status.setText(f"Building llama.cpp from source ({c.estimate if c else 'CPU'})…")
        self.cancel_event = start_build(backend, self._build_relay, self._installed, self._fail)

    def _show_build_progress(self, p) -> None:
        from .llama_builds import progress_text

        if p.log_path is not None and self.build_log_path != p.log_path:
            self.build_log_path = p.log_path
            self.log_btn.show()
        if p.fraction is None:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * p.fraction))
        self.status.setText(progress_text(p))

    def show_log(self) -> None:
        from .llama_builds import show_build_log

        if self.build_log_path is not None:
            self.log_dialog = show_build_log(self.build_log_path, self)

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder with llama-server")
        if folder:
            self.use_folder(folder)

    def use_folder(self, folder: str) -> None:
        from app.llamacpp.install import use

        self._set_busy(True, cancellable=False)
        self.bar.setRange(0, 0)
        self.status.setText(f"Checking {folder}…")
        run_in_background(lambda: use(folder), self._installed, self._fail)

    # ------------------------------------------------------------------ results

    def _installed(self, result) -> None:
        from app.llamacpp.find import Build

        build = result if isinstance(result, Build) else result.build
        folder = str(build.folder)
        self._set_busy(False)
        self.settings.setValue("llama_dir", folder)
        devices = ", ".join(d.name for d in build.devices) or "CPU"
        self.title.setText(f"<b>llama.cpp is ready:</b> {build.label()} in {folder}")
        self.detail.setText(
            f"Backends: {', '.join(build.backends)}; devices: {devices}. Launch, Verify and the "
            "device names use it now; Settings lists every build."
        )
        self.download_btn.hide()
        self.build_btn.hide()
        self.backend_box.hide()
        self.folder_btn.hide()
        self.close_btn.setText("Close")
        self.installed.emit(folder)

    def _fail(self, exc) -> None:
        self._fail_text(_message(exc))

    def _fail_text(self, text: str) -> None:
        self._set_busy(False)
        self.cancel_event = None
        self.bar.setRange(0, 1000)
        self.detail.setText(f"<span style='color:#c0392b'>{text[:1].upper() + text[1:]}</span>")


def attach_first_run(window, release_url: str | None = None) -> FirstRunBanner:
    """Put the banner at the top of ``window`` (a toolbar row of its own) and start looking for llama.cpp.

    When a build is set up, the window reads its flags and detects the devices again.
    """
    banner = FirstRunBanner(window.settings, release_url, window)
    tb = QToolBar("llama.cpp set-up")
    tb.setObjectName("first-run-toolbar")
    tb.setMovable(False)
    tb.setFloatable(False)
    window.addToolBarBreak()
    window.addToolBar(tb)
    action = tb.addWidget(banner)  # a toolbar widget is shown and hidden through its action

    def visible(on: bool) -> None:
        action.setVisible(on)
        tb.setVisible(on)

    visible(False)
    banner.shown.connect(visible)
    banner.installed.connect(lambda _f: (window._load_capabilities(), window._detect()))
    window.first_run_toolbar = tb
    banner.check()
    return banner
