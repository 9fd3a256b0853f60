"""Parsers on real llama.cpp output captured by ``tests/launch/capture_samples.py`` (tests/data/launch/)."""

from __future__ import annotations

import json
import math
import re

import pytest

from app.launch.bench import bench_args, parse_bench_json
from app.launch.buffers import device_for_buffer_type, logged_buffers, rpc_names_from_log
from app.lanes import CPU
from app.launch.metrics import (Timings, counter_rates, generation_progress, parse_prometheus, parse_slots,
                                predicted_vs_actual, request_timings)
from app.command.parse import settings_from_args
from app.memory.estimator import estimate
from app.lanes import Lane
from app.model import open_model
from tests import gguf_factory
from tests.launch.helpers import DATA


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def endpoints_of(log: str) -> list[str]:
    return re.findall(r"using device RPC\d+ \((\S+)\)", log)


def test_metrics_text_parses_every_llamacpp_series():
    m = parse_prometheus(read("metrics-after.txt"))
    for name in ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
                 "tokens_predicted_seconds_total", "n_decode_total", "n_tokens_max", "prompt_tokens_seconds",
                 "predicted_tokens_seconds", "requests_processing", "requests_deferred", "n_busy_slots_per_decode"):
        assert name in m.values, name
    assert m.types["tokens_predicted_total"] == "counter"
    assert m.types["predicted_tokens_seconds"] == "gauge"
    assert m.tokens_predicted_total > 4000          # the long generation of the capture
    assert m.predicted_tokens_per_second > 0
    assert m.requests_processing == 0


def test_counter_rates_between_two_real_scrapes():
    before, after = parse_prometheus(read("metrics.txt")), parse_prometheus(read("metrics-after.txt"))
    rates = counter_rates(before, after)
    assert rates["generation"] > 0
    assert rates["prompt"] >= 0


def test_slots_before_and_after_a_task():
    idle = parse_slots(json.loads(read("slots-idle.json")))
    assert idle.total == 1 and idle.busy == 0
    assert idle.slots[0].id_task is None and idle.context_used == 0
    after = parse_slots(json.loads(read("slots-after.json")))
    slot = after.slots[0]
    assert slot.id_task is not None
    assert slot.n_ctx == 4096
    assert slot.context_used == slot.n_prompt_tokens > 4000   # prompt + the generated tokens
    assert 0 < slot.context_fraction <= 1
    assert slot.n_remain == -1


def test_completion_timings():
    t = Timings.from_json(json.loads(read("completion.json"))["timings"])
    assert t.prompt_n > 0 and t.predicted_n == 8
    assert t.prompt_per_second > 0 and t.predicted_per_second > 0


def test_print_timing_and_generation_progress_lines():
    log = read("server-2rpc-lv4.log")
    timings = request_timings(log)
    assert len(timings) == 3
    first = timings[0]
    assert first.prompt_tokens == 12 and first.eval_tokens == 8
    assert first.prompt_per_second > 0 and first.eval_per_second > 0
    long = timings[-1]
    assert long.eval_tokens > 4000 and long.eval_ms > 1000
    progress = generation_progress(log)
    assert progress, "the capture generated long enough for n_gen/tg lines"
    assert progress[0].n_gen >= 100 and progress[0].tg > 0 and progress[0].tg_3s > 0
    assert [p.task for p in progress] == [long.task] * len(progress)


def test_buffer_lines_map_to_devices():
    log = read("server-2rpc-lv4.log")
    eps = endpoints_of(log)
    assert rpc_names_from_log(log) == {(eps[0], 0): "RPC0", (eps[1], 0): "RPC1"}
    per_device = logged_buffers(log)
    assert set(per_device) == {"RPC0", "RPC1", CPU}
    assert per_device["RPC0"].buffer_types == (f"RPC0[{eps[0]}]",)   # the server-local index is 0 on both
    assert per_device["RPC1"].buffer_types == (f"RPC0[{eps[1]}]",)
    assert per_device["RPC0"].model == pytest.approx(0.36)
    assert per_device["RPC1"].kv == pytest.approx(2.0)
    assert per_device["RPC0"].compute > 30
    assert set(per_device[CPU].buffer_types) == {"CPU_Mapped", "CPU"}


def test_buffer_type_names():
    names = {("10.0.0.2:50052", 0): "RPC3", ("10.0.0.2:50052", 1): "RPC4"}
    assert device_for_buffer_type("RPC1[10.0.0.2:50052]", names) == "RPC4"
    assert device_for_buffer_type("CUDA_Host") == CPU
    assert device_for_buffer_type("CPU_REPACK") == CPU
    assert device_for_buffer_type("CUDA1") == "CUDA1"
    assert device_for_buffer_type("RPC0[h:1]") == "RPC[h:1]"   # unknown without names: still per endpoint


