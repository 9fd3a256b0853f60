"""Auto-fit: a placement that fits every device with a margin, for a given context and slot count.

Strategy (what users do by hand, done exactly):
1. Device order: the fastest device (memory bandwidth, then capacity) goes
   last in ``-dev`` order, so it takes the output layer and fills first.
2. Dense pass: with every routed expert on the CPU, give each device, from
   the last backwards, as many of the remaining last layers (attention,
   shared experts, norms, their KV cache) as fit; layers left over stay on
   the CPU (llama.cpp keeps CPU layers at the start).
3. Expert pass: on each device, fastest first, bring the experts of its own
   layers back from the CPU, highest layer first (so CPU experts form a
   prefix and export as ``--n-cpu-moe N`` on one device), as many whole
   layers as fit, then single gate/up/down parts of the next layer.
4. Overflow pass: experts still on the CPU go to any device with room left.
Pinned blocks keep their device throughout. Every step is checked with the
estimator, so the result never exceeds a device's budget by our numbers. A
trial llama.cpp would abort on (a layer's KV cache above a Vulkan driver's
storage-buffer range) counts as not fitting, and the report says what kept
those layers off the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EstimateError, ExportError
from ..lanes import Lane
from ..memory.backends import BackendAbort
from ..memory.estimator import Estimate, Estimator
from ..memory.settings import LlamaSettings
from ..model import BlockId, Model, Role
from ..units import GiB
from .placement import CPU, Placement


class FitError(ExportError, ValueError):
    """No placement fits: the message says what would have to change."""


@dataclass
class FitResult:
    placement: Placement
    estimate: Estimate
    report: list[str] = field(default_factory=list)
    #: device -> why llama.cpp would abort with more on it (the fit stopped there for that, not for memory)
    held_back: dict[str, str] = field(default_factory=dict)


def budget(d: Lane, margin: int) -> int:
    return (d.free or d.total) - margin


class _Fitter:
    def __init__(
        self,
        model: Model,
        devices: list[Lane],
        settings: LlamaSettings,
        margin: int,
        host_budget: int | None,
        pinned_from: Placement | None,
    ):
        self.model = model
        self.settings = settings
        self.margin = margin
        self.host_budget = host_budget
        self.order = sorted(devices, key=lambda d: (d.bandwidth, d.free or d.total))  # fastest last
        self.devices = list(devices)
        self.pinned: dict[int, str] = {}
        self.pinned_ids: set[str] = set()
        self.pinned_layers: dict[int, str] = {}  # pinned attention/output blocks fix their layer (and its KV)
        if pinned_from is not None:
            self.pinned_ids = set(pinned_from.pinned)
            for item in pinned_from.pinned:
                for i in pinned_from.tensor_indices(item):
                    self.pinned[i] = pinned_from.tensor_device[i]
                block = model.index.block_of_item(item)
                if block.role is Role.ATTN and block.layer is not None:
                    self.pinned_layers[block.layer] = pinned_from.layer_device[block.layer]
                elif block.role is Role.OUTPUT:
                    self.pinned_layers[model.params.n_layer] = pinned_from.layer_device[model.params.n_layer]
        self.n = model.params.n_layer
        self.exp_blocks = {
            b.layer: b for b in model.blocks if b.role is Role.EXPERTS and not b.nextn and b.layer is not None
        }
        self.calls = 0
        self.aborts: dict[str, str] = {}  # device -> why llama.cpp would abort with more on it (first seen)
        self.estimator = Estimator(model)  # auto_fit() may hand in a session's instead

    def make(self, layer_device: list[str], experts_on: dict[str, str]) -> Placement:
        """Placement with given layer devices; expert blocks/parts in ``experts_on`` go there, other experts to CPU."""
        layer_device = list(layer_device)
        for il, dev in self.pinned_layers.items():
            layer_device[il] = dev
        p = Placement(self.model, self.devices, layer_device, [], self.settings.copy(), set(self.pinned_ids))
        p.tensor_device = p.default_tensor_devices()
        for blk in self.exp_blocks.values():
            for i in p.tensor_indices(blk.id):
                p.tensor_device[i] = CPU
        for item, dev in experts_on.items():
            for i in p.tensor_indices(item):
                p.tensor_device[i] = dev
        for i, dev in self.pinned.items():
            p.tensor_device[i] = dev
        return p

    def est(self, p: Placement, quick: bool = True) -> Estimate:
        """The search's trials replay a graph cut to representative layers (10x faster on a 94-layer model: 0.17
        vs 1.8 s for a whole fit); the result is checked with every layer (``quick=False``)."""
        self.calls += 1
        return self.estimator.estimate(p.devices, self.settings, p.weight_placement(), quick=quick)

    def trial(self, p: Placement, dev: str) -> Estimate | None:
        """A search step's estimate, or None where llama.cpp would abort on it (the step does not fit; the first
        reason per device is kept for the report). Only the device being filled is blamed: the steps before
        this one ran, so what changed is what this step moved there."""
        try:
            return self.est(p)
        except BackendAbort as exc:
            self.aborts.setdefault(dev, str(exc))
            return None

    def fits(self, e: Estimate | None, names: list[str] | None = None) -> bool:
        if e is None:
            return False
        budgets = {d.name: budget(d, self.margin) for d in self.devices}
        for dm in e.devices:
            if dm.name == CPU:
                if self.host_budget is not None and dm.total > self.host_budget and (names is None or CPU in names):
                    return False
                continue
            if (names is None or dm.name in names) and dm.total > budgets[dm.name]:
                return False
        return True

    def run(self) -> FitResult:
        n = self.n
        layers = [CPU] * (n + 1)
        remaining = n + 1  # layers [0, remaining) still unassigned (CPU)
        # 2. dense pass, last device backwards
        for dev in reversed(self.order):
            lo, hi = 0, remaining
            while lo < hi:  # largest c such that the last c unassigned layers fit on dev
                c = (lo + hi + 1) // 2
                trial_layers = layers[: remaining - c] + [dev.name] * c + layers[remaining:]
                if self.fits(self.trial(self.make(trial_layers, {}), dev.name), [dev.name]):
                    lo = c
                else:
                    hi = c - 1
            if lo == 0 and remaining == n + 1:
                continue  # nothing fits here, not even the output layer; try the next device
            layers = layers[: remaining - lo] + [dev.name] * lo + layers[remaining:]
            remaining -= lo
            if remaining == 0:
                break
        if all(d == CPU for d in layers) and self.devices:
            why = "".join(f" {dev}: {msg}" for dev, msg in self.aborts.items())
            raise FitError(
                "not even the output layer fits on any device with a margin of "
                f"{self.margin / GiB:.1f} GiB: use a shorter context, fewer slots, a smaller quantization "
                "or a smaller margin." + why
            )
        experts: dict[str, str] = {}
        # 3. expert pass: each device's own layers, fastest device first, highest layer first
        for dev in reversed(self.order):
            own = sorted((il for il in self.exp_blocks if layers[il] == dev.name), reverse=True)
            lo, hi = 0, len(own)
            while lo < hi:
                c = (lo + hi + 1) // 2
                trial = dict(experts, **{self.exp_blocks[il].id: dev.name for il in own[:c]})
                if self.fits(self.trial(self.make(layers, trial), dev.name), [dev.name, CPU]):
                    lo = c
                else:
                    hi = c - 1
            experts.update({self.exp_blocks[il].id: dev.name for il in own[:lo]})
            if lo < len(own):
                self._parts(own[lo], dev.name, layers, experts)
        # 4. overflow: experts still on the CPU go to any device with room, highest layer first
        for dev in reversed(self.order):
            left = sorted(
                (
                    il
                    for il in self.exp_blocks
                    if self.exp_blocks[il].id not in experts
                    and not any(self.model.index.block_id(k).block == BlockId(il, Role.EXPERTS) for k in experts)
                ),
                reverse=True,
            )
            for il in left:
                trial = dict(experts, **{self.exp_blocks[il].id: dev.name})
                if self.fits(self.trial(self.make(layers, trial), dev.name), [dev.name, CPU]):
                    experts = trial
                else:
                    self._parts(il, dev.name, layers, experts)
                    break
        final = self.make(layers, experts)
        e = self.est(final, quick=False)
        while not self.fits(e) and experts:
            # the exact figures (every layer) are a few MiB above the search's: hand back the last expert moved
            experts.pop(next(reversed(experts)))
            final = self.make(layers, experts)
            e = self.est(final, quick=False)
        if not self.fits(e):
            over = [
                d.name
                for d in e.devices
                if d.name != CPU and d.total > budget(next(x for x in self.devices if x.name == d.name), self.margin)
            ]
            raise FitError(
                f"no placement fits: {', '.join(over) or 'host memory'} would still be over budget "
                "(pinned blocks may hold too much); unpin blocks, shorten the context or lower the margin."
            )
        return FitResult(final, e, self._report(final, e), dict(self.aborts))

    def _parts(self, il: int, dev: str, layers: list[str], experts: dict[str, str]) -> None:
        blk = self.exp_blocks[il]
        for part in sorted(blk.parts, key=lambda pt: -blk.part_bytes(pt)):
            item = f"{blk.id}:{part}"
            trial = dict(experts, **{item: dev})
            if self.fits(self.trial(self.make(layers, trial), dev), [dev, CPU]):
                experts[item] = dev

    def _report(self, p: Placement, e: Estimate) -> list[str]:
        out = []
        for dm in e.devices:
            if dm.name == CPU:
                continue
            n_layers = sum(1 for d in p.layer_device if d == dm.name)
            n_exp = sum(1 for b in self.exp_blocks.values() if p.device_of(b.id) == dm.name)
            out.append(
                f"{dm.name}: {n_layers} layers, experts of {n_exp} layers, {dm.total / GiB:.2f} GiB "
                f"(weights {dm.model / GiB:.2f}, KV {dm.context / GiB:.2f}, compute {dm.compute / GiB:.2f})"
            )
        cpu_exp = sum(1 for b in self.exp_blocks.values() if p.device_of(b.id) == CPU)
        out.append(
            f"CPU: {sum(1 for d in p.layer_device if d == CPU)} layers, experts of {cpu_exp} layers, "
            f"{e.host.total / GiB:.2f} GiB host memory"
        )
        for dev, msg in self.aborts.items():
            out.append(f"{dev} holds no more: {msg}")
        out.append(f"({self.calls} estimates)")
        return out


def auto_fit(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    *,
    margin: int = GiB,
    host_budget: int | None = None,
    pinned_from: Placement | None = None,
    estimator: Estimator | None = None,
) -> FitResult:
    """Fit ``model`` on ``devices`` (non-CPU, llama.cpp names) leaving ``margin`` bytes free on each.

    ``estimator``: an :class:`~app.memory.estimator.Estimator` of ``model`` whose caches to reuse."""
    fitter = _Fitter(model, devices, settings, margin, host_budget, pinned_from)
    fitter.estimator = estimator if estimator is not None and estimator.model is model else Estimator(model)
    try:
        return fitter.run()
    except EstimateError as exc:  # llama.cpp refuses the settings, or aborts on every placement tried
        raise FitError(f"auto-fit found no placement llama.cpp runs: {exc}") from None
