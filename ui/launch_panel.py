"""Launch llama-server with the current placement and watch it: state, URLs, and one tab each for the live
monitor, predicted vs actual, the log, a prompt box and llama-bench runs.

Process logic lives in :mod:`app.launch` (GUI-free) and the choice of placements to benchmark in
:meth:`app.session.Session.proof_candidates`; :class:`LaunchPanel` owns the server and bridges its thread
callbacks to Qt signals, and each tab is a widget of its own that draws what it is given. Launching is
disabled for the demo model.
"""

from __future__ import annotations

import logging
from html import escape
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.lanes import CPU, DeviceKind
from app.launch.metrics import predicted_vs_actual
from app.launch.process import LaunchError, ServerProcess, State
from app.placement.export import InexpressibleError

from .chat_tab import ChatTab
from .document import Document
from .elided_label import ElidedLabel
from .feedback import copy_with_feedback
from .launch_options import LaunchOptions, remembered_profile
from .worker import run_in_background

log = logging.getLogger(__name__)

LEVEL_COLORS = {"E": QColor("#D64541"), "W": QColor("#C98A00"), "D": QColor("#8C8C8C")}
PALETTE = ["#4C78A8", "#E8833A", "#54A24B", "#B279A2", "#59A89C", "#9D755D"]


def _f(x) -> str:
    return "" if x is None else f"{x:,.1f}"


def _when(iso: str) -> str:
    """A run's time (ISO 8601, UTC) in local time, as the benchmark table shows it."""
    import datetime

    try:
        t = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return iso
    return t.astimezone().strftime("%Y-%m-%d %H:%M")


class _Bridge(QObject):
    """Thread callbacks from app.launch become queued Qt signals."""

    state = Signal(object)
    line = Signal(object)
    sample = Signal(object)
    token = Signal(str)


class MonitorTab(QWidget):
    """Live plots of memory, tokens per second, process RSS and CPU, with the predicted memory dashed."""

    def __init__(self, parent=None):
        super().__init__(parent)
        pal = QApplication.palette()
        w = pg.GraphicsLayoutWidget()
        w.setBackground(pal.color(QPalette.ColorRole.Base))
        fg = pal.color(QPalette.ColorRole.Text)

        def plot(title: str):
            p = w.addPlot()
            p.setTitle(title, size="9pt", color=fg)
            for axis in ("left", "bottom"):
                p.getAxis(axis).setTextPen(fg)
                p.getAxis(axis).setPen(pal.color(QPalette.ColorRole.Mid))
            return p

        self.mem_plot = plot("Memory used (MiB); dashed: predicted")
        self.mem_plot.addLegend(offset=(5, 5))
        self.tps_plot = plot("Tokens per second")
        self.tps_plot.addLegend(offset=(5, 5))
        # one row of four: the plots use the tab's whole height (a 2x2 grid was squeezed in a short panel)
        self.host_plot = plot("llama-server process: RSS (MiB)")
        self.cpu_plot = plot("CPU (%) and busy slots")
        for p in (self.mem_plot, self.tps_plot, self.host_plot, self.cpu_plot):
            p.setClipToView(True)
            p.setDownsampling(mode="peak")
            p.showGrid(x=True, y=True, alpha=0.2)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.predicted_lines: list = []
        self.unified = False  # the server's KV cache is one cache shared by its slots (set at launch)
        self.speed_label = ElidedLabel()
        bl = QVBoxLayout(self)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.speed_label)
        bl.addWidget(w, 1)

    def _curve(self, plot, key: str, label: str, i: int) -> pg.PlotDataItem:
        c = self.curves.get(key)
        if c is None:
            c = self.curves[key] = plot.plot(name=label, pen=pg.mkPen(PALETTE[i % len(PALETTE)], width=2))
        return c

    def show_sample(self, monitor, sample, predicted_tps: float | None) -> None:
        series = monitor.series()
        t = series.get("time")
        if t is None or not len(t):
            return
        i = 0
        for key, values in series.items():
            if key.startswith("mem:"):
                self._curve(self.mem_plot, key, key[4:], i).setData(t, values)
                i += 1
        if not self.predicted_lines:
            for j, (_dev, mib) in enumerate(monitor.predicted_mib().items()):
                line = pg.InfiniteLine(pos=mib, angle=0,
                                       pen=pg.mkPen(PALETTE[j % len(PALETTE)], style=Qt.PenStyle.DashLine))
                self.mem_plot.addItem(line)
                self.predicted_lines.append(line)
        for j, key in enumerate(("prompt_tps", "gen_tps")):
            if key in series:
                self._curve(self.tps_plot, key, "prompt" if key == "prompt_tps" else "generation", j).setData(
                    t, series[key])
        if "host_rss_mib" in series:
            self._curve(self.host_plot, "rss", "RSS", 0).setData(t, series["host_rss_mib"])
        if "host_cpu_percent" in series:
            self._curve(self.cpu_plot, "cpu", "CPU %", 1).setData(t, series["host_cpu_percent"])
        if "busy_slots" in series:
            self._curve(self.cpu_plot, "slots", "busy slots", 2).setData(t, series["busy_slots"])
        parts = []
        if sample.gen_tps:
            parts.append(f"generation {sample.gen_tps:.1f} tok/s")
        if sample.prompt_tps:
            parts.append(f"prompt {sample.prompt_tps:.1f} tok/s")
        cells = context_cells(sample, self.unified)
        if sample.context_used is not None and cells:
            parts.append(f"KV cells {sample.context_used}/{cells}"
                         + (" (one cache shared by all slots)" if self.unified and sample.slots and
                            len(sample.slots.slots) > 1 else ""))
        if predicted_tps is not None:
            parts.append(f"predicted generation {predicted_tps:.1f} tok/s")
        if parts:
            self.speed_label.setText(" · ".join(parts))


