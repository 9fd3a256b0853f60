"""The window at 1024x700, 1280x800 and 1920x1080, light and dark: no text is clipped (an elided text carries its
full text as a tooltip) and nothing grows the window past the screen. Compares widget geometry, not pixels."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QApplication, QComboBox, QLabel, QToolBar, QWidget

from app.lanes import Lane
from tests.gguf_factory import write_sparse_model

pytestmark = pytest.mark.gui
GiB = 1 << 30
SIZES = [(1024, 700), (1280, 800), (1920, 1080)]
LONG = ("llama-fit-params failed (exit status 1): error while handling argument \"-ot\": "
        + "blk\\.(0|1|2|3|4|5|6|7|8|9|10|11|12|13|14|15)\\.ffn_(up|down|gate)_exps=CUDA0," * 12)


def settle(n: int = 5) -> None:
    for _ in range(n):
        QApplication.processEvents()


def clipped(win) -> list[str]:
    """Visible widgets whose text does not fit and that do not offer it in full as a tooltip."""
    out = []
    for w in win.findChildren(QWidget):
        if not w.isVisible() or w.width() <= 0 or w.window() is not win:
            continue
        if isinstance(w, QLabel) and w.text():
            if w.toolTip():
                continue
            if w.wordWrap():
                need = w.heightForWidth(w.width())
                if need > w.height() + 2:
                    out.append(f"label {w.text()[:60]!r}: needs {need} px high, has {w.height()}")
            elif w.sizeHint().width() > w.width() + 2 and type(w).__name__ != "ElidedLabel":
                out.append(f"label {w.text()[:60]!r}: needs {w.sizeHint().width()} px, has {w.width()}")
        elif isinstance(w, QAbstractButton) and w.text():
            if w.sizeHint().width() > w.width() + 2:
                out.append(f"button {w.text()!r}: needs {w.sizeHint().width()} px, has {w.width()}")
        elif isinstance(w, (QAbstractSpinBox, QComboBox)):
            if w.minimumSizeHint().width() > w.width() + 2:
                out.append(f"{type(w).__name__} {w.toolTip()[:30]!r}: needs {w.minimumSizeHint().width()} px, "
                           f"has {w.width()}")
    for tb in win.findChildren(QToolBar):
        for a in tb.actions():
            if a.isSeparator():
                continue
            widget = tb.widgetForAction(a)
            if widget is not None and not widget.isVisible():
                out.append(f"toolbar item {a.text() or type(widget).__name__!r} is pushed off the toolbar")
    for name, lane in win.board.lanes.items():
        room = lane.rect().width() - 240
        if lane.status.boundingRect().width() > room + 2:
            out.append(f"lane {name}: status {lane.status.text()[:50]!r} is wider than the lane")
        if lane.status.text() != getattr(lane, "full_status", lane.status.text()) and not lane.toolTip():
            out.append(f"lane {name}: status elided without a tooltip")
    return out


@pytest.fixture(params=["light", "dark"])
def theme(request, qapp):
    from PySide6.QtCore import QSettings

    from ui.settings_dialog import apply_appearance

    s = QSettings()
    s.setValue("theme", request.param)
    apply_appearance(s)
    yield request.param
    s.setValue("theme", "light")
    apply_appearance(s)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_nothing_is_clipped_and_the_window_fits_the_screen(qtbot, tmp_path, size, theme):
    from ui.main_window import MainWindow

    w, h = size
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.resize(w, h)
    win.show()
    qtbot.waitExposed(win)
    settle()
    states = {}
    assert win.minimumSizeHint().width() <= w and win.minimumSizeHint().height() <= h
    states["demo"] = clipped(win)
    # over capacity: the advice on each lane
    win.doc.set_settings(n_ctx=262144, n_parallel=4, kv_unified=False)
    settle()
    states["over capacity"] = clipped(win)
    # a long error in the message bar and in the server panel
    win.message_bar.show_message("Verify failed", LONG, "error")
    win.launch._show_problem("Cannot launch", LONG, [LONG, LONG])
    win.bottom.setCurrentWidget(win.launch)
    settle()
    states["long errors"] = clipped(win)
    assert win.width() <= w and win.height() <= h, f"the window grew to {win.width()}x{win.height()}"
    # a real model opened fitted, with a llama.cpp dry run on each lane
    win.devices = [Lane("CUDA0", "CUDA0", 8 * GiB, 8 * GiB, "planned", 1e12),
                   Lane("CUDA1", "CUDA1", 512 << 20, 512 << 20, "planned", 1e11)]
    win.bottom.setCurrentWidget(win.command)
    assert win.open_path_sync(str(write_sparse_model("qwen3-30b-a3b", tmp_path / "q.gguf")))
    settle()
    states["opened fitted"] = clipped(win)
    for lane in win.board.lanes.values():
        lane.set_status(lane.full_status + "   llama.cpp dry run: 7.21 GiB (model 6540, context 384, compute 460 MiB)")
    settle()
    states["dry run"] = clipped(win)
    assert win.width() <= w and win.height() <= h, f"the window grew to {win.width()}x{win.height()}"
    problems = {k: v for k, v in states.items() if v}
    assert not problems, problems
