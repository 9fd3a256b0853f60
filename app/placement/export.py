"""Turn a placement into llama.cpp arguments, exactly.

1. Layer devices become ``-dev`` (the order of the device runs), ``-ngl``
   (layers not on the CPU, output layer included) and ``-ts`` as layer
   counts. llama.cpp keeps CPU layers at the start and gives each device one
   contiguous run, the output layer on the last; a placement that breaks this
   is refused with an explanation (:class:`InexpressibleError`).
2. Every tensor whose wanted device differs from where those flags put it
   gets an override: ``--cpu-moe`` / ``--n-cpu-moe N`` when exactly
   equivalent, otherwise the fewest ``-ot`` patterns (layer ranges merged,
   no commas, ``blk\\.1\\.`` never matching ``blk.10.``).
3. The result is checked by running llama.cpp's own rules (``place_weights``)
   on it: if any tensor or layer would land elsewhere, export fails instead
   of producing a wrong command.
"""

from __future__ import annotations

import os
from collections import OrderedDict, defaultdict

from ..command.ot_patterns import int_set_regex
from ..command.spec import InexpressibleError, PlacementArgs
from ..lanes import CPU
from ..memory.layout import OverrideMatcher, place_weights
from ..memory.settings import LlamaSettings
from ..model import Model, Role
from .placement import Placement


def _layer_runs(p: Placement) -> tuple[list[str], int, list[int]]:
    n = p.model.params.n_layer
    seq = p.layer_device
    order: list[str] = []
    counts: list[int] = []
    seen_gpu = False
    for il, dev in enumerate(seq):
        what = f"layer {il}" if il < n else "the output layer"
        if dev == CPU:
            if seen_gpu:
                first_gpu = next(i for i, d in enumerate(seq) if d != CPU)
                raise InexpressibleError(
                    f"{what} is on the CPU after layer {first_gpu} went to {seq[first_gpu]}: llama.cpp keeps CPU "
                    f"layers at the start (-ngl offloads the last layers). Move layers 0-{il - 1 if il else 0} to "
                    f"the CPU as well, or move only {what}'s FFN/experts (not its attention) to the CPU."
                )
            continue
        seen_gpu = True
        if order and order[-1] == dev:
            counts[-1] += 1
            continue
        if dev in order:
            raise InexpressibleError(
                f"{dev} holds layers before and after {order[-1]} (again at {what}): llama.cpp gives each device "
                f"one contiguous range of layers (-ts). Keep {dev}'s layers together, or move only the FFN/experts "
                f"of the layers in between."
            )
        order.append(dev)
        counts.append(1)
    if order and seq[n] == CPU:
        raise InexpressibleError(
            "the output layer is on the CPU while other layers are on GPUs: llama.cpp puts "
            "the output layer on the last GPU device; move the output head to a GPU lane."
        )
    return order, sum(counts), counts


def _factor(names: list[str]) -> str:
    """A regex matching exactly these literal names: common prefix/suffix factored out."""
    names = sorted(set(names), key=lambda s: (-len(s), s))
    if len(names) == 1:
        return names[0]
    pre = os.path.commonprefix(names)
    suf = os.path.commonprefix([n[len(pre) :][::-1] for n in names])[::-1]
    mids = [n[len(pre) : len(n) - len(suf)] for n in names]
    if any(m == "" for m in mids):
        return "(" + "|".join(names) + ")"
    return f"{pre}({'|'.join(mids)}){suf}"


def _escape(s: str) -> str:
    return s.replace(".", r"\.")


def buffer_type(p: Placement, device: str) -> str:
    if device == CPU:
        return "CPU"
    return next(d.buft for d in p.devices if d.name == device)


class ExportCache:
    """Recent :func:`placement_args` results of one model by placement state, and the ``-ot`` match sets its
    self-check needs. A session keeps one: a drop asks for the same placement twice (the check before the
    move and the command panel after it), and a drag asks for placements a few patterns apart. A drag's preview
    asks without the self-check (``verify`` False); a later ask with it runs the check on the kept result."""

    def __init__(self, model: Model, matcher: OverrideMatcher | None = None, size: int = 64):
        self.model = model
        self.matcher = matcher or OverrideMatcher([t.name for t in model.tensors])
        self.size = size
        # placement state -> (the args or why not, whether the self-check ran)
        self._results: OrderedDict[tuple, tuple[PlacementArgs | InexpressibleError, bool]] = OrderedDict()

    def get(self, p: Placement, verify: bool = True) -> PlacementArgs:
        key = (tuple(p.layer_device), tuple(p.tensor_device), tuple((d.name, d.buft) for d in p.devices))
        got = self._results.get(key)
        hit, checked = got if got is not None else (None, False)
        if hit is None or (verify and not checked):
            try:
                if hit is None:
                    hit = _placement_args(p, self.matcher, verify)
                elif isinstance(hit, PlacementArgs):
                    _verify(p, hit, self.matcher)
            except InexpressibleError as exc:
                hit = exc
            self._results[key] = (hit, verify or checked)
            if len(self._results) > self.size:
                self._results.popitem(last=False)
        if isinstance(hit, InexpressibleError):
            raise hit
        return PlacementArgs(
            list(hit.devices),
            hit.n_gpu_layers,
            list(hit.tensor_split),
            list(hit.overrides),
            hit.cpu_moe,
            hit.n_cpu_moe,
            list(hit.notes),
        )


