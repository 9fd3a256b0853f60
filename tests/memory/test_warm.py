"""Estimator.warm: the cut graphs a drag's previews need, built while the board is still, change no figure.

A drag preview estimates a cut of the model's layers (app/memory/compute/compress.py), padded to a few sizes so
that one built graph serves many placements; a preview that keeps more layers than the board's placement needs the
graph of a bigger size, and built during the drag it costs that preview 16-30 ms on a 94-layer model. Warm builds
those graphs ahead, one per call.
"""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute import core
from app.memory.estimator import Estimator
from app.model import open_model
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


def _counting(monkeypatch):
    """Builder constructions (graph builds) and the cut sizes estimated, from here on."""
    seen = {"builds": 0, "sizes": []}
    real_builder, real_pad = core.Builder, core.pad_layers

    class Counting(real_builder):
        def __init__(self, *a, **k):
            seen["builds"] += 1
            super().__init__(*a, **k)

    def pad(keep, n, at_least=0):
        out = real_pad(keep, n, at_least)
        if not at_least:
            seen["sizes"].append(len(out))
        return out

    monkeypatch.setattr(core, "Builder", Counting)
    monkeypatch.setattr(core, "pad_layers", pad)
    return seen


def _board(tmp_path, spec):
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"CUDA{i}", f"CUDA{i}", 96 * GiB, 96 * GiB) for i in range(3)]
    args = ["-ngl", "all", "-ts", "1,1,1", "-c", "8192"]
    for k, il in enumerate(range(2, model.params.n_layer - 4, 2)):  # a board with scattered overrides
        args += ["-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps={'CPU' if k % 2 else 'CUDA2'}"]
    return model, devices, settings_from_args(args, tool="server")


def test_warm_builds_the_graphs_a_drag_then_uses_and_no_figure_changes(tmp_path, monkeypatch):
    model, devices, settings = _board(tmp_path, "qwen3-30b-a3b")
    warmed, fresh = Estimator(model), Estimator(model)
    warmed.estimate(devices, settings)  # the board's own figures (every layer)
    seen = _counting(monkeypatch)
    calls = 1
    while warmed.warm(devices, settings):
        calls += 1
        assert calls < 10
    board_size = seen["sizes"][0]
    # the board's own cut (built by its preview), then one graph a call
    assert seen["builds"] == calls - 1 >= 3, (seen, calls)
    assert not warmed.warm(devices, settings) and seen["builds"] == calls - 1  # done: nothing more

    seen["builds"], seen["sizes"] = 0, []
    n = model.params.n_layer
    for k in range(24):  # a drag from the board: one block of experts at a time on each lane
        s = settings.copy(overrides=list(settings.overrides))
        s.overrides[k % len(s.overrides)] = (rf"blk\.{(k * 7) % n}\.ffn_(up|down)_exps", ("CPU", "CUDA0", "CUDA1")[k % 3])
        got = warmed.estimate(devices, s, quick=True)
        want = fresh.estimate(devices, s, quick=True)
        assert [(d.name, d.compute) for d in got.devices] == [(d.name, d.compute) for d in want.devices], k
        assert got.notes == want.notes
        assert not any("approximate" in note for note in got.notes)
    warmed_sizes = seen["sizes"][0::2]  # the warmed estimator's previews (the fresh one's come between)
    bigger = sum(size > board_size for size in warmed_sizes)
    assert bigger >= 6, (board_size, warmed_sizes)  # previews that needed a bigger graph than the board's
    fresh_builds = len({size for size in seen["sizes"][1::2]})
    assert seen["builds"] == fresh_builds, seen  # every build was the fresh estimator's: none for the warmed
    print(f"board cut {board_size}, {calls} warm calls, warmed previews' sizes {sorted(set(warmed_sizes))}")


@pytest.mark.parametrize("spec", ["gemma-3-27b", "qwen3.5-35b-a3b"])
def test_warm_builds_nothing_ahead_for_layers_of_several_kinds(spec, tmp_path, monkeypatch):
    """A model whose layers are of several kinds (gemma-3's local and global attention, qwen3.5's linear and
    full attention) keeps other kinds in a cut of another size, depending on the placement: not known ahead."""
    model, devices, settings = _board(tmp_path, spec)
    est = Estimator(model)
    seen = _counting(monkeypatch)
    assert not est.warm(devices, settings)
    assert seen["builds"] == 1  # the board's own preview's graph (a cut where the model is cut), and no other
    est.estimate(devices, settings, quick=True)
    assert seen["builds"] == 1  # that preview was estimated and kept: asked again, nothing is built
    assert not est.warm(devices, settings) and seen["builds"] == 1
