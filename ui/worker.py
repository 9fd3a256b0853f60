"""Run a function off the GUI thread and get its result (or error) back on the GUI thread."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

log = logging.getLogger(__name__)


class _Signals(QObject):
    done = Signal(object)
    failed = Signal(object)
    progress = Signal(int, int)


class _Job(QRunnable):
    def __init__(self, fn: Callable, signals: _Signals, with_progress: bool):
        super().__init__()
        self.fn, self.signals, self.with_progress = fn, signals, with_progress

    def run(self) -> None:  # background thread: never touch widgets here
        try:
            if self.with_progress:
                result = self.fn(lambda done, total: self.signals.progress.emit(done, total))
            else:
                result = self.fn()
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread, which shows it
            log.debug("background job failed:\n%s", traceback.format_exc())
            self.signals.failed.emit(exc)
            return
        self.signals.done.emit(result)


_alive: set[_Signals] = set()


def run_in_background(fn: Callable, on_done: Callable[[object], None], on_error: Callable[[Exception], None],
                      on_progress: Callable[[int, int], None] | None = None) -> None:
    """``fn()`` (or ``fn(progress)`` when ``on_progress`` is given) in the global thread pool."""
    signals = _Signals()
    _alive.add(signals)

    def finish(cb, value) -> None:
        _alive.discard(signals)
        cb(value)

    signals.done.connect(lambda r: finish(on_done, r))
    signals.failed.connect(lambda e: finish(on_error, e))
    if on_progress is not None:
        signals.progress.connect(on_progress)
    QThreadPool.globalInstance().start(_Job(fn, signals, on_progress is not None))