def placement_args(p: Placement, cache: ExportCache | None = None, verify: bool = True) -> PlacementArgs:
    """Compute -dev/-ngl/-ts and overrides for ``p`` and verify them against llama.cpp's rules.

    ``cache`` (an :class:`ExportCache` of ``p``'s model) reuses earlier results and match sets. ``verify``
    False leaves out the self-check (the arguments resolved again as llama.cpp would, which must give ``p``
    back: a failure is this module's bug, not the placement's), half the cost on a 94-layer model: a drag's
    preview, whose drop checks.
    """
    if cache is not None and cache.model is p.model:
        return cache.get(p, verify)
    return _placement_args(p, None, verify)


def _placement_args(p: Placement, matcher: OverrideMatcher | None, verify: bool = True) -> PlacementArgs:
    order, ngl, counts = _layer_runs(p)
    # devices that only receive overridden tensors must still be model devices (with no layers)
    extra = [d.name for d in p.devices if d.name not in order and d.name in set(p.tensor_device)]
    dev_order = order + extra
    ts = counts + [0] * len(extra)
    base = PlacementArgs(dev_order, ngl, ts if len(dev_order) > 1 else [], [])
    default = p.default_tensor_devices()
    model = p.model
    n = model.params.n_layer
    # group differing tensors: target device -> (base-name set) -> layers
    groups: dict[str, dict[frozenset[str], set[int]]] = defaultdict(lambda: defaultdict(set))
    globals_: dict[str, list[str]] = defaultdict(list)
    per_layer_bases: dict[tuple[str, int], set[str]] = defaultdict(set)
    tbases = model.index.tensor_bases
    for i, (want, have) in enumerate(zip(p.tensor_device, default)):
        if want == have or want == "":
            continue
        layer, b = tbases[i]
        if layer is None:
            globals_[want].append(b)
        else:
            per_layer_bases[(want, layer)].add(b)
    for (want, layer), bases in per_layer_bases.items():
        groups[want][frozenset(bases)].add(layer)
    # exact --cpu-moe / --n-cpu-moe equivalents (llama.cpp appends them after the -ot list, as we emit them)
    cpu = groups.get(CPU, {})
    exps_layers = {b.layer for b in model.blocks if b.role is Role.EXPERTS and not b.nextn and b.layer is not None}
    cpu_by_default = {il for il in exps_layers if p.layer_device[il] == CPU}
    for cpu_bases, cpu_layers in list(cpu.items()):
        expert_bases = {
            tbases[i][1]
            for il in cpu_layers
            for b in model.index.layer_blocks.get(il, ())
            if b.role is Role.EXPERTS
            for i in model.index.item_tensors[b.id]
        }
        if set(cpu_bases) != expert_bases or not cpu_layers <= exps_layers:
            continue
        full = cpu_layers | cpu_by_default
        n = max(full) + 1
        if full == exps_layers and len(exps_layers) > 1:
            base.cpu_moe = True
            del cpu[cpu_bases]
        elif full == {il for il in exps_layers if il < n}:
            # -ncmoe N covers layers 0..N-1; dense leading layers (DeepSeek, GLM) have no experts to move
            base.n_cpu_moe = n
            del cpu[cpu_bases]
    suffixless = model.index.suffixless_bases

    def end(bases) -> str:
        # "\." stops blk\.1\.attn_q from matching attn_q_norm; names without a suffix end the string instead
        return r"(\.|$)" if set(bases) & suffixless else r"\."

    for want, by_bases in groups.items():
        buft = buffer_type(p, want)
        # merge base-sets that share a layer set, so one pattern covers e.g. ffn and experts of layers 10-19
        by_layers: dict[frozenset[int], set[str]] = defaultdict(set)
        for group_bases, group_layers in by_bases.items():
            by_layers[frozenset(group_layers)] |= set(group_bases)
        for merged_layers, merged_bases in sorted(by_layers.items(), key=lambda kv: min(kv[0])):
            rx_layers = int_set_regex(set(merged_layers))
            if "|" in rx_layers:
                rx_layers = f"({rx_layers})"
            base.overrides.append(
                (rf"blk\.{rx_layers}\.{_escape(_factor(sorted(merged_bases)))}{end(merged_bases)}", buft)
            )
    for want, global_bases in globals_.items():
        for b in sorted(set(global_bases)):
            base.overrides.append((rf"^{_escape(b)}{end([b])}", buffer_type(p, want)))
    if verify:
        _verify(p, base, matcher)
    return base


def _verify(p: Placement, args: PlacementArgs, matcher: OverrideMatcher | None) -> None:
    s = args.settings(LlamaSettings())
    wp = place_weights(p.model, p.devices, s, matcher)
    got_layers = wp.layer_device
    if got_layers != p.layer_device:
        bad = next(i for i, (a, b) in enumerate(zip(got_layers, p.layer_device)) if a != b)
        raise InexpressibleError(
            f"internal check failed: layer {bad} would land on {got_layers[bad]} instead of "
            f"{p.layer_device[bad]}; the command was not exported (please report this)."
        )
    for i, d in enumerate(wp.tensor_device):
        got = d
        if got != p.tensor_device[i]:
            raise InexpressibleError(
                f"internal check failed: {p.model.tensors[i].name} would land on {got} instead "
                f"of {p.tensor_device[i]}; the command was not exported (please report this)."
            )
