"""The speed model against the measured data set (benchmarks/speed_data), out of sample.

The data set holds real llama-bench runs of the pinned llama.cpp on this project's 2-core machine; the
bench's cross-validation (calibrate on half of the models, predict the other half) must stay within the
issue's goal. This guards the model: a change that breaks a term shows up here as a larger error.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "benchmarks" / "speed_data"))
    import collect

    collect.MODEL_DIR = tmp_path_factory.mktemp("speed-models")  # sparse files: a second each, no disk
    import bench_speed_truth

    doc = json.loads(collect.DEFAULT_OUT.read_text())
    return doc, bench_speed_truth.evaluate(doc)


def test_the_data_set_is_real_measurements_with_their_spread(evaluation):
    doc, ev = evaluation
    runs = doc["runs"]
    assert len({r["model"] for r in runs}) >= 10 and len(ev.rows) >= 30
    assert doc["llama_cpp"] and doc["machine"]["host_bandwidth_gb_s"] > 0
    for r in runs:
        for res in r["results"]:
            if r["tool"] == "llama-bench":
                assert len(res["samples_ts"]) == 3, (r["case"], r["model"])  # every figure repeated
    # several thread counts, depths, micro-batches and RPC placements are in it
    cases = {r["case"] for r in runs}
    assert {"base", "threads", "depth", "ubatch"} <= cases and any(c.startswith("rpc") for c in cases)


@pytest.mark.parametrize("kind", ["tg", "pp"])
def test_out_of_sample_error_meets_the_goal(evaluation, kind):
    _, ev = evaluation
    after = ev.errors(kind, "after")
    assert len(after) >= 15
    assert statistics.median(after) <= 0.15, sorted(after)
    # calibration must help: out of sample beats the uncalibrated defaults
    assert statistics.median(after) < statistics.median(ev.errors(kind, "before"))


def test_every_figure_is_predicted_out_of_sample(evaluation):
    _, ev = evaluation
    assert set(ev.after) == {id(r) for r in ev.rows}
    assert all(v > 0 for v in ev.after.values())
