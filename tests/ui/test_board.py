"""The board with real widgets: open, drag (a real mouse drag and the drop handler), undo, KV panel, over-capacity,
command panel, import, demo."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app import gcpolicy
from app.lanes import Lane
from app.placement import CPU
from tests.gguf_factory import write_sparse_model, write_tiny_model
from ui import main_window

pytestmark = pytest.mark.gui
GiB = 1 << 30


def view_point(board, item) -> QPoint:
    return board.mapFromScene(item.sceneBoundingRect().center())


def lane_point(board, lane: str) -> QPoint:
    r = board.lanes[lane].sceneBoundingRect()
    return board.mapFromScene(r.center().x(), r.bottom() - 12)


def test_demo_starts_on_two_planned_gpus(window):
    doc = window.doc
    assert doc.model.is_demo and [d.name for d in doc.devices] == ["CUDA0", "CUDA1"]
    assert set(window.board.lanes) == {"CUDA0", "CUDA1", CPU}
    assert "Demo" in window.summary.text() and "launching is disabled" in window.summary.text()
    assert "-dev CUDA0,CUDA1" in " ".join(window.command.argv())


def test_open_file_shows_its_summary_and_blocks(window, tmp_path, qtbot):
    path = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    window.open_path(str(path))  # off the GUI thread
    qtbot.waitUntil(lambda: window.doc.model.path == path, timeout=10000)
    assert "qwen3moe" in window.summary.text()
    ids = set(window.board.blocks)
    assert {"input", "0:attn", "0:ffn", "0:experts", "output"} <= ids


def test_open_bad_file_says_why(window, tmp_path, qtbot, no_modal_dialogs):
    shown = no_modal_dialogs
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x01" * 7)
    window.open_path(str(bad))
    qtbot.waitUntil(lambda: bool(shown), timeout=10000)
    assert "download" in shown[0][1] and window.doc.model.is_demo


@pytest.mark.llama
def test_a_file_llama_cpp_refuses_is_not_put_on_the_board(window, tmp_path, qtbot, no_modal_dialogs, llama_bin,
                                                           monkeypatch):
    """The window asks llama.cpp (the configured build) whether a file loads, off the GUI thread: a refusal is
    the message box with llama.cpp's reason and the model on screen stays; a pass is shown in the summary."""
    from app.llamacpp import load_check
    from tests.model.gguf_edit import apply, parse

    monkeypatch.setattr(load_check, "_cache_file", lambda: tmp_path / "load-checks.json")
    window.settings.setValue("llama_dir", str(llama_bin))
    good = write_tiny_model("qwen3", tmp_path / "good.gguf")
    window.open_path(str(good))
    qtbot.waitUntil(lambda: window.doc.model.path == good, timeout=10000)
    assert "llama.cpp" in window.summary.text() and "loads this file" in window.summary.text()
    base = good.read_bytes()
    names = [t[0] for t in parse(base).tensors]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(apply(base, [["rename", names.index("blk.2.ffn_down.weight"), "blk.2.ffn_dwon.weight"]]))
    window.open_path(str(bad))
    qtbot.waitUntil(lambda: bool(no_modal_dialogs), timeout=10000)
    kind, text = no_modal_dialogs[-1]
    assert kind == "warning" and "llama.cpp refuses to load bad.gguf: " in text, text
    assert "check_tensor_dims: tensor 'blk.2.ffn_down.weight' not found" in text or "lost its own reason" in text
    assert window.doc.model.path == good
    assert window.open_path_sync(str(bad)) is False and len(no_modal_dialogs) == 2  # the same on the sync path
    window.settings.setValue("llama_dir", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    assert window.open_path_sync(str(bad))  # nobody to ask: it opens, and the summary says it was not checked
    assert "not checked: no llama-fit-params found" in window.summary.text()


def test_real_mouse_drag_moves_one_block(window, qtbot):
    board = window.board
    item = board.blocks["5:experts"]
    assert window.doc.placement.device_of("5:experts") != CPU
    start, end = view_point(board, item), lane_point(board, CPU)
    vp = board.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    QTest.mouseMove(vp, start + QPoint(10, 5))
    QTest.mouseMove(vp, (start + end) / 2)
    QTest.mouseMove(vp, end)
    assert board.lanes[CPU].target  # the target lane is highlighted while dragging
    assert board.lanes[CPU].gauge.preview is not None  # and its gauge previews the drop
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)
    assert window.doc.placement.device_of("5:experts") == CPU
    assert board.lanes[CPU].gauge.preview is None
    assert window.doc.history.undo_label == "Move 5:experts to CPU"
    assert "ffn_(down|gate|up)_exps" in window.command.text.toPlainText()


