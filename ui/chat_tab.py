"""Try it: a chat with the running server through its OpenAI-compatible endpoint (the model's own chat
template, applied by llama-server): a system prompt, the common samplers, stop strings, regenerate, and the
speed of every reply. A button opens llama-server's own web UI when the build has one."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.launch.chat import ChatMessage, ChatParams, ChatReply, parse_stop

from .elided_label import ElidedLabel


def _spin(lo: float, hi: float, step: float, value: float, decimals: int = 2, special: str = "default"):
    s = QDoubleSpinBox()
    s.setRange(lo - step, hi)  # the lowest value stands for "the server's default"
    s.setDecimals(decimals)
    s.setSingleStep(step)
    s.setSpecialValueText(special)
    s.setValue(value)
    return s


class ChatTab(QWidget):
    """The transcript and the controls; the panel sends (it owns the server)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.messages: list[ChatMessage] = []  # the conversation so far (user and assistant turns)
        self.replies: list[ChatReply] = []
        self._streaming = ""
        bl = QVBoxLayout(self)
        bl.setContentsMargins(0, 4, 0, 0)
        top = QHBoxLayout()
        top.addWidget(QLabel("System"))
        self.system = QLineEdit()
        self.system.setPlaceholderText("system prompt (optional), e.g. You are a helpful assistant.")
        top.addWidget(self.system, 1)
        self.web_ui_btn = QPushButton("Web UI")
        self.web_ui_btn.setEnabled(False)
        self.web_ui_btn.setToolTip(
            "Open llama-server's own web UI (available once the server runs, if its build has one)"
        )
        top.addWidget(self.web_ui_btn)
        bl.addLayout(top)
        grid = QGridLayout()
        self.temperature = _spin(0, 5, 0.05, 0.8)
        self.top_p = _spin(0, 1, 0.05, 0.95)
        self.top_k = QSpinBox()
        self.top_k.setRange(-1, 1000)
        self.top_k.setSpecialValueText("default")
        self.top_k.setValue(40)
        self.min_p = _spin(0, 1, 0.01, 0.05)
        self.repeat_penalty = _spin(0, 3, 0.05, 1.0)
        self.n_predict = QSpinBox()
        self.n_predict.setRange(1, 32768)
        self.n_predict.setValue(256)
        self.stop = QLineEdit()
        self.stop.setPlaceholderText("stop strings, | between them (\\n = newline)")
        # two short rows, so a narrow window keeps every control readable
        for i, (label, w) in enumerate(
            (
                ("temp", self.temperature),
                ("top-p", self.top_p),
                ("top-k", self.top_k),
                ("min-p", self.min_p),
                ("repeat", self.repeat_penalty),
                ("max tokens", self.n_predict),
            )
        ):
            grid.addWidget(QLabel(label), i // 4, 2 * (i % 4))
            grid.addWidget(w, i // 4, 2 * (i % 4) + 1)
        grid.addWidget(QLabel("stop"), 1, 4)
        grid.addWidget(self.stop, 1, 5, 1, 3)
        self.stop.setMinimumWidth(80)
        bl.addLayout(grid)
        self.output = QTextBrowser()
        self.output.setOpenExternalLinks(False)
        bl.addWidget(self.output, 1)
        row = QHBoxLayout()
        self.prompt = QLineEdit("Write a haiku about GPUs.")
        self.prompt.setPlaceholderText("Type a message (Enter sends)")
        self.send_btn = QPushButton("Send")
        self.regen_btn = QPushButton("Regenerate")
        self.regen_btn.setToolTip("Ask again for the last reply")
        self.stop_btn = QPushButton("Stop")
        self.clear_btn = QPushButton("New chat")
        row.addWidget(self.prompt, 1)
        for b in (self.send_btn, self.regen_btn, self.stop_btn, self.clear_btn):
            row.addWidget(b)
        bl.addLayout(row)
        self.speed = ElidedLabel()
        self.speed.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bl.addWidget(self.speed)
        self.prompt.returnPressed.connect(self.send_btn.click)
        self.clear_btn.clicked.connect(self.clear)
        self.set_busy(False, ready=False)

    # ------------------------------------------------------------------ what is sent

    def params(self) -> ChatParams:
        def opt(spin, lo):
            return None if spin.value() < lo else round(spin.value(), 4)

        return ChatParams(
            max_tokens=self.n_predict.value(),
            temperature=opt(self.temperature, 0),
            top_p=opt(self.top_p, 0),
            top_k=None if self.top_k.value() < 0 else self.top_k.value(),
            min_p=opt(self.min_p, 0),
            repeat_penalty=opt(self.repeat_penalty, 0),
            stop=parse_stop(self.stop.text()),
        )

    def conversation(self) -> list[ChatMessage]:
        sys_text = self.system.text().strip()
        return ([ChatMessage("system", sys_text)] if sys_text else []) + list(self.messages)

    def add_user(self, text: str) -> None:
        self.messages.append(ChatMessage("user", text))
        self._render()

    def drop_last_reply(self) -> bool:
        """For Regenerate: forget the last assistant turn (its user turn stays)."""
        if self.messages and self.messages[-1].role == "assistant":
            self.messages.pop()
            self.replies.pop()
            self._render()
            return True
        return bool(self.messages) and self.messages[-1].role == "user"

    # ------------------------------------------------------------------ what is shown

    def begin_reply(self) -> None:
        self._streaming = ""
        self._render()

    def add_token(self, text: str) -> None:
        self._streaming += text
        self.output.moveCursor(QTextCursor.MoveOperation.End)
        self.output.insertPlainText(text)

    def end_reply(self, reply: ChatReply | None, error: str | None = None) -> None:
        if reply is not None:
            self.messages.append(ChatMessage("assistant", reply.text))
            self.replies.append(reply)
        self._streaming = ""
        self._render(error)

    def clear(self) -> None:
        self.messages.clear()
        self.replies.clear()
        self._render()
        self.speed.setText("")

    def _render(self, error: str | None = None) -> None:
        parts = []
        if self.system.text().strip():
            parts.append(f"<p style='color:gray'><i>system: {escape(self.system.text().strip())}</i></p>")
        replies = iter(self.replies)
        for m in self.messages:
            if m.role == "user":
                parts.append(f"<p><b>You</b><br>{escape(m.content).replace(chr(10), '<br>')}</p>")
            else:
                r = next(replies)
                t = r.timings
                how = " (measured by Layerdeck)" if r.measured_here else ""
                stop = f" · stopped: {r.finish_reason}" if r.finish_reason else ""
                parts.append(
                    f"<p><b>Model</b><br>{escape(m.content).replace(chr(10), '<br>')}<br>"
                    f"<span style='color:gray'>{t.predicted_per_second:.1f} tok/s{how} · "
                    f"{t.predicted_n} tokens · prompt {t.prompt_n} tokens at "
                    f"{t.prompt_per_second:.0f} tok/s{stop}</span></p>"
                )
        if error:
            parts.append(f"<p style='color:#D55E00'>{escape(error)}</p>")
        self.output.setHtml("".join(parts))
        if self._streaming is not None and self.messages and self.messages[-1].role == "user":
            self.output.moveCursor(QTextCursor.MoveOperation.End)
            self.output.insertHtml("<p><b>Model</b><br></p>")
            self.output.insertPlainText(self._streaming)
        self.output.moveCursor(QTextCursor.MoveOperation.End)

    def set_busy(self, busy: bool, ready: bool = True) -> None:
        self.send_btn.setEnabled(ready and not busy)
        self.regen_btn.setEnabled(ready and not busy and bool(self.messages))
        self.stop_btn.setEnabled(busy)
        self.prompt.setEnabled(True)
        if not busy:
            self.output.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
