"""What every fuzzer door shares: a watchdog that ends a hang, and the time and memory budget of one input."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import tracemalloc

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


@contextlib.contextmanager
def within_budget(what: str):
    """Fail if the block takes longer than TIME_BUDGET_S (the watchdog interrupts a hang at twice that) or
    allocates more than MEMORY_BUDGET_BYTES."""
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
