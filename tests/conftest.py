"""Test-wide setup: offscreen Qt, settings in a temporary folder, llama.cpp fixtures."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = ["tests.llama_fixtures"]


import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _qt_pool_drained():
    """After each test, wait for the background jobs its windows started on Qt's global thread pool: a job still
    running into a later test that traces memory (tracemalloc) would enter Python there, and CPython 3.11's
    tracemalloc crashes a thread creating its thread state while it traces (a SIGSEGV in CI;
    tests/fuzz/harness.py)."""
    yield
    qtcore = sys.modules.get("PySide6.QtCore")
    if qtcore is not None and not qtcore.QThreadPool.globalInstance().waitForDone(120_000):
        # a job that never ends (a test's bug): say so rather than hang the suite
        print("\nQt's thread pool still busy 120 s after the test", file=sys.stderr)


@pytest.fixture
def collector_state(monkeypatch):
    """The garbage collector as at start-up for app.gcpolicy (nothing frozen, the first settle walks everything),
    and put back after the test whatever it asserted: thresholds restored, nothing left frozen."""
    import gc

    from app import gcpolicy

    threshold = gc.get_threshold()
    gc.unfreeze()
    monkeypatch.setattr(gcpolicy, "_after_full", 0)
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()
