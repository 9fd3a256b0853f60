"""LLM_NORM (a layer norm, ggml's NORM) against LLM_NORM_RMS: ggml_op_can_inplace allows RMS_NORM to take its
input's memory but not NORM, so the op of every build_norm moves the compute peak. Tiny models with a vocabulary
large enough that the logits set the peak, where the difference shows (cohere2moe: 45 MiB with layer norms, 54
with RMS norms; llama.cpp prints the same)."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.llamacpp.fit_print import run_fit_print
from app.memory.estimator import estimate
from app.model import open_model
from tests import gguf_factory as gf

from .accuracy import list_rpc_devices, record, within_floor

SHAPE = dict(n_vocab=20000, n_embd=1024, n_head=8, n_head_kv=2, n_ff=2048)


@pytest.mark.llama
@pytest.mark.parametrize(
    "arch,extra",
    [
        ("command-r", {}),
        ("command-r", dict(n_layer=64, n_embd=256, n_head=4, n_ff=512)),  # R+: per-head Q/K layer norms
        ("cohere2", {}),
        ("starcoder2", {}),
        ("orion", {}),
        ("phi2", {}),
        ("gpt2", {}),
        ("mpt", {}),  # Q/K/V clamped
        ("bloom", {}),
        ("gptneox", {}),
        ("nemotron", {}),
        ("olmo", {}),  # the norm alone, no weight
        ("falcon", dict(norm_2=True, n_head_kv=2)),  # 40B's shape: a second attention norm
        ("stablelm", dict(parallel=True, qkv_bias=False)),  # 12B's shape: per-head Q/K norms, no FFN norm
        ("cohere2moe", dict(layer_norm=True, n_nextn=0)),
        ("cohere2moe", dict(layer_norm=False, n_nextn=0)),
    ],
    ids=["command-r", "command-r-qk-norm", "cohere2", "starcoder2", "orion", "phi2", "stablelm-parallel", "gpt2", "mpt-clamped", "bloom", "gptneox", "nemotron", "olmo", "falcon-norm-2", "cohere2moe-layer-norm", "cohere2moe-rms"],
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
    record("fit-print", case=f"tiny {arch} {extra} {args}", arch=model.params.arch,
           backends=["CPU"] + (["RPC"] if n_rpc else []), args=args, approximate=False, ok=ok)
    assert all(ok.values()), got
    assert not [n for n in ours.notes if "approximate" in n.lower()], ours.notes
