"""File > Open from Hugging Face…: the repo table and opening a quantization on the board, off the GUI thread."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QCoreApplication, QSettings
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setenv("LAYERDECK_CONFIG_DIR", str(tmp_path / "config"))
    QCoreApplication.setOrganizationName("LayerdeckTests")
    QCoreApplication.setApplicationName("Layerdeck")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard))
    from app.memory.device_adapter import parse_device_spec
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.devices = parse_device_spec("CUDA0=16000,CUDA1=8000")
    win.host_bandwidth = 40e9
    return win


def _menu_action(win, text):
    for menu_action in win.menuBar().actions():
        for a in menu_action.menu().actions():
            if a.text() == text:
                return a
    raise AssertionError(f"no menu action {text!r}")


def test_the_repo_table_and_opening_a_quant(hub, window, qtbot, tmp_path):
    _menu_action(window, "Open from &Hugging Face…").trigger()
    dlg = window._remote_dialog
    assert dlg.isVisible()
    dlg.name.setText("acme/Tiny-GGUF")
    dlg.predict.setText("none")
    dlg.go.click()
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 2 and dlg.go.isEnabled(), timeout=30000)
    heads = [dlg.table.horizontalHeaderItem(c).text() for c in range(dlg.table.columnCount())]
    assert heads == ["Quant", "Kind", "Size", "Fits", "Left CUDA0", "Left CUDA1", "Left Host", "tg tok/s", "pp tok/s",
                     "Where"]
    assert {dlg.table.item(r, 0).text() for r in range(2)} == {"Q8_0", "F16"}
    assert all(dlg.table.item(r, 1).text() == "file" and dlg.table.item(r, 3).text() == "yes" for r in range(2))
    assert "2 quantizations, 2 fit" in dlg.status.text()
    dlg.table.sortItems(2)  # by size: the numbers, not the text
    sizes = [dlg.table.item(r, 2).value for r in range(2)]
    assert sizes == sorted(sizes)
    out = os.environ.get("LAYERDECK_SHOT_DIR") or str(tmp_path)
    assert dlg.grab().save(os.path.join(out, "remote-dialog.png"))
    row = next(r for r in range(2) if dlg.table.item(r, 0).text() == "F16")
    dlg.open_row(row)
    assert window.doc.model.source == "hf://acme/Tiny-GGUF/Tiny-MoE-F16.gguf"
    assert window.doc.model.header_only
    argv = window.doc.command().argv
    assert argv[1:5] == ["-hf", "acme/Tiny-GGUF", "-hff", "Tiny-MoE-F16.gguf"]
    assert not dlg.isVisible()


def test_a_name_opens_directly_and_errors_are_shown(hub, window, qtbot):
    from ui.remote_dialog import open_remote_dialog

    dlg = open_remote_dialog(window)
    dlg.name.setText("acme/Nope-GGUF:Q4_K_M")
    dlg.go.click()
    qtbot.waitUntil(lambda: dlg.go.isEnabled(), timeout=30000)
    assert "not found" in dlg.status.text()
    dlg.name.setText("hf://Qwen/Qwen3-30B-A3B-GGUF/Qwen3-30B-A3B-Q4_K_M.gguf")
    dlg.go.click()
    qtbot.waitUntil(lambda: window.doc.model.source.startswith("hf://Qwen"), timeout=30000)
    assert window.doc.model.params.n_layer == 48


def test_cancel_stops_a_slow_read(hub, window, qtbot):
    from ui.remote_dialog import open_remote_dialog

    hub.state.slow_chunk_delay = 0.05
    dlg = open_remote_dialog(window)
    dlg.name.setText("hf://Qwen/Qwen3-30B-A3B-GGUF/Qwen3-30B-A3B-Q4_K_M.gguf")
    dlg.go.click()
    assert dlg.cancel_btn.isEnabled()
    qtbot.wait(300)
    dlg.cancel_btn.click()
    qtbot.waitUntil(lambda: dlg.go.isEnabled(), timeout=10000)
    assert dlg.status.text() == "Cancelled."
    assert not (window.doc.model.source or "")


def test_a_header_only_model_cannot_be_launched_and_says_why(hub, window, qtbot):
    from app.remote import open_remote

    model, _ = open_remote("acme/Tiny-GGUF:Q8_0")
    window.show_model(model)
    assert "Header only, read from hf://acme/Tiny-GGUF:Q8_0" in window.summary.text()
    launch = window.launch
    assert not launch.launch_btn.isEnabled() and "download the file" in launch.launch_btn.toolTip()
    assert launch.launch() is False
    assert "Header only (hf://acme/Tiny-GGUF:Q8_0)" in window.command.notes.text()
    assert "-hf acme/Tiny-GGUF:Q8_0" in window.command.text.toPlainText()


def _read_repo(dlg, qtbot, repo, predict="common"):
    dlg.name.setText(repo)
    dlg.predict.setText(predict)
    dlg.go.click()
    qtbot.waitUntil(lambda: dlg.go.isEnabled() and dlg.table.rowCount() > 0, timeout=60000)


def _row(dlg, quant):
    return next(r for r in range(dlg.table.rowCount()) if dlg.table.item(r, 0).text() == quant)


def test_predicted_rows_are_marked_and_open_as_predicted(pred_hub, window, qtbot, tmp_path):
    from app.remote.predicted import COMMON_TYPES
    from ui.remote_dialog import open_remote_dialog

    dlg = open_remote_dialog(window)
    _read_repo(dlg, qtbot, "acme/Pred-GGUF")
    n = dlg.table.rowCount()
    assert n == 2 + len(COMMON_TYPES)
    kinds = {dlg.table.item(r, 0).text(): dlg.table.item(r, 1).text() for r in range(n)}
    assert kinds["F16"] == "file" and kinds["Q4_K_M"] == "predicted" and list(kinds.values()).count("predicted") == 8
    r = _row(dlg, "Q4_K_M")
    assert dlg.table.item(r, 0).font().italic() and "Tiny-MoE-F16.gguf's header" in dlg.table.item(r, 0).toolTip()
    assert "8 predicted (8 fit)" in dlg.status.text()
    assert "llama-quantize's rules" in dlg.notes.text()
    dlg.resize(1200, 520)
    out = os.environ.get("LAYERDECK_SHOT_DIR") or str(tmp_path)
    assert dlg.grab().save(os.path.join(out, "remote-dialog-predicted.png"))
    dlg.table.selectRow(r)
    assert dlg.open_btn.isEnabled() and not dlg.download_btn.isEnabled() and not dlg.copy_btn.isEnabled()
    assert "no such file" in dlg.download_btn.toolTip()
    dlg.open_row(r)
    m = window.doc.model
    assert m.predicted_from.startswith("Tiny-MoE-F16.gguf as Q4_K_M") and m.header_only and "predicted" in m.title
    assert "predicted" in window.summary.text()
    assert not window.launch.launch_btn.isEnabled()
    assert window.doc.command().argv[1:3] == ["-m", "Tiny-MoE-Q4_K_M.gguf"]
    assert window.command.notes.text().startswith("Predicted (Tiny-MoE-F16.gguf as Q4_K_M")


def test_download_opens_the_file_and_copy_command_has_hf(pred_hub, pred_models, window, qtbot, tmp_path):
    from PySide6.QtGui import QGuiApplication

    from ui.remote_dialog import open_remote_dialog

    dlg = open_remote_dialog(window)
    _read_repo(dlg, qtbot, "acme/Pred-GGUF", "none")
    r = _row(dlg, "F16")
    dlg.table.selectRow(r)
    assert dlg.download_btn.isEnabled() and dlg.copy_btn.isEnabled()
    dlg.copy_command(r)
    text = QGuiApplication.clipboard().text()
    assert "-hf acme/Pred-GGUF:F16" in text and "-ngl" in text
    assert str(tmp_path / "data" / "models" / "acme" / "Pred-GGUF") in dlg.folder_btn.toolTip()
    dlg.dest = str(tmp_path / "picked")
    dlg.download_row(r)
    qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=60000)
    path = tmp_path / "picked" / "Tiny-MoE-F16.gguf"
    assert path.read_bytes() == pred_models["f16"].read_bytes()
    qtbot.waitUntil(lambda: str(window.doc.model.path) == str(path), timeout=60000)
    assert not window.doc.model.header_only


def test_cancel_a_download_keeps_the_part(pred_hub, window, qtbot, tmp_path):
    from ui.remote_dialog import open_remote_dialog

    dlg = open_remote_dialog(window)
    _read_repo(dlg, qtbot, "acme/Pred-GGUF", "none")
    pred_hub.state.slow_chunk_delay = 0.05
    dlg.dest = str(tmp_path / "d")
    dlg.table.selectRow(_row(dlg, "F16"))
    dlg.download_btn.click()
    assert dlg.cancel_btn.isEnabled() and not dlg.download_btn.isEnabled()
    qtbot.waitUntil(lambda: dlg._last_progress is not None and dlg._last_progress.done > 0, timeout=10000)
    qtbot.waitUntil(lambda: " of " in dlg.progress.format(), timeout=10000)  # "48 KiB of 1.04 MiB, ..."
    qtbot.waitUntil(lambda: "left" in dlg.progress.format(), timeout=10000)  # the speed and time left
    out = os.environ.get("LAYERDECK_SHOT_DIR") or str(tmp_path)
    assert dlg.grab().save(os.path.join(out, "remote-dialog-download.png"))
    dlg.cancel_btn.click()
    qtbot.waitUntil(lambda: dlg.go.isEnabled(), timeout=10000)
    assert dlg.status.text().startswith("Cancelled.") and "kept in" in dlg.status.text()
    assert (tmp_path / "d" / "Tiny-MoE-F16.gguf.part").exists()
    assert not (tmp_path / "d" / "Tiny-MoE-F16.gguf").exists()


def test_a_bad_predict_field_is_said_and_nothing_is_read(hub, window, qtbot):
    import random

    from ui.remote_dialog import open_remote_dialog

    dlg = open_remote_dialog(window)
    rng = random.Random(7)
    for _ in range(30):  # bounded fuzz: junk type lists never start a read
        junk = "".join(rng.choice("QK_4M,xyz9 .-") for _ in range(rng.randint(1, 12)))
        if any(t.strip().upper() not in ("", "Q4_K_M", "Q4_K") for t in junk.split(",")):
            dlg.name.setText("acme/Tiny-GGUF")
            dlg.predict.setText(junk + ",Q9_Z")
            before = len(hub.log)
            dlg.go.click()
            assert dlg.status.text().startswith("Predict: llama-quantize has no type ")
            assert dlg.go.isEnabled() and len(hub.log) == before
