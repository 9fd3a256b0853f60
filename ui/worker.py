"""Run a function off the GUI thread and get its result (or error) back on the GUI thread.

Every Python object of a job (the function, whatever its closure holds — often a window —, the result, the
error and its traceback) is owned by the GUI thread from start to finish: the pool thread borrows them and
hands back only an integer. A pool thread that dropped the last reference to a window (a job that outlived
the window's Python wrapper, as the fuzzed crash recovery does with many windows in quick succession,
tests/fuzz/test_fuzz_plans.py) would destroy Qt widgets off the GUI thread and crash the process.
"""

from __future__ import annotations

import itertools
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QThreadPool, Signal

log = logging.getLogger(__name__)


class _Relay(QObject):
    """One long-lived object on the GUI thread: its queued signals carry a job's key, never its objects."""

    finished = Signal(int)
    progress = Signal(int, int, int)


@dataclass
class _Job:
    fn: Callable
    on_done: Callable[[object], None]
    on_error: Callable[[Exception], None]
    on_progress: Callable[[int, int], None] | None
    outcome: list = field(default_factory=list)  # [ok, value], set by the pool thread under _lock


_lock = threading.Lock()
_jobs: dict[int, _Job] = {}  # owned by the GUI thread; the pool thread only reads an entry and sets its outcome
_keys = itertools.count(1)
_relay: _Relay | None = None


def _finished(key: int) -> None:
    with _lock:
        job = _jobs.pop(key, None)
    if job is None or not job.outcome:
        return
    ok, value = job.outcome
    (job.on_done if ok else job.on_error)(value)


def _progress(key: int, done: int, total: int) -> None:
    with _lock:
        job = _jobs.get(key)
    if job is not None and job.on_progress is not None:
        job.on_progress(done, total)


def _the_relay() -> _Relay:
    global _relay
    if _relay is None:  # created by the first job, on the GUI thread, and kept for the process's life
        _relay = _Relay()
        _relay.finished.connect(_finished)
        _relay.progress.connect(_progress)
    return _relay


def run_in_background(fn: Callable, on_done: Callable[[object], None], on_error: Callable[[Exception], None],
                      on_progress: Callable[[int, int], None] | None = None) -> None:
    """``fn()`` (or ``fn(progress)`` when ``on_progress`` is given) in the global thread pool; ``on_done`` or
    ``on_error`` is called on the GUI thread with its result or exception."""
    relay = _the_relay()
    key = next(_keys)
    with _lock:
        _jobs[key] = _Job(fn, on_done, on_error, on_progress)

    def run() -> None:  # pool thread: never touch widgets here, and drop every borrowed reference before returning
        with _lock:
            job = _jobs[key]
        call, with_progress, outcome = job.fn, job.on_progress is not None, job.outcome
        del job
        try:
            result = call(lambda done, total: relay.progress.emit(key, done, total)) if with_progress else call()
            got = [True, result]
            del result
        except Exception as exc:  # noqa: BLE001 - handed to the GUI thread, which shows it
            log.debug("background job failed:\n%s", traceback.format_exc())
            got = [False, exc]
        del call
        with _lock:
            outcome[:] = got  # the entry holds it now: the GUI thread lets go of it
        del got, outcome
        relay.finished.emit(key)

    QThreadPool.globalInstance().start(run)


def pending() -> int:
    """Jobs whose answer the GUI thread has not taken yet (tests)."""
    with _lock:
        return len(_jobs)
