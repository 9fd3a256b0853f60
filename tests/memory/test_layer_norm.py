"""LLM_NORM (a layer norm, ggml's NORM) against LLM_NORM_RMS: ggml_op_can_inplace allows RMS_NORM to take its
input's memory but not NORM, so the op of every build_norm moves the compute peak. Tiny models with a vocabulary
large enough that the logits set the peak, where the difference shows (cohere2moe: 45 MiB with layer norms, 54
with RMS norms; llama.cpp prints the same)."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.llamacpp.fit_print import run_fit_print
from app.memory.compute.approx import APPROXIMATE
from app.memory.estimator import estimate
from app.model import open_model
from tests import gguf_factory as gf

from .accuracy import list_rpc_devices, record, within_floor

SHAPE = dict(n_vocab=20000, n_embd=1024, n_head=8, n_head_kv=2, n_ff=2048)


@pytest.mark.llama
@pytest.mark.parametrize(
    "arch,extra",
    [
        pytest.param("command-r", {}, id="command-r"),
        pytest.param("command-r", dict(n_layer=64, n_embd=256, n_head=4, n_ff=512), id="command-r-qk-norm"),  # R+
        pytest.param("cohere2", {}, id="cohere2"),
        pytest.param("starcoder2", {}, id="starcoder2"),
        pytest.param("orion", {}, id="orion"),
        pytest.param("phi2", {}, id="phi2"),
        pytest.param("gpt2", {}, id="gpt2"),
        pytest.param("mpt", {}, id="mpt-clamped"),  # Q/K/V clamped
        pytest.param("bloom", {}, id="bloom"),
        pytest.param("gptneox", {}, id="gptneox"),
        pytest.param("nemotron", {}, id="nemotron"),
        pytest.param("olmo", {}, id="olmo"),  # the norm alone, no weight
        pytest.param("falcon", dict(norm_2=True, n_head_kv=2), id="falcon-norm-2"),  # 40B: a second attention norm
        # 12B's shape: per-head Q/K norms, no FFN norm
        pytest.param("stablelm", dict(parallel=True, qkv_bias=False), id="stablelm-parallel"),
        pytest.param("cohere2moe", dict(layer_norm=True, n_nextn=0), id="cohere2moe-layer-norm"),
        pytest.param("cohere2moe", dict(layer_norm=False, n_nextn=0), id="cohere2moe-rms"),
    ],
)
@pytest.mark.parametrize("n_rpc,args", [(0, "-c 4096 -fa on"), (1, "-c 4096 -ngl all -fa on -ub 256")],
                         ids=["cpu", "1rpc"])
def test_the_norm_op_sets_the_peak(arch, extra, n_rpc, args, llama_bin, rpc_servers, tmp_path):
    path = gf.write_tiny_model(arch, tmp_path / f"{arch}.gguf", **{**SHAPE, **extra})
    model = open_model(path)
    if extra.get("n_layer") == 64:
        assert any(t.name == "blk.0.attn_q_norm.weight" for t in model.tensors)
    endpoints = [s.endpoint for s in rpc_servers(n_rpc)] if n_rpc else []
    full = (["--rpc", ",".join(endpoints)] if endpoints else []) + args.split() + ["--fit", "off", "--no-repack"]
    theirs = run_fit_print(path, full, llama_dir=llama_bin)
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    ours = estimate(model, devices, settings_from_args(args.split(), tool="fit-params"))
    got = {q: [(r.name, getattr(ours.device(r.name), q) / (1 << 20), getattr(r, q)) for r in theirs]
           for q in ("model", "context", "compute")}
    ok = {q: all(within_floor(mine * (1 << 20), want) for _n, mine, want in rows) for q, rows in got.items()}
    approximate = any(n.startswith(APPROXIMATE) for n in ours.notes)
    record("fit-print", case=f"tiny {arch} {extra} {args}", arch=model.params.arch,
           backends=["CPU"] + (["RPC"] if n_rpc else []), args=args, approximate=approximate, ok=ok)
    assert all(ok.values()), got
    assert not approximate, ours.notes
