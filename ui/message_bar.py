"""A message that stays until it is dismissed: a problem (llama.cpp's own reason) or a note (what was checked).

Long text wraps inside the bar (it never widens the window); the full text is the tooltip too.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy

STYLES = {"error": "rgba(214,69,65,0.14)", "warning": "rgba(201,138,0,0.16)", "info": "rgba(76,120,168,0.14)"}


class MessageBar(QFrame):
    dismissed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("message-bar")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.label.setMinimumWidth(100)
        lay.addWidget(self.label, 1)
        self.action_btn = QPushButton()
        self.action_btn.setVisible(False)
        lay.addWidget(self.action_btn)
        self.close_btn = QPushButton("Dismiss")
        self.close_btn.clicked.connect(self.dismiss)
        lay.addWidget(self.close_btn)
        self.kind = "info"
        self._action = None
        self.action_btn.clicked.connect(self._run_action)
        self.setVisible(False)

    def show_message(
        self, title: str, text: str, kind: str = "error", action: tuple[str, object] | None = None
    ) -> None:
        self.kind = kind
        self.setStyleSheet(f"#message-bar {{ background: {STYLES.get(kind, STYLES['info'])}; border-radius: 3px; }}")
        self.label.setText(f"<b>{escape(title)}</b>: {escape(text).replace(chr(10), '<br>')}")
        self.label.setToolTip(f"{title}: {text}")
        self._action = action[1] if action else None
        self.action_btn.setVisible(action is not None)
        if action is not None:
            self.action_btn.setText(action[0])
        self.setVisible(True)

    def text(self) -> str:
        return self.label.toolTip()

    def _run_action(self) -> None:
        fn = self._action
        self.dismiss()
        if callable(fn):
            fn()

    def dismiss(self) -> None:
        self.setVisible(False)
        self.dismissed.emit()
