"""The compute-buffer simulator's shortcuts change nothing that matters: compressed graph == uncut graph
(to within an alignment's worth of bytes).

The simulator (app/memory/compute/) rebuilds llama.cpp's graph, scheduler and allocator; for speed it
builds only representative layers. Here random placements on full-size models are estimated both ways.
"""

from __future__ import annotations

import random

import pytest

from app.memory.compute import core
from app.memory.estimator import Estimator
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Role, open_model
from app.placement import CPU
from app.placement.presets import all_on_gpus
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


@pytest.mark.parametrize("spec", ["qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b", "phi-3.5-moe"])
def test_compressed_graph_gives_the_same_buffers(spec, tmp_path, monkeypatch):
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC0[127.0.0.1:{5000 + i}]", 48 * GiB, 48 * GiB, "rpc") for i in range(3)]
    rng = random.Random(spec)
    exps = [b.id for b in model.blocks if b.role is Role.EXPERTS]
    checked = 0
    for trial in range(20):
        s = LlamaSettings(n_ctx=rng.choice([4096, 16384]), flash_attn=rng.choice(["on", "off"]),
                          n_parallel=rng.choice([-1, 2]), tool=rng.choice(["server", "fit-params"]))
        p = all_on_gpus(model, devices, s)
        for item in rng.sample(exps, k=len(exps) // 2):  # scattered: every other layer's experts elsewhere
            p.assign(item if rng.random() < 0.7 else f"{item}:down", rng.choice([CPU, "RPC1", "RPC2"]))
        fast = Estimator(model).estimate(devices, p.settings, p.weight_placement(), quick=True)
        full = Estimator(model).estimate(devices, p.settings, p.weight_placement())
        # one copy of each neighbourhood is enough: at most an alignment's worth of bytes differs (seen: 32 B)
        assert [d.name for d in fast.devices] == [d.name for d in full.devices]
        for a, b in zip(fast.devices, full.devices):
            assert abs(a.compute - b.compute) <= 4096, (trial, a.name, a.compute - b.compute)
        checked += 1
    assert checked == 20


@pytest.mark.parametrize("spec", ["trinity-mini", "gemma-3-27b", "llama-4-scout", "mimo-v2-flash", "olmo-3-7b"])
def test_interleaved_layers_on_a_middle_device_cut_as_uncut(spec, tmp_path, monkeypatch):
    """Sliding-window layers in runs of 3+ between global ones: a middle pipelined device's peak depends on the
    allocator's state after two periods, so the cut graph compares two layers either side (core._interleaved).
    With one, Trinity-Mini -ts 1,2,1 -cmoe -np 4 gave RPC1 62.89 MiB against 90.89 uncut (and llama.cpp's 90)."""
    from app.command.parse import settings_from_args
    from app.memory.compute.compress import pad_layers

    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB, "rpc") for i in range(3)]
    cut_layers = []
    real = core.compress

    def compressing(sigs, hood=1):
        out = real(sigs, hood)
        cut_layers.append(len(pad_layers(out, len(sigs))) < len(sigs))
        return out

    for args in ("-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -ctk q8_0 -ctv q8_0", "-c 16384 -ngl all -ts 1,3,1 -fa off",
                 "-c 32768 -ngl all -ts 2,1,1 -np 2"):
        s = settings_from_args(args.split(), tool="fit-params")
        monkeypatch.setattr(core, "compress", compressing)
        fast = Estimator(model).estimate(devices, s, quick=True)
        monkeypatch.undo()
        full = Estimator(model).estimate(devices, s)
        for a, b in zip(fast.devices, full.devices, strict=True):
            assert abs(a.compute - b.compute) <= 4096, (args, a.name, a.compute / 2**20, b.compute / 2**20)
    assert any(cut_layers), "no placement was cut: the test compares nothing"


@pytest.mark.parametrize("spec", ["qwen3-next-80b-a3b", "lfm2-8b-a1b", "nemotron-3-nano-30b-a3b", "mamba2-2.7b"])
def test_recurrent_graphs_are_not_cut(spec, tmp_path):
    """Graphs with recurrent layers are built with every layer: build_rs's zero-size "extra states" tensors leave
    zero-size free blocks in ggml's allocator that can sit out of address order and keep free neighbours from
    merging, so the fragmentation, and a device's peak, depends on how many layers came before."""
    from app.command.parse import settings_from_args
    from app.memory.estimator import Estimator

    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB, "rpc") for i in range(2)]
    est = Estimator(model)
    assert est.compute_facts["uncut"]
    n_main = model.params.n_layer - model.params.nextn_layers
    for args in ("-c 8192 -ngl all -ts 1,1 -np 4", "-c 16384 -ngl 20 -fa off -ub 256"):
        assert est.estimate(devices, settings_from_args(args.split(), tool="fit-params")).devices
    graphs = list(est.compute_facts["graphs"].values())
    assert len(graphs) == 2 and all(b.layers == list(range(n_main)) for b in graphs)