def test_the_next_drag_s_graphs_are_built_while_the_board_is_still(window, qtbot, monkeypatch, collector_state):
    """A moment after an edit, with no drag on, the window builds the cut graphs a drag's previews will need
    (Session.warm_previews, one per tick until it says it is done); during a drag it waits."""
    session = window.doc.session
    calls: list[bool] = []
    real = session.warm_previews

    def counting():
        calls.append(real())
        return calls[-1]

    monkeypatch.setattr(session, "warm_previews", counting)
    settled: list[int] = []  # calls when the garbage collector ran (app.gcpolicy.settle, the real one here)
    monkeypatch.setattr(main_window, "settle", lambda: (settled.append(len(calls)), gcpolicy.settle())[1])
    facts = session.estimator.compute_facts
    window.doc.move(["10:experts"], CPU)
    qtbot.waitUntil(lambda: bool(calls) and not calls[-1] and not window._warm_timer.isActive(), timeout=10000)
    assert calls.count(True) >= 2, calls  # the placement's own preview, then graphs one call at a time
    # then, once, the full collection: what survives it is frozen out of the next ones
    assert settled == [len(calls)] and gc.get_freeze_count() > 0
    built = len(facts["graphs"])
    window.doc.preview(["11:experts"], CPU)  # a drag is on
    calls.clear()
    settled.clear()
    window._warm_timer.start(0)
    qtbot.wait(100)
    assert not calls and not settled and window._warm_timer.isActive()  # put off until the drag ends
    window.doc.preview([], None)
    qtbot.waitUntil(lambda: bool(calls) and not window._warm_timer.isActive(), timeout=10000)
    assert len(facts["graphs"]) >= built and settled == [len(calls)]
    # another model: its predecessor's frozen objects go, so the next settle walks everything
    resets: list[int] = []
    monkeypatch.setattr(main_window, "reset_collector", lambda: resets.append(1) or gcpolicy.reset())
    assert gcpolicy._after_full > 0
    window.show_model(window.doc.model)
    assert resets == [1] and gcpolicy._after_full == 0


def test_drop_of_a_selection_is_one_undo_step(window):
    board, doc = window.board, window.doc
    board.select_experts(10, 30)
    ids = board.selected_ids()
    assert len(ids) == 21
    before = doc.estimate.host.model
    assert board.drop_mime(board.mime_for(ids), CPU)
    assert all(doc.placement.device_of(i) == CPU for i in ids)
    assert doc.estimate.host.model > before
    assert doc.history.undo_label == "Move 21 blocks to CPU"
    window.undo_act.trigger()
    assert all(doc.placement.device_of(i) != CPU for i in ids) and doc.estimate.host.model == before
    window.redo_act.trigger()
    assert all(doc.placement.device_of(i) == CPU for i in ids)


