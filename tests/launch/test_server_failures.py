"""Each failure provoked for real with llama-server, and the diagnosis it gets."""

from __future__ import annotations

import socket
import time

import pytest

from app.launch.diagnose import DiagnosisKind
from app.launch.process import RpcUnreachable, ServerProcess, State
from tests import gguf_factory
from tests.launch.helpers import (free_port, memory_limited_rpc_server, truncated_copy, wait_gone,
                                  write_unknown_arch_model)

pytestmark = pytest.mark.llama


def run_to_failure(llama_bin, *args: str, timeout: float = 60, **kwargs) -> ServerProcess:
    sp = ServerProcess(["llama-server", *args], llama_dir=llama_bin, **kwargs)
    sp.start()
    try:
        state = sp.wait_stopped(timeout)
    finally:
        sp.stop()
    assert state == State.FAILED, sp.log.text()[-3000:]
    assert not sp.running and wait_gone(sp.pid, 5)
    return sp


def test_removed_flag(llama_bin, tiny_models):
    sp = run_to_failure(llama_bin, "-m", str(tiny_models["llama"]), "--no-mmap")
    d = sp.diagnosis
    assert d.kind == DiagnosisKind.INVALID_ARGUMENT and d.facts["replacement"] == "--load-mode none"
    assert sp.returncode == 1


def test_port_already_in_use(llama_bin, tiny_models):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        sp = run_to_failure(llama_bin, "-m", str(tiny_models["llama"]), "--port", str(port))
    assert sp.diagnosis.kind == DiagnosisKind.PORT_IN_USE and sp.diagnosis.facts["port"] == port


def test_free_port_taken_before_llama_server_binds_is_retried(llama_bin, tiny_models, monkeypatch):
    import app.launch.process as process

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picks = iter([taken])
        real = process.free_port
        monkeypatch.setattr(process, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host))
        sp = ServerProcess(["llama-server", "-m", str(tiny_models["llama"]), "-c", "256", "-np", "1"],
                           llama_dir=llama_bin)
        sp.start()
        try:
            assert sp.wait_ready(60) == State.READY, sp.log.text()[-3000:]
            assert sp.port != taken and sp.client().health().ok
            assert any(f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {taken}" in ln.text
                       for ln in sp.log.lines())
        finally:
            assert sp.stop() == State.STOPPED


def test_dead_rpc_endpoint_fails_before_launch(llama_bin, tiny_models, rpc_servers):
    alive = rpc_servers(1)[0].endpoint
    dead = f"127.0.0.1:{free_port()}"
    sp = ServerProcess(["llama-server", "-m", str(tiny_models["llama"]), "--rpc", f"{alive},{dead}", "-ngl", "all"],
                       llama_dir=llama_bin)
    states = []
    sp.add_state_listener(states.append)
    t = time.monotonic()
    with pytest.raises(RpcUnreachable) as err:
        sp.start()
    assert time.monotonic() - t < 3
    assert [ep for ep, _ in err.value.problems] == [dead]          # one message per failing host only
    assert "connection refused" in err.value.problems[0][1]
    assert f"RPC host {dead}: connection refused" in str(err.value)
    assert sp.pid is None and states == [State.FAILED]
    assert sp.diagnosis.kind == DiagnosisKind.RPC_UNREACHABLE and sp.diagnosis.facts["hosts"] == (dead,)


def test_dead_rpc_endpoint_without_the_check_uses_llama_cpp_abort(llama_bin, tiny_models):
    dead = f"127.0.0.1:{free_port()}"
    sp = run_to_failure(llama_bin, "-m", str(tiny_models["llama"]), "--rpc", dead, check_rpc=False)
    assert sp.diagnosis.kind == DiagnosisKind.RPC_UNREACHABLE and sp.diagnosis.facts["endpoint"] == dead


def test_truncated_model_file(llama_bin, tiny_models, tmp_path):
    half = truncated_copy(tiny_models["llama"], tmp_path / "cut-in-half.gguf")
    sp = run_to_failure(llama_bin, "-m", str(half))
    d = sp.diagnosis
    assert d.kind == DiagnosisKind.MODEL_CORRUPT and d.facts["path"] == str(half) and str(half) in d.title


def test_missing_model_file(llama_bin, tmp_path):
    sp = run_to_failure(llama_bin, "-m", str(tmp_path / "nowhere.gguf"))
    assert sp.diagnosis.kind == DiagnosisKind.MODEL_MISSING


def test_impossible_override_target(llama_bin, tiny_models, rpc_servers):
    endpoint = rpc_servers(1)[0].endpoint
    sp = run_to_failure(llama_bin, "-m", str(tiny_models["qwen3moe"]), "--rpc", endpoint, "-ot", "exps=CUDA9")
    d = sp.diagnosis
    assert d.kind == DiagnosisKind.UNKNOWN_BUFFER_TYPE
    assert d.facts["requested"] == ("CUDA9",)
    assert set(d.facts["available"]) == {"CPU", f"RPC0[{endpoint}]"}


def test_unknown_architecture(llama_bin, tmp_path):
    sp = run_to_failure(llama_bin, "-m", str(write_unknown_arch_model(tmp_path / "odd.gguf")))
    assert sp.diagnosis.kind == DiagnosisKind.UNSUPPORTED_ARCH


def test_out_of_memory_on_an_rpc_device(llama_bin, tmp_path):
    # An 18 GB model (sparse file) onto an RPC server whose address space is capped at 1 GiB: the weight
    # buffer allocation fails on the server for real. -lm none: no mmap, so nothing reads the file first.
    model = gguf_factory.write_sparse_model("qwen3-30b-a3b", tmp_path / "q30.gguf")
    with memory_limited_rpc_server(llama_bin) as (endpoint, _):
        sp = run_to_failure(llama_bin, "-m", str(model), "--rpc", endpoint, "-ngl", "all", "--fit", "off",
                            "-lm", "none", "-c", "512")
    d = sp.diagnosis
    assert d.kind == DiagnosisKind.OUT_OF_MEMORY
    assert d.facts["buffer_type"] == f"RPC0[{endpoint}]" and d.facts["phase"] == "the model weights"
    assert d.facts["mib"] > 10_000
    assert endpoint in d.title
