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
