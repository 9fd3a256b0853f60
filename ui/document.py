"""The open session as one Qt object the widgets subscribe to.

All state and every rule live in the GUI-free :class:`app.session.Session`;
this adapter only turns its events into Qt signals (and forwards reads and
edits to it), so widgets receive it in their constructor and listen to its
signals (no globals). A view that wants to know exactly what changed connects
to :attr:`Document.session_changed`, which carries the
:class:`~app.session.SessionEvent`.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.errors import LayerdeckError
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Model
from app.placement import Placement
from app.session import Change, Session, SessionEvent


class Document(QObject):
    session_changed = Signal(object)   # SessionEvent, for views that redraw only what changed
    changed = Signal()                 # placement, settings, devices or machine figures changed; estimate current
    preview_changed = Signal(object)   # Estimate of a hypothetical drop, or None when the preview ends
    message = Signal(str)              # a sentence for the status bar
    opinion_changed = Signal()         # llama.cpp's dry-run numbers arrived (or were cleared by an edit)

    _CHANGED = Change.PLACEMENT | Change.SETTINGS | Change.DEVICES | Change.ESTIMATE | Change.HISTORY | Change.MACHINE

    def __init__(self, model: Model, devices: list[Lane], placement: Placement | None = None,
                 settings: LlamaSettings | None = None, host_capacity: int | None = None, margin: int = 0,
                 parent=None):
        super().__init__(parent)
        self.session = Session(model, list(devices), placement, settings, host_capacity, margin=margin)
        self.session.subscribe(self._on_event)

    def __getattr__(self, name: str):
        # reads and edits go to the session (only called for names the QObject does not have)
        session = self.__dict__.get("session")
        if session is None:
            raise AttributeError(name)
        return getattr(session, name)

    def _on_event(self, ev: SessionEvent) -> None:
        self.session_changed.emit(ev)
        if ev.changes & Change.PREVIEW:
            pv = self.session.preview_state
            self.preview_changed.emit(pv.estimate if pv is not None else None)
        if ev.changes & Change.OPINION:
            self.opinion_changed.emit()
        if ev.changes & self._CHANGED:
            self.changed.emit()
        if ev.message is not None:
            self.message.emit(ev.message)

    # ------------------------------------------------------------------ edits that can be refused

    def set_settings(self, **changes) -> bool:
        """As :meth:`Session.set_settings`; settings llama.cpp refuses are not applied, the reason goes to the
        status bar and the views show the settings that stand."""
        try:
            return self.session.set_settings(**changes)
        except LayerdeckError as exc:
            self.message.emit(str(exc))
            self.changed.emit()
            return False

    # ------------------------------------------------------------------ what views read

    @property
    def preview_decode(self):
        pv = self.session.preview_state
        return pv.decode if pv is not None else None

    def preview(self, items: list[str], lane: str | None) -> str | None:
        """Show the gauges as if ``items`` were dropped on ``lane`` (None ends the preview); returns why a
        drop there is refused, or None."""
        pv = self.session.preview(items, lane)
        return pv.reason if pv is not None else None
