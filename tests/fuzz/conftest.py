"""Shared set-up of the fuzzers: seeded, bounded, the same examples on every run.

Each input door (GGUF files, plan files, llama.cpp arguments and pasted commands, RPC endpoints) has a
fuzzer module here. In the normal suite every fuzzer runs a small fixed number of examples
(profile ``ci``, derandomized, so CI is repeatable); ``LAYERDECK_FUZZ_PROFILE=long pytest -m fuzz``
runs them much longer. Every input must end in a result or a typed error (``app.errors.LayerdeckError``)
within :data:`TIME_BUDGET_S` seconds; a failing example found once is kept under ``regressions/`` and
replayed by the module that owns it.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

#: wall time one input may take through a door (parse, estimate, export...)
TIME_BUDGET_S = 5.0
#: peak memory (tracemalloc) one input may allocate through a door
MEMORY_BUDGET_BYTES = 256 << 20

settings.register_profile(
    "ci", max_examples=60, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture])
settings.register_profile(
    "long", max_examples=3000, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("LAYERDECK_FUZZ_PROFILE", "ci"))


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/fuzz/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.fuzz)
