"""Small acknowledgements: a button that says what it just did for two seconds."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QAbstractButton


def copy_with_feedback(button: QAbstractButton, text: str, done: str = "Copied ✓", ms: int = 2000) -> None:
    """Put ``text`` on the clipboard and show ``done`` on ``button`` for ``ms`` milliseconds."""
    QGuiApplication.clipboard().setText(text)
    label = button.property("idle_text") or button.text()
    button.setProperty("idle_text", label)
    button.setText(done)
    QTimer.singleShot(ms, lambda: button.setText(label))