def test_cutting_a_recurrent_graph_changes_its_peak(tmp_path):
    """Why recurrent graphs are not cut: Nemotron-3-Nano with -cmoe on one RPC device, cut to representative
    layers, puts the logits 17.3 MiB higher than the uncut graph, which matches llama-fit-params (305 MiB)."""
    from app.command.parse import settings_from_args
    from app.memory.estimator import Estimator

    model = open_model(write_sparse_model("nemotron-3-nano-30b-a3b", tmp_path / "n.gguf"))
    devices = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 96 * GiB, 96 * GiB, "rpc")]
    s = settings_from_args("-c 16384 -ngl all -cmoe -fa on".split(), tool="fit-params")
    full = Estimator(model).estimate(devices, s).device("RPC0").compute
    cut_est = Estimator(model)
    cut_est.compute_facts["uncut"] = False
    cut = cut_est.estimate(devices, s, quick=True).device("RPC0").compute
    assert full // (1 << 20) == 305
    assert cut - full > 16 * (1 << 20), (cut, full)


def test_a_reused_cut_graph_resolves_fa_auto_for_its_own_layers(tmp_path):
    """One built graph serves every kept set of the same layer kinds, so the fused nodes resolve_fused_ops checks
    hold kept-layer positions, not the layers of the first placement that built it: with real layer numbers a
    drag preview of -fa auto compared the attention of layer 40 against layer 12's device, turned flash attention
    off and replayed the graph a second time (the README bench's preview p95, 40 -> 21 ms on a busy machine)."""
    from app.command.parse import parse_llama_args

    model = open_model(write_sparse_model("qwen3-235b-a22b", tmp_path / "q235.gguf"))
    devices = [Lane(f"CUDA{i}", f"CUDA{i}", 24 * GiB, 24 * GiB) for i in range(3)]
    ot = []
    for k, il in enumerate(range(2, 94, 2)[:40]):
        ot += ["-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps={'CPU' if k % 2 else 'CUDA2'}"]
    base = parse_llama_args(["-ngl", "all", "-ts", "1,1,1", "-c", "32768", *ot], tool="server").settings
    assert base.flash_attn == "auto"
    warm = Estimator(model)
    warm.estimate(devices, base, quick=True)
    runs: list[bool] = []
    full_runs: list[int] = []
    real = core._run

    def counting(*a, **k):
        runs.append(k.get("schedule_only", False))
        return real(*a, **k)

    for k in range(0, 60, 5):
        s = base.copy(overrides=list(base.overrides))
        s.overrides[k % 40] = (rf"blk\.{(k * 7) % 94}\.ffn_(up|down)_exps", "CPU" if k % 3 else "CUDA1")
        runs.clear()
        core._run = counting
        try:
            got = warm.estimate(devices, s, quick=True)
        finally:
            core._run = real
        full_runs.append(runs.count(False))
        fresh = Estimator(model).estimate(devices, s, quick=True)
        assert [(d.name, d.compute) for d in got.devices] == [(d.name, d.compute) for d in fresh.devices], k
    # every layer's attention is on its own device here: the probe never turns flash attention off
    assert max(full_runs) == 1 and full_runs.count(1) >= 10, full_runs


@pytest.mark.parametrize("spec", ["qwen3-30b-a3b", "llama-3.1-8b", "gpt-oss-20b", "gemma-3-27b", "deepseek-v2-lite",
                                  "qwen3.5-35b-a3b"])