def test_ctrl_y_redoes_as_well(window, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QKeySequence

    assert QKeySequence("Ctrl+Y") in window.redo_act.shortcuts()
    window.board.select_ids(["4:experts"])
    window.board.move_selection(CPU)
    window.undo_act.trigger()
    assert window.doc.placement.device_of("4:experts") != CPU
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert window.doc.placement.device_of("4:experts") == CPU


def test_keyboard_moves_selection(window, qtbot):
    board = window.board
    board.select_ids(["7:experts", "8:experts"])
    board.setFocus()
    QTest.keyClick(board, Qt.Key.Key_3, Qt.KeyboardModifier.AltModifier)  # lane 3 = CPU
    assert window.doc.placement.device_of("7:experts") == CPU == window.doc.placement.device_of("8:experts")


def test_inexpressible_drop_is_refused_with_a_reason(window):
    board, doc = window.board, window.doc
    messages = []
    doc.message.connect(messages.append)
    before = doc.placement.snapshot()
    assert not board.drop_mime(board.mime_for(["40:attn"]), CPU)
    assert doc.placement.snapshot() == before
    assert "CPU layers at the start" in messages[-1]


def test_kv_panel_moves_the_gauges(window):
    doc, kv = window.doc, window.kv_panel
    gauge = window.board.lanes["CUDA0"].gauge
    before = gauge.mem.kv
    kv.ctx_spin.setValue(32768)
    kv.ctx_spin.editingFinished.emit()
    assert doc.placement.settings.n_ctx == 32768 and gauge.mem.kv == pytest.approx(before * 4, rel=0.01)
    kv.ctk.setCurrentText("q8_0")
    kv.fa.setCurrentText("on")
    assert gauge.mem.kv < before * 4
    assert "-ctk q8_0" in " ".join(window.command.argv())


def test_over_capacity_turns_the_lane_red_and_says_what_to_move(window):
    window.doc.set_settings(n_ctx=262144, n_parallel=4, kv_unified=False)
    lane = window.board.lanes["CUDA0"]
    assert lane.over
    text = lane.status.text()
    assert "over by" in text and "experts of layer" in text
    assert "over capacity" in window._status.text()


def test_import_pasted_command(window):
    err = window.command.import_text(
        "llama-server -m x.gguf -ngl 99 -ts 1,1 \\\n  --n-cpu-moe 12 -c 16384 -fa on --fit off")
    # the only warning: the command was made for another file than the one on screen (issue #16, item 1)
    assert err == ("Imported, with warnings: the command names another model (x.gguf); its settings were applied "
                   "to the open one (Qwen3-30B-A3B-Q4_K_M (demo).gguf)")
    p = window.doc.placement
    assert [p.device_of(f"{i}:experts") for i in range(12)] == [CPU] * 12 and p.device_of("12:experts") != CPU
    assert p.settings.n_ctx == 16384 and window.kv_panel.ctx_spin.value() == 16384
    assert "-ncmoe 12" in " ".join(window.command.argv())
    assert window.command.import_text("llama-server -c lots") .startswith("-c expects")


def test_presets_and_auto_fit(window, no_modal_dialogs):
    window._preset("experts")
    assert "-cmoe" in window.command.argv()
    window.doc.set_settings(n_ctx=32768)
    window._auto_fit()
    assert not no_modal_dialogs, no_modal_dialogs
    est = window.doc.estimate
    for lane in ("CUDA0", "CUDA1"):
        m = next((d for d in est.devices if d.name == lane), None)
        if m is not None:
            assert m.total <= window.doc.capacity(lane) - window.margin_spin.value() * (1 << 20)


def test_no_devices_and_a_big_model(qtbot, tmp_path):
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.devices = [Lane("RPC0", "RPC0[127.0.0.1:1]", 8 * GiB, 8 * GiB, "rpc")]
    assert win.open_path_sync(str(write_sparse_model("qwen3-235b-a22b", tmp_path / "big.gguf")))
    # it opens fitted, the way llama.cpp's --fit would run it, and says so (issue #16, item 9)
    assert not win.board.lanes["RPC0"].over and "opened fitted" in win.message_bar.text()
    win._preset("all")
    assert win.board.lanes["RPC0"].over
    win._auto_fit()
    assert not win.board.lanes["RPC0"].over
    assert win.board.lanes["CPU"].over  # 142 GiB of experts cannot fit this machine's RAM: shown, not hidden


def test_auto_fit_says_what_llama_cpp_would_refuse_on_the_device(qtbot, tmp_path, no_modal_dialogs):
    """Each layer's f32 K cache (256 MiB at 128k) is above a Vulkan driver's 128 MiB storage-buffer range: auto-fit
    keeps the layers on the CPU, and says so in a message, since the gauges show room to spare."""
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.devices = [Lane("Vulkan0", "Vulkan0", 24 * GiB, 24 * GiB, "gpu", max_tensor_bytes=128 << 20)]
    assert win.open_path_sync(str(write_sparse_model("qwen3-30b-a3b", tmp_path / "q30.gguf")))
    no_modal_dialogs.clear()
    win.doc.set_settings(n_ctx=131072, type_k="f32", type_v="f32")
    win._auto_fit()
    (msg,) = [text for kind, text in no_modal_dialogs if kind == "information"]
    assert msg.startswith("Auto-fit: Placed what llama.cpp runs. Vulkan0 holds no more: llama.cpp aborts")
    assert "cache_k_l" in msg and "storage-buffer range" in msg
    assert win.doc.placement.layer_device.count("Vulkan0") == 1  # the output layer, which has no cache


@pytest.mark.llama
def test_verify_shows_llama_cpp_numbers_per_lane(qtbot, rpc_window):
    win = rpc_window
    win.verify_act.trigger()
    qtbot.waitUntil(lambda: win.doc.opinion is not None or win.doc.opinion_error is not None, timeout=30000)
    assert win.doc.opinion_error is None, win.doc.opinion_error
    assert [r.name for r in win.doc.opinion.rows] == ["RPC0", "RPC1", "CPU"]
    assert "llama.cpp dry run" in win.board.lanes["RPC0"].status.text()
    win.board.select_ids(["1:experts"])
    win.board.move_selection("CPU")  # an edit makes the dry run stale: it disappears
    assert win.doc.opinion is None and "llama.cpp dry run" not in win.board.lanes["RPC0"].status.text()


def test_devices_dialog_adds_planned_cards(window, qtbot):
    from ui.devices_dialog import DevicesDialog

    dlg = DevicesDialog(window.doc.devices, [], parent=window)
    qtbot.addWidget(dlg)
    dlg.card.setCurrentIndex(dlg.card.findData("rtx-3090"))
    dlg.name_edit.setText("CUDA2")
    dlg._add_catalogue()
    dlg.name_edit.setText("")
    dlg.cap.setValue(16)
    dlg.bw.setValue(448)
    dlg._add_custom()
    names = [d.name for d in dlg.devices]
    assert names == ["CUDA0", "CUDA1", "CUDA2", "CUDA3"]
    assert dlg.devices[2].total == 24 * GiB and dlg.devices[2].bandwidth == pytest.approx(936e9)
    assert dlg.devices[3].total == 16 * GiB and dlg.devices[3].bandwidth == pytest.approx(448e9)
    dlg.name_edit.setText("CUDA2")
    dlg._add_custom()
    assert "already a device called CUDA2" in dlg.message.text()
    window.doc.set_devices(dlg.devices)
    assert set(window.board.lanes) == {"CUDA0", "CUDA1", "CUDA2", "CUDA3", CPU}


def test_settings_dialog_reports_missing_llama_cpp(window, qtbot, tmp_path, monkeypatch):
    from ui.settings_dialog import SettingsDialog

    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    window.settings.setValue("llama_dir", str(tmp_path / "none"))
    dlg = SettingsDialog(window.settings, window)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.llama_info.text() != "checking llama.cpp…", timeout=10000)  # checked off-thread
    assert "llama-server was not found" in dlg.llama_info.text()
    dlg.units.setCurrentIndex(1)
    dlg._save()
    from app.units import fmt_bytes

    assert fmt_bytes(2 * 10**9) == "2.00 GB"
    dlg.units.setCurrentIndex(0)
    dlg._save()
    assert fmt_bytes(2 * 2**30) == "2.00 GiB"


