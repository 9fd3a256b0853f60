"""The "fastest" placement: minimise predicted decode time subject to memory (with margin).

Starts from auto-fit (dense parts and KV first on the fastest device, experts after) and improves it by
local search with the speed model: move an expert block or part from the CPU (or a slower device) to a
faster device with room, or shift a layer boundary between two GPUs, keeping every change that fits and
lowers the predicted time per token. A fast 24 GB card and a slow 12 GB card are therefore used by
bandwidth, not just capacity; pinned blocks never move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..lanes import Lane
from ..memory.backends import BackendAbort
from ..memory.estimator import Estimate, Estimator
from ..memory.settings import LlamaSettings
from ..model import BlockId, Model, Role
from ..speed.predict import DecodePrediction, SpeedFacts, SpeedParams, predict_decode
from ..units import GiB
from .autofit import FitError, auto_fit, budget
from .export import ExportCache, InexpressibleError, placement_args
from .placement import CPU, Placement


@dataclass
class FastestResult:
    placement: Placement
    estimate: Estimate
    decode: DecodePrediction
    start_decode: DecodePrediction
    steps: list[str] = field(default_factory=list)


def _fits(e: Estimate, devices: list[Lane], margin: int) -> bool:
    budgets = {d.name: budget(d, margin) for d in devices}
    return all(m.total <= budgets[m.name] for m in e.devices if m.name in budgets)


def fastest(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    params: SpeedParams,
    *,
    margin: int = GiB,
    pinned_from: Placement | None = None,
    max_rounds: int = 60,
    estimator: Estimator | None = None,
    facts: SpeedFacts | None = None,
    export_cache: ExportCache | None = None,
) -> FastestResult:
    """The placement with the best predicted decode speed that fits, by local search from auto-fit.

    ``estimator``, ``facts`` and ``export_cache`` (all of ``model``) are reused when given."""
    estimator = estimator if estimator is not None and estimator.model is model else Estimator(model)
    facts = facts if facts is not None and facts.model is model else SpeedFacts(model)
    export_cache = (
        export_cache
        if export_cache is not None and export_cache.model is model
        else ExportCache(model, estimator.matcher)
    )
    start = auto_fit(model, devices, settings, margin=margin, pinned_from=pinned_from, estimator=estimator)
    p = start.placement
    pinned = set(p.pinned)

    def score(q: Placement) -> tuple[float, Estimate | None, DecodePrediction | None]:
        try:
            placement_args(q, export_cache)
        except InexpressibleError:
            return float("inf"), None, None
        # trials replay a graph cut to representative layers (fast); the result is checked with every layer below
        try:
            e = estimator.estimate(q.devices, q.settings, q.weight_placement(), quick=True)
        except BackendAbort:  # llama.cpp stops on this placement (a cache its device cannot hold): not a candidate
            return float("inf"), None, None
        if not _fits(e, devices, margin):
            return float("inf"), e, None
        d = predict_decode(model, q.weight_placement(), params, facts=facts)
        return d.seconds_per_token, e, d

    best_t, best_e, best_d = score(p)
    start_d = best_d
    steps: list[str] = []
    speed = {d.name: params.get(d.name).bandwidth * params.get(d.name).eff_bandwidth for d in devices}
    by_speed = sorted(devices, key=lambda d: -speed[d.name])

    def is_pinned(block_id: str) -> bool:  # a pinned block, or any pinned part of it
        ids = model.index.ids
        return block_id in pinned or any(ids[x].block == ids[block_id] for x in pinned if x in ids)

    exps = [
        b
        for b in model.blocks
        if b.role is Role.EXPERTS and not b.nextn and b.layer is not None and not is_pinned(b.id)
    ]
    for _ in range(max_rounds):
        improved = False
        # 1. experts (whole blocks, then parts) from a slower place to a faster device with room
        for dev in by_speed:
            movable = sorted(
                (
                    b
                    for b in exps
                    if p.device_of(b.id) not in (dev.name,)
                    and (p.device_of(b.id) == CPU or speed.get(p.device_of(b.id), 0) < speed[dev.name])
                ),
                key=lambda b: (p.layer_device[b.layer or 0] != dev.name, -(b.layer or 0)),
            )
            for b in movable:
                for item in [b.id] + [
                    str(BlockId(b.layer, b.role, part)) for part in sorted(b.parts, key=lambda x: -b.part_bytes(x))
                ]:
                    if p.device_of(item) == dev.name:
                        continue
                    q = p.copy()
                    q.assign(item, dev.name)
                    t, e, d = score(q)
                    if t < best_t - 1e-9:
                        p, best_t, best_e, best_d = q, t, e, d
                        steps.append(f"{item} -> {dev.name}")
                        improved = True
                        break
                else:
                    continue
                break
        # 2. shift a layer boundary between two devices toward the faster one
        runs = [
            (dev, [il for il, x in enumerate(p.layer_device) if x == dev])
            for dev in dict.fromkeys(x for x in p.layer_device if x != CPU)
        ]
        for (dev_a, la), (dev_b, lb) in zip(runs, runs[1:]):
            if not la or not lb:
                continue
            if speed.get(dev_a, 0) < speed.get(dev_b, 0):
                il, to = la[-1], dev_b  # a's last layer moves to the faster b
            else:
                il, to = lb[0], dev_a
            if il >= model.params.n_layer:
                continue
            layer_blocks = model.layer_blocks(il)
            if any(is_pinned(blk.id) for blk in layer_blocks):
                continue  # a pinned block keeps its layer where it is
            q = p.copy()
            for blk in layer_blocks:
                if blk.role is not Role.EXPERTS or p.device_of(blk.id) != CPU:
                    q.assign(blk.id, to)
            t, e, d = score(q)
            if t < best_t - 1e-9:
                p, best_t, best_e, best_d = q, t, e, d
                steps.append(f"layer {il} -> {to}")
                improved = True
        if not improved:
            break
    if best_d is None or best_e is None or start_d is None:
        raise FitError("no placement fits with this margin")
    best_e = estimator.estimate(p.devices, p.settings, p.weight_placement())
    if not _fits(best_e, devices, margin):  # a few MiB over once every layer is replayed: auto-fit's own (checked)
        p, best_e, best_d, steps = start.placement, start.estimate, start_d, []
    return FastestResult(p, best_e, best_d, start_d, steps)
