"""GUI tests run offscreen with settings in a temporary folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, qapp, monkeypatch):
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAYERDECK_CONFIG_DIR", str(tmp_path / "config"))
    from PySide6.QtCore import QCoreApplication, QSettings

    QCoreApplication.setOrganizationName("LayerdeckTests")
    QCoreApplication.setApplicationName("Layerdeck")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    yield


@pytest.fixture
def window(qtbot):
    """The main window on the demo model, 1280x800, shown (no device detection)."""
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    win.resize(1280, 800)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    return win


@pytest.fixture(autouse=True)
def settled_garbage(monkeypatch):
    """The window's garbage collection while the board is still (app.gcpolicy.settle), not run.
    This test process holds 1-3 million objects (pytest's and every earlier test's), against some 250,000 in the
    app on a 94-layer model, so a full walk costs 0.3-1.4 s here and 50-110 ms there, and tests that count
    event-loop ticks would see pauses the app does not have. The policy itself is tested in tests/test_gcpolicy.py
    and, in the window, with the real call, by test_board's test of what the window does while the board is still."""
    from ui import main_window

    monkeypatch.setattr(main_window, "settle", lambda: 0.0)


@pytest.fixture(autouse=True)
def no_modal_dialogs(monkeypatch):
    """Record message boxes instead of blocking the test on a modal loop."""
    from PySide6.QtWidgets import QMessageBox

    shown: list[tuple[str, str]] = []

    def fake(kind):
        def show(parent, title, text, *args, **kwargs):
            shown.append((kind, f"{title}: {text}"))
            return QMessageBox.StandardButton.Discard if kind == "question" else QMessageBox.StandardButton.Ok
        return show

    for kind in ("information", "warning", "critical", "question"):
        monkeypatch.setattr(QMessageBox, kind, staticmethod(fake(kind)))
    return shown


@pytest.fixture
def rpc_window(qtbot, tiny_models, rpc_servers, llama_bin):
    """A main window on the tiny qwen3moe model with two real RPC devices and llama.cpp configured."""
    from tests.memory.accuracy import list_rpc_devices
    from ui.main_window import MainWindow

    servers = rpc_servers(2)
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.settings.setValue("llama_dir", str(llama_bin))
    win.devices = list_rpc_devices(llama_bin / "llama-server", [s.endpoint for s in servers])
    assert win.open_path_sync(str(tiny_models["qwen3moe"]))
    return win