def context_cells(sample, unified: bool) -> int | None:
    """The KV cache's cells: with a unified cache every slot reports the whole cache (count it once),
    otherwise each slot has its own share (add them up)."""
    slots = getattr(sample, "slots", None)
    if slots is None or not slots.slots:
        return sample.context_size or None
    sizes = [s.n_ctx for s in slots.slots]
    return (max(sizes) if unified else sum(sizes)) or None


class ComparisonTab(QTableWidget):
    """Predicted, llama.cpp-logged and measured MiB per device and quantity."""

    def __init__(self, parent=None):
        super().__init__(0, 6, parent)
        self.setHorizontalHeaderLabels(["Device", "Quantity", "Predicted MiB", "llama.cpp logged MiB",
                                        "Measured MiB", "Difference"])
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)

    def fill(self, estimate, buffers, measured: dict, draft_buffers=None) -> None:
        rows = predicted_vs_actual(estimate, buffers, measured, draft_logged=draft_buffers)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [row.device, row.quantity, _f(row.predicted_mib), _f(row.logged_mib), _f(row.measured_mib),
                     "" if row.difference_pct is None else f"{row.difference_pct:+.1f}%"]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if row.flagged:
                    item.setBackground(QColor(214, 69, 65, 60))
                self.setItem(r, c, item)


class LogTab(QWidget):
    """The server's log: bounded, coloured by level, searchable, copy and save."""

    def __init__(self, parent=None):
        super().__init__(parent)
        bl = QVBoxLayout(self)
        bl.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search the log (Enter: next match)")
        self.search.returnPressed.connect(self._find)
        copy = QPushButton("Copy")
        save = QPushButton("Save…")
        copy.clicked.connect(lambda: copy_with_feedback(copy, self.view.toPlainText()))
        save.clicked.connect(self._save)
        row.addWidget(self.search, 1)
        row.addWidget(copy)
        row.addWidget(save)
        bl.addLayout(row)
        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setMaximumBlockCount(5000)  # bounded, like the process's own buffer
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        bl.addWidget(self.view, 1)

    def append(self, line) -> None:
        cursor = self.view.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextCharFormat()
        color = LEVEL_COLORS.get(line.level or "")
        if color is not None:
            fmt.setForeground(color)
        cursor.insertText(line.text + "\n", fmt)

    def _find(self) -> None:
        if not self.view.find(self.search.text()):
            self.view.moveCursor(QTextCursor.MoveOperation.Start)
            self.view.find(self.search.text())

    def _save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save log", "llama-server.log")
        if path:
            Path(path).write_text(self.view.toPlainText(), encoding="utf-8")


