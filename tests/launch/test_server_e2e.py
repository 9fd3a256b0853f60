"""A real llama-server across two RPC devices and the CPU: launch, stream, scrape, monitor, stop, kill."""

from __future__ import annotations

import os
import signal

import pytest

from app.devices.telemetry import TelemetrySampler
from app.lanes import CPU
from app.launch.diagnose import DiagnosisKind
from app.launch.metrics import predicted_vs_actual, request_timings
from app.launch.monitor import Monitor
from app.launch.process import ServerProcess, State
from app.command.parse import settings_from_args
from app.memory.estimator import estimate
from app.lanes import Lane
from app.model import open_model
from tests.launch.helpers import wait_gone

pytestmark = pytest.mark.llama


def test_two_rpc_devices_and_cpu_end_to_end(llama_bin, rpc_servers, tiny_models):
    rpcs = rpc_servers(2)
    model = tiny_models["qwen3moe"]
    endpoints = [r.endpoint for r in rpcs]
    placement = ["--rpc", ",".join(endpoints), "-ngl", "all", "-ts", "1,1", "-c", "1024", "-np", "1"]
    sp = ServerProcess(["llama-server", "-m", str(model), *placement], llama_dir=llama_bin)
    states, lines = [], []
    sp.add_state_listener(states.append)
    sp.add_log_listener(lines.append)

    devices = [Lane(f"RPC{i}", f"RPC0[{ep}]", 24105 << 20, 24105 << 20, "rpc") for i, ep in enumerate(endpoints)]
    est = estimate(open_model(model), devices, settings_from_args(placement))
    sampler = TelemetrySampler(nvml=False, amd=False)
    monitor = Monitor(sp, sampler, est, capacity=8)

    sp.start()
    pid = sp.pid
    try:
        assert sp.wait_ready(60) == State.READY, sp.log.text()[-3000:]
        assert sp.openai_base_url == f"http://127.0.0.1:{sp.port}/v1"
        client = sp.client(timeout=30)
        assert client.health().ok
        assert client.props()["model_path"] == str(model)

        pieces: list[str] = []
        done = client.stream_completion("Hello there", n_predict=16, on_token=pieces.append, seed=1)
        assert done.text and done.text == "".join(pieces)
        assert done.tokens_predicted == done.timings.predicted_n > 0
        assert done.timings.predicted_per_second > 0 and done.timings.prompt_n > 0

        # the monitor is the only /metrics scraper
        monitor.tick()
        sample = monitor.tick()
        assert sample.metrics is not None and sample.metrics.tokens_predicted_total >= done.tokens_predicted
        assert sample.slots.total == 1 and sample.busy_slots == 0
        assert sample.context_used == sample.slots.slots[0].n_prompt_tokens > 0
        assert sample.host_rss_mib > 0 and not sample.errors
        series = monitor.series()
        assert len(series["time"]) == 2 and series["host_rss_mib"][-1] > 0
        assert all(len(v) == 2 for v in series.values())
        assert series["host_cpu_percent"][-1] >= 0
        assert monitor.predicted_mib()["RPC0"] > 0 and monitor.allocated_mib()["RPC1"] > 0

        # buffer sizes per device from the -lv 4 load log
        assert set(sp.buffers) == {"RPC0", "RPC1", CPU}
        for name in ("RPC0", "RPC1"):
            assert sp.buffers[name].model > 0 and sp.buffers[name].kv > 0 and sp.buffers[name].compute > 0
        rows = predicted_vs_actual(est, sp.buffers)
        assert {r.device for r in rows} == {"RPC0", "RPC1", CPU}
        assert not [r for r in rows if r.flagged and r.quantity in ("model", "context")]

        timings = request_timings(ln.text for ln in sp.run_lines())
        assert timings and timings[-1].eval_tokens == done.timings.predicted_n
        assert any(ln.level == "I" and "model buffer size" in ln.text for ln in lines)
    finally:
        state = sp.stop(timeout=10)
        sampler.close()
    assert state == State.STOPPED and sp.diagnosis is None
    assert states[0] == State.STARTING and State.READY in states and states[-2:] == [State.STOPPING, State.STOPPED]
    assert sp.signals_sent == (signal.SIGTERM,)
    assert wait_gone(pid, 5)


def test_killed_from_outside(llama_bin, tiny_models):
    # --port 0: the port is learnt from the "listening on" line
    sp = ServerProcess(["llama-server", "-m", str(tiny_models["llama"]), "-c", "256", "-np", "1", "--port", "0"],
                       llama_dir=llama_bin)
    sp.start()
    try:
        assert sp.wait_ready(60) == State.READY, sp.log.text()[-3000:]
        assert sp.port and sp.client().health().ok
        os.kill(sp.pid, signal.SIGKILL)
        assert sp.wait_stopped(10) == State.FAILED
    finally:
        sp.stop()
    assert sp.diagnosis.kind == DiagnosisKind.KILLED
    assert sp.diagnosis.facts["signal"] == "SIGKILL"
    assert sp.signals_sent == ()


def test_restart_with_another_command(llama_bin, tiny_models):
    base = ["llama-server", "-m", str(tiny_models["llama"]), "-np", "1"]
    sp = ServerProcess([*base, "-c", "256"], llama_dir=llama_bin)
    sp.start()
    try:
        assert sp.wait_ready(60) == State.READY
        first = sp.pid
        sp.restart([*base, "-c", "512"])
        assert sp.wait_ready(60) == State.READY, sp.log.text()[-3000:]
        assert sp.pid != first and wait_gone(first, 5)
        assert sp.client().slots().slots[0].n_ctx == 512
    finally:
        assert sp.stop() == State.STOPPED
