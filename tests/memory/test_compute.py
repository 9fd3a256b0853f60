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


def _uncut(sigs, hood=1):
    return list(range(len(sigs)))


@pytest.mark.parametrize("spec", ["qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b", "qwen3-next-80b-a3b", "qwen3.5-27b",
                                  "lfm2-8b-a1b", "phi-3.5-moe"])
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


@pytest.mark.parametrize("spec", ["qwen3-next-80b-a3b", "qwen3.5-35b-a3b"])
def test_compressed_graph_of_periodic_hybrids(spec, tmp_path, monkeypatch):
    """3 recurrent : 1 attention layers, the first N layers' experts on the CPU (-ncmoe N): a wrong cut of the
    layers after the split loses a peak (qwen3next -ncmoe 40 -fa on lost 28 MiB with a narrower neighbourhood)."""
    from app.command.parse import settings_from_args

    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB, "rpc") for i in range(2)]
    n = model.params.n_layer
    for ncmoe in (n // 3, n - 9, n - 8, n - 7, n - 5):
        for extra in (["-fa", "on"], ["-fa", "off", "-ts", "1,1", "-np", "2"]):
            s = settings_from_args(["-c", "8192", "-ngl", "all", "-ncmoe", str(ncmoe), *extra], tool="fit-params")
            model.__dict__.pop("_compute_facts", None)
            fast = estimate(model, devices, s)
            monkeypatch.setattr(core, "compress", _uncut)
            model.__dict__.pop("_compute_facts", None)
            full = estimate(model, devices, s)
            monkeypatch.undo()
            for a, b in zip(fast.devices, full.devices, strict=True):
                assert b.compute > 0 and abs(a.compute - b.compute) <= 4096, (ncmoe, extra, a.name, a.compute, b.compute)
