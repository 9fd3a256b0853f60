"""Create the QApplication and the main window, wire them, run the event loop."""

from __future__ import annotations

import logging
import sys

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app import __version__
from app.gcpolicy import tune

from .main_window import MainWindow

log = logging.getLogger(__name__)


def app_icon() -> QIcon:
    import resources

    icon = QIcon()
    for size in (16, 32, 48, 64, 128, 256, 512):
        icon.addFile(str(resources.path("icons", f"layerdeck-{size}.png")))
    return icon


class _FileOpenFilter(QObject):
    """macOS Finder sends "Open With" files as QFileOpenEvent, not on the command line."""

    def __init__(self, window):
        super().__init__(window)
        self._window = window

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.FileOpen and event.file():
            self._window.open_path(event.file())
            return True
        return super().eventFilter(obj, event)


def run_gui(model_path: str | None = None, smoke_test: bool = False) -> int:
    tune()  # young garbage collections less often: a drag's previews allocate a lot (app.gcpolicy)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Layerdeck")
    app.setOrganizationName("Layerdeck")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("layerdeck")  # Wayland app id; matches layerdeck.desktop
    app.setWindowIcon(app_icon())
    from PySide6.QtCore import QSettings

    from .settings_dialog import apply_appearance

    apply_appearance(QSettings())
    window = MainWindow(detect_devices=not smoke_test)
    window.resize(1280, 800)
    window.show()
    app.installEventFilter(_FileOpenFilter(window))
    if model_path:
        window.open_path_sync(model_path)
    if smoke_test:
        # Let the window lay out and paint, then leave with success if nothing raised.
        QTimer.singleShot(500, app.quit)
    return app.exec()
