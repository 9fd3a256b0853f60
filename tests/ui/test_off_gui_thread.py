"""Slow llama.cpp calls never run on the GUI thread: the Settings check (``--version``, ``--help``), the main
window's capabilities query and the RPC preflight at launch. Each slow call is replaced by one that records
its thread and sleeps; the event loop must keep turning meanwhile and the widget must say "checking…"."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QTimer

import app.devices.detect  # noqa: F401 - imported before find_tool is patched below, so it keeps the real one
from app.lanes import Lane
from app.llamacpp.binaries import ToolLocation
from app.llamacpp.capabilities import Capabilities

pytestmark = pytest.mark.gui

class Slow:
    """A stand-in for a blocking call: records the thread it runs on, then blocks until the test releases it
    (at most 5 s), and returns ``result`` (called with the arguments when it is callable)."""

    def __init__(self, result):
        self.result = result
        self.threads: list[threading.Thread] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args, **kwargs):
        self.threads.append(threading.current_thread())
        self.started.set()
        self.release.wait(5)
        return self.result(*args, **kwargs) if callable(self.result) else self.result


def loop_turns_while_blocked(qtbot, ticks, *calls: Slow) -> int:
    """Wait until the first call is blocked, spin the event loop 300 ms, release every call; the turns counted."""
    qtbot.waitUntil(calls[0].started.is_set, timeout=5000)
    before = ticks.n
    qtbot.wait(300)
    turns = ticks.n - before
    for c in calls:
        c.release.set()
    return turns


class Ticks:
    """Counts event-loop turns (a 10 ms timer): if a slow call blocked the GUI thread it would not advance."""

    def __init__(self):
        self.n = 0
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self):
        self.n += 1


def fake_llama_server(folder) -> str:
    """An executable named llama-server that is never run (the slow calls are replaced)."""
    folder.mkdir(exist_ok=True)
    exe = folder / "llama-server"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_settings_check_runs_off_the_gui_thread(qtbot, monkeypatch, tmp_path):
    import ui.settings_dialog as sd
    from PySide6.QtCore import QSettings

    exe = fake_llama_server(tmp_path / "llama")
    monkeypatch.setattr(sd, "find_tool", lambda name, folder=None: ToolLocation(Path(exe), "configured"))
    version = Slow(lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "version: 9999 (abcdef)\n", ""))
    helps = Slow(Capabilities(frozenset({"--fit", "-ot", "--rpc"})))
    # only the dialog's subprocess module is replaced, not subprocess.run for everyone
    monkeypatch.setattr(sd, "subprocess", SimpleNamespace(run=version, TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(sd, "capabilities", helps)
    ticks = Ticks()
    dlg = sd.SettingsDialog(QSettings())
    qtbot.addWidget(dlg)
    assert dlg.llama_info.text() == "checking llama.cpp…"  # the dialog did not wait for --version and --help
    assert loop_turns_while_blocked(qtbot, ticks, version, helps) >= 10  # the GUI ran while --version ran
    assert dlg.llama_info.text() == "checking llama.cpp…"
    qtbot.waitUntil(lambda: dlg.llama_info.text() != "checking llama.cpp…", timeout=5000)
    assert dlg.llama_info.text() == f"{exe} (configured) — version: 9999 (abcdef); supports --fit, -ot, --rpc"
    main = threading.main_thread()
    assert len(version.threads) == len(helps.threads) == 1
    assert version.threads[0] is not main and helps.threads[0] is not main


def test_settings_check_shows_only_the_latest_folder(qtbot, monkeypatch, tmp_path):
    import ui.settings_dialog as sd
    from PySide6.QtCore import QSettings

    calls: list[str] = []

    def describe(folder):
        calls.append(folder)
        time.sleep(0.4 if folder == "/slow" else 0.0)
        return f"described {folder}"

    monkeypatch.setattr(sd, "describe_llama", describe)
    dlg = sd.SettingsDialog(QSettings())
    qtbot.addWidget(dlg)
    dlg.llama_dir.setText("/slow")
    dlg._check()
    dlg.llama_dir.setText("/fast")
    dlg._check()
    qtbot.waitUntil(lambda: len(calls) == 3, timeout=5000)
    qtbot.wait(600)  # the slow, older check finishes last
    assert dlg.llama_info.text() == "described /fast"


def test_capabilities_are_asked_off_the_gui_thread(qtbot, monkeypatch, tmp_path):
    import app.llamacpp.binaries as binaries
    import app.llamacpp.capabilities as caps_mod
    from ui.main_window import MainWindow

    exe = fake_llama_server(tmp_path / "llama")
    where = Slow(ToolLocation(Path(exe), "configured"))
    helps = Slow(Capabilities(frozenset({"--fit", "--rpc"})))
    monkeypatch.setattr(binaries, "find_tool", where)
    monkeypatch.setattr(caps_mod, "capabilities", helps)
    ticks = Ticks()
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    assert win.command.program is None  # the window did not wait: the answer comes through the event loop
    assert loop_turns_while_blocked(qtbot, ticks, where, helps) >= 10
    qtbot.waitUntil(lambda: win.command.program == exe, timeout=5000)
    assert win.command.caps == Capabilities(frozenset({"--fit", "--rpc"}))
    main = threading.main_thread()
    assert where.threads and helps.threads and all(t is not main for t in where.threads + helps.threads)


def test_capabilities_without_llama_cpp_are_reset_and_said(qtbot, monkeypatch, tmp_path):
    from app.llamacpp.capabilities import UNKNOWN
    from ui.main_window import MainWindow

    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.command.caps, win.command.program = Capabilities(frozenset({"--fit"})), "/old/llama-server"
    win._load_capabilities()
    qtbot.waitUntil(lambda: win.command.program is None, timeout=5000)
    assert win.command.caps is UNKNOWN
    assert win.statusBar().currentMessage().startswith("llama.cpp: llama-server was not found")


def test_rpc_preflight_at_launch_runs_off_the_gui_thread(qtbot, monkeypatch, tmp_path, tiny_models):
    import app.launch.process as process
    from ui.main_window import MainWindow

    llama_dir = tmp_path / "llama"
    fake_llama_server(llama_dir)
    endpoint = "127.0.0.1:9"  # never contacted: the preflight is replaced
    preflight = Slow(lambda endpoints, timeout: [(ep, "connection refused: nothing listens there") for ep in endpoints])
    monkeypatch.setattr(process, "check_rpc_hosts", preflight)
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.settings.setValue("llama_dir", str(llama_dir))
    win.devices = [Lane("RPC0", f"RPC0[{endpoint}]", 1 << 30, 1 << 30, "rpc")]
    assert win.open_path_sync(str(tiny_models["llama"]))
    panel = win.launch
    ticks = Ticks()
    assert panel.launch()
    assert panel.state_label.text() == "checking RPC hosts…"  # launch() came back before the check ended
    assert not panel.launch_btn.isEnabled() and not panel.restart_btn.isEnabled()
    assert loop_turns_while_blocked(qtbot, ticks, preflight) >= 10
    qtbot.waitUntil(lambda: panel.state_label.text() == "failed", timeout=5000)
    assert preflight.threads and preflight.threads[0] is not threading.main_thread()
    qtbot.waitUntil(lambda: not panel.diagnosis.isHidden(), timeout=5000)
    qtbot.waitUntil(lambda: panel.diagnosis.text().startswith("<b>Cannot launch</b>"), timeout=5000)
    assert panel.diagnosis.text() == f"<b>Cannot launch</b>: RPC host {endpoint}: connection refused: nothing listens there"
    assert panel.server.diagnosis is not None and panel.server.pid is None  # nothing was started
    qtbot.waitUntil(lambda: panel.launch_btn.isEnabled(), timeout=5000)
    panel.shutdown()


def test_assumed_rpc_devices_are_said_in_the_status_bar_and_the_kv_panel(qtbot, monkeypatch, tmp_path, tiny_models):
    """No llama.cpp here: the RPC host from the settings becomes one assumed device of unknown memory, and
    the window says so (status bar: what detection could not learn; KV panel: the estimate's note)."""
    import socket

    from app.devices.detect import detect
    from ui.main_window import MainWindow

    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{s.getsockname()[1]}"  # closed once the socket is
    result = detect(rpc=[endpoint], cuda_probe=None)
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win._detected(result)
    status = win.statusBar().currentMessage()
    assert status.startswith("Found RPC0 · ")
    assert f"--rpc: devices of these RPC hosts are unknown, one device each is assumed, memory unknown: RPC0 = " \
           f"{endpoint} (refused)" in status
    assert "llama.cpp: llama-server was not found" in status
    assert win.open_path_sync(str(tiny_models["llama"]))
    assert [(d.name, d.buft, d.capacity) for d in win.doc.devices] == [("RPC0", f"RPC0[{endpoint}]", 0)]
    win.doc.set_settings(n_ctx=1024)
    assert win.doc.placement.layer_device == ["RPC0"] * 5  # a real model goes on the detected device
    assert (f"memory of RPC0 ({endpoint}) is unknown: llama.cpp did not list that RPC host, so one device of "
            "unknown memory is assumed per host") in win.kv_panel.info.text()
    assert "color:#C98A00" in win.kv_panel.info.text()