#: the Try it tab is a chat now (ui/chat_tab.py)
TryTab = ChatTab


class BenchTab(QWidget):
    """llama-bench runs: this placement, or the alternatives with a calibration plot."""

    def __init__(self, parent=None):
        super().__init__(parent)
        bl = QVBoxLayout(self)
        row = QHBoxLayout()
        self.bench_btn = QPushButton("Run llama-bench on this placement")
        row.addWidget(self.bench_btn)
        self.proof_btn = QPushButton("Benchmark alternatives and calibrate")
        self.proof_btn.setToolTip("llama-bench on this placement, auto-fit, fastest, llama.cpp's --fit and a "
                                  "--n-cpu-moe sweep; predicted next to measured; fits the speed model to this machine")
        row.addWidget(self.proof_btn)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop the running llama-bench now")
        self.cancel_btn.setEnabled(False)
        row.addWidget(self.cancel_btn)
        self.stop_and_bench_btn = QPushButton("Stop the server and benchmark")
        self.stop_and_bench_btn.setVisible(False)
        row.addWidget(self.stop_and_bench_btn)
        row.addStretch(1)
        bl.addLayout(row)
        self.plot = pg.PlotWidget()
        self.plot.setLabel("bottom", "predicted tok/s")
        self.plot.setLabel("left", "measured tok/s")
        self.plot.setMinimumHeight(160)
        self.plot.addLegend(offset=(5, 5))
        self.plot.setVisible(False)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["When", "Placement", "prompt tok/s", "generation tok/s",
                                              "predicted gen tok/s"])
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        bl.addWidget(self.table, 1)
        bl.addWidget(self.plot, 1)
        self.note = QLabel()
        self.note.setWordWrap(True)
        bl.addWidget(self.note)

    def add_row(self, cells: list[str]) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, text in enumerate(cells):
            self.table.setItem(r, c, QTableWidgetItem(str(text)))

    def show_proof(self, res, when: str = "") -> None:
        self.table.setRowCount(0)
        for row in res.rows:
            self.add_row([when, row.label, _f(row.measured_pp), _f(row.measured_tg) if row.error is None else row.error,
                          _f(row.predicted_tg)])
        self.plot.clear()
        ok = [r for r in res.rows if r.measured_tg]
        if ok:
            self.plot.setVisible(True)
            self.plot.plot([r.predicted_tg for r in ok], [r.measured_tg for r in ok], pen=None,
                           symbol="o", symbolBrush=PALETTE[0], name="before calibration")
            if res.calibration is not None:
                tg = [row for row in res.calibration.rows if row[1] == "tg"]
                self.plot.plot([p for _, _, p, _ in tg], [m for _, _, _, m in tg], pen=None, symbol="t",
                               symbolBrush=PALETTE[1], name="after calibration")
                top = max(max(r.measured_tg for r in ok), max(r.predicted_tg for r in ok))
                self.plot.plot([0, top], [0, top], pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine))


