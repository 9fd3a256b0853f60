"""Crash recovery: an autosave is offered, or set aside with a message -- never deleted unseen."""

from __future__ import annotations

import json

import pytest

from app.lanes import CPU
from tests.gguf_factory import write_tiny_model

pytest.importorskip("PySide6")
pytestmark = pytest.mark.gui

STAMP = "20260101-120000"


@pytest.fixture(autouse=True)
def isolated(tmp_path, qapp, monkeypatch):
    """Settings and the data folder in tmp_path (as tests/ui/conftest.py does), a fixed time stamp, and
    message boxes recorded instead of shown; ``answer`` is what a question gets."""
    from PySide6.QtCore import QCoreApplication, QSettings
    from PySide6.QtWidgets import QMessageBox

    from app import paths

    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAYERDECK_CONFIG_DIR", str(tmp_path / "config"))
    QCoreApplication.setOrganizationName("LayerdeckTests")
    QCoreApplication.setApplicationName("Layerdeck")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    monkeypatch.setattr(paths.time, "strftime", lambda fmt: STAMP)
    shown: list[tuple[str, str]] = []
    state = {"answer": QMessageBox.StandardButton.Yes}

    def record(kind):
        def show(parent, title, text, *a, **k):
            shown.append((kind, text))
            return state["answer"] if kind == "question" else QMessageBox.StandardButton.Ok

        return staticmethod(show)

    for kind in ("information", "warning", "critical", "question"):
        monkeypatch.setattr(QMessageBox, kind, record(kind))
    return shown, state


def window(qtbot):
    from ui.main_window import DEMO_DEVICES, MainWindow

    w = MainWindow(detect_devices=False)
    w.devices = list(DEMO_DEVICES)
    w.setProperty("ask_on_close", False)
    qtbot.addWidget(w)
    return w


def crash_after_an_edit(qtbot, model_arg: str):
    """Open ``model_arg``, move two expert blocks to the CPU, autosave, and "crash" (no close)."""
    a = window(qtbot)
    assert a.open_path_sync(model_arg)
    a.board.select_ids(["1:experts", "2:experts"])
    a.board.move_selection(CPU)
    a._autosave_timer.timeout.emit()
    assert a.autosave_path().is_file()
    return a


def test_relative_model_path_restores_from_another_folder(qtbot, tmp_path, monkeypatch, isolated):
    """``layerdeck model.gguf`` in one folder, edit, crash; started from another folder it is offered back."""
    shown, _ = isolated
    (tmp_path / "models").mkdir()
    (tmp_path / "elsewhere").mkdir()
    model = write_tiny_model("qwen3moe", tmp_path / "models" / "q.gguf")
    monkeypatch.chdir(tmp_path / "models")
    a = crash_after_an_edit(qtbot, "q.gguf")
    saved = json.loads(a.autosave_path().read_text())
    assert saved["model"]["path"] == str(model)
    monkeypatch.chdir(tmp_path / "elsewhere")
    b = window(qtbot)
    assert b.offer_restore()
    assert shown == [
        ("question", "Layerdeck did not close normally while you were placing q.gguf. Restore that placement?")
    ]
    assert b.doc.model.path == model
    assert b.doc.placement.device_of("1:experts") == CPU == b.doc.placement.device_of("2:experts")


def test_a_corrupt_autosave_is_set_aside_with_a_message(qtbot, tmp_path, isolated):
    shown, _ = isolated
    w = window(qtbot)
    path = w.autosave_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"format": "layerdeck-plan", "vers')
    assert not w.offer_restore()
    kept = path.with_name(f"autosave.layerdeck.json.corrupt-{STAMP}")
    assert not path.exists() and kept.read_text() == '{"format": "layerdeck-plan", "vers'
    assert shown == [
        (
            "warning",
            f"Layerdeck did not close normally last time, but the placement it saved cannot be read: {path} is not a "
            "Layerdeck plan (not valid JSON: Unterminated string starting at: line 1 column 30 (char 29)).\n\n"
            f"The file was kept as {kept}.",
        )
    ]


def test_an_autosave_of_the_wrong_shape_is_set_aside(qtbot, tmp_path, isolated):
    shown, _ = isolated
    w = window(qtbot)
    path = w.autosave_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": "layerdeck-plan", "version": 1, "model": "abc"}))
    assert not w.offer_restore()
    assert path.with_name(f"autosave.layerdeck.json.corrupt-{STAMP}").is_file() and not path.exists()
    assert len(shown) == 1 and f'{path}: model: "abc" is not an object.' in shown[0][1]


def test_a_missing_model_is_said_and_the_autosave_kept(qtbot, tmp_path, isolated):
    shown, _ = isolated
    model = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    a = crash_after_an_edit(qtbot, str(model))
    path = a.autosave_path()
    before = path.read_bytes()
    model.rename(tmp_path / "moved.gguf")
    b = window(qtbot)
    assert not b.offer_restore()
    kept = path.with_name(f"autosave.unrestored-{STAMP}.layerdeck.json")
    assert not path.exists() and kept.read_bytes() == before
    assert shown == [
        (
            "warning",
            f"Layerdeck did not close normally while you were placing q.gguf, but the model is no longer at {model} "
            "(moved, renamed, or on a drive that is not connected).\n\n"
            f"The placement was kept as {kept}: open the model, then Open plan… with that file to get it back.",
        )
    ]
    # and it is a plan: once the model is back, it opens as one
    (tmp_path / "moved.gguf").rename(model)
    assert b.open_path_sync(str(model))
    b.doc.open_plan(kept)
    assert b.doc.placement.device_of("1:experts") == CPU


def test_a_different_model_at_the_same_path_keeps_the_autosave(qtbot, tmp_path, isolated):
    shown, _ = isolated
    model = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    a = crash_after_an_edit(qtbot, str(model))
    write_tiny_model("llama", model)  # replaced by another model under the same name
    b = window(qtbot)
    assert not b.offer_restore()
    kept = a.autosave_path().with_name(f"autosave.unrestored-{STAMP}.layerdeck.json")
    assert kept.is_file() and not a.autosave_path().exists()
    assert [k for k, _ in shown] == ["question", "warning"]
    assert shown[1][1].startswith(
        f"The unsaved placement does not fit q.gguf any more: {a.autosave_path()}: this plan was made for q.gguf"
    )


def test_a_declined_offer_removes_the_autosave(qtbot, tmp_path, isolated):
    from PySide6.QtWidgets import QMessageBox

    shown, state = isolated
    model = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    a = crash_after_an_edit(qtbot, str(model))
    state["answer"] = QMessageBox.StandardButton.No
    b = window(qtbot)
    assert not b.offer_restore()
    assert [k for k, _ in shown] == ["question"] and list(a.autosave_path().parent.iterdir()) == []
