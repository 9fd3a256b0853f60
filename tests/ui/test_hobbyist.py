"""Issue #16: what a newcomer trips over around the core gestures (import, focus, verify, server options,
benchmarks, capacity states, refused drops, legend and help, undo labels)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.lanes import Lane
from app.placement import CPU
from tests.gguf_factory import write_tiny_model

pytestmark = pytest.mark.gui
GiB = 1 << 30


@pytest.fixture
def model_window(window, tmp_path):
    """The window on a real tiny MoE model, planned on two cards."""
    window.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "planned", 1e12),
                      Lane("CUDA1", "CUDA1", 8 * GiB, 8 * GiB, "planned", 5e11)]
    path = write_tiny_model("qwen3moe", tmp_path / "moe.gguf")
    assert window.open_path_sync(str(path))
    return window


# --------------------------------------------------------------------------- undo labels


def test_settings_undo_label_reads_as_words(window):
    window.doc.set_settings(n_ctx=262144, n_parallel=4, kv_unified=False)
    assert window.undo_act.text() == "&Undo Set unified KV off, context 262144, slots 4"
    window.doc.set_settings(n_parallel=-1, kv_unified=None)
    assert window.doc.history.undo_label == "Set unified KV default, slots auto"


# --------------------------------------------------------------------------- item 1: import


def test_import_shows_every_warning_and_keeps_unplaced_flags(model_window, qtbot):
    win = model_window
    dlg = win.command.import_dialog()
    dlg.show()
    dlg.edit.setPlainText("llama-server -m MODEL -ngl 99 -c 4096 --port 8099 --temp 0.7 --bogus-flag 7")
    dlg.ok.click()
    qtbot.waitUntil(lambda: not dlg.reading)
    assert dlg.isVisible()  # the warnings stay until read
    text = dlg.msg.text()
    assert "--bogus-flag" in text and "MODEL" in text and "--fit is on" in text
    assert "--temp 0.7 --bogus-flag 7" in text  # kept for the launch
    prof = win.doc.launch_profile
    assert prof.port == 8099 and prof.extra == ["--temp", "0.7", "--bogus-flag", "7"]
    assert win.doc.placement.settings.n_ctx == 4096
    argv = win.command.argv()
    assert argv[-6:] == ["--port", "8099", "--temp", "0.7", "--bogus-flag", "7"]
    dlg.ok.click()
    assert not dlg.isVisible()


def test_import_naming_another_model_offers_to_open_it(model_window, tmp_path, qtbot):
    win = model_window
    other = write_tiny_model("llama", tmp_path / "dense.gguf")
    dlg = win.command.import_dialog()
    dlg.show()
    dlg.edit.setPlainText(f"llama-server -m {other} -c 2048 --fit off")
    dlg.ok.click()
    qtbot.waitUntil(lambda: not dlg.reading)
    assert "another model" in dlg.msg.text() and not dlg.open_other.isHidden()
    dlg.open_other.click()
    assert win.doc.model.path == other
    assert win.doc.placement.settings.n_ctx == 2048


def test_import_of_a_bad_command_says_why_and_stays_open(model_window, qtbot):
    dlg = model_window.command.import_dialog()
    dlg.show()
    dlg.edit.setPlainText("llama-server -c lots")
    dlg.ok.click()
    qtbot.waitUntil(lambda: not dlg.reading)
    assert dlg.isVisible() and "-c expects" in dlg.msg.text()


def test_a_hostile_pattern_is_read_off_the_gui_thread(model_window, qtbot, monkeypatch):
    """Catastrophic backtracking is cut at half a second per pattern; meanwhile the window keeps painting and
    answering, and the refusal arrives as a message (hardening: the GUI never waits on a pattern)."""
    import time

    from app.memory import layout

    slow = layout.OverrideMatcher._search

    def slower(self, pattern):  # the pattern search as a hostile one takes it, on whichever thread runs it
        time.sleep(0.8)
        return slow(self, pattern)

    monkeypatch.setattr(layout.OverrideMatcher, "_search", slower)
    dlg = model_window.command.import_dialog()
    dlg.show()
    dlg.edit.setPlainText("llama-server -m MODEL -ngl 99 -ot exps=CPU")
    t0 = time.monotonic()
    dlg.ok.click()
    assert time.monotonic() - t0 < 0.5 and dlg.reading and not dlg.ok.isEnabled()  # the click returned at once
    ticks = []
    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(50)
    qtbot.waitUntil(lambda: not dlg.reading, timeout=10000)
    timer.stop()
    assert len(ticks) >= 5  # the event loop ran while the command was read
    assert model_window.doc.history.undo_label == "Import command"


# --------------------------------------------------------------------------- item 4: focus and --n-cpu-moe


def test_focus_is_on_the_board_after_open_and_enter_applies_ncmoe(model_window, qtbot):
    win = model_window
    qtbot.waitUntil(lambda: win.board.hasFocus())
    assert not win.ncmoe_spin.hasFocus()
    QTest.keyClick(win.board, Qt.Key.Key_5)  # typing does not change the number
    assert win.ncmoe_spin.value() == 0
    win.ncmoe_spin.setFocus()
    win.ncmoe_spin.lineEdit().selectAll()
    QTest.keyClicks(win.ncmoe_spin.lineEdit(), "2")
    QTest.keyClick(win.ncmoe_spin.lineEdit(), Qt.Key.Key_Return)
    p = win.doc.placement
    assert win.doc.history.undo_label == "--n-cpu-moe 2"
    assert [p.device_of(f"{i}:experts") for i in range(3)] == [CPU, CPU, p.device_of("2:experts")]
    assert p.device_of("2:experts") != CPU

    assert not win.ncmoe_btn.autoRaise() and win.ncmoe_btn.text() == "Apply"  # a bordered button


def test_toolbar_does_not_jump_as_the_undo_label_grows(model_window):
    win = model_window
    before = win.undo_btn.geometry(), win.all_gpu_act and win.ncmoe_btn.geometry()
    win.board.select_experts(0, 3)
    win.board.move_selection(CPU)
    win.doc.set_settings(n_ctx=16384, n_parallel=2, kv_unified=True)
    assert win.undo_btn.geometry() == before[0] and win.ncmoe_btn.geometry() == before[1]
    assert "context 16384" in win.undo_btn.toolTip()


# --------------------------------------------------------------------------- item 2: verify and compare


@pytest.mark.llama
def test_verify_with_a_planned_card_checks_what_it_can_and_says_which(qtbot, rpc_window):
    win = rpc_window
    planned = Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "planned", 1e12)
    win.doc.set_devices(win.doc.devices + [planned], win.host_capacity)
    win.board.select_ids(["1:experts"])
    assert win.board.move_selection("CUDA0")
    win.verify_act.trigger()
    qtbot.waitUntil(lambda: win.doc.opinion is not None or win.doc.opinion_error is not None, timeout=30000)
    assert win.doc.opinion_error is None, win.doc.opinion_error
    assert [r.name for r in win.doc.opinion.rows] == ["RPC0", "RPC1"]
    bar = win.message_bar
    assert not bar.isHidden() and "checked RPC0, RPC1" in bar.text() and "CUDA0" in bar.text()
    assert "llama.cpp dry run" in win.board.lanes["RPC0"].status.text()
    assert "llama.cpp dry run" not in win.board.lanes["CUDA0"].status.text()


@pytest.mark.llama
def test_verify_failure_shows_llama_cpp_reason_until_dismissed(qtbot, tmp_path, llama_bin):
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.settings.setValue("llama_dir", str(llama_bin))
    # a device this machine does not have, not marked as planned (a GPU that was unplugged)
    win.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "gpu", 1e12)]
    assert win.open_path_sync(str(write_tiny_model("qwen3moe", tmp_path / "m.gguf")))
    win.verify_act.trigger()
    qtbot.waitUntil(lambda: win.doc.opinion_error is not None, timeout=30000)
    bar = win.message_bar
    assert not bar.isHidden() and "invalid device: CUDA0" in bar.text()
    assert "usage" not in bar.text()
    qtbot.wait(300)
    assert not bar.isHidden()  # it stays
    bar.close_btn.click()
    assert bar.isHidden()


@pytest.mark.llama
def test_compare_with_a_planned_card_never_dumps_usage_text(model_window, qtbot, llama_bin):
    from ui.compare_dialog import CompareDialog

    win = model_window
    win.settings.setValue("llama_dir", str(llama_bin))
    dlg = CompareDialog(win.doc, win.doc.margin, str(llama_bin), [], win)
    qtbot.addWidget(dlg)
    qtbot.wait(500)
    note = dlg.note.text()
    assert "usage" not in note and "planned" in note and "CUDA0" in note


# --------------------------------------------------------------------------- item 6: server options


@pytest.fixture
def cpu_window(window, tiny_models, llama_bin):
    """The window on the tiny llama model, CPU only, with the real llama.cpp configured."""
    window.settings.setValue("llama_dir", str(llama_bin))
    window.devices = []
    assert window.open_path_sync(str(tiny_models["llama"]))
    window.doc.set_settings(n_ctx=512, n_parallel=1)
    yield window
    window.launch.shutdown()


@pytest.mark.llama
def test_fixed_port_api_key_and_extra_arguments_reach_the_server(cpu_window, qtbot):
    import json
    import urllib.request

    from app.launch.process import free_port

    win = cpu_window
    opts, panel = win.launch.options_tab, win.launch
    port = free_port()
    opts.port.setValue(port)
    opts.api_key.setText("s3cret-key")
    opts.extra.setText("--alias 'tiny llama' --temp 0.5")
    assert opts.apply()
    assert win.doc.launch_profile.extra == ["--alias", "tiny llama", "--temp", "0.5"]
    assert win.doc.dirty  # unsaved work until the plan is saved
    assert "s3cret-key" not in win.command.text.toPlainText() and "***" in win.command.text.toPlainText()
    assert panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() in ("ready", "failed"), timeout=60000)
    assert panel.state_label.text() == "ready", panel.log_view.toPlainText()[-2000:]
    assert panel.server.port == port and f":{port}" in panel.url_label.text()
    assert "s3cret-key" not in panel.log_view.toPlainText()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                 headers={"Authorization": "Bearer s3cret-key"})
    with urllib.request.urlopen(req, timeout=10) as r:
        models = json.load(r)
    assert models["data"][0]["id"] == "tiny llama"
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10)
        raise AssertionError("the server answered without the API key")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401


def test_extra_arguments_are_checked_and_lan_is_an_opt_in_with_a_warning(model_window):
    opts = model_window.launch.options_tab
    before = model_window.doc.launch_profile
    opts.extra.setText("-ngl 99 --temp 0.5")
    assert not opts.apply()
    assert "placement" in opts.last_error and model_window.doc.launch_profile == before
    opts.extra.setText('--chat-template "unterminated')
    assert not opts.apply() and "cannot be read" in opts.last_error
    opts.extra.setText("--port 9000")
    assert not opts.apply() and "Port box" in opts.last_error
    opts.extra.setText("")
    assert opts.lan_warning.isHidden()
    opts.network.setCurrentIndex(opts.network.findData("0.0.0.0"))
    assert not opts.lan_warning.isHidden() and "local network" in opts.lan_warning.text()
    assert "--host 0.0.0.0" in " ".join(model_window.command.argv())


def test_opened_to_the_network_it_says_where_other_devices_reach_it(model_window, monkeypatch):
    import ui.launch_options as lo

    monkeypatch.setattr("app.launch.network.lan_addresses", lambda: ["192.168.1.23"])
    opts = model_window.launch.options_tab
    opts.port.setValue(8099)
    opts.network.setCurrentIndex(opts.network.findData(lo.LAN_HOST))
    opts.apply()
    assert "http://192.168.1.23:8099" in opts.lan_warning.text()
    monkeypatch.setattr("app.launch.network.lan_addresses", lambda: [])
    opts.port.setValue(0)
    opts.apply()
    assert "no local-network address" in opts.lan_warning.text()


def test_launch_profile_is_saved_with_the_plan_and_remembered_per_model(model_window, tmp_path, qtbot):
    import json

    from app.placement.plan_file import PlanError

    win = model_window
    opts = win.launch.options_tab
    opts.port.setValue(8123)
    opts.extra.setText("--temp 0.2")
    assert opts.apply()
    plan = tmp_path / "p.layerdeck.json"
    win.doc.save_plan(plan)
    assert not win.doc.dirty
    data = json.loads(plan.read_text())
    assert data["version"] == 1 and data["launch"] == {"port": 8123, "host": "127.0.0.1", "api_key": None,
                                                       "extra": ["--temp", "0.2"]}
    # the same model opened again starts with its last profile
    path = str(win.doc.model.path)
    assert win.open_path_sync(path)
    assert win.doc.launch_profile.port == 8123 and win.launch.options_tab.port.value() == 8123
    assert not win.doc.dirty
    # a plan's launch section is checked like the rest of the plan
    data["launch"]["port"] = 70000
    bad = tmp_path / "bad.layerdeck.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(PlanError) as err:
        win.doc.open_plan(bad)
    assert err.value.where == "launch.port" and "TCP port" in str(err.value)
    data["launch"] = {"port": 8200, "extra": ["--top-k", "20"], "colour": "red"}
    bad.write_text(json.dumps(data))
    with pytest.raises(PlanError, match="launch.colour"):
        win.doc.open_plan(bad)
    del data["launch"]["colour"]
    bad.write_text(json.dumps(data))
    win.doc.open_plan(bad)
    assert win.doc.launch_profile.port == 8200 and win.doc.launch_profile.extra == ["--top-k", "20"]


# --------------------------------------------------------------------------- item 7: llama-bench and the server


@pytest.fixture
def rpc_running(rpc_window):
    win = rpc_window
    win.doc.set_settings(n_ctx=512, n_parallel=1)
    yield win, win.launch
    win.launch.shutdown()


@pytest.mark.llama
def test_bench_while_the_server_holds_the_rpc_hosts_says_so_then_stops_it(rpc_running, qtbot):
    win, panel = rpc_running
    assert panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() == "ready", timeout=60000)
    panel.bench_btn.click()
    note = panel.bench_note.text()
    assert "holds the RPC hosts" in note and "one client at a time" in note
    assert not panel.bench_tab.stop_and_bench_btn.isHidden() and panel.bench_btn.isEnabled()
    assert panel.bench_table.rowCount() == 0 and panel.running
    panel.bench_tab.stop_and_bench_btn.click()
    qtbot.waitUntil(lambda: panel.bench_table.rowCount() == 1 or "failed" in panel.bench_note.text(),
                    timeout=120000)
    assert panel.bench_table.rowCount() == 1, panel.bench_note.text()
    assert not panel.running
    when = panel.bench_table.item(0, 0).text()
    assert len(when) == 16 and when[4] == "-" and when[13] == ":"  # "2026-12-01 12:34"
    assert float(panel.bench_table.item(0, 3).text().replace(",", "")) > 0


@pytest.mark.llama
def test_a_waiting_bench_can_be_cancelled(rpc_window, llama_server, tiny_models, qtbot):
    import psutil

    win = rpc_window
    panel = win.launch
    # another program (not this window's server) holds both RPC hosts
    eps = win.doc.rpc_endpoints()
    outsider = llama_server(tiny_models["llama"], "--rpc", ",".join(eps), "-ngl", "99", "-c", "256")
    panel.bench_btn.click()
    assert panel.bench_tab.cancel_btn.isEnabled() and not panel.bench_btn.isEnabled()
    qtbot.wait(3000)
    benches = [p for p in psutil.Process().children(recursive=True) if "llama-bench" in p.name()]
    assert benches, "llama-bench should be waiting for the RPC hosts"
    panel.bench_tab.cancel_btn.click()
    qtbot.waitUntil(lambda: "cancelled" in panel.bench_note.text(), timeout=10000)
    assert not panel.bench_tab.cancel_btn.isEnabled() and panel.bench_btn.isEnabled()
    for p in benches:
        try:
            assert p.wait(5) is not None or not p.is_running()
        except psutil.NoSuchProcess:
            pass
    assert outsider.process.poll() is None


# --------------------------------------------------------------------------- item 11: the smaller ones


def test_quantized_v_cache_without_flash_attention_is_refused_with_llama_cpp_reason(model_window):
    win = model_window
    said = []
    win.doc.message.connect(said.append)
    win.kv_panel.fa.setCurrentText("off")
    win.kv_panel.ctv.setCurrentText("q8_0")
    assert win.doc.placement.settings.type_v == "f16"
    assert any("quantized V cache requires flash_attn" in m for m in said)


@pytest.mark.llama
def test_monitor_counts_a_unified_cache_once(cpu_window, qtbot):
    win = cpu_window
    win.doc.set_settings(n_ctx=1024, n_parallel=2, kv_unified=True)
    panel = win.launch
    assert panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() in ("ready", "failed"), timeout=60000)
    assert panel.state_label.text() == "ready", panel.log_view.toPlainText()[-2000:]
    qtbot.waitUntil(lambda: "KV cells" in panel.speed_label.text(), timeout=15000)
    assert "/1024" in panel.speed_label.text() and "shared by all slots" in panel.speed_label.text()
    assert [s.n_ctx for s in panel.monitor.last.slots.slots] == [1024, 1024]  # what llama-server reports


@pytest.mark.llama
def test_a_dead_rpc_host_is_named(rpc_window, rpc_servers, qtbot):
    win = rpc_window
    panel = win.launch
    win.doc.set_settings(n_ctx=512, n_parallel=1)
    assert panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() == "ready", timeout=60000)
    eps = win.doc.rpc_endpoints()
    import psutil

    victim = next(p for p in psutil.Process().children(recursive=True)
                  if "rpc" in p.name() and any(eps[1].rsplit(":", 1)[1] in a for a in p.cmdline()))
    victim.kill()
    victim.wait(5)
    panel.prompt.setText("Hello")
    panel.n_predict.setValue(4)
    panel.send_btn.click()
    qtbot.waitUntil(lambda: panel.state_label.text() == "failed", timeout=60000)
    qtbot.waitUntil(lambda: "stopped answering" in panel.diagnosis.text(), timeout=15000)
    named = panel.diagnosis.text().split("stopped answering")[1].split(". ")[0]
    assert eps[1] in named and eps[0] not in named
    panel.shutdown()


def test_opening_another_model_with_an_unsaved_placement_asks(model_window, tmp_path, no_modal_dialogs,
                                                               monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    win = model_window
    win.board.select_ids(["2:experts"])
    win.board.move_selection(CPU)
    other = write_tiny_model("llama", tmp_path / "other.gguf")
    monkeypatch.setattr(QMessageBox, "question", staticmethod(
        lambda *a, **k: (no_modal_dialogs.append(("question", a[1])), QMessageBox.StandardButton.Cancel)[1]))
    assert not win.open_path_sync(str(other))
    assert no_modal_dialogs[-1] == ("question", "Unsaved placement")
    assert win.doc.model.path.name == "moe.gguf" and win.doc.placement.device_of("2:experts") == CPU
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard))
    assert win.open_path_sync(str(other)) and win.doc.model.path == other


def test_copy_says_it_copied(model_window, qtbot):
    from PySide6.QtGui import QGuiApplication

    panel = model_window.command
    panel.copy_btn.click()
    assert panel.copy_btn.text() == "Copied ✓"
    assert QGuiApplication.clipboard().text().startswith("llama-server") or "llama-server" in \
        QGuiApplication.clipboard().text()
    qtbot.waitUntil(lambda: panel.copy_btn.text() == "Copy", timeout=4000)


def test_a_custom_card_under_half_a_gib_says_why(window):
    from ui.devices_dialog import DevicesDialog

    dlg = DevicesDialog(list(window.doc.devices), [], parent=window)
    n = len(dlg.devices)
    dlg.cap.setValue(0.25)
    assert dlg.cap.value() == 0.25  # not clamped without a word
    dlg._add_custom()
    assert len(dlg.devices) == n and "too small" in dlg.message.text() and "0.5 GiB" in dlg.message.text()
    dlg.cap.setValue(6)
    dlg._add_custom()
    assert len(dlg.devices) == n + 1 and dlg.devices[-1].total == 6 * GiB


# --------------------------------------------------------------------------- item 9: capacity states


def test_an_empty_small_card_is_not_over_because_of_the_margin(window, tmp_path):
    win = window
    win.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "planned", 1e12),
                   Lane("CUDA1", "CUDA1", 512 << 20, 512 << 20, "planned", 1e11)]
    assert win.open_path_sync(str(write_tiny_model("qwen3moe", tmp_path / "m.gguf")))
    win.board.select_ids([i for i in win.board.blocks if win.doc.placement.device_of(i) == "CUDA1"])
    win.board.move_selection("CUDA0")
    assert win.margin_spin.value() == 1024
    lane = win.board.lanes["CUDA1"]
    assert not lane.over and "over by" not in lane.status.text()
    assert "over capacity" not in win._status.text()


def test_a_model_that_does_not_fit_opens_fitted_and_says_so(window, tmp_path):
    from tests.gguf_factory import write_sparse_model

    win = window
    win.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "planned", 1e12)]
    assert win.open_path_sync(str(write_sparse_model("qwen3-30b-a3b", tmp_path / "q30.gguf")))
    assert not win.doc.overflows() or [o.lane for o in win.doc.overflows()] == [CPU]
    assert not win.board.lanes["CUDA0"].over
    p = win.doc.placement
    assert any(p.device_of(b.id) == CPU for b in win.doc.model.blocks if b.id.endswith(":experts"))
    assert "opened fitted" in win.message_bar.text() and "--fit" in win.message_bar.text()
    assert win.doc.history.undo_label is None  # the starting point, not an edit


@pytest.mark.llama
def test_no_gpu_status_bar_says_what_the_board_shows(window, tmp_path, llama_bin, qtbot):
    from app.devices.detect import detect

    win = window
    win.settings.setValue("llama_dir", str(llama_bin))
    assert win.open_path_sync(str(write_tiny_model("llama", tmp_path / "m.gguf")))
    result = detect(llama_dir=str(llama_bin), rpc=[])  # the CPU build: no GPU
    assert not [d for d in result.devices if d.kind in ("gpu", "igpu")]
    win._detected(result)
    text = win.statusBar().currentMessage()
    assert "planned GPUs" not in text and "24 GB" not in text and "CPU" in text
    assert set(win.board.lanes) == {CPU}


# --------------------------------------------------------------------------- item 5: refused drops


def _drag(board, ids, lane):
    """A real mouse drag of the selected ``ids`` onto ``lane``; returns (press, end) points."""
    from PySide6.QtCore import QPoint

    board.select_ids(ids)
    item = board.blocks[ids[0]]
    start = board.mapFromScene(item.sceneBoundingRect().center())
    r = board.lanes[lane].sceneBoundingRect()
    end = board.mapFromScene(r.center().x(), r.bottom() - 12)
    vp = board.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier, start)
    board.select_ids(ids)  # the ctrl-press toggled the first block: select them all again
    QTest.mouseMove(vp, start + QPoint(10, 5))
    QTest.mouseMove(vp, end)
    return vp, end


def test_a_refused_drop_does_not_light_up_says_why_on_the_lane_and_offers_the_nearest(window):
    board, doc = window.board, window.doc
    ids = ["40:attn", "40:experts", "41:attn", "41:experts"]  # a rubber band that caught attention blocks
    vp, end = _drag(board, ids, CPU)
    lane = board.lanes[CPU]
    assert lane.refused and not lane.target
    assert "release to move only the experts (2 blocks)" in lane.full_status
    assert "CPU layers at the start" in lane.toolTip()
    assert lane.status.boundingRect().width() <= lane.rect().width() - 240  # elided, never wider
    before = doc.placement.snapshot()
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)
    assert doc.placement.snapshot() == before and not lane.refused
    bar = window.message_bar
    assert not bar.isHidden() and "CPU layers at the start" in bar.text()
    assert bar.action_btn.text() == "Move only the experts (2 blocks) to CPU"
    bar.action_btn.click()
    p = doc.placement
    assert p.device_of("40:experts") == CPU == p.device_of("41:experts") and p.device_of("40:attn") != CPU
    assert doc.history.undo_label == "Move 2 blocks to CPU"


# --------------------------------------------------------------------------- item 10: legend, palette, help


def _deficient(c, kind: str):
    """``c`` as seen with protanopia, deuteranopia or tritanopia (Machado et al. 2009, severity 1), linear RGB."""
    m = {"protan": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
         "deutan": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
         "tritan": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
         "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1))}[kind]

    def lin(v):
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    rgb = [lin(c.redF()), lin(c.greenF()), lin(c.blueF())]
    return [max(0.0, min(1.0, sum(a * b for a, b in zip(row, rgb)))) for row in m]


def test_palette_is_colour_blind_safe_and_gauge_hues_differ_from_blocks():
    from app.model import Role
    from ui.board import style

    blocks = {name: style.ROLE_COLORS[r] for r, name in style.ROLE_LEGEND}
    gauge = {name: c for c, name in style.GAUGE_LEGEND if name != "margin (kept free)"}
    assert not {c.name() for c in blocks.values()} & {c.name() for c in gauge.values()}
    colours = list(blocks.items()) + list(gauge.items())
    for kind in ("normal", "protan", "deutan", "tritan"):
        for i, (na, a) in enumerate(colours):
            for nb, b in colours[i + 1:]:
                d = sum((x - y) ** 2 for x, y in zip(_deficient(a, kind), _deficient(b, kind))) ** 0.5
                assert d > 0.05, f"{na} and {nb} look alike with {kind} vision ({d:.3f})"
    assert style.ROLE_COLORS[Role.EXPERTS] != style.GAUGE_COMPUTE


def test_legend_is_on_screen_and_help_has_a_guide_and_about(window, qtbot, llama_bin):
    from ui.board.legend import Legend
    from ui.help import AboutDialog, GuideDialog

    legend = window.findChild(Legend)
    assert legend is not None and legend.isVisible()
    text = legend.text()
    for word in ("attention", "routed experts", "weights", "KV cache", "compute", "margin", "over capacity"):
        assert word in text
    helps = [m for m in window.menuBar().actions() if m.text() == "&Help"]
    assert helps and [a.text() for a in helps[0].menu().actions()][:2] == ["&Guide to the board", "&About Layerdeck"]
    from PySide6.QtGui import QKeySequence

    assert QKeySequence("F1") in window.guide_act.shortcuts()
    window.activateWindow()
    window.board.setFocus()
    QTest.keyClick(window, Qt.Key.Key_F1)
    dlg = window.findChild(GuideDialog)
    assert dlg is not None and dlg.isVisible() and "gauge" in dlg.view.toPlainText().lower()
    window.settings.setValue("llama_dir", str(llama_bin))
    window.about_act.trigger()
    about = window.findChild(AboutDialog)
    qtbot.waitUntil(lambda: "checking" not in about.info.text(), timeout=30000)
    info = about.info.text()
    assert "Layerdeck</b> 0." in info and "Qt</b> 6." in info and "version" in info


def test_tiny_blocks_are_drawn_lower_so_their_area_is_honest(window):
    from ui.board import style

    board = window.board
    heights = {bid: it.rect().height() for bid, it in board.blocks.items()}
    widths = {bid: it.rect().width() for bid, it in board.blocks.items()}
    small = [b for b, w in widths.items() if w == style.MIN_BLOCK_W]
    assert small, "the demo has blocks under the width floor"
    assert all(style.MIN_BLOCK_H <= heights[b] < style.BLOCK_H for b in small)
    assert max(heights.values()) == style.BLOCK_H


# --------------------------------------------------------------------------- the chat


@pytest.mark.llama
def test_try_it_is_a_chat_with_system_prompt_samplers_stop_regenerate_and_speed(cpu_window, qtbot):
    win = cpu_window
    panel = win.launch
    chat = panel.try_tab
    assert panel.launch()
    qtbot.waitUntil(lambda: panel.state_label.text() in ("ready", "failed"), timeout=60000)
    assert panel.state_label.text() == "ready", panel.log_view.toPlainText()[-2000:]
    # this CPU build has no web UI: the button says so instead of opening a 404
    qtbot.waitUntil(lambda: "web UI" in chat.web_ui_btn.toolTip() and "once the server runs" not in chat.web_ui_btn.toolTip(),
                    timeout=10000)
    assert not chat.web_ui_btn.isEnabled() and "no web UI" in chat.web_ui_btn.toolTip()
    chat.system.setText("You are terse.")
    chat.temperature.setValue(0.0)
    chat.n_predict.setValue(8)
    chat.stop.setText("zzz|\\n\\n")
    assert chat.params().stop == ("zzz", "\n\n") and chat.params().temperature == 0.0
    chat.prompt.setText("Hello there")
    chat.send_btn.click()
    qtbot.waitUntil(lambda: len(chat.replies) == 1 or "failed" in panel.try_speed.text(), timeout=60000)
    assert len(chat.replies) == 1, panel.try_speed.text()
    first = chat.replies[0]
    assert first.timings.predicted_n >= 1 and first.tokens_per_second > 0 and not first.measured_here
    assert first.timings.prompt_n > 3  # the system prompt and the template went in
    assert [m.role for m in chat.messages] == ["user", "assistant"]
    shown = chat.output.toPlainText()
    assert "You" in shown and "Hello there" in shown and "tok/s" in shown
    assert "generation" in panel.try_speed.text()
    # regenerate: the last reply is asked for again, the conversation keeps one assistant turn
    chat.regen_btn.click()
    qtbot.waitUntil(lambda: not chat.stop_btn.isEnabled(), timeout=60000)
    assert [m.role for m in chat.messages] == ["user", "assistant"] and len(chat.replies) == 1
    # a second turn carries the history
    chat.prompt.setText("And again")
    chat.send_btn.click()
    qtbot.waitUntil(lambda: len(chat.replies) == 2, timeout=60000)
    assert chat.replies[1].timings.prompt_n + chat.replies[1].timings.cache_n > first.timings.prompt_n
    assert shown.count("tok/s") <= chat.output.toPlainText().count("tok/s")


@pytest.mark.llama
def test_launch_last_opens_the_recent_model_with_its_profile_in_one_click(qtbot, tiny_models, llama_bin):
    from app.launch.process import free_port
    from ui.main_window import MainWindow

    first = MainWindow(detect_devices=False)
    first.setProperty("ask_on_close", False)
    qtbot.addWidget(first)
    first.settings.setValue("llama_dir", str(llama_bin))
    first.devices = []
    assert first.open_path_sync(str(tiny_models["llama"]))
    port = free_port()
    first.launch.options_tab.port.setValue(port)
    first.launch.options_tab.extra.setText("-np 1 -c 512")
    assert not first.launch.options_tab.apply()  # -c is a memory flag: it belongs to the KV panel
    first.launch.options_tab.extra.setText("--alias again")
    assert first.launch.options_tab.apply()
    first.close()
    # the next start: one action
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.devices = []
    assert win.doc.model.is_demo
    assert win._launch_last()
    try:
        qtbot.waitUntil(lambda: win.launch.state_label.text() in ("ready", "failed"), timeout=60000)
        assert win.launch.state_label.text() == "ready", win.launch.log_view.toPlainText()[-2000:]
        assert win.doc.model.path == tiny_models["llama"] and win.launch.server.port == port
        assert "--alias" in win.launch.server.argv and not win.doc.dirty
    finally:
        win.launch.shutdown()


@pytest.mark.llama
def test_compare_says_llama_cpp_reason_without_usage_text(window, tmp_path, llama_bin, qtbot):
    from ui.compare_dialog import CompareDialog

    win = window
    win.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "gpu", 1e12)]  # not on this machine, not planned
    assert win.open_path_sync(str(write_tiny_model("qwen3moe", tmp_path / "m.gguf")))
    dlg = CompareDialog(win.doc, win.doc.margin, str(llama_bin), [], win)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: "Running" not in dlg.note.text(), timeout=30000)
    note = dlg.note.text()
    assert "invalid device: CUDA0" in note and "usage" not in note and "--device" not in note


def test_the_board_zooms_so_small_blocks_get_their_labels(window, qtbot):
    board = window.board
    item = board.blocks["10:attn"]
    w0, h0 = item.rect().width(), item.rect().height()
    assert not item.text.isVisible()
    board.setFocus()
    QTest.keyClick(board, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    assert board.zoom == pytest.approx(1.25)
    big = board.blocks["10:experts"]  # above the floor, a block's area follows its bytes
    assert big.rect().width() == pytest.approx(1.25 * window.doc.model.block("10:experts").nbytes
                                               * board._scale(max(640, board.viewport().width() - 2),
                                                              board.item_infos(),
                                                              {i.id: board.lane_of(i.id) for i in board.item_infos()})
                                               / board.zoom, rel=0.01)
    assert item.rect().width() * item.rect().height() >= w0 * h0
    while not item.text.isVisible() and board.zoom < board.ZOOM_MAX:
        QTest.keyClick(board, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    assert item.text.isVisible() and item.text.text() in ("10 attn", "10")  # its layer is readable
    assert board.scene().sceneRect().width() <= board.viewport().width()  # rows wrap: never wider
    QTest.keyClick(board, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert board.zoom == 1.0 and item.rect().width() == pytest.approx(w0)
