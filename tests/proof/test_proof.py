"""The proof pipeline end to end on the CPU with RPC devices: llama-bench on alternatives, calibration fit."""

from __future__ import annotations

import pytest

from app.launch.bench import BenchHistory
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.placement.autofit import auto_fit
from app.placement.presets import all_on_gpus, experts_to_cpu, n_cpu_moe
from app.speed.params import load_calibration, save_calibration, speed_params
from app.proof import run_proof
from tests.memory.accuracy import list_rpc_devices

pytestmark = pytest.mark.llama


def test_bench_alternatives_and_calibrate(tiny_models, rpc_servers, llama_bin, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    servers = rpc_servers(2)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    model = open_model(tiny_models["qwen3moe"])
    s = LlamaSettings(n_ctx=512, n_parallel=1)
    candidates = [("all on RPC", all_on_gpus(model, devices, s)), ("experts to CPU", experts_to_cpu(model, devices, s)),
                  ("--n-cpu-moe 2", n_cpu_moe(model, devices, s, 2)),
                  ("auto-fit", auto_fit(model, devices, s, margin=0).placement)]
    params = speed_params(devices, 10e9)
    history = BenchHistory(tmp_path / "bench")
    seen = []
    res = run_proof(model, tiny_models["qwen3moe"], devices, candidates, params, rpc=endpoints, llama_dir=llama_bin,
                    n_prompt=32, n_gen=8, repetitions=1, history=history,
                    progress=lambda i, n, label: seen.append(label))
    assert seen[-1] == "done" and len(seen) == 5
    for row in res.rows:
        assert row.error is None, row.error
        assert row.measured_tg > 0 and row.measured_pp > 0 and row.predicted_tg > 0
    assert len(history.runs(tiny_models["qwen3moe"])) == 4
    rep = res.calibration
    assert rep is not None and {r[1] for r in rep.rows} == {"tg", "pp"}
    # the fitted model is closer to the measurements than the uncalibrated one
    before = [abs(r.predicted_tg - r.measured_tg) / r.measured_tg for r in res.rows]
    after = [abs(p - m) / m for _, kind, p, m in rep.rows if kind == "tg"]
    assert sum(after) < sum(before)
    path = save_calibration(devices, rep.fitted)
    assert path.is_file() and load_calibration(devices) == rep.fitted
