"""The allocator's trace (app/memory/compute/alloc.py ``Trace``) changes no figure.

A run for a new placement starts from a recorded run's state at the last layer up to which the two are one run,
and stops where it reaches a recorded run's state with the same layers still to come. Here a random walk of
placements (each a block or two moved from the one before, as a drag does) on full-size models is estimated by
one Estimator that keeps its traces, and by one that never traces (every node allocated, ``allocate_graph``):
every device's compute buffer must be the same to the byte, and the trace must have skipped layers, or the
comparison proves nothing.
"""

from __future__ import annotations

import random

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute import alloc, core
from app.memory.estimator import Estimator
from app.model import Role, open_model
from app.placement import CPU
from app.placement.presets import all_on_gpus
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


@pytest.mark.parametrize(
    "spec, kind",
    [
        ("qwen3-235b-a22b", "CUDA"),
        ("deepseek-v3", "RPC"),
        ("gpt-oss-120b", "CUDA"),
        ("gemma-3-27b", "RPC"),
        ("qwen3.5-35b-a3b", "CUDA"),
        ("llama-4-scout", "RPC"),
        # this year's families with graphs of their own (issue 17): hyper-connections, compressed and indexed
        # attention, sliding-window mixes, multi-token heads
        ("deepseek-v4-flash", "CUDA"),
        ("kimi-k3", "RPC"),
        ("minimax-m2", "CUDA"),
        ("step-3.5-flash", "RPC"),
        ("mimo-v2-flash", "CUDA"),
        ("gemma-4-26b-a4b", "RPC"),
        ("k-exaone-236b-a23b", "CUDA"),
        ("trinity-mini", "RPC"),
    ],
)
def test_traced_allocation_equals_the_whole_replay(spec, kind, tmp_path, monkeypatch):
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [
        Lane(f"{kind}{i}", f"{kind}{i}" if kind == "CUDA" else f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB,
             "gpu" if kind == "CUDA" else "rpc")
        for i in range(3)
    ]
    rng = random.Random(spec)
    args = ["-c", "8192", "-ts", "1,1,1", "-fa", rng.choice(["on", "auto"])]
    n = model.params.n_layer
    for il in range(2, n, 4):  # a board with overrides already: experts of scattered layers elsewhere
        args += ["-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps={rng.choice([CPU, f'{kind}2'])}"]
    settings = settings_from_args(args, tool="server")
    base = all_on_gpus(model, devices, settings)
    items = [b.id for b in model.blocks if b.role is Role.EXPERTS] or [b.id for b in model.blocks if b.layer]
    places = [CPU] + [d.name for d in devices]

    walked = []
    real_walk = alloc._walk

    tracing = [False]

    def counting_walk(gn, i0, i1, *a):
        if tracing[0]:  # allocate_graph walks every node too
            walked[-1][0] += i1 - i0
        return real_walk(gn, i0, i1, *a)

    real_traced = alloc.allocate_traced

    def counting_traced(*a):
        walked.append([0, 0])
        tracing[0] = True
        try:
            out = real_traced(*a)
        finally:
            tracing[0] = False
        walked[-1][1] = len(a[-4].records[0].gn)  # the trace: its newest record is this run's
        return out

    traced, plain = Estimator(model), Estimator(model)
    p = base.copy()
    compared = 0
    for step in range(14):
        p.assign(rng.choice(items), rng.choice(places))
        if step % 5 == 4:
            p = base.copy()  # back to the board's placement: a drag that ends where it began
        wp = p.weight_placement()
        for quick in (True, False):
            monkeypatch.setattr(alloc, "_walk", counting_walk)
            monkeypatch.setattr(core, "allocate_traced", counting_traced)
            got = traced.estimate(p.devices, p.settings, wp, quick=quick)
            monkeypatch.undo()
            monkeypatch.setattr(core, "_marks", lambda b: None)  # the whole replay, as before traces
            want = plain.estimate(p.devices, p.settings, wp, quick=quick)
            monkeypatch.undo()
            assert [(d.name, d.compute) for d in got.devices] == [(d.name, d.compute) for d in want.devices], (
                step, quick)
            assert got.notes == want.notes
            assert not any("approximate" in n for n in got.notes), got.notes  # both replayed, not estimated
            compared += 1
    assert compared == 28
    assert walked, "no run was traced"
    skipped = sum(total - done for done, total in walked)
    print(spec, f"{skipped / sum(total for _, total in walked):.0%} of the nodes skipped")
    assert skipped > 0.4 * sum(total for _, total in walked), walked  # seen: 53% (gpt-oss) to 80%


