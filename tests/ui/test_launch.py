"""Launch from the panel with the real llama-server across RPC devices and the CPU; watch, prompt, stop, fail."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from app.launch.process import State
from app.placement import CPU

pytestmark = [pytest.mark.gui, pytest.mark.llama]


@pytest.fixture
def running(rpc_window):
    win = rpc_window
    win.doc.set_settings(n_ctx=1024, n_parallel=1)
    win.board.select_ids(["1:experts", "2:experts"])
    win.board.move_selection(CPU)  # experts of two layers in RAM, the rest on the two RPC devices
    panel = win.launch
    yield win, panel
    panel.shutdown()


def test_launch_prompt_monitor_stop(running, qtbot):
    win, panel = running
    assert panel.launch_btn.isEnabled()
    panel.launch_btn.click()
    # the panel hears about states through queued signals: wait for what it shows, not the thread's state
    qtbot.waitUntil(lambda: panel.state_label.text() == "ready", timeout=60000)
    assert "127.0.0.1" in panel.url_label.text() and "/v1" in panel.url_label.text()
    argv = panel.server.argv
    assert "--metrics" in argv and "-lv" in argv and "--fit" in argv and "--rpc" in argv
    # predicted vs actual: llama.cpp's logged buffers per device, next to our estimate
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0, timeout=10000)
    devices = {panel.table.item(r, 0).text() for r in range(panel.table.rowCount())}
    assert {"RPC0", "RPC1", "CPU"} <= devices
    logged = [panel.table.item(r, 3).text() for r in range(panel.table.rowCount())]
    assert any(x not in ("", "0.0") for x in logged)
    # try it: a streamed completion with speeds
    panel.prompt.setText("Hello")
    panel.n_predict.setValue(16)
    panel.send_btn.click()
    qtbot.waitUntil(lambda: "generation" in panel.try_speed.text(), timeout=60000)
    assert panel.output.toPlainText() != ""
    assert panel.last_completion.timings.predicted_per_second > 0
    # the monitor saw the generation
    qtbot.waitUntil(lambda: panel.monitor is not None and panel.monitor.last is not None
                    and (panel.monitor.last.gen_tps or 0) > 0 or "generation" in panel.speed_label.text(),
                    timeout=15000)
    assert panel.log_view.toPlainText().count("\n") > 20
    pid = panel.server.pid
    panel.stop_btn.click()
    qtbot.waitUntil(lambda: panel.state_label.text() == "stopped", timeout=30000)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_killed_from_outside_is_diagnosed(running, qtbot):
    win, panel = running
    panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() == "ready", timeout=60000)
    os.kill(panel.server.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: panel.state_label.text() == "failed", timeout=30000)
    assert panel.server.diagnosis.kind == "killed"
    assert not panel.diagnosis.isHidden() and "killed" in panel.diagnosis.text().lower()
    assert panel.launch_btn.isEnabled()


def test_demo_cannot_launch(qtbot):
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    assert not win.launch.launch_btn.isEnabled() and "demo" in win.launch.launch_btn.toolTip().lower()
    assert not win.launch.launch()


def test_quitting_the_app_leaves_no_server(tmp_path, tiny_models, llama_bin):
    """A real app process launches a server, then quits; no llama-server child may remain."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        sys.path.insert(0, {str(os.getcwd())!r})
        from PySide6.QtCore import QCoreApplication, QSettings, QTimer
        from PySide6.QtWidgets import QApplication
        QCoreApplication.setOrganizationName("LayerdeckQuitTest")
        QSettings.setDefaultFormat(QSettings.Format.IniFormat)
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, {str(tmp_path / "s")!r})
        app = QApplication([])
        from ui.main_window import MainWindow
        from app.launch.process import State
        w = MainWindow(detect_devices=False)
        w.setProperty("ask_on_close", False)
        w.settings.setValue("llama_dir", {str(llama_bin)!r})
        w.devices = []
        w.open_path_sync({str(tiny_models["llama"])!r})
        w.doc.set_settings(n_ctx=512, n_parallel=1)
        w.show()
        assert w.launch.launch()
        def check():
            if w.launch.server.state == State.FAILED:
                print("FAILED", w.launch.server.diagnosis, flush=True)
                app.quit()
            elif w.launch.server.state == State.READY:
                print("PID", w.launch.server.pid, flush=True)
                w.close()
                app.quit()
            else:
                QTimer.singleShot(100, check)
        QTimer.singleShot(100, check)
        app.exec()
    """))
    env = dict(os.environ, LAYERDECK_DATA_DIR=str(tmp_path / "d"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "PID" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    pid = int(next(ln for ln in proc.stdout.splitlines() if ln.startswith("PID")).split()[1])
    deadline = time.time() + 10
    while time.time() < deadline and psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.1)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_benchmark_alternatives_calibrates(running, qtbot, monkeypatch, tmp_path):
    win, panel = running
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    from app import proof

    real = proof.run_proof

    def quick(*a, **k):  # tiny model: a short run is enough to prove the pipeline
        k.update(n_prompt=32, n_gen=8, repetitions=1)
        return real(*a, **k)

    monkeypatch.setattr(proof, "run_proof", quick)
    panel.proof_btn.click()
    qtbot.waitUntil(lambda: "Calibrated" in panel.bench_note.text() or "failed" in panel.bench_note.text(),
                    timeout=120000)
    assert "Calibrated" in panel.bench_note.text(), panel.bench_note.text()
    labels = [panel.bench_table.item(r, 1).text() for r in range(panel.bench_table.rowCount())]
    assert labels[0] == "current" and "fastest" in labels and any(x.startswith("--n-cpu-moe") for x in labels)
    assert not panel.proof_plot.isHidden()
    assert (tmp_path / "data" / "speed-calibration.json").is_file()