@pytest.mark.llama
def test_settings_dialog_names_the_llama_cpp_build(window, qtbot, llama_bin):
    from ui.settings_dialog import SettingsDialog

    window.settings.setValue("llama_dir", str(llama_bin))
    dlg = SettingsDialog(window.settings, window)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.llama_info.text() != "checking llama.cpp…", timeout=60000)  # checked off-thread
    text = dlg.llama_info.text()
    assert "version" in text and "--fit" in text and "--n-cpu-moe" in text


def test_crash_recovery_restores_the_placement(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from ui.main_window import MainWindow

    from ui.main_window import DEMO_DEVICES

    path = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    a = MainWindow(detect_devices=False)
    a.devices = list(DEMO_DEVICES)
    qtbot.addWidget(a)
    assert a.open_path_sync(str(path))
    a.board.select_ids(["1:experts", "2:experts"])
    a.board.move_selection(CPU)
    a._autosave_timer.timeout.emit()  # what the timer does 1.5 s after an edit
    assert a.autosave_path().is_file()
    # "crash": no closeEvent. A new window offers the placement back.
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.StandardButton.Yes))
    b = MainWindow(detect_devices=False)
    b.devices = list(DEMO_DEVICES)
    b.setProperty("ask_on_close", False)
    qtbot.addWidget(b)
    assert b.offer_restore()
    assert b.doc.model.path == path
    assert b.doc.placement.device_of("1:experts") == CPU == b.doc.placement.device_of("2:experts")
    b.close()
    assert not b.autosave_path().exists()  # a normal close leaves nothing to recover
    a.setProperty("ask_on_close", False)


