"""The compute-buffer simulator's shortcuts change nothing that matters: compressed graph == uncut graph
(to within an alignment's worth of bytes).

The simulator (app/memory/compute/) rebuilds llama.cpp's graph, scheduler and allocator; for speed it
builds only representative layers. Here random placements on full-size models are estimated both ways.
"""

from __future__ import annotations

import random

import pytest

from app.memory.compute import core
from app.memory.estimator import estimate
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Role, open_model
from app.placement import CPU
from app.placement.presets import all_on_gpus
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


def _uncut(sigs):
    return list(range(len(sigs)))


@pytest.mark.parametrize("spec", ["qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b"])
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
        model.__dict__.pop("_compute_facts", None)
        fast = estimate(model, devices, p.settings, p.weight_placement())
        monkeypatch.setattr(core, "compress", _uncut)
        model.__dict__.pop("_compute_facts", None)
        full = estimate(model, devices, p.settings, p.weight_placement())
        monkeypatch.undo()
        # one copy of each neighbourhood is enough: at most an alignment's worth of bytes differs (seen: 32 B)
        assert [d.name for d in fast.devices] == [d.name for d in full.devices]
        for a, b in zip(fast.devices, full.devices):
            assert abs(a.compute - b.compute) <= 4096, (trial, a.name, a.compute - b.compute)
        checked += 1
    assert checked == 20