def test_the_scheduler_s_shortcuts_equal_its_four_expansion_sweeps(spec, tmp_path, monkeypatch):
    """Where no device refuses an op, schedule() gives the backends of the four expansion sweeps without running
    them: one sweep over the graph (schedule._expand_all), and for resolve_fused_ops' probe only its fused nodes'
    (schedule._probed, from the pins and weights alone); passes 4 and 5 over the non-view nodes only (the graph's
    schedule.shape). Every schedule here is run both ways, the shortcut and the four sweeps from the same
    pass 1 (every node's backend and the splits compared), on placements that put some layers' attention weights on
    the CPU (the flash attention of such a layer lands off its device), with CUDA-like op offload, -nkvo and
    partial -ngl."""
    from app.command.parse import settings_from_args
    from app.memory.compute import schedule as sched

    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    n = model.params.n_layer
    rng = random.Random(spec)
    compared = []
    real = sched.schedule

    def both_ways(nodes, leafs, cpu, offload_to, limits=None, users=None, forced=(), backends_only=False,
                  wanted=None, pool=None, subs=None, kept=None, shape=None):
        assert shape is not None  # core keeps the graph's shape: passes 4 and 5 skip the views' sources
        out = real(nodes, leafs, cpu, offload_to, limits, users, forced, backends_only, wanted, pool, subs, kept,
                   shape)
        if limits is not None and not all(lim is None and kind != "vulkan" for lim, kind, _ in limits):
            return out  # a device refuses ops: the four sweeps ran
        # the reference: the four expansion sweeps, which a size limit no tensor reaches keeps in use, then passes
        # 4 and 5 node by node (no shape)
        sweeps = [(1 << 62, "cpu", ())] * (cpu + 1)
        got = [t.be for t in (wanted[0] if wanted is not None else nodes)]
        shape = [(be, i0, i1, len(inputs)) for be, i0, i1, inputs in out]
        for t in nodes:
            t.be = -1
            t.cs = t.src
        for t in leafs:
            t.be = -1
        if subs is not None:
            subs.clear()  # the copies of the run returned
        ref = real(nodes, leafs, cpu, offload_to, sweeps, users, forced, backends_only, None, pool, subs, kept)
        want = [t.be for t in (wanted[0] if wanted is not None else nodes)]
        compared.append(got == want)
        assert got == want, (got, want)
        assert shape == [(be, i0, i1, len(inputs)) for be, i0, i1, inputs in ref]
        return ref

    real_off = core._fused_off
    offs = []

    def counting_off(*a):
        offs.append(real_off(*a))
        return offs[-1]

    monkeypatch.setattr(core, "schedule", both_ways)
    monkeypatch.setattr(core, "_fused_off", counting_off)
    for _trial in range(8):
        kind = rng.choice(["CUDA", "RPC"])
        ndev = rng.randint(1, 3)
        devices = [Lane(f"{kind}{i}", f"{kind}{i}" if kind == "CUDA" else f"RPC{i}[127.0.0.1:{5000 + i}]",
                        96 * GiB, 96 * GiB, "gpu" if kind == "CUDA" else "rpc") for i in range(ndev)]
        args = ["-c", "8192", "-fa", "auto", "-ngl", str(rng.choice([n, n - 3, n // 2]))]
        if ndev > 1:
            args += ["-ts", ",".join(str(rng.randint(1, 3)) for _ in range(ndev))]
        attn_layers = [il for il in range(n) if not model.params.recurrent_layers[il]]
        for il in rng.sample(attn_layers, k=min(4, len(attn_layers))):
            args += ["-ot", rf"blk\.{il}\.attn_.*=CPU"]
        if rng.random() < 0.3:
            args.append("-nkvo")
        if rng.random() < 0.5:
            args += ["-ub", str(rng.choice([256, 1024]))]
        Estimator(model).estimate(devices, settings_from_args(args, tool="fit-params"), quick=rng.random() < 0.5)
    assert len(compared) >= 8 and all(compared), compared
    assert any(offs), "no probe found flash attention off its layer's device: the shortcut's hard case is untested"


def _compress_rule(sigs, hood):
    """compress's rule spelt out (as first written): periodic runs cut to two periods and the last, then each
    neighbourhood of ``hood`` kept layers either side kept once, the first and last two (or ``hood``) always."""
    from app.memory.compute.compress import _KEEP, _KEEP_HOOD, _MAX_PERIOD

    n, keep, s = len(sigs), [], 0
    while s < n:
        best_p, best_e = 0, s + 1
        for p in range(1, _MAX_PERIOD + 1):
            e = s + p
            while e < n and sigs[e] == sigs[e - p]:
                e += 1
            if e - s >= (_KEEP + 2) * p and e > best_e:
                best_p, best_e = p, e
        if best_p == 0:
            keep.append(s)
            s += 1
            continue
        keep.extend(range(s, s + _KEEP * best_p))
        keep.extend(range(s + ((best_e - s) // best_p - 1) * best_p, best_e))
        s = best_e
    seen: dict = {}
    out = []
    for k, il in enumerate(keep):
        if k < max(2, hood) or k >= len(keep) - max(2, hood):
            out.append(il)
            continue
        key = tuple(sigs[keep[j]] for j in range(k - hood, k + hood + 1))
        if seen.get(key, 0) < _KEEP_HOOD:
            seen[key] = seen.get(key, 0) + 1
            out.append(il)
    return out


def test_compress_keeps_what_its_rule_keeps():
    """compress (run on every drag preview: 0.13 -> 0.08 ms for 94 layers) against its rule spelt out, on random
    signature sequences: plain, periodic with noise, and a 94-layer board's."""
    from app.memory.compute.compress import compress

    rng = random.Random(5)
    board = [0, 0] + [1, 0, 2, 0] * 8 + [3, 4, 5, 4, 3, 12, 5, 4] + [4, 6, 7, 7, 7, 7, 7, 6, 4, 5, 4, 3] * 4 + [7, 8]
    cases = [(board, 1), (board, 2)]
    for _ in range(3000):
        n, a = rng.randint(0, 120), rng.randint(1, 6)
        per = rng.randint(1, 9)
        base = [rng.randrange(a) for _ in range(per)]
        periodic = rng.random() < 0.5
        sigs = [base[i % per] if periodic and rng.random() < 0.95 else rng.randrange(a) for i in range(n)]
        cases.append((sigs, rng.choice([1, 2])))
    cut = 0
    for sigs, hood in cases:
        got = compress(sigs, hood)
        assert got == _compress_rule(sigs, hood), (sigs, hood)
        cut += len(got) < len(sigs)
    assert cut > 1000, cut  # most cases drop layers: the rule is exercised, not only its edges