def test_close_with_unsaved_changes_asks(window, tmp_path, no_modal_dialogs):
    from ui.main_window import DEMO_DEVICES

    window.setProperty("ask_on_close", None)
    window.devices = list(DEMO_DEVICES)
    assert window.open_path_sync(str(write_tiny_model("qwen3moe", tmp_path / "q.gguf")))
    window.board.select_ids(["1:experts"])
    window.board.move_selection(CPU)
    window.close()
    assert any(kind == "question" and "not saved" in text for kind, text in no_modal_dialogs)


def test_fastest_and_compare_dialog(window, qtbot):
    from ui.compare_dialog import CompareDialog

    window.doc.set_settings(n_ctx=40960)
    window.fastest_act.trigger()
    assert window.doc.history.undo_label == "Fastest"
    assert "tok/s generation" in window._status.text()
    dlg = CompareDialog(window.doc, 1 << 30, None, [], window)
    qtbot.addWidget(dlg)
    labels = [dlg.table.item(r, 0).text() for r in range(dlg.table.rowCount())]
    assert labels == ["Current", "Auto-fit", "Fastest"]
    assert "demo has none" in dlg.note.text()
    assert "tok/s" in dlg.table.item(2, dlg.table.columnCount() - 2).text()


@pytest.mark.llama
def test_devices_dialog_probes_rpc_hosts_one_by_one(qtbot, rpc_servers, llama_bin):
    from tests.llama_fixtures import free_port
    from ui.devices_dialog import DevicesDialog
    from ui.main_window import MainWindow

    live = rpc_servers(1)[0]
    dead = f"127.0.0.1:{free_port()}"
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.settings.setValue("llama_dir", str(llama_bin))
    dlg = DevicesDialog(win.doc.devices, [live.endpoint, dead], detect=lambda rpc, cb: win._detect(rpc, cb), parent=win)
    qtbot.addWidget(dlg)
    dlg._probe()
    qtbot.waitUntil(lambda: "Probing" not in dlg.rpc_status.toPlainText(), timeout=60000)
    text = dlg.rpc_status.toPlainText()
    assert f"{live.endpoint}: ok" in text and "RPC0" in text
    assert dead in text and "refused" in text
    assert "run there: ggml-rpc-server" in text
    # the dead host stands for one assumed device (memory unknown), numbered after the live one as llama.cpp would
    assert [(d.name, d.endpoint, d.total) for d in dlg.devices if d.kind == "rpc"][1] == ("RPC1", dead, 0)
    assert [d.name for d in dlg.devices if d.kind == "rpc"] == ["RPC0", "RPC1"]


def test_dark_and_light_themes_set_readable_palettes(qapp):
    from PySide6.QtCore import QSettings
    from PySide6.QtGui import QPalette

    from ui.settings_dialog import apply_appearance

    s = QSettings()
    try:
        for theme, dark in (("dark", True), ("light", False)):
            s.setValue("theme", theme)
            apply_appearance(s)
            pal = qapp.palette()
            text, base = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.Base)
            assert (base.lightness() < 80) == dark
            assert abs(text.lightness() - base.lightness()) > 150  # contrast
            disabled = pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
            assert disabled != pal.color(QPalette.ColorRole.ButtonText)
    finally:
        s.setValue("theme", "light")
        apply_appearance(s)


