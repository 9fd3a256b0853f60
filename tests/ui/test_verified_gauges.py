"""The gauges say which figures are llama.cpp's: a background dry run once the board is still (off the GUI thread,
killed by the next edit), learned figures applied to later placements, and a missing llama.cpp said plainly."""

from __future__ import annotations

import os
import time

import pytest
from PySide6.QtCore import QTimer

from app.devices.detect import detect
from app.memory.device_adapter import from_detected
from app.placement.placement import Placement
from tests import gguf_factory as gf
from tests.llama_fixtures import VULKAN_ENV

pytestmark = pytest.mark.gui

MiB = 1 << 20


@pytest.fixture(scope="module")
def l8b(tmp_path_factory):
    return gf.write_sparse_model("llama-3.1-8b", tmp_path_factory.mktemp("verified") / "llama-3.1-8b.gguf")


def _window(qtbot, lanes, llama_dir, model):
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.resize(1400, 850)
    win.settings.setValue("llama_dir", str(llama_dir))
    win.devices = lanes
    win.show()
    assert win.open_path_sync(str(model))
    return win


def _ffn_on_cpu(win, lanes, k: int) -> None:
    s = win.doc.session
    base = s.placement.settings
    st = base.copy(n_gpu_layers=-2, overrides=[(rf"blk\.{k}\.ffn_(up|down|gate)", "CPU")])
    s.replace(Placement.from_settings(s.model, lanes, st).with_settings(base), f"FFN {k} on the CPU")


@pytest.mark.llama
def test_a_still_board_is_checked_in_the_background_and_the_gauges_say_so(qtbot, llama_vulkan_bin, l8b, monkeypatch,
                                                                         tmp_path):
    for k, v in VULKAN_ENV.items():
        monkeypatch.setenv(k, v)
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env=dict(os.environ), cuda_probe=None, amd=False).devices)
    win = _window(qtbot, lanes, llama_vulkan_bin, l8b)
    win.doc.session.set_settings(tool="fit-params", repack=False, n_ctx=8192)  # the graph llama-fit-params builds
    _ffn_on_cpu(win, lanes, 11)
    raw = win.doc.session.estimate_for(win.doc.session.placement).device("Vulkan0").compute
    # the GUI thread keeps turning while llama.cpp runs: count timer ticks during the background run
    ticks = []
    timer = QTimer(win)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(20)
    qtbot.waitUntil(lambda: win._bg_job is not None, timeout=10000)  # started ~1.5 s after the last edit
    started = time.monotonic()
    qtbot.waitUntil(lambda: win.doc.verification is not None and win.doc.verification.all_verified, timeout=120000)
    timer.stop()
    took = time.monotonic() - started
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > took / 0.2 and max(gaps) < 0.5, (len(ticks), took, max(gaps))
    status = win.board.lanes["Vulkan0"].full_status
    assert "✓ verified by llama.cpp" in status, status
    got = win.doc.estimate.device("Vulkan0").compute
    assert got // MiB == win.doc.opinion.row("Vulkan0").compute
    summary = win.summary.text()
    assert "Memory figures" in summary and "verified by llama.cpp" in summary
    # the estimate already equals the dry run here (the Vulkan backend's graph reordering is replayed): the
    # correction the summary states is none on every device
    assert got // MiB == raw // MiB, (got / MiB, raw / MiB)
    assert "last dry run corrected the estimate by: Vulkan0 0 MiB; CPU 0 MiB" in summary, summary
    assert "verified by llama.cpp" in win.board.lanes["Vulkan0"].gauge.describe()
    win.grab().save(str(tmp_path / "verified.png"))
    # a placement the learned figures cover only in part: said per lane, right away, before any new dry run
    _ffn_on_cpu(win, lanes, 12)
    assert win._bg_job is None
    status = win.board.lanes["Vulkan0"].full_status
    assert "partly verified by llama.cpp" in status or "estimated" in status, status
    assert "✓ verified" not in status


@pytest.mark.llama
def test_the_next_edit_kills_the_background_dry_run(qtbot, llama_vulkan_bin, l8b, monkeypatch, tmp_path):
    """A llama-fit-params that takes long (a wrapper that sleeps first) is killed when the board changes."""
    tool_dir = tmp_path / "slow-llama"
    tool_dir.mkdir()
    pid_file = tmp_path / "pid"
    import sys

    (tool_dir / "llama-fit-params").write_text(
        f"#!{sys.executable}\nimport os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    (tool_dir / "llama-fit-params").chmod(0o755)
    for k, v in VULKAN_ENV.items():
        monkeypatch.setenv(k, v)
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env=dict(os.environ), cuda_probe=None, amd=False).devices)
    win = _window(qtbot, lanes, llama_vulkan_bin, l8b)  # (the load check on opening runs llama-fit-params too)
    win.settings.setValue("llama_dir", str(tool_dir))
    win._attach_learning()  # as after the Settings dialog
    qtbot.waitUntil(lambda: not win._finding_llama, timeout=5000)
    win.doc.session.set_settings(tool="fit-params", repack=False, n_ctx=8192)
    _ffn_on_cpu(win, lanes, 11)
    qtbot.waitUntil(lambda: win._bg_job is not None and pid_file.exists() and pid_file.read_text() != "",
                    timeout=15000)
    job = win._bg_job
    assert "checking" in win.summary.text()
    _ffn_on_cpu(win, lanes, 14)  # the next edit
    assert job.run.cancelled and win._bg_job is None
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    qtbot.waitUntil(gone, timeout=5000)
    assert "checking" not in win.summary.text()


def test_a_missing_llama_cpp_is_said_in_the_summary(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    model = gf.write_tiny_model("llama", tmp_path / "m.gguf")
    win = _window(qtbot, [], tmp_path / "no-llama-here", model)
    qtbot.waitUntil(lambda: "not found" in win.summary.text(), timeout=5000)  # looked for off the GUI thread
    text = win.summary.text()
    assert "estimated: llama.cpp was not found" in text and "llama-fit-params was not found" in text, text
    qtbot.wait(1800)  # the background check's moment passes: it says why it cannot run, and nothing starts
    assert win._bg_job is None
    assert "no background check: llama.cpp was not found" in win.summary.text()
