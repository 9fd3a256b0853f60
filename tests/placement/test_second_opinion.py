"""llama.cpp's dry run as a second opinion: real runs, and every way it can fail, each with a clear message."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from app.llamacpp.fit_print import FitPrintError, parse_fit_print, run_fit_print
from app.memory.estimator import estimate
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.model.demo import load_demo
from app.placement import CPU
from app.placement.presets import all_on_gpus
from app.placement.second_opinion import compare, second_opinion
from tests.memory.accuracy import list_rpc_devices


def fake_tool(tmp_path, body: str):
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    exe = d / "llama-fit-params"
    exe.write_text(f"#!{sys.executable}\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return d


def test_parse_fit_print():
    rows = parse_fit_print("RPC0 13196 592 624 \nRPC1 4328 176 640 \nHost 166 0 92 \n")
    assert [r.name for r in rows] == ["RPC0", "RPC1", "CPU"] and rows[1].compute == 640


@pytest.mark.llama
def test_second_opinion_matches_our_estimate(tiny_models, rpc_servers, llama_bin):
    servers = rpc_servers(2)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    model = open_model(tiny_models["qwen3moe"])
    p = all_on_gpus(model, devices, LlamaSettings(n_ctx=4096, n_parallel=2, kv_unified=False, tool="fit-params"))
    p.assign("1:experts", CPU)
    op = second_opinion(p, tiny_models["qwen3moe"], rpc=endpoints, llama_dir=llama_bin)
    assert [r.name for r in op.rows] == ["RPC0", "RPC1", "CPU"]
    est = estimate(model, p.devices, p.settings.copy(tool="fit-params"), p.weight_placement())
    for dev, q, ours, theirs in compare(est, op):
        assert abs(ours - theirs) <= (64 if q == "compute" else 16) + 1, (dev, q, ours, theirs)


def test_missing_binary(tmp_path, monkeypatch):
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FitPrintError, match="llama-fit-params was not found"):
        run_fit_print(tmp_path / "m.gguf", [], llama_dir=tmp_path / "nowhere")


def test_old_build_without_fit_print(tmp_path):
    d = fake_tool(tmp_path, "import sys; print('error: invalid argument: --fit-print', file=sys.stderr); sys.exit(1)")
    with pytest.raises(FitPrintError, match="too old for --fit-print"):
        run_fit_print(tmp_path / "m.gguf", [], llama_dir=d)


def test_timeout(tmp_path):
    d = fake_tool(tmp_path, "import time; time.sleep(30)")
    with pytest.raises(FitPrintError, match="did not finish within 1 s"):
        run_fit_print(tmp_path / "m.gguf", [], llama_dir=d, timeout=1)


@pytest.mark.llama
def test_failure_shows_llama_cpp_reason(tmp_path, llama_bin):
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 20)
    with pytest.raises(FitPrintError) as exc:
        run_fit_print(bad, ["-c", "512"], llama_dir=llama_bin)
    assert "llama-fit-params failed" in str(exc.value) and "exit status" in str(exc.value)


def test_demo_is_refused_politely(tmp_path):
    m = load_demo()
    p = all_on_gpus(m, [], LlamaSettings())
    with pytest.raises(FitPrintError, match="demo model"):
        second_opinion(p, "x.gguf")
