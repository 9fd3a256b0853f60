"""ui.worker: a background job's Python objects are let go on the GUI thread, never on a pool thread (a window a
job's closure kept alive was freed off the GUI thread and crashed the process: the GUI crash-recovery fuzz)."""

from __future__ import annotations

import threading
import weakref

import pytest

from ui import worker

pytestmark = pytest.mark.gui


class _Held:
    """Stands in for a window a job's closure holds: records the thread that frees it."""

    def __init__(self, freed: list[str]) -> None:
        weakref.finalize(self, lambda: freed.append(threading.current_thread().name))


def test_a_finished_jobs_closure_result_and_error_are_freed_on_the_gui_thread(qtbot):
    freed: list[str] = []
    got: list[object] = []

    def job_ok(held=_Held(freed)):
        return _Held(freed)  # the result too

    def job_fails(held=_Held(freed)):
        local = _Held(freed)  # the error's traceback holds this frame, and with it `local`
        raise RuntimeError(f"boom {local}")

    worker.run_in_background(job_ok, lambda r: got.append(type(r).__name__), got.append)
    worker.run_in_background(job_fails, got.append, lambda e: got.append(str(e)))
    del job_ok, job_fails
    qtbot.waitUntil(lambda: len(got) == 2 and worker.pending() == 0, timeout=10_000)
    got.clear()
    qtbot.waitUntil(lambda: len(freed) == 4, timeout=10_000)
    assert set(freed) == {threading.main_thread().name}, freed


def test_progress_reaches_the_gui_thread_in_order(qtbot):
    seen: list[tuple[int, int, str]] = []
    done: list[object] = []

    def job(progress):
        for i in range(5):
            progress(i, 4)
        return "ok"

    worker.run_in_background(job, done.append, done.append,
                             lambda a, b: seen.append((a, b, threading.current_thread().name)))
    qtbot.waitUntil(lambda: done == ["ok"], timeout=10_000)
    assert [(a, b) for a, b, _ in seen] == [(i, 4) for i in range(5)]
    assert {t for _, _, t in seen} == {threading.main_thread().name}
