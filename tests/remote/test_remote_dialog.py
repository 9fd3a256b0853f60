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
    dlg.go.click()
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 2 and dlg.go.isEnabled(), timeout=30000)
    heads = [dlg.table.horizontalHeaderItem(c).text() for c in range(dlg.table.columnCount())]
    assert heads == ["Quant", "Size", "Fits", "Left CUDA0", "Left CUDA1", "Left Host", "tg tok/s", "pp tok/s", "Where"]
    assert {dlg.table.item(r, 0).text() for r in range(2)} == {"Q8_0", "F16"}
    assert all(dlg.table.item(r, 2).text() == "yes" for r in range(2))
    assert "2 quantizations, 2 fit" in dlg.status.text()
    dlg.table.sortItems(1)  # by size: the numbers, not the text
    sizes = [dlg.table.item(r, 1).value for r in range(2)]
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