class LaunchPanel(QWidget):
    """Start, stop and watch llama-server for the document's placement."""

    server_state = Signal(object)

    def __init__(self, document: Document, llama_dir=lambda: None, rpc=lambda: [], parent=None, settings=None):
        super().__init__(parent)
        self.doc = document
        self.settings = settings
        self.llama_dir = llama_dir
        self.rpc = rpc
        self.server: ServerProcess | None = None
        self.monitor = None
        self.estimate_at_launch = None
        self._slots: dict[str, object] = {}  # what _connect_once connected last, per button
        self.bridge = _Bridge()
        self.bridge.state.connect(self._on_state)
        self.bridge.line.connect(lambda line: self.log_tab.append(line))
        self.bridge.sample.connect(self._on_sample)
        self.bridge.token.connect(lambda text: self.try_tab.add_token(text))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        top = QHBoxLayout()
        self.launch_btn = QPushButton("Launch")
        self.stop_btn = QPushButton("Stop")
        self.restart_btn = QPushButton("Restart")
        for b in (self.launch_btn, self.stop_btn, self.restart_btn):
            top.addWidget(b)
        self.state_label = QLabel("stopped")
        self.state_label.setMinimumWidth(90)
        top.addWidget(self.state_label)
        self.url_label = QLabel()
        self.url_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.url_label.setWordWrap(True)
        self.url_label.setOpenExternalLinks(True)
        self.url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        top.addWidget(self.url_label, 1)
        self.copy_api = QPushButton("Copy OpenAI base URL")
        top.addWidget(self.copy_api)
        lay.addLayout(top)
        self.diagnosis = QLabel()
        self.diagnosis.setWordWrap(True)
        self.diagnosis.setVisible(False)
        self.diagnosis.setStyleSheet("QLabel { background: rgba(214,69,65,0.12); padding: 6px; }")
        # a long llama.cpp line wraps inside the panel; it never widens the window
        self.diagnosis.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.diagnosis.setMinimumWidth(100)
        self.diagnosis.setMaximumHeight(110)  # the rest of a long diagnosis is in its tooltip and the Log tab
        self.diagnosis.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.diagnosis)
        self.tabs = QTabWidget()
        lay.addWidget(self.tabs, 1)
        if settings is not None and not document.model.is_demo and document.launch_profile.is_default():
            last = remembered_profile(settings, document.model.path)
            if last is not None:
                document.restore_launch_profile(last)  # the model's last profile: launch as last time
        self.options_tab = LaunchOptions(document, settings)
        self.monitor_tab = MonitorTab()
        self.table = ComparisonTab()
        self.log_tab = LogTab()
        self.try_tab = ChatTab()
        self.bench_tab = BenchTab()
        options_scroll = QScrollArea()  # a short panel scrolls the options rather than squeezing them
        options_scroll.setWidgetResizable(True)
        options_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        options_scroll.setWidget(self.options_tab)
        for w, title in ((options_scroll, "Launch options"), (self.monitor_tab, "Monitor"), (self.table, "Predicted vs actual"), (self.log_tab, "Log"),
                         (self.try_tab, "Try it"), (self.bench_tab, "Benchmark")):
            self.tabs.addTab(w, title)
        # the widgets tests and the window reach for, by their old names
        self.log_view = self.log_tab.view
        self.speed_label = self.monitor_tab.speed_label
        self.prompt, self.n_predict = self.try_tab.prompt, self.try_tab.n_predict
        self.send_btn, self.output, self.try_speed = self.try_tab.send_btn, self.try_tab.output, self.try_tab.speed
        self.bench_btn, self.proof_btn = self.bench_tab.bench_btn, self.bench_tab.proof_btn
        self.bench_table, self.proof_plot, self.bench_note = self.bench_tab.table, self.bench_tab.plot, self.bench_tab.note
        self.send_btn.clicked.connect(lambda: self.try_prompt())
        self.try_tab.regen_btn.clicked.connect(lambda: self.try_prompt(regenerate=True))
        self.try_tab.stop_btn.clicked.connect(self._stop_reply)
        self.try_tab.web_ui_btn.clicked.connect(self._open_web_ui)
        self.bench_btn.clicked.connect(self.run_bench)
        self.proof_btn.clicked.connect(self.run_proof)
        self.launch_btn.clicked.connect(self.launch)
        self.stop_btn.clicked.connect(self.stop)
        self.restart_btn.clicked.connect(self.restart)
        self.copy_api.clicked.connect(self._copy_api)
        self.doc.changed.connect(self._update_buttons)
        self._update_buttons()

    # ------------------------------------------------------------------ actions

    def command_argv(self) -> list[str]:
        return self.doc.command(rpc=self.rpc()).argv

    def _update_buttons(self) -> None:
        demo = self.doc.model.header_only  # the demo, or a header read over HTTP (app.remote): no weights here
        running = self.server is not None and self.server.state in (State.STARTING, State.LOADING, State.READY)
        checking = getattr(self, "_checking", False)  # launch() is checking RPC hosts in the background
        self.launch_btn.setEnabled(not demo and not running and not checking)
        self.launch_btn.setToolTip(
            ("The demo model has no weights: open a GGUF to launch it." if self.doc.model.is_demo else
             f"Only the header of {self.doc.model.source} was read: download the file and open it to launch it, or "
             "export the command (its -hf makes llama.cpp download the model itself).") if demo else
            "Start llama-server with this placement on 127.0.0.1")
        self.stop_btn.setEnabled(running)
        self.restart_btn.setEnabled(not demo and self.server is not None and not checking)
        ready = self.server is not None and self.server.state == State.READY
        busy = self.try_tab.stop_btn.isEnabled()
        self.try_tab.set_busy(busy, ready)
        if not ready:
            self.try_tab.web_ui_btn.setEnabled(False)
        benching = self.bench_tab.cancel_btn.isEnabled()  # one llama-bench at a time
        self.bench_btn.setEnabled(not demo and not benching)
        self.proof_btn.setEnabled(not demo and not benching)
        self.copy_api.setEnabled(self.server is not None and self.server.state == State.READY)

    def launch(self) -> bool:
        """Start llama-server for this placement. False when it cannot start (the panel says why); True once
        the start is under way: the RPC check and the start itself finish in the background."""
        if self.doc.model.header_only:  # the demo, or only a header read over HTTP: nothing to load
            return False
        used = set(self.doc.placement.layer_device) | set(self.doc.placement.tensor_device)
        planned = [d.name for d in self.doc.devices if d.kind is DeviceKind.PLANNED and d.name in used]
        if planned:
            self._show_problem("Cannot launch", f"{', '.join(planned)} {'is a planned device' if len(planned) == 1 else 'are planned devices'}"
                               " (a card you don't have here): move its blocks to a detected device or the CPU, or "
                               "export the command for the machine that has it.")
            return False
        from app.command.values import ArgsError, check_settings

        try:
            check_settings(self.doc.placement.settings)  # what llama.cpp would refuse at start, said before it
        except ArgsError as exc:
            self._show_problem("Cannot launch", str(exc))
            return False
        if not self.options_tab.apply():  # extra arguments that cannot be used: the options tab says why
            self.tabs.setCurrentIndex(0)
            self._show_problem("Cannot launch", "the launch options have a problem: " + self.options_tab.last_error)
            return False
        try:
            argv = self.command_argv()
        except InexpressibleError as exc:
            self._show_problem("Cannot launch", str(exc))
            return False
        self.diagnosis.setVisible(False)
        if self.tabs.currentIndex() == 0:  # the launch options: show the monitor once it runs
            self.tabs.setCurrentWidget(self.monitor_tab)
        self.log_tab.view.clear()
        self.estimate_at_launch = self.doc.estimate
        self.monitor_tab.unified = self.doc.placement.settings.eff_kv_unified
        server = ServerProcess(argv, llama_dir=self.llama_dir())
        server.add_state_listener(self.bridge.state.emit)
        server.add_log_listener(self.bridge.line.emit)
        self.server = server
        # ServerProcess.start blocks on the RPC preflight (a TCP connect per --rpc host, up to 2 s, and name
        # resolution): it runs in the thread pool, the panel says "checking…" and the window stays responsive.
        self._checking = True
        self.state_label.setText("checking RPC hosts…" if "--rpc" in argv else "checking…")
        self._update_buttons()

        def started(_result) -> None:
            self._checking = False
            if self.server is server and not getattr(self, "_closing", False):
                self._start_monitor()
            elif server.running:  # the panel was shut down or relaunched while this one was checked
                run_in_background(server.stop, lambda _s: None, lambda exc: None)
            self._update_buttons()

        def failed(exc: Exception) -> None:
            self._checking = False
            if self.server is server:
                self._show_problem("Cannot launch", str(exc) if isinstance(exc, LaunchError) else repr(exc))
            self._update_buttons()

        run_in_background(server.start, started, failed)
        return True

    def stop(self) -> None:
        if self.server is not None:
            server = self.server
            run_in_background(lambda: server.stop(), lambda _s: self._update_buttons(), lambda exc: None)

    def restart(self) -> None:
        if self.server is None:
            self.launch()
            return
        server = self.server
        argv = self.command_argv()
        self.estimate_at_launch = self.doc.estimate
        self.log_tab.view.clear()
        run_in_background(lambda: server.restart(argv), lambda _r: self._update_buttons(),
                          lambda exc: self._show_problem("Restart failed", str(exc)))

    def shutdown(self) -> None:
        """Stop the server and the monitor now (the window is closing or the app quits)."""
        self._closing = True  # a launch still being checked stops as soon as it starts
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        if self.server is not None and self.server.running:
            self.server.stop()

    @property
    def running(self) -> bool:
        return self.server is not None and self.server.running

    def _start_monitor(self) -> None:
        from app.devices.telemetry import TelemetrySampler
        from app.launch.monitor import Monitor

        if self.monitor is not None:
            self.monitor.stop()
        try:
            sampler = TelemetrySampler()
        except Exception as exc:  # noqa: BLE001 - telemetry is optional; the monitor still scrapes the server
            log.info("telemetry unavailable: %s", exc)
            sampler = None
        self.monitor = Monitor(self.server, sampler, self.estimate_at_launch, interval=0.5)
        self.monitor.add_listener(self.bridge.sample.emit)
        self.monitor.start()

    # ------------------------------------------------------------------ callbacks (GUI thread)

    def _on_state(self, state: State) -> None:
        self.state_label.setText(state.value)
        s = self.server
        if state == State.READY and s is not None:
            self.url_label.setText(f"<a href='{s.web_ui_url}'>{s.web_ui_url}</a> · OpenAI API: {s.openai_base_url}")
            self._probe_web_ui(s)
            self._fill_table()
        elif state in (State.STOPPED, State.FAILED):
            self.url_label.setText("")
            if self.monitor is not None:
                self.monitor.stop()
        if state == State.FAILED and s is not None and s.diagnosis is not None:
            d = s.diagnosis
            self._show_problem(d.title, f"{d.explanation} {d.suggestion}", d.lines)
            if d.kind == "rpc_failed":
                self._name_dead_rpc_hosts(s, d)
        self._update_buttons()
        self.server_state.emit(state)

    def _name_dead_rpc_hosts(self, server, d) -> None:
        """llama.cpp's "RPC server crashed" does not say which: ask every --rpc host (off the GUI thread)."""
        from app.command.argv import rpc_endpoints
        from app.launch.preflight import check_rpc_hosts

        eps = rpc_endpoints(server.argv or [])
        if not eps:
            return

        def done(problems) -> None:
            if self.server is not server:
                return
            if problems:
                which = "; ".join(f"{ep} ({msg})" for ep, msg in problems)
                head = f"RPC host{'s' if len(problems) > 1 else ''} that stopped answering: {which}."
            else:
                head = (f"Every RPC host ({', '.join(eps)}) still accepts connections: one of them restarted or "
                        "dropped the connection; its ggml-rpc-server output says why.")
            self._show_problem(d.title, f"{head} {d.explanation} {d.suggestion}", d.lines)

        run_in_background(lambda: check_rpc_hosts(eps), done, lambda exc: None)

    def _show_problem(self, title: str, text: str, lines=()) -> None:
        body = f"<b>{escape(title)}</b>: {escape(text)}"
        if lines:
            shown = "<br>".join(escape(ln) for ln in list(lines)[-6:])
            body += f"<p style='font-family: monospace; white-space: pre-wrap'>{shown}</p>"
        self.diagnosis.setText(body)
        self.diagnosis.setToolTip(title + ": " + text + ("\n" + "\n".join(list(lines)[-6:]) if lines else ""))
        self.diagnosis.setVisible(True)

    def _copy_api(self) -> None:
        if self.server is not None and self.server.openai_base_url:
            copy_with_feedback(self.copy_api, self.server.openai_base_url)

    def _on_sample(self, sample) -> None:
        if self.monitor is None:
            return
        decode = self.doc.decode
        self.monitor_tab.show_sample(self.monitor, sample, decode.tokens_per_s if decode is not None else None)

    def _fill_table(self) -> None:
        s, est = self.server, self.estimate_at_launch
        if s is None or est is None:
            return
        measured = {}
        if self.monitor is not None and self.monitor.last is not None:
            last = self.monitor.last
            measured = dict(last.device_used_mib)
            if last.host_rss_mib:
                measured[CPU] = last.host_rss_mib
        self.table.fill(est, s.buffers, measured, getattr(s, "draft_buffers", None) or None)

    # ------------------------------------------------------------------ try it: the chat

    def try_prompt(self, regenerate: bool = False) -> None:
        """Send the typed message (or ask again for the last reply) to /v1/chat/completions, streaming."""
        import threading

        from app.launch.chat import ChatCancelled, stream_chat

        chat = self.try_tab
        if self.server is None or self.server.state != State.READY:
            return
        if regenerate:
            if not chat.drop_last_reply():
                return
        else:
            text = chat.prompt.text().strip()
            if not text:
                return
            chat.add_user(text)
            chat.prompt.clear()
        client = self.server.client(timeout=120)
        messages, params = chat.conversation(), chat.params()
        cancel = self._chat_cancel = threading.Event()
        chat.begin_reply()
        chat.set_busy(True)

        def job():
            return stream_chat(client, messages, params, on_token=self.bridge.token.emit, cancel=cancel)

        def done(reply) -> None:
            t = reply.timings
            self.try_speed.setText(f"generation {t.predicted_per_second:.1f} tok/s ({t.predicted_n} tokens) · "
                                   f"prompt {t.prompt_per_second:.1f} tok/s ({t.prompt_n} tokens)"
                                   + (" · measured by Layerdeck (the server sent no timings)"
                                      if reply.measured_here else ""))
            self.last_completion = reply
            chat.end_reply(reply)
            chat.set_busy(False)
            self._update_buttons()

        def failed(exc) -> None:
            if isinstance(exc, ChatCancelled):
                chat.end_reply(exc.partial, "stopped")
                self.try_speed.setText("Stopped.")
            else:
                chat.end_reply(None, f"Request failed: {exc}")
                self.try_speed.setText(f"Request failed: {exc}")
            chat.set_busy(False)
            self._update_buttons()

        run_in_background(job, done, failed)

    def _stop_reply(self) -> None:
        ev = getattr(self, "_chat_cancel", None)
        if ev is not None:
            ev.set()

    def _probe_web_ui(self, server) -> None:
        """Does this llama-server serve its own web UI? (off the GUI thread)"""
        from app.launch.chat import has_web_ui

        btn = self.try_tab.web_ui_btn
        client = server.client(timeout=3)

        def done(has: bool) -> None:
            if self.server is not server or server.state != State.READY:
                return
            btn.setEnabled(has)
            btn.setToolTip(f"Open {server.web_ui_url} in the browser" if has else
                           "This llama-server build has no web UI (built without it, or started with --no-webui)")

        run_in_background(lambda: has_web_ui(client), done, lambda exc: None)

    def _open_web_ui(self) -> None:
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        if self.server is not None and self.server.web_ui_url:
            QDesktopServices.openUrl(QUrl(self.server.web_ui_url))

    # ------------------------------------------------------------------ llama-bench

    #: the longest a benchmark may run before it is stopped (seconds)
    BENCH_TIMEOUT = 600.0

    def busy_rpc_hosts(self) -> list[str]:
        """RPC hosts the running server holds (an RPC server serves one client at a time)."""
        from app.command.argv import rpc_endpoints

        if self.server is None or not self.server.running:
            return []
        return rpc_endpoints(self.server.argv or [])

    def _bench_blocked(self, rpc: list[str], again) -> bool:
        """Say so, and offer to stop the server, when the benchmark needs RPC hosts the server holds."""
        held = [ep for ep in rpc if ep in set(self.busy_rpc_hosts())]
        btn = self.bench_tab.stop_and_bench_btn
        if not held:
            btn.setVisible(False)
            return False
        self.bench_note.setText(
            f"The running llama-server holds the RPC host{'s' if len(held) > 1 else ''} {', '.join(held)}; an RPC "
            "server serves one client at a time, so llama-bench would wait forever. Stop the server first.")

        def stop_then() -> None:
            btn.setVisible(False)
            server = self.server
            self.bench_note.setText("Stopping the server, then benchmarking…")
            run_in_background(lambda: server.stop(), lambda _r: (self._update_buttons(), again()),
                              lambda exc: self.bench_note.setText(f"The server did not stop: {exc}"))

        self._connect_once("stop_and_bench", btn.clicked, stop_then)
        btn.setVisible(True)
        return True

    def _connect_once(self, key: str, signal, slot) -> None:
        """Connect ``slot`` to ``signal`` in place of what was connected under ``key`` before (a bare
        ``disconnect()`` of a signal with nothing connected warns in PySide6)."""
        old = self._slots.get(key)
        if old is not None:
            signal.disconnect(old)
        signal.connect(slot)
        self._slots[key] = slot

    def _bench_started(self, cancel) -> None:
        self.bench_btn.setEnabled(False)
        self.proof_btn.setEnabled(False)
        tab = self.bench_tab
        tab.cancel_btn.setEnabled(True)
        note = self.bench_note

        def cancel_bench() -> None:
            cancel.set()
            note.setText("Cancelling llama-bench…")

        self._connect_once("cancel_bench", tab.cancel_btn.clicked, cancel_bench)

    def _bench_ended(self) -> None:
        self.bench_tab.cancel_btn.setEnabled(False)
        self._update_buttons()

    def run_bench(self) -> None:
        import threading

        from app.launch.bench import BenchCancelled, BenchHistory, bench_args, run_bench
        from app.paths import data_dir

        try:
            server_argv = self.command_argv()
            args, notes = bench_args(server_argv, n_prompt=512, n_gen=64, repetitions=2)
        except (InexpressibleError, ValueError) as exc:
            self.bench_note.setText(str(exc))
            return
        from app.command.argv import rpc_endpoints

        if self._bench_blocked(rpc_endpoints(server_argv), self.run_bench):
            return
        history = BenchHistory(data_dir() / "bench")
        predicted = self.doc.decode.tokens_per_s if self.doc.decode else None
        label = self.doc.history.undo_label or "initial placement"
        cancel = threading.Event()
        self._bench_started(cancel)
        limit = f"stops after {self.BENCH_TIMEOUT / 60:.0f} min"
        self.bench_note.setText(f"Running llama-bench… ({limit}" + ("; " + "; ".join(notes) if notes else "") + ")")
        llama_dir = self.llama_dir()
        busy = self.busy_rpc_hosts()
        timeout = self.BENCH_TIMEOUT

        def job():
            run = run_bench(args, llama_dir=llama_dir, label=label, cancel=cancel, busy_rpc=busy, timeout=timeout)
            history.add(run)
            return run

        def done(run) -> None:
            self.bench_note.setText(f"Saved in {history.path_for(run.model)}")
            self.bench_tab.add_row([_when(run.time), label, _f(run.pp_ts), _f(run.tg_ts), _f(predicted)])
            self._bench_ended()

        def failed(exc) -> None:
            self.bench_note.setText("llama-bench was cancelled." if isinstance(exc, BenchCancelled)
                                    else f"llama-bench failed: {exc}")
            self._bench_ended()

        run_in_background(job, done, failed)

    def run_proof(self) -> None:
        from app.launch.bench import BenchHistory
        from app.paths import data_dir
        from app.proof import run_proof
        from app.speed.params import save_calibration

        d = self.doc
        candidates = d.proof_candidates()
        llama_dir = self.llama_dir()
        rpc = self.rpc()
        params = d.speed_params
        history = BenchHistory(data_dir() / "bench")
        if self._bench_blocked(list(rpc), self.run_proof):
            return
        import threading
        import time

        cancel = threading.Event()
        self._bench_started(cancel)
        self.bench_note.setText(f"Benchmarking {len(candidates)} placements… (Cancel stops it)")

        def job():
            return run_proof(d.model, str(d.model.path), d.devices, candidates, params, rpc=rpc, llama_dir=llama_dir,
                             n_prompt=512, n_gen=64, repetitions=2, history=history, cancel=cancel)

        def done(res) -> None:
            self.proof_result = res
            self._bench_ended()
            self.bench_tab.show_proof(res, _when(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            if res.calibration is not None:
                path = save_calibration(d.devices, res.calibration.fitted)
                d.recalibrated()
                self.bench_note.setText(f"Calibrated: worst error after the fit "
                                        f"{res.calibration.worst_error * 100:.0f}%; saved in {path}")

        def failed(exc) -> None:
            from app.launch.bench import BenchCancelled

            self.bench_note.setText("The benchmark was cancelled." if isinstance(exc, BenchCancelled)
                                    else f"Benchmark failed: {exc}")
            self._bench_ended()

        run_in_background(job, done, failed)
