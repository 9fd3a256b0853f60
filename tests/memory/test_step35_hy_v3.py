"""Step-3.5-Flash (step35) and Hy3-preview (hy_v3): the compressed compute graph gives the uncut graph's buffers on
scattered placements (step35's 1-full-3-sliding pattern with per-layer head counts is what ``hood=2`` guards), and
the MTP blocks' ``TENSOR_NOT_REQUIRED`` tensors are placed as llama.cpp loads them without MTP."""

from __future__ import annotations

import random

import pytest

from app.memory.compute import core
from app.memory.estimator import estimate
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Role, open_model
from app.model.index import tensor_base
from app.placement import CPU
from app.placement.presets import all_on_gpus
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


def _uncut(sigs, hood=1):
    return list(range(len(sigs)))


@pytest.mark.parametrize("spec", ["step-3.5-flash", "hy3-preview"])
def test_compressed_graph_gives_the_same_buffers(spec, tmp_path, monkeypatch):
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB, "rpc") for i in range(3)]
    rng = random.Random(spec)
    exps = [b.id for b in model.blocks if b.role is Role.EXPERTS and not b.nextn]
    for trial in range(30):
        s = LlamaSettings(n_ctx=rng.choice([4096, 16384]), flash_attn=rng.choice(["on", "off"]),
                          n_parallel=rng.choice([-1, 2]), tool=rng.choice(["server", "fit-params"]))
        p = all_on_gpus(model, devices, s)
        for item in rng.sample(exps, k=len(exps) // 2):
            p.assign(item, rng.choice([CPU, "RPC1", "RPC2"]))
        model.__dict__.pop("_compute_facts", None)
        fast = estimate(model, devices, p.settings, p.weight_placement())
        monkeypatch.setattr(core, "compress", _uncut)
        model.__dict__.pop("_compute_facts", None)
        full = estimate(model, devices, p.settings, p.weight_placement())
        monkeypatch.undo()
        assert [d.name for d in fast.devices] == [d.name for d in full.devices]
        assert all(d.compute > 0 for d in full.devices), trial
        for a, b in zip(fast.devices, full.devices):
            assert abs(a.compute - b.compute) <= 4096, (trial, a.name, a.compute - b.compute)


@pytest.mark.parametrize("spec, loaded", [
    # step35.cpp load_block_mtp: q/k norms, the gate and the (dense) FFN are TENSOR_NOT_REQUIRED only
    ("step-3.5-flash", {"attn_q_norm", "attn_k_norm", "attn_gate", "ffn_gate", "ffn_up", "ffn_down",
                        "nextn.shared_head_norm"}),
    # hy-v3.cpp load_block(i, mtp_flags): the router, bias, experts and shared expert load
    ("hy3-preview", {"ffn_gate_inp", "exp_probs_b", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
                     "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "nextn.shared_head_norm"}),
])
def test_mtp_blocks_load_their_not_required_tensors(spec, loaded, tmp_path):
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    p = model.params
    first = p.n_layer - p.nextn_layers
    idx = model.index
    kept = {tensor_base(t.name)[1] for t, skip in zip(model.tensors, idx.skipped)
            if not skip and (tensor_base(t.name)[0] or -1) >= first}
    assert kept == loaded
    skipped = {tensor_base(t.name)[1] for t, skip in zip(model.tensors, idx.skipped) if skip}
    assert {"attn_norm", "attn_q", "attn_output", "nextn.eh_proj"} <= skipped
    # the loaded MTP tensors go where llama.cpp puts layers past n_layer: the output device
    devices = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 96 * GiB, 96 * GiB, "rpc"),
               Lane("RPC1", "RPC1[127.0.0.1:5001]", 96 * GiB, 96 * GiB, "rpc")]
    wp = all_on_gpus(model, devices, LlamaSettings(n_ctx=4096)).weight_placement()
    out = wp.tensor_device[idx.tensor_pos["output.weight"]]
    mtp = {wp.tensor_device[i] for i, t in enumerate(model.tensors)
           if not idx.skipped[i] and (tensor_base(t.name)[0] or -1) >= first}
    assert out == "RPC1" and mtp == {"RPC1"}


@pytest.mark.llama
def test_scattered_experts_need_two_layers_either_side(llama_bin, rpc_servers, sparse_models, monkeypatch):
    """Hy3-preview on 3 RPC devices with every few layers' experts sent to another device or the CPU: the
    compressed graph (``hood=2``) and the uncut one both give llama-fit-params' figures to the MiB; with one layer
    either side the compression kept a neighbourhood that put RPC2's peak 8 MiB too high (268 vs 260 MiB)."""
    from app.command.parse import settings_from_args
    from app.llamacpp.fit_print import run_fit_print

    from .accuracy import errors, list_rpc_devices, Result, _c

    servers = rpc_servers(3)
    eps = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", eps)
    path = sparse_models["hy3-preview"]
    exps = r"\.ffn_(down|gate|up)_exps\.="
    args = ["-dev", "RPC0,RPC1,RPC2", "-ngl", "82", "-ts", "28,27,27",
            "-ot", r"blk\.([1247]|19|2[1367]|55|6[0368]|77)" + exps + devices[0].buft,
            "-ot", r"blk\.(5|1[13-5]|24|3[19]|4[58]|58|6[24]|73)" + exps + "CPU",
            "-ot", r"blk\.(36|47|5[01])" + exps + devices[2].buft,
            "-c", "16384", "-fa", "on"]
    theirs = run_fit_print(path, ["--rpc", ",".join(eps), *args, "--no-repack"], llama_dir=llama_bin)
    model = open_model(path)
    settings = settings_from_args(args, tool="fit-params")
    case = _c("hy3-scattered", "hy3-preview", 3, " ".join(args))
    fast = estimate(model, devices, settings)
    rows = errors(Result(case, fast, theirs))
    assert [r.name for r in theirs] == [d.name for d in fast.devices]
    assert not [r for r in rows if not r[4]], rows
    monkeypatch.setattr(core, "compress", _uncut)
    model.__dict__.pop("_compute_facts", None)
    full = estimate(model, devices, settings)
    assert [d.compute for d in full.devices] == [d.compute for d in fast.devices]
