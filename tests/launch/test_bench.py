"""llama-bench for a placement, end to end, and the per-model history."""

from __future__ import annotations

import json

import pytest

from app.launch.bench import BenchError, BenchHistory, BenchRun, bench_args, run_bench
from app.launch.diagnose import DiagnosisKind
from tests.launch.helpers import free_port


@pytest.mark.llama
def test_bench_one_rpc_device_and_history(llama_bin, rpc_servers, tiny_models, tmp_path):
    endpoint = rpc_servers(1)[0].endpoint
    model = tiny_models["qwen3moe"]
    server_cmd = ["llama-server", "-m", str(model), "--rpc", endpoint, "-ngl", "all", "-fa", "on", "-c", "512",
                  "-ot", r"blk\.0\.ffn_up_exps=CPU", "-ot", r"blk\.1\.ffn_up_exps=CPU"]
    args, notes = bench_args(server_cmd, n_prompt=32, n_gen=8, repetitions=1)
    assert any(n.startswith("-c 512") for n in notes)
    run = run_bench(args, llama_dir=llama_bin, label="1 RPC, two experts on CPU", timeout=120)
    assert run.pp_ts > 0 and run.tg_ts > 0
    assert [t.label for t in run.tests] == ["pp32", "tg8"]
    # both overrides reached one test (a ',' would have made two tests per size)
    assert run.info["tensor_buft_overrides"] == r"blk\.0\.ffn_up_exps=CPU;blk\.1\.ffn_up_exps=CPU"
    assert run.info["backends"] == "RPC"

    history = BenchHistory(tmp_path / "bench")
    path = history.add(run)
    assert path.parent == tmp_path / "bench" and json.loads(path.read_text())["version"] == 1
    second = BenchRun(run.model, run.args, run.tests[:1], run.time, "pp only")
    history.add(second)
    back = history.runs(model)
    assert [r.label for r in back] == ["1 RPC, two experts on CPU", "pp only"]
    assert back[0].tests == run.tests and back[0].pp_ts == run.pp_ts
    assert history.best(model, by="tg").label == "1 RPC, two experts on CPU"
    assert history.runs(tmp_path / "other.gguf") == []


@pytest.mark.llama
def test_bench_dead_rpc_host_fails_before_running(llama_bin, tiny_models):
    dead = f"127.0.0.1:{free_port()}"
    args, _ = bench_args(["-m", str(tiny_models["llama"]), "--rpc", dead], n_prompt=8, n_gen=0, repetitions=1)
    with pytest.raises(BenchError) as err:
        run_bench(args, llama_dir=llama_bin)
    assert err.value.diagnosis.kind == DiagnosisKind.RPC_UNREACHABLE and dead in str(err.value)


@pytest.mark.llama
def test_bench_bad_override_target_is_diagnosed(llama_bin, tiny_models):
    args, _ = bench_args(["-m", str(tiny_models["qwen3moe"]), "-ot", "exps=CUDA9"], n_prompt=8, n_gen=0,
                         repetitions=1)
    with pytest.raises(BenchError) as err:
        run_bench(args, llama_dir=llama_bin)
    assert err.value.diagnosis.kind == DiagnosisKind.UNKNOWN_BUFFER_TYPE
    assert "CPU" in err.value.diagnosis.facts["available"]


def test_history_rejects_a_damaged_file(tmp_path):
    history = BenchHistory(tmp_path)
    history.path_for("m.gguf").write_text("{not json")
    with pytest.raises(ValueError, match="damaged"):
        history.runs("m.gguf")