def test_device_detection_keeps_edits_and_restores(window):
    from app.lanes import Lane

    doc = window.doc
    window.board.select_ids(["4:experts"])
    window.board.move_selection(CPU)
    edited = doc.placement.snapshot()
    more = doc.devices + [Lane("CUDA2", "CUDA2", 8 * GiB, 8 * GiB, "planned")]
    doc.set_devices(more)  # the placement only uses devices that are still there: kept as it is
    assert doc.placement.snapshot().same_assignment(edited) and "CUDA2" in window.board.lanes
    doc.set_devices([more[2]])  # CUDA0/1 vanished: laid out again, as one undoable step
    assert doc.history.undo_label == "Lay out on the new devices"
    doc.undo()  # back to the edited placement on the devices it had
    assert doc.placement.snapshot().same_assignment(edited) and [d.name for d in doc.devices] == ["CUDA0", "CUDA1", "CUDA2"]


def test_settings_changes_count_as_unsaved_work(window, tmp_path, no_modal_dialogs):
    window.setProperty("ask_on_close", None)
    assert window.open_path_sync(str(write_tiny_model("qwen3moe", tmp_path / "q.gguf")))
    assert not window.doc.dirty
    window.doc.set_settings(n_ctx=2048)
    assert window.doc.dirty
    window.close()
    assert any(kind == "question" and "not saved" in text for kind, text in no_modal_dialogs)


def test_a_layer_ruler_numbers_every_row_without_overlap(window):
    """Under each row of blocks, the layer numbers where layers start, as many as fit without touching; the
    first layer of every row is numbered, so a 94-layer model reads like a ruler."""
    board = window.board
    seen: set[int] = set()
    for name, lane in board.lanes.items():
        rows: dict[float, list] = {}
        for item in lane.ruler:
            rows.setdefault(item.pos().y(), []).append(item)
        blocks = [b for b in board.blocks.values() if window.doc.placement.device_of(b.info.id) == name
                  and b.info.layer is not None]
        if not blocks:
            continue
        assert rows, name
        for items in rows.values():
            items.sort(key=lambda it: it.pos().x())
            numbers = [int(it.text()) for it in items]
            assert numbers == sorted(numbers)
            for a, b in zip(items, items[1:]):
                assert a.pos().x() + a.boundingRect().width() <= b.pos().x(), (a.text(), b.text())
            seen.update(numbers)
    assert 0 in seen and len(seen) >= 10  # the demo's 48 layers: numbered along both GPU lanes
    window.resize(1024, 700)  # narrower: rows wrap, and every new row starts numbered again
    window.doc.changed.emit()
    assert all(lane.ruler for name, lane in board.lanes.items() if name != CPU)


def test_a_long_status_message_ends_in_an_ellipsis_and_reads_in_full_as_the_tooltip(window):
    window.resize(1024, 700)
    text = "llama.cpp: " + "a very long explanation of what went wrong and what to do " * 6
    window.statusBar().showMessage(text)
    bar = window.statusBar()
    shown = super(type(bar), bar).currentMessage()  # what is drawn
    assert shown.endswith("…") and len(shown) < len(text) and bar.toolTip() == text
    assert bar.currentMessage() == text  # what it says
    assert window.width() <= 1024


def test_status_says_what_each_user_gets_with_every_slot_busy(window):
    window.doc.set_settings(n_parallel=4, n_ctx=16384)
    par = window.doc.parallel
    assert par is not None and par.n == 4
    assert f"4 users at {par.ctx_each} tokens each" in window._status.text()
    assert par.per_user < window.doc.decode.tokens_per_s  # each user gets a share
    assert par.aggregate > window.doc.decode.tokens_per_s  # the reads are shared
    window.doc.set_settings(n_parallel=1)
    assert window.doc.parallel is None and "users at" not in window._status.text()
