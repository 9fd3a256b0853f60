"""The main window: model summary and KV panel, the board, the command panel.

Objects are created and wired here (a new :class:`Document` per opened
model); widgets get what they show in their constructors.
"""

from __future__ import annotations

import logging
from pathlib import Path

import psutil
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.errors import LayerdeckError
from app.gcpolicy import reset as reset_collector
from app.gcpolicy import settle
from app.lanes import Lane
from app.llamacpp.load_check import LoadCheck, check_load
from app.memory.device_adapter import from_detected
from app.model import Model, open_model
from app.model.demo import load_demo
from app.placement.autofit import FitError
from app.placement.plan_file import PlanError
from app.units import GiB

from .board.board_view import BoardView
from .board.legend import Legend
from .command_panel import CommandPanel
from .document import Document
from .draft_panel import DraftPanel
from .elided_label import ElidedLabel, ElidingStatusBar
from .kv_panel import KvPanel
from .message_bar import MessageBar
from .projector_panel import ProjectorPanel
from .summary_panel import SummaryPanel
from .worker import run_in_background

#: how long the board is still before the next drag's cut graphs are built ahead (Session.warm_previews): about
#: one human reaction, so a drag that follows a drop at once is not held up by it
_WARM_AFTER_MS = 250

log = logging.getLogger(__name__)

#: Lanes for the demo (and for planning) when no GPU is detected.
DEMO_DEVICES = [Lane("CUDA0", "CUDA0", 24 * GiB, 24 * GiB, "planned", 1.0e12),
                Lane("CUDA1", "CUDA1", 12 * GiB, 12 * GiB, "planned", 0.5e12)]