def test_a_long_drag_keeps_the_trace_small_and_exact(tmp_path, monkeypatch):
    """A trace's tables of stretches and states grow with every new run; past alloc._TABLE entries they are cut
    to what the records hold (alloc._prune). Here the limit is 16 and a trace keeps 3 records, so a random walk
    prunes often: the figures stay those of the whole replay, a prune leaves what the records hold, and the runs
    after one still start, jump and stop on the records (a table emptied instead made the next runs walk all)."""
    model = open_model(write_sparse_model("qwen3-235b-a22b", tmp_path / "q.gguf"))
    devices = [Lane(f"CUDA{i}", f"CUDA{i}", 96 * GiB, 96 * GiB, "gpu") for i in range(3)]
    rng = random.Random(3)
    args = ["-c", "8192", "-ts", "1,1,1"]
    for il in range(2, model.params.n_layer, 4):
        args += ["-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps={rng.choice([CPU, 'CUDA2'])}"]
    settings = settings_from_args(args, tool="server")
    base = all_on_gpus(model, devices, settings)
    items = [b.id for b in model.blocks if b.role is Role.EXPERTS]
    monkeypatch.setattr(alloc, "_TABLE", 16)
    monkeypatch.setattr(alloc.Trace, "KEEP", 3)
    real_prune, real_walk, real_marks = alloc._prune, alloc._walk, core._marks
    pruned: list[tuple[int, int]] = []  # (entries before, after) of each prune that dropped some
    walked: list[list[int]] = []  # per traced run: nodes walked, nodes in all, a prune right before it

    def counting_prune(trace):
        before = len(trace.units) + len(trace.states)
        real_prune(trace)
        after = len(trace.units) + len(trace.states)
        held = {u for r in trace.records for u in r.u}
        assert set(trace.units.values()) <= held or len(trace.units) <= 16
        if after < before:
            pruned.append((before, after))
        walked.append([0, 0, after < before])

    def counting_walk(gn, i0, i1, *a):
        walked[-1][0] += i1 - i0
        return real_walk(gn, i0, i1, *a)

    real_traced = alloc.allocate_traced

    def counting_traced(*a):
        out = real_traced(*a)
        walked[-1][1] = len(a[-4].records[0].gn)
        return out

    traced, plain = Estimator(model), Estimator(model)
    p = base.copy()
    for step in range(60):
        p.assign(rng.choice(items), rng.choice([CPU, "CUDA0", "CUDA1", "CUDA2"]))
        wp = p.weight_placement()
        monkeypatch.setattr(alloc, "_prune", counting_prune)
        monkeypatch.setattr(alloc, "_walk", counting_walk)
        monkeypatch.setattr(core, "allocate_traced", counting_traced)
        got = traced.estimate(p.devices, p.settings, wp, quick=True)
        monkeypatch.setattr(alloc, "_prune", real_prune)
        monkeypatch.setattr(alloc, "_walk", real_walk)
        monkeypatch.setattr(core, "allocate_traced", real_traced)
        monkeypatch.setattr(core, "_marks", lambda b: None)
        want = plain.estimate(p.devices, p.settings, wp, quick=True)
        monkeypatch.setattr(core, "_marks", real_marks)
        assert [(d.name, d.compute) for d in got.devices] == [(d.name, d.compute) for d in want.devices], step
    assert len(pruned) >= 5, pruned
    after_prune = [(done, total) for done, total, fresh in walked if fresh]
    assert any(done < total for done, total in after_prune), after_prune  # records still met after a prune