def test_predicted_vs_actual_on_the_captured_load(tmp_path):
    log = read("server-2rpc-lv4.log")
    eps = endpoints_of(log)
    model = open_model(gguf_factory.write_tiny_model("qwen3moe", tmp_path / "qwen3moe.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC0[{ep}]", 24105 << 20, 24105 << 20, "rpc") for i, ep in enumerate(eps)]
    settings = settings_from_args(["--rpc", ",".join(eps), "-ngl", "all", "-ts", "1,1", "-c", "8192", "-np", "1"])
    rows = predicted_vs_actual(estimate(model, devices, settings), logged_buffers(log),
                               measured={CPU: 123.0})
    by = {(r.device, r.quantity): r for r in rows}
    assert by[("RPC0", "compute")].logged_mib == pytest.approx(33.79)
    assert not any(r.flagged for r in rows), [r for r in rows if r.flagged]
    assert by[(CPU, "total")].measured_mib == 123.0
    # a prediction 10 % off is flagged
    est = estimate(model, devices, settings)
    est.device("RPC0").compute = int(est.device("RPC0").compute * 1.10)
    flagged = [r for r in predicted_vs_actual(est, logged_buffers(log)) if r.flagged]
    assert {(r.device, r.quantity) for r in flagged} == {("RPC0", "compute"), ("RPC0", "total")}
    assert all(not math.isnan(r.difference_pct) for r in flagged)
    # the difference is in percent: a prediction 10 % high reads about -9.1 %, not -909 %
    assert next(r for r in flagged if r.quantity == "compute").difference_pct == pytest.approx(-100 / 11, abs=0.2)


def test_bench_json():
    tests, info = parse_bench_json(read("bench.json"))
    assert [t.kind for t in tests] == ["pp", "tg"]
    assert tests[0].n_prompt == 32 and tests[1].n_gen == 8
    assert all(t.avg_ts > 0 for t in tests)
    assert info["backends"] == "RPC"


def test_bench_args_translate_a_server_command():
    server = ["llama-server", "-m", "m.gguf", "--rpc", "a:1,b:2", "-dev", "RPC0,RPC1", "-ngl", "all", "-ts", "3,1",
              "-ot", r"blk\.1\.ffn_up_exps=CPU", "-ot", r"blk\.2\.ffn_up_exps=CPU,blk\.3\.ffn_up_exps=CPU", "-cmoe",
              "-fa", "on", "-ctk", "q8_0", "-ub", "256", "-nkvo", "--no-repack", "-c", "4096", "-np", "2",
              "--host", "127.0.0.1", "--port", "8080", "--metrics", "-lv", "4"]
    args, notes = bench_args(server, n_prompt=32, n_gen=8, repetitions=1)
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs["-m"] == "m.gguf" and pairs["--rpc"] == "a:1,b:2"
    assert pairs["-dev"] == "RPC0/RPC1" and pairs["-ts"] == "3/1" and pairs["-ngl"] == "-1"
    assert pairs["-ot"] == (r"blk\.1\.ffn_up_exps=CPU;blk\.2\.ffn_up_exps=CPU;blk\.3\.ffn_up_exps=CPU;"
                            r"\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU")
    assert pairs["-fa"] == "on" and pairs["-ctk"] == "q8_0" and pairs["-ub"] == "256"
    assert pairs["-nkvo"] == "1" and pairs["--repack"] == "0"
    assert pairs["-p"] == "32" and pairs["-n"] == "8" and pairs["-r"] == "1" and pairs["-o"] == "json"
    assert "-c" not in args and "--host" not in args and "--metrics" not in args
    assert any("-c 4096" in n for n in notes) and any("--metrics" in n for n in notes)


def test_a_draft_models_buffers_are_told_apart_from_the_models():
    """With -md, llama-server logs the draft's buffers after 'loading draft model': they are the draft's, compared
    with each device's draft share, and the model's own rows stay the model's (the lines of a real -lv 4 log)."""
    from app.launch.buffers import logged_buffers
    from app.launch.metrics import predicted_vs_actual
    from app.memory.estimator import DeviceMemory

    log = "\n".join([
        "0.00.008.226 I load_tensors:   CPU_Mapped model buffer size =     0.24 MiB",
        "0.00.008.478 I llama_context:        CPU  output buffer size =     0.00 MiB",
        "0.00.008.751 I llama_kv_cache:        CPU KV buffer size =     2.00 MiB",
        "0.00.011.135 I sched_reserve:        CPU compute buffer size =     6.01 MiB",
        "0.00.012.089 I common_speculative_init_result: loading draft model 'draft.gguf'",
        "0.00.012.911 I load_tensors:   CPU_Mapped model buffer size =     0.05 MiB",
        "0.00.013.130 I llama_kv_cache:        CPU KV buffer size =     0.50 MiB",
        "0.00.014.816 I sched_reserve:        CPU compute buffer size =     4.51 MiB",
    ])
    main, draft = logged_buffers(log), logged_buffers(log, part="draft")
    assert (main["CPU"].kv, main["CPU"].compute) == (2.0, 6.01)
    assert (draft["CPU"].kv, draft["CPU"].compute) == (0.5, 4.51)
    assert logged_buffers(log.split("\n0.00.012.089")[0], part="draft") == {}  # no draft: nothing

    MiB = 1 << 20

    class Est:
        devices = [DeviceMemory("CPU", model=int(0.24 * MiB), kv=2 * MiB, compute=int(6.01 * MiB),
                                draft=int(5.06 * MiB))]

        def device(self, name):
            return self.devices[0]

    rows = {r.quantity: r for r in predicted_vs_actual(Est(), main, draft_logged=draft)}
    assert not rows["total"].flagged and not rows["draft"].flagged
    assert abs(rows["draft"].logged_mib - 5.06) < 1e-9
