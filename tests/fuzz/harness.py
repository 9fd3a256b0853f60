"""What every fuzzer door shares: a watchdog that ends a hang, and the time and memory budget of one input."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import tracemalloc

import psutil

from tests.fuzz.conftest import MEMORY_BUDGET_BYTES, TIME_BUDGET_S


class Hang(Exception):
    """An input ran past the watchdog (twice the time budget)."""


@contextlib.contextmanager
def watchdog(seconds: float):
    """Raise :class:`Hang` in the main thread after ``seconds`` (POSIX); a no-op elsewhere."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _quiet_qt_pool() -> None:
    """Wait for Qt's global thread pool to finish its jobs (when Qt is loaded): a pool thread entering Python
    creates its thread state, and CPython 3.11's tracemalloc crashes a thread that does so while it traces
    (``traceback_new`` under ``PyGILState_Ensure``: a SIGSEGV in CI, after a GUI test's window jobs)."""
    qtcore = sys.modules.get("PySide6.QtCore")
    if qtcore is not None:
        qtcore.QThreadPool.globalInstance().waitForDone()


@contextlib.contextmanager
def _rss_peak():
    """The growth of the process's resident memory over the block, sampled every 5 ms by a Python thread."""
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.005):
            peak[0] = max(peak[0], proc.memory_info().rss)

    t = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    t.start()
    out = [0]
    try:
        yield out
    finally:
        stop.set()
        t.join()
        out[0] = max(peak[0], proc.memory_info().rss) - base


@contextlib.contextmanager
def within_budget(what: str, *, native_threads: bool = False):
    """Fail if the block takes longer than TIME_BUDGET_S (the watchdog interrupts a hang at twice that) or
    allocates more than MEMORY_BUDGET_BYTES. ``native_threads``: threads Python did not start (Qt's pool, a
    window's background jobs) may enter Python during the block, where tracemalloc would crash them
    (:func:`_quiet_qt_pool`): the memory is the growth of the resident set instead."""
    _quiet_qt_pool()
    if native_threads:
        t0 = time.perf_counter()
        with _rss_peak() as grew, watchdog(2 * TIME_BUDGET_S):
            yield
        elapsed, peak = time.perf_counter() - t0, grew[0]
    else:
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            with watchdog(2 * TIME_BUDGET_S):
                yield
        finally:
            elapsed = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert elapsed < TIME_BUDGET_S, f"{what}: {elapsed:.2f} s"
    assert peak < MEMORY_BUDGET_BYTES, f"{what}: {peak >> 20} MiB"