class MainWindow(QMainWindow):
    def __init__(self, detect_devices: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("Layerdeck")
        self.setAcceptDrops(True)
        self.settings = QSettings()
        self.devices: list[Lane] = []
        self.detected = False
        self.host_capacity = psutil.virtual_memory().total
        self.doc: Document | None = None
        self.board: BoardView | None = None
        self._build_actions()
        self._build_toolbar()
        self._build_menus()
        self.setStatusBar(ElidingStatusBar(self))  # temporary messages end in "…" where they do not fit
        self._status = ElidedLabel()  # the estimate line: elided, never widening the window
        self._status.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.statusBar().addPermanentWidget(self._status)
        self._autosave_timer = QTimer(self)
        self._autosave_timer.setSingleShot(True)
        self._autosave_timer.setInterval(1500)
        self._autosave_timer.timeout.connect(self._autosave)
        from app.memory.learned import LearnedStore, store_path

        # what the user's llama.cpp decided in dry runs, kept per build, model and devices (app.memory.learned)
        self.learned_store = LearnedStore(store_path())
        self._llama_missing: str | None = None  # why no llama-fit-params was found, said in the summary
        self._finding_llama = False  # looking for llama-fit-params (off the GUI thread)
        self._bg_timer = QTimer(self)  # the background dry run starts when the board has been still this long
        self._bg_timer.setSingleShot(True)
        self._bg_timer.setInterval(1500)
        self._bg_timer.timeout.connect(self._background_check)
        self._bg_job = None  # the background dry run in flight (app.placement.dry_run.DryRunJob)
        # a drag's first previews need cut graphs the board's placement did not: built ahead, one per tick, once
        # the board has been still this long and while no drag is on (Session.warm_previews)
        self._warm_timer = QTimer(self)
        self._warm_timer.setSingleShot(True)
        self._warm_timer.timeout.connect(self._warm_previews)
        self._bg_state = ""  # what the summary says about it
        self.show_model(load_demo())
        if detect_devices:
            self._detect()
            self._measure_host()
            QTimer.singleShot(0, self.offer_restore)
            from .first_run import attach_first_run  # no usable llama.cpp: say so once, offer to get one

            self.first_run = attach_first_run(self)

    # ------------------------------------------------------------------ layout

    def _build_actions(self) -> None:
        def act(text, slot, shortcut=None, tip=None):
            a = QAction(text, self)
            a.triggered.connect(slot)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            if tip:
                a.setToolTip(tip)
            return a

        self.open_act = act("&Open model…", self._choose_file, QKeySequence.StandardKey.Open)
        self.open_act.setIconText("Open")  # the toolbar's short text (the menu says "Open model…")
        self.open_plan_act = act("Open &plan…", self._open_plan)
        self.save_plan_act = act("&Save plan…", self._save_plan, QKeySequence.StandardKey.Save)
        self.launch_last_act = act("&Launch last model", self._launch_last, "Ctrl+Shift+L",
                                   tip="Open the most recent model and launch it with its last launch profile")
        self.quit_act = act("&Quit", self.close, QKeySequence.StandardKey.Quit)
        self.undo_act = act("&Undo", lambda: self.doc and self.doc.undo(), QKeySequence.StandardKey.Undo)
        self.redo_act = act("&Redo", lambda: self.doc and self.doc.redo(), QKeySequence.StandardKey.Redo)
        # Ctrl+Y as well as the platform's own redo key (Ctrl+Shift+Z on Linux and macOS)
        self.redo_act.setShortcuts(list(dict.fromkeys(QKeySequence.keyBindings(QKeySequence.StandardKey.Redo)
                                                      + [QKeySequence("Ctrl+Y")])))
        self.all_gpu_act = act("All on GPU", lambda: self._preset("all"), tip="Every layer on the GPUs, split by capacity")
        self.experts_cpu_act = act("Experts → CPU", lambda: self._preset("experts"),
                                   tip="Attention, shared experts and KV on the GPUs; routed experts in RAM (--cpu-moe)")
        self.ncmoe_act = act("--n-cpu-moe", lambda: self._preset("ncmoe"),
                             tip="Experts of the first N layers in RAM (llama.cpp's --n-cpu-moe N)")
        self.fit_act = act("Auto-fit", self._auto_fit, "Ctrl+F",
                           tip="Fill every device up to its margin: dense parts first, then experts")
        self.select_exp_act = act("Select experts of layers…", self._select_experts, "Ctrl+E")
        self.fastest_act = act("Fastest", self._fastest, tip="Minimise predicted generation time within memory")
        self.compare_act = act("Compare…", self._compare,
                               tip="Current, auto-fit, fastest and llama.cpp's own --fit side by side")
        self.devices_act = act("&Devices…", self._devices_dialog, "Ctrl+D",
                               tip="Detected devices, planned GPUs, RPC hosts")
        self.settings_act = act("S&ettings…", self._settings_dialog, QKeySequence.StandardKey.Preferences)
        self.verify_act = act("Verify with llama.cpp", self._verify, "Ctrl+R",
                              tip="Run llama.cpp's own dry run (llama-fit-params) and show its numbers per lane")
        self.verify_act.setIconText("Verify")
        self.bg_check_act = act("Check with llama.cpp in the background", self._bg_check_toggled,
                                tip="When the board has been still for a moment, run llama.cpp's dry run off the "
                                    "GUI thread and keep what it decided (stopped by the next edit)")
        self.bg_check_act.setCheckable(True)
        self.bg_check_act.setChecked(self.settings.value("background_check", "true") in (True, "true"))
        self.experts_cpu_act.setIconText("Experts→CPU")
        self.guide_act = act("&Guide to the board", self._guide, QKeySequence.StandardKey.HelpContents,
                             tip="What each colour, gauge segment and number means")
        if QKeySequence("F1") not in self.guide_act.shortcuts():
            self.guide_act.setShortcuts([*self.guide_act.shortcuts(), QKeySequence("F1")])
        self.about_act = act("&About Layerdeck", self._about)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main")
        tb.setObjectName("main-toolbar")
        tb.setMovable(False)
        self.addToolBar(tb)
        tb.addAction(self.open_act)
        # undo/redo buttons keep a fixed text (the full label is their tooltip), so the toolbar never jumps
        self.undo_btn, self.redo_btn = QToolButton(), QToolButton()
        for btn, a, text in ((self.undo_btn, self.undo_act, "Undo"), (self.redo_btn, self.redo_act, "Redo")):
            btn.setText(text)
            btn.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            btn.clicked.connect(a.trigger)
            tb.addWidget(btn)
        tb.addSeparator()
        tb.addAction(self.all_gpu_act)
        tb.addAction(self.experts_cpu_act)
        tb.addWidget(QLabel(" --n-cpu-moe "))
        self.ncmoe_spin = QSpinBox()
        self.ncmoe_spin.setRange(0, 999)
        self.ncmoe_spin.setToolTip("N for --n-cpu-moe: the experts of the first N layers stay in RAM (Enter applies)")
        self.ncmoe_spin.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # never the first focus: keys go to the board
        self.ncmoe_spin.lineEdit().returnPressed.connect(self.ncmoe_act.trigger)
        tb.addWidget(self.ncmoe_spin)
        self.ncmoe_btn = QToolButton()
        self.ncmoe_btn.setText("Apply")
        self.ncmoe_btn.setAutoRaise(False)  # drawn as a button, not as a label
        self.ncmoe_btn.setToolTip("Apply --n-cpu-moe N (Enter in the box does the same)")
        self.ncmoe_btn.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.ncmoe_btn.clicked.connect(self.ncmoe_act.trigger)
        tb.addWidget(self.ncmoe_btn)
        self.ncmoe_btn.setAutoRaise(False)  # after addWidget: the toolbar raises its tool buttons
        tb.addSeparator()
        tb.addAction(self.fit_act)
        tb.addAction(self.fastest_act)
        tb.addAction(self.compare_act)
        tb.addAction(self.verify_act)
        self.margin_spin = QSpinBox()
        self.margin_spin.setRange(0, 16384)
        self.margin_spin.setSingleStep(256)
        self.margin_spin.setValue(int(self.settings.value("margin_mib", 1024)))
        self.margin_spin.setSuffix(" MiB")
        self.margin_spin.setToolTip("Free memory to keep on every GPU (llama.cpp's --fit-target; the hatched part "
                                    "of each gauge)")
        self.margin_spin.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        tb.addWidget(QLabel(" Margin "))
        self.margin_spin.valueChanged.connect(self._margin_changed)
        tb.addWidget(self.margin_spin)

    def _build_menus(self) -> None:
        m = self.menuBar().addMenu("&File")
        for a in (self.open_act, self.open_plan_act, self.save_plan_act):
            m.addAction(a)
        from .remote_dialog import open_remote_dialog  # a model or a repository by name, read from its headers

        m.addAction("Open from &Hugging Face…", lambda: open_remote_dialog(self))
        self.recent_menu = m.addMenu("Open &recent")
        self._fill_recent()
        m.addAction(self.launch_last_act)
        m.addSeparator()
        m.addAction(self.quit_act)
        e = self.menuBar().addMenu("&Edit")
        for a in (self.undo_act, self.redo_act, self.select_exp_act):
            e.addAction(a)
        t = self.menuBar().addMenu("&Tools")
        t.addAction(self.devices_act)
        t.addAction(self.settings_act)
        p = self.menuBar().addMenu("&Placement")
        for a in (self.all_gpu_act, self.experts_cpu_act, self.ncmoe_act, self.fit_act, self.fastest_act,
                  self.compare_act, self.verify_act, self.bg_check_act):
            p.addAction(a)
        h = self.menuBar().addMenu("&Help")
        h.addAction(self.guide_act)
        h.addAction(self.about_act)

    def show_model(self, model: Model) -> None:
        """Build the document and the widgets for ``model``; devices are the detected ones (or planned)."""
        # the demo plans on two GPUs when none was found; a real model gets what was detected (maybe only the CPU)
        devices = self.devices or (DEMO_DEVICES if model.is_demo else [])
        old_doc = self.doc
        self.doc = Document(model, devices, host_capacity=self.host_capacity,
                            margin=self.margin_spin.value() << 20, parent=self)
        if old_doc is not None:
            old_doc.deleteLater()  # its tensor table and caches go with it
            reset_collector()  # its frozen objects too: the next settle walks everything (app.gcpolicy)
        self.doc.message.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self.doc.preview_changed.connect(self._preview_speed)
        if getattr(self, "host_bandwidth", None):
            self.doc.set_host_bandwidth(self.host_bandwidth)
        self.doc.changed.connect(self._doc_changed)
        self.doc.session_changed.connect(self._session_event)
        self.doc.opinion_changed.connect(self._show_verification)
        self.board = BoardView(self.doc)
        self.board.preset_actions = [("All on GPU", lambda: self._preset("all")),
                                     ("Experts → CPU", lambda: self._preset("experts")),
                                     ("Auto-fit", self._auto_fit),
                                     ("Select experts of layers…", self._select_experts)]
        self.board.hovered.connect(lambda text: self.statusBar().showMessage(text, 4000))
        self.board.drop_refused.connect(self._drop_refused)
        self.command = CommandPanel(self.doc)
        self._load_capabilities()
        old = getattr(self, "launch", None)
        if old is not None:
            old.shutdown()  # a new model: the old server stops with its panel
        from .launch_panel import LaunchPanel

        self.launch = LaunchPanel(self.doc, llama_dir=lambda: self.settings.value("llama_dir") or None,
                                  rpc=lambda: self.doc.rpc_endpoints(), settings=self.settings)
        self.launch.launch_btn.setShortcut(QKeySequence("Ctrl+L"))
        self.bottom = QTabWidget()
        self.bottom.addTab(self.command, "Command")
        self.bottom.addTab(self.launch, "Server")
        self.draft_panel = DraftPanel(self.doc)
        self.bottom.addTab(self.draft_panel, "Draft model")
        self.projector_panel = ProjectorPanel(self.doc)
        self.bottom.addTab(self.projector_panel, "Projector")
        self.launch.server_state.connect(lambda st: self.bottom.setTabText(1, f"Server: {st.value}"))
        split = QSplitter(Qt.Orientation.Vertical)

        def show_server() -> None:
            self.bottom.setCurrentWidget(self.launch)
            total = sum(split.sizes())
            split.setSizes([int(total * 0.45), total - int(total * 0.45)])

        self.launch.launch_btn.clicked.connect(show_server)
        top = QWidget()
        top_lay = QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.setSpacing(2)
        self.message_bar = MessageBar()  # problems stay until dismissed (the status bar forgets in seconds)
        top_lay.addWidget(self.message_bar)
        top_lay.addWidget(Legend())
        top_lay.addWidget(self.board, 1)
        split.addWidget(top)
        split.addWidget(self.bottom)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([560, 190])
        self.setCentralWidget(split)
        left = QWidget()
        lay = QVBoxLayout(left)
        lay.setContentsMargins(0, 0, 0, 0)
        self.summary = SummaryPanel(model)
        self.kv_panel = KvPanel(self.doc)
        lay.addWidget(self.summary)
        lay.addWidget(self.kv_panel, 1)
        dock = getattr(self, "_dock", None)
        if dock is None:
            dock = self._dock = QDockWidget("Model", self)
            dock.setObjectName("model-dock")
            dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        old_left = dock.widget()
        dock.setWidget(left)
        if old_left is not None:
            old_left.deleteLater()
        left.setMinimumWidth(300)
        title = model.title or model.path.name
        self.setWindowTitle(f"{title} — Layerdeck")
        self.command.open_model_requested.connect(self._open_with_command)
        fitted = None if model.is_demo else self.doc.session.start_fitted()
        if fitted:
            self.message_bar.show_message("Opened fitted", fitted, "info")
        self.board.setFocus()  # keys (Ctrl+D, Ctrl+E, Alt+N) reach the board, not a toolbar spin box
        self._cancel_background()
        self._attach_learning()
        self._doc_changed()
        self._bg_timer.start()
        self._warm_timer.start(_WARM_AFTER_MS)

    def _doc_changed(self) -> None:
        d = self.doc
        if d is None:
            return
        if not d.model.is_demo and d.dirty:
            self._autosave_timer.start()
        self.undo_act.setEnabled(bool(d.history.undo_label))
        self.redo_act.setEnabled(bool(d.history.redo_label))
        self.undo_act.setText(f"&Undo {d.history.undo_label}" if d.history.undo_label else "&Undo")
        self.redo_act.setText(f"&Redo {d.history.redo_label}" if d.history.redo_label else "&Redo")
        for btn, a, label in ((self.undo_btn, self.undo_act, d.history.undo_label),
                              (self.redo_btn, self.redo_act, d.history.redo_label)):
            btn.setEnabled(a.isEnabled())
            btn.setToolTip(a.text().replace("&", "") if label else "Nothing to " + btn.text().lower())
        over = [o.lane for o in d.overflows()]
        text = f"estimate {d.last_estimate_ms:.1f} ms"
        if d.decode is not None:
            par = d.parallel
            text = (f"expected ≈ {d.decode.tokens_per_s:.1f} tok/s generation, "
                    f"{d.prompt.tokens_per_s:.0f} tok/s prompt · "
                    + (f"{par.text()} · " if par is not None else "") + text)
            self._status.setToolTip(
                "Predicted by the speed model (docs/speed-model.md), for one user; "
                + (f"with all {par.n} slots busy: {par.text()}, once every user is generating"
                   if par is not None else "one slot (-np 1)"))
        if over:
            text = "over capacity: " + ", ".join(over) + " · " + text
        self._status.setText(text)
        self._show_verification()

    # ------------------------------------------------------------------ learning from llama.cpp

    def _attach_learning(self) -> None:
        """Give the document the figures learned from this llama.cpp build (found off the GUI thread); say
        plainly when there is none."""
        from app.llamacpp.binaries import LlamaCppNotFound, find_tool
        from app.memory.learned import build_id

        d = self.doc
        llama_dir = self.settings.value("llama_dir") or None
        self._finding_llama = True

        def find():
            try:
                tool = find_tool("llama-fit-params", llama_dir)
            except LlamaCppNotFound as exc:
                return None, str(exc)
            try:
                return build_id(tool.path), None
            except OSError as exc:
                return None, f"llama-fit-params cannot be read: {exc}"

        def done(result) -> None:
            build, missing = result
            if self.doc is not d or d is None:
                return
            self._finding_llama = False
            self._llama_missing = missing
            d.use_learned(self.learned_store, build)

        def failed(exc) -> None:
            self._finding_llama = False
            self._llama_missing = f"llama-fit-params could not be looked for: {exc}"
            self._show_verification()

        run_in_background(find, done, failed)

    def _show_verification(self) -> None:
        from .summary_panel import verification_html

        d = self.doc
        if d is None or not hasattr(self, "summary"):
            return
        self.summary.set_verification(verification_html(d.session, self._bg_state, self._llama_missing))

    def _session_event(self, ev) -> None:
        from app.session import Change

        if ev.changes & (Change.PLACEMENT | Change.SETTINGS | Change.DEVICES):
            self._cancel_background()  # the next edit supersedes a dry run in flight
            self._bg_state = ""
            self._warm_timer.start(_WARM_AFTER_MS)
            if self.bg_check_act.isChecked():
                self._bg_timer.start()

    def _warm_previews(self) -> None:
        d = self.doc
        if d is None:
            return
        if d.session.preview_state is not None:  # a drag is on: after it
            self._warm_timer.start(_WARM_AFTER_MS)
            return
        if d.session.warm_previews():
            self._warm_timer.start(0)  # the next graph on the next tick: input in between is served first
        else:  # ready for a drag: the garbage collector's full walk now, rather than during it
            log.debug("garbage collected while the board is still: %.1f ms", settle())

    def _cancel_background(self) -> None:
        job, self._bg_job = self._bg_job, None
        if job is not None:
            job.run.cancel()
            self._bg_state = ""

    def _bg_check_toggled(self, on: bool) -> None:
        self.settings.setValue("background_check", "true" if on else "false")
        if on:
            self._bg_timer.start()
        else:
            self._bg_timer.stop()
            self._cancel_background()
            self._bg_state = "background checks are off (Placement menu)"
        self._show_verification()

    def _background_check(self) -> None:
        """llama.cpp's dry run of the current placement, in a worker thread, once the board is still: its figures
        are kept (app.memory.learned) and the gauges say "verified by llama.cpp" where they apply."""
        from app.llamacpp.fit_print import FitPrintError
        from app.memory.learned import Cancelled

        d = self.doc
        if d is None or not self.bg_check_act.isChecked() or self._bg_job is not None:
            return
        if d.model.is_demo or d.model.source:
            return  # nothing to dry run; the summary says the figures are estimated and why
        v = d.verification
        if v is not None and v.all_verified:
            return
        if self._finding_llama:  # still looking for llama-fit-params: try again in a moment
            self._bg_timer.start()
            return
        if d.learned_build is None:
            self._bg_state = "no background check: llama.cpp was not found"
            self._show_verification()
            return
        try:
            job = d.dry_run_job(self.settings.value("llama_dir") or None)
        except LayerdeckError as exc:
            self._bg_state = f"no background check: {exc}"
            self._show_verification()
            return
        snapshot = d.placement.snapshot()
        self._bg_job = job
        self._bg_state = "llama.cpp is checking this placement…"
        self._show_verification()

        def done(rows) -> None:
            if self._bg_job is job:
                self._bg_job = None
            if job.run.cancelled or self.doc is not d or d.placement.snapshot() != snapshot:
                return
            self._bg_state = "checked by llama.cpp in the background"
            d.learn_dry_run(job, rows)

        def failed(exc) -> None:
            if self._bg_job is job:
                self._bg_job = None
            if isinstance(exc, Cancelled) or job.run.cancelled or self.doc is not d:
                return
            text = str(exc) if isinstance(exc, FitPrintError) else f"{type(exc).__name__}: {exc}"
            self._bg_state = f"background check failed: {text.splitlines()[0]}"
            self._show_verification()

        run_in_background(job.run.run, done, failed)

    # ------------------------------------------------------------------ devices

    def _preview_speed(self, est) -> None:
        d = self.doc
        if est is None or d.preview_decode is None or d.decode is None:
            return
        delta = d.preview_decode.tokens_per_s - d.decode.tokens_per_s
        self.statusBar().showMessage(f"If dropped here: {d.preview_decode.tokens_per_s:.1f} tok/s generation "
                                     f"({'+' if delta >= 0 else ''}{delta:.1f} tok/s)", 4000)

    def _measure_host(self) -> None:
        """A short RAM bandwidth test for the CPU lane's speed (once per start, off the GUI thread)."""
        from app.speed.membench import measure_host_bandwidth

        def done(bw) -> None:
            self.host_bandwidth = bw
            if self.doc is not None:
                self.doc.set_host_bandwidth(bw)

        run_in_background(measure_host_bandwidth, done, lambda exc: None)

    def _load_capabilities(self) -> None:
        """Ask the configured llama-server which flags it accepts, off the GUI thread (finding it, and ``--help``
        with its 20 s limit when not cached). Only the latest request updates the command panel. Without a
        llama-server, or when ``--help`` cannot be read, the panel checks nothing and the status bar says so."""
        from app.llamacpp.binaries import LlamaCppNotFound, find_tool
        from app.llamacpp.capabilities import UNKNOWN, capabilities

        llama_dir = self.settings.value("llama_dir") or None
        self._caps_seq = seq = getattr(self, "_caps_seq", 0) + 1
        panel = self.command

        def job():
            tool = find_tool("llama-server", llama_dir)
            return tool, capabilities(tool.path)

        def current() -> bool:
            return seq == self._caps_seq and panel is self.command

        def done(result) -> None:
            tool, caps = result
            if not current():
                return
            panel.caps, panel.program = caps, str(tool.path)
            panel.refresh()
            if not caps.known:
                self.statusBar().showMessage(f"{tool.path} --help could not be read: the command is not checked "
                                             "against the flags it accepts", 10000)

        def failed(exc) -> None:
            if not current():
                return
            panel.caps, panel.program = UNKNOWN, None  # not the flags of a llama-server that is not configured
            panel.refresh()
            why = str(exc) if isinstance(exc, LlamaCppNotFound) else f"its flags could not be read ({exc})"
            self.statusBar().showMessage(f"llama.cpp: {why} The command is not checked against a llama-server.",
                                         10000)

        run_in_background(job, done, failed)

    def rpc_hosts(self) -> list[str]:
        return [x.strip() for x in str(self.settings.value("rpc_hosts", "") or "").split(",") if x.strip()]

    def _detect(self, rpc: list[str] | None = None, on_done=None) -> None:
        from app.devices.detect import detect

        rpc = self.rpc_hosts() if rpc is None else rpc

        def job():
            return detect(llama_dir=self.settings.value("llama_dir") or None, rpc=rpc)

        def done(result) -> None:
            if on_done is not None:
                on_done(result, from_detected(result.devices))
            else:
                self._detected(result)

        run_in_background(job, done, lambda exc: self.statusBar().showMessage(f"Device detection: {exc}"))

    def _devices_dialog(self) -> None:
        from .devices_dialog import DevicesDialog

        dlg = DevicesDialog(self.doc.devices, self.rpc_hosts(), detect=lambda rpc, cb: self._detect(rpc, cb),
                            parent=self)
        if dlg.exec():
            self.settings.setValue("rpc_hosts", ", ".join(dlg.rpc_hosts))
            self.devices = dlg.devices
            self.doc.set_devices(self.devices, self.host_capacity)
            self.statusBar().showMessage("Devices: " + ", ".join(d.name for d in self.devices), 6000)

    def _settings_dialog(self) -> None:
        from .settings_dialog import SettingsDialog

        if SettingsDialog(self.settings, self).exec():
            self.margin_spin.setValue(int(self.settings.value("margin_mib", 1024)))
            self._load_capabilities()
            self._attach_learning()  # the llama.cpp folder may have changed
            if self.board is not None:
                self.board.relayout()
            self.command.refresh()

    def _detected(self, result) -> None:
        devices = from_detected(result.devices)
        self.detected = True
        if result.host and getattr(result.host, "total_bytes", None):
            self.host_capacity = result.host.total_bytes
        if devices:
            self.devices = devices
            if self.doc is not None:
                self.doc.set_devices(devices, self.host_capacity)
            text = f"Found {', '.join(d.name for d in devices)}"
        elif self.doc is not None and not self.doc.model.is_demo:
            planned = [d.name for d in self.doc.devices if d.kind == "planned"]
            text = ("No GPU found: planning on " + (f"the planned {', '.join(planned)} and " if planned else "")
                    + "the CPU. Add cards you plan to buy in Tools → Devices…")
        else:
            names = " + ".join(f"{d.total / GiB:.0f} GB" for d in self.doc.devices) if self.doc else ""
            text = (f"No GPU found: the demo plans on {len(self.doc.devices)} planned GPUs ({names})" if self.doc and
                    self.doc.devices else "No GPU found: planning on the CPU")
        # what detection could not learn or assumed (llama.cpp or NVML missing, names guessed, RPC devices assumed)
        problems = [f"{e.source}: {e.message}" for e in getattr(result, "errors", ())]
        self.statusBar().showMessage(" · ".join([text, *problems]), 30000 if problems else 8000)

    # ------------------------------------------------------------------ files

    def _choose_file(self) -> None:
        start = self.settings.value("last_dir", str(Path.home()))
        path, _ = QFileDialog.getOpenFileName(self, "Open GGUF model", start, "GGUF models (*.gguf);;All files (*)")
        if path:
            self.open_path(path)

    def _confirm_leave(self) -> bool:
        """Before another model replaces this one: offer to save an unsaved placement. False: stay."""
        d = self.doc
        if d is None or d.model.is_demo or not d.dirty:
            return True
        answer = QMessageBox.question(
            self, "Unsaved placement",
            f"The placement of {d.model.path.name} has changes that are not saved in a plan. Save them before "
            "opening another model?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel)
        if answer == QMessageBox.StandardButton.Cancel:
            return False
        return answer != QMessageBox.StandardButton.Save or self._save_plan()

    def open_path(self, path: str) -> None:
        """Read the header off the GUI thread (with progress for split sets), then show it."""
        if not self._confirm_leave():
            return
        self.statusBar().showMessage(f"Reading {Path(path).name}…")
        llama_dir = self.settings.value("llama_dir") or None

        def job(progress):
            model = open_model(path, progress=progress)
            return model, self._check_load(path, model, llama_dir)

        run_in_background(job, lambda result: self._opened(path, *result), lambda exc: self._open_failed(path, exc),
                          lambda done, total: self.statusBar().showMessage(f"Reading part {done} of {total}…"))

    @staticmethod
    def _check_load(path: str, model: Model, llama_dir: str | None) -> LoadCheck:
        """llama.cpp's load verdict (any thread); raises :class:`LlamaRefusedModel` when it refuses the file."""
        verdict = check_load(model.paths, llama_dir)
        verdict.raise_if_refused(path)
        return verdict

    def show_load_check(self, verdict: LoadCheck | None) -> None:
        """Show in the model summary whether llama.cpp loads the model on screen, or why that was not checked."""
        self.summary.set_load_check(verdict)
        if verdict is not None and not verdict.loads:
            log.info("%s", verdict.note())

    def open_path_sync(self, path: str) -> bool:
        """The same as :meth:`open_path`, on the calling thread (command line start-up, tests).

        True when the model is shown; False when it could not be opened (a message box says why and the
        model on screen stays)."""
        if not self._confirm_leave():
            return False
        try:
            model = open_model(path)
            verdict = self._check_load(path, model, self.settings.value("llama_dir") or None)
        except Exception as exc:  # noqa: BLE001 - typed errors and bugs alike end in the message box
            self._open_failed(path, exc)
            return False
        return self._opened(path, model, verdict)

    def _opened(self, path: str, model: Model, verdict: LoadCheck | None = None) -> bool:
        try:
            self.show_model(model)
        except Exception as exc:  # noqa: BLE001 - a slot must not raise; the old model stays on screen
            self._open_failed(path, exc)
            return False
        self.show_load_check(verdict)
        self.settings.setValue("last_dir", str(Path(path).parent))
        recent = [p for p in (self.settings.value("recent", []) or []) if p != path]
        self.settings.setValue("recent", [path] + recent[:9])
        self._fill_recent()
        self.statusBar().showMessage(f"Opened {Path(path).name}", 5000)
        return True

    def _open_failed(self, path: str, exc: Exception) -> None:
        if isinstance(exc, LayerdeckError):
            text = exc.message + (f"\n\n{exc.hint}" if exc.hint else "")
        else:  # not a typed error: a bug, with its traceback in the log
            log.error("opening %s failed", path, exc_info=exc)
            text = f"{Path(path).name} could not be opened because of an internal error ({type(exc).__name__}: {exc})."
        self.statusBar().showMessage(f"Could not open {Path(path).name}", 8000)
        QMessageBox.warning(self, "Cannot open model", text)

    def _drop_refused(self, reason: str, sub: list, lane: str, words: str) -> None:
        """A refused drop: the reason stays in the message bar, with the nearest drop that works as a button."""
        board = self.board
        action = None
        if sub:
            def move_part() -> None:
                board.select_ids(sub)
                board.move_selection(lane)

            action = (f"Move {words} to {lane}", move_part)
        self.message_bar.show_message(f"Cannot drop on {lane}", reason, "warning", action)

    def _launch_last(self) -> bool:
        """The most recent model, opened (with its remembered launch profile) and launched: one click."""
        recent = [p for p in (self.settings.value("recent", []) or []) if p]
        if not recent:
            self.statusBar().showMessage("No model opened yet: open one first (File → Open model…)", 8000)
            return False
        path = recent[0]
        if self.doc is None or self.doc.model.is_demo or str(self.doc.model.path) != path:
            if not self.open_path_sync(path):
                return False
        self.bottom.setCurrentWidget(self.launch)
        return self.launch.launch()

    def _guide(self) -> None:
        from .help import GuideDialog

        self._guide_dlg = GuideDialog(self)
        self._guide_dlg.show()

    def _about(self) -> None:
        from .help import AboutDialog

        self._about_dlg = AboutDialog(self.settings.value("llama_dir") or None, self)
        self._about_dlg.show()

    def _open_with_command(self, path: str, text: str) -> None:
        """Open the model a pasted command names, then import that command onto it."""
        if self.open_path_sync(path):
            err = self.command.import_text(text)
            if err:
                self.statusBar().showMessage(err, 15000)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for p in self.settings.value("recent", []) or []:
            self.recent_menu.addAction(p, lambda p=p: self.open_path(p))
        self.recent_menu.setEnabled(bool(self.recent_menu.actions()))

    def _save_plan(self) -> bool:
        path, _ = QFileDialog.getSaveFileName(self, "Save plan", f"{self.doc.model.path.stem}.layerdeck.json",
                                              "Layerdeck plans (*.layerdeck.json *.json)")
        if not path:
            return False
        try:
            self.doc.save_plan(path)
        except OSError as exc:
            QMessageBox.warning(self, "Cannot save plan", f"{path}: {exc}")
            return False
        return True

    def _open_plan(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open plan", "", "Layerdeck plans (*.json)")
        if not path:
            return
        try:
            self.doc.open_plan(path)
        except PlanError as exc:
            QMessageBox.warning(self, "Cannot open plan", str(exc))

    # ------------------------------------------------------------------ placement actions

    def _preset(self, which: str) -> None:
        self.doc.apply_preset(which, self.ncmoe_spin.value() if which == "ncmoe" else 0)

    def _auto_fit(self) -> None:
        try:
            # host RAM is not a hard limit (CPU weights are memory-mapped); the CPU lane shows when it is exceeded
            res = self.doc.auto_fit()
        except FitError as exc:
            QMessageBox.information(self, "Auto-fit", str(exc))
            return
        self.statusBar().showMessage("Auto-fit: " + "; ".join(res.report[:-1]), 10000)
        if res.held_back:  # memory was not what stopped it: say what llama.cpp would refuse, and what would help
            QMessageBox.information(self, "Auto-fit", "Placed what llama.cpp runs. "
                                    + "\n\n".join(f"{dev} holds no more: {msg}" for dev, msg in res.held_back.items()))

    def _verify(self) -> None:
        """llama.cpp's dry run for the current placement, off the GUI thread; its numbers appear per lane and are
        kept (app.memory.learned), so this placement and every later one they transfer to show llama.cpp's figures.

        Planned cards cannot be checked (llama.cpp does not have them): their blocks are counted on the CPU for
        the dry run and the message says which devices were checked. A failure shows llama.cpp's own reason in
        the message bar until it is dismissed."""
        from app.llamacpp.fit_print import FitPrintError

        d = self.doc
        snapshot = d.placement.snapshot()
        self.message_bar.dismiss()
        planned = [x.name for x in d.devices if x.kind == "planned"]
        try:
            job = d.dry_run_job(self.settings.value("llama_dir") or None)
        except LayerdeckError as exc:
            more = (" Run Verify on the machine that has the cards, or add a detected device or RPC host."
                    if planned else "")
            self.message_bar.show_message("Verify", f"{exc}{'.' if more and not str(exc).endswith('.') else ''}"
                                          f"{more}", "warning")
            return
        self._cancel_background()  # this run answers the same question
        self.statusBar().showMessage("Running llama.cpp's dry run…")

        def done(rows) -> None:
            if not (self.doc is d and d.placement.snapshot() == snapshot):  # edited meanwhile
                return
            if job.planned:
                self.message_bar.show_message(
                    "Verify", f"llama.cpp checked {', '.join(job.checked)}; {', '.join(job.planned)} "
                    f"{'is' if len(job.planned) == 1 else 'are'} planned, so not checked (its blocks were counted "
                    "on the CPU for the dry run, so the CPU is not shown either).", "info")
            d.learn_dry_run(job, rows)
            s = d.placement.settings
            extras = [w for w, on in (("the draft model (-md)", s.draft_model), ("the projector (--mmproj)",
                                                                              s.mmproj)) if on]
            if extras:  # llama-fit-params loads neither: their figures stay Layerdeck's
                self.message_bar.show_message(
                    "Verify", f"llama.cpp's dry run (llama-fit-params) leaves out {' and '.join(extras)}: their "
                    "figures in the gauges are Layerdeck's, checked against llama-server's load log in the tests; "
                    "Launch shows what llama-server allocates.", "info")
            self.statusBar().showMessage("llama.cpp's dry run is shown next to each lane (checked: "
                                         + ", ".join(r.name for r in d.opinion.rows) + ")", 8000)

        def failed(exc) -> None:
            text = str(exc) if isinstance(exc, FitPrintError) else f"{type(exc).__name__}: {exc}"
            if self.doc is d:
                d.set_opinion(None, text)
            self.message_bar.show_message("Verify failed", text, "error")
            self.statusBar().showMessage(f"Verify: {text.splitlines()[0]}", 10000)

        run_in_background(job.run.run, done, failed)

    def _fastest(self) -> None:
        try:
            res = self.doc.fastest()
        except FitError as exc:
            QMessageBox.information(self, "Fastest", str(exc))
            return
        self.statusBar().showMessage(f"Fastest: {res.decode.tokens_per_s:.1f} tok/s expected "
                                     f"(auto-fit {res.start_decode.tokens_per_s:.1f})", 10000)

    def _compare(self) -> None:
        from .compare_dialog import CompareDialog

        CompareDialog(self.doc, self.doc.margin, self.settings.value("llama_dir") or None,
                      self.doc.rpc_endpoints(), self).exec()

    def _select_experts(self) -> None:
        n = self.doc.model.params.n_layer
        text, ok = QInputDialog.getText(self, "Select experts", f"Layers (e.g. 10-30), 0-{n - 1}:", text=f"0-{n - 1}")
        if not ok:
            return
        try:
            a, _, b = text.partition("-")
            first, last = int(a), int(b or a)
        except ValueError:
            self.statusBar().showMessage("Write a range like 10-30", 5000)
            return
        self.board.select_experts(first, last)

    def _margin_changed(self, value: int) -> None:
        self.settings.setValue("margin_mib", value)
        if self.doc is not None:
            self.doc.set_margin(value << 20)
            if self.board is not None:
                self.board.relayout()
        self._doc_changed()

    # ------------------------------------------------------------------ autosave and crash recovery

    @staticmethod
    def autosave_path() -> Path:
        from app.paths import data_dir

        return data_dir() / "autosave.layerdeck.json"

    def _autosave(self) -> None:
        if self.doc is None or self.doc.model.is_demo:
            return
        from app.errors import LayerdeckError

        try:
            path = self.autosave_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            self.doc.save_plan(path, as_document=False)  # written in one step (app.paths.atomic_write_text)
        except (OSError, LayerdeckError) as exc:
            log.warning("autosave failed: %s", exc)

    def _keep_autosave(self, path: Path, why: str, *, corrupt: bool) -> None:
        """Set an autosave that cannot be restored aside (never delete one the user was not offered) and say so.

        A corrupt one becomes ``autosave.layerdeck.json.corrupt-<time>``; a readable one whose model is
        missing or different stays openable as a plan (``autosave.unrestored-<time>.layerdeck.json``).
        """
        from app.paths import set_aside

        tag, keep_extension = ("corrupt", False) if corrupt else ("unrestored", True)
        try:
            kept = set_aside(path, tag, keep_extension=keep_extension)
        except OSError as exc:
            text = f"{why}\n\nThe file could not be set aside ({exc}); it is still {path}."
        else:
            text = (f"{why}\n\nThe file was kept as {kept}." if corrupt else
                    f"{why}\n\nThe placement was kept as {kept}: open the model, then Open plan… with that "
                    "file to get it back.")
        log.warning("%s", text.replace("\n\n", " "))
        QMessageBox.warning(self, "Cannot restore the unsaved placement", text)

    def offer_restore(self) -> bool:
        """After a crash, offer the placement that was being edited. Returns True if it was restored.

        An autosave that cannot be offered (unreadable, or its model is gone) is set aside with a message,
        never deleted; only one the user was offered and declined is removed.
        """
        from app.errors import LayerdeckError
        from app.placement.plan_file import read_plan

        path = self.autosave_path()
        if not (path.exists() or path.is_symlink()):
            return False
        try:
            data = read_plan(path)  # checked against the plan schema: model.path is a usable path
        except PlanError as exc:
            self._keep_autosave(path, f"Layerdeck did not close normally last time, but the placement it "
                                      f"saved cannot be read: {exc}", corrupt=True)
            return False
        model_path = Path(data["model"]["path"])
        if not model_path.is_file():
            self._keep_autosave(path, f"Layerdeck did not close normally while you were placing "
                                      f"{model_path.name}, but the model is no longer at {model_path} (moved, "
                                      "renamed, or on a drive that is not connected).", corrupt=False)
            return False
        answer = QMessageBox.question(
            self, "Restore unsaved placement?",
            f"Layerdeck did not close normally while you were placing {model_path.name}. "
            "Restore that placement?", QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        if answer != QMessageBox.StandardButton.Yes:
            path.unlink(missing_ok=True)  # offered and declined
            return False
        if not self.open_path_sync(str(model_path)):  # it said why
            self._keep_autosave(path, f"{model_path.name} could not be opened, so its placement was not "
                                      "restored.", corrupt=False)
            return False
        try:
            self.doc.open_plan(path, label="Restore unsaved placement")
        except LayerdeckError as exc:
            self._keep_autosave(path, f"The unsaved placement does not fit {model_path.name} any more: {exc}",
                                corrupt=False)
            return False
        self.statusBar().showMessage("Restored the placement from before the crash", 8000)
        return True

    # ------------------------------------------------------------------ window events

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and any(u.toLocalFile().lower().endswith(".gguf") for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.toLocalFile().lower().endswith(".gguf"):
                self.open_path(url.toLocalFile())
                break

    def closeEvent(self, event) -> None:  # noqa: N802
        """Ask about a running server and unsaved work first; stop and clean up only once closing is sure."""
        launch = getattr(self, "launch", None)
        ask = self.property("ask_on_close") is not False
        if launch is not None and launch.running and ask:
            answer = QMessageBox.question(
                self, "llama-server is running",
                "A llama-server started from Layerdeck is still running. Stop it and close?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel)
            if answer == QMessageBox.StandardButton.Cancel:
                event.ignore()
                return
        if self.doc is not None and self.doc.dirty and not self.doc.model.is_demo and ask:
            answer = QMessageBox.question(
                self, "Unsaved placement", "The placement has changes that are not saved in a plan. Save them?",
                QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel)
            if answer == QMessageBox.StandardButton.Cancel or (
                    answer == QMessageBox.StandardButton.Save and not self._save_plan()):
                event.ignore()
                return
        if launch is not None:
            launch.shutdown()
        self._autosave_timer.stop()
        self._bg_timer.stop()
        self._warm_timer.stop()
        self._cancel_background()  # a dry run in flight is killed, not left running
        self.autosave_path().unlink(missing_ok=True)  # a normal close: nothing to recover
        super().closeEvent(event)
