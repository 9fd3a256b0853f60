"""Run a function off the GUI thread and get its result (or error) back on the GUI thread."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, QThreadPool, Signal

log = logging.getLogger(__name__)


class _Signals(QObject):
    done = Signal(object)
    failed = Signal(object)
    progress = Signal(int, int)


_alive: set[_Signals] = set()


def run_in_background(fn: Callable, on_done: Callable[[object], None], on_error: Callable[[Exception], None],
                      on_progress: Callable[[int, int], None] | None = None) -> None:
    """``fn()`` (or ``fn(progress)`` when ``on_progress`` is given) in the global thread pool."""
    signals = _Signals()
    _alive.add(signals)
    with_progress = on_progress is not None

    def run() -> None:  # background thread: never touch widgets here
        try:
            try:
                result = fn(lambda done, total: signals.progress.emit(done, total)) if with_progress else fn()
            except Exception as exc:  # noqa: BLE001 - handed to the GUI thread, which shows it
                log.debug("background job failed:\n%s", traceback.format_exc())
                signals.failed.emit(exc)
                return
            signals.done.emit(result)
        except RuntimeError as exc:  # the receiving side was deleted (its window closed): nobody is waiting
            log.debug("background job's answer dropped: %s", exc)

    def finish(cb, value) -> None:
        _alive.discard(signals)
        cb(value)

    signals.done.connect(lambda r: finish(on_done, r))
    signals.failed.connect(lambda e: finish(on_error, e))
    if on_progress is not None:
        signals.progress.connect(on_progress)
    # a plain callable, not a Python QRunnable subclass: the pool deleting such a runnable on its own thread
    # freed the Python wrapper there and crashed the process when many windows started jobs in quick
    # succession (tests/fuzz/test_fuzz_plans.py, the GUI restore)
    QThreadPool.globalInstance().start(run)
