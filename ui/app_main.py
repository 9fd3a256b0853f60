"""Create the QApplication and the main window, wire them, run the event loop."""

from __future__ import annotations

import logging
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app import __version__

from .main_window import MainWindow

log = logging.getLogger(__name__)


def run_gui(model_path: str | None = None, smoke_test: bool = False) -> int:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Layerdeck")
    app.setOrganizationName("Layerdeck")
    app.setApplicationVersion(__version__)
    from PySide6.QtCore import QSettings

    from .settings_dialog import apply_appearance

    apply_appearance(QSettings())
    window = MainWindow(detect_devices=not smoke_test)
    window.resize(1280, 800)
    window.show()
    if model_path:
        window.open_path_sync(model_path)
    if smoke_test:
        # Let the window lay out and paint, then leave with success if nothing raised.
        QTimer.singleShot(500, app.quit)
    return app.exec()
