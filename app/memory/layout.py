"""Where llama.cpp puts each weight tensor, following its own rules.

- Device list: ``-dev`` or the given model devices (RPC first, then GPUs).
- Layers: ``-ngl`` picks the last N of the ``n_layer+1`` offloadable layers
  (the output layer counts); ``-ts`` (or free memory) splits them into
  contiguous ranges with ``std::upper_bound`` on float32 split points
  (``src/llama-model.cpp`` ``load_tensors``). Token embeddings stay on the CPU.
- Overrides (``-ot``, ``-cmoe``, ``-ncmoe``): first pattern in list order
  whose regex is *found* anywhere in the tensor name wins (``std::regex_search``).
- Tied embeddings: without ``output.weight`` the token embedding is loaded a
  second time for the output device (``TENSOR_DUPLICATED``), unless that is
  the CPU too.
- NextN/MTP layers' tensors are skipped (``TENSOR_SKIP``) in a normal context.
"""

from __future__ import annotations

import struct
import time
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import EstimateError
from ..lanes import CPU, Lane
from ..model import Model
from .backends import backend_of, refused_weights, refuses
from .ecmascript import Compiled, PatternError, compile_pattern, name_bytes
from .settings import NGL_ALL, NGL_AUTO, LlamaSettings


class PlacementError(EstimateError, ValueError):
    """The settings name something llama.cpp would reject (an unknown device or buffer type)."""


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def model_devices(devices: list[Lane], settings: LlamaSettings) -> list[Lane]:
    """The devices llama.cpp uses for the model, in its order (``llama_prepare_model_devices``)."""
    devs = list(devices)
    if settings.devices:
        if [d.lower() for d in settings.devices] == ["none"]:
            return []
        by_name = {d.name.lower(): d for d in devices}
        chosen = []
        for name in settings.devices:
            if name.lower() == "cpu":
                raise PlacementError("-dev does not accept CPU: leave it out (the CPU is always used).")
            if name.lower() not in by_name:
                raise PlacementError(
                    f"-dev names {name}, which is not among the devices "
                    f"({', '.join(d.name for d in devices) or 'none'})."
                )
            chosen.append(by_name[name.lower()])
        devs = chosen
    if settings.split_mode == "none":
        # llama_model_load_from_file_impl: a negative -mg drops every device; one past the list fails the load
        mg = settings.main_gpu
        if devs and mg >= len(devs):
            raise PlacementError(
                f"-sm none -mg {mg} names device {mg}, but llama.cpp uses {len(devs)} "
                f'({", ".join(d.name for d in devs)}), so it refuses to load the model ("invalid value for '
                f'main_gpu"). Use -mg 0 to {len(devs) - 1}.'
            )
        return [devs[mg]] if 0 <= mg < len(devs) else []
    return devs


def layer_devices(n_layer_all: int, devs: list[Lane], settings: LlamaSettings) -> list[str]:
    """Device name for each of the ``n_layer_all + 1`` layers (index n_layer_all is the output layer)."""
    ts = settings.tensor_split
    return list(
        _layer_devices(
            n_layer_all,
            tuple(d.name for d in devs),
            tuple(float(d.free) for d in devs),
            settings.n_gpu_layers,
            tuple(float(x) for x in ts) if ts else None,
        )
    )


@lru_cache(maxsize=256)
def _layer_devices(
    n_layer_all: int, names: tuple[str, ...], free: tuple[float, ...], ngl: int | None, ts: tuple[float, ...] | None
) -> tuple[str, ...]:
    """:func:`layer_devices` of hashable inputs, kept: every estimate asks, and a drag's ask the same (0.09 ms for
    95 layers)."""
    if ngl is None or ngl in (NGL_AUTO, NGL_ALL):
        ngl = n_layer_all + 1
    nd = len(names)
    if ts and any(x != 0 for x in ts[:nd]):
        weights = [ts[i] if i < len(ts) else 0.0 for i in range(nd)]
    else:
        weights = list(free)
    splits = []
    acc = _f32(0.0)
    for w in weights:
        acc = _f32(acc + _f32(w))
        splits.append(acc)
    total = splits[-1] if splits else 0.0
    splits = [_f32(s / total) if total else 0.0 for s in splits]
    i_gpu_start = max(n_layer_all + 1 - ngl, 0)
    act = 0 if not names else min(ngl, n_layer_all + 1)
    out = []
    # float(il - i_gpu_start) / act in single precision: the double quotient rounded to float32 is the same
    xs = array("f", [(il - i_gpu_start) / act if act else 0.0 for il in range(n_layer_all + 1)])
    for il in range(n_layer_all + 1):
        if il < i_gpu_start or (il - i_gpu_start) >= act:
            out.append(CPU)
            continue
        x = xs[il]
        k = 0
        while k < nd and not (splits[k] > x):  # std::upper_bound
            k += 1
        out.append(names[min(k, nd - 1)])
    return tuple(out)


#: Seconds one override pattern may spend searching all of a model's tensor names (then: PlacementError).
MATCH_BUDGET_S = 0.5


#: Names up to this many bytes let a simple pattern (:attr:`~app.memory.ecmascript.Compiled.simple`) use ``re``.
_FAST_NAME_BYTES = 256


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Compiled:
    """``pattern`` as llama.cpp's ``std::regex`` reads it (:mod:`app.memory.ecmascript`); PlacementError if it cannot."""
    try:
        return compile_pattern(pattern)
    except PatternError as exc:
        raise PlacementError(str(exc)) from None


class OverrideMatcher:
    """First-match-wins override resolution, with per-pattern match sets cached per model.

    During a drag only one or two patterns change, so the sets of tensors each
    pattern matches are cached: resolving 40 patterns over 1,131 tensors costs
    set operations, not 45,000 regex searches.

    Patterns are read as ``std::regex`` ECMAScript on the names' bytes, as
    llama.cpp does (:mod:`app.memory.ecmascript`), and each gets
    :data:`MATCH_BUDGET_S` seconds over all names: a pattern with catastrophic
    backtracking (``(.+)+X$``-like) is a :class:`PlacementError`, never a hang.
    """

    def __init__(self, names: list[str], budget_s: float = MATCH_BUDGET_S):
        self.names = names
        self.budget_s = budget_s
        self._bytes = [name_bytes(n) for n in names]
        self._short = max(map(len, self._bytes), default=0) <= _FAST_NAME_BYTES
        self._cache: dict[str, frozenset[int]] = {}
        # the names end to end, for :meth:`holding`: each name's offset in it
        self._blob = b"\n".join(self._bytes)
        self._starts: list[int] = []
        at = 0
        for name in self._bytes:
            self._starts.append(at)
            at += len(name) + 1

    def matches(self, pattern: str) -> frozenset[int]:
        hit = self._cache.get(pattern)
        if hit is None:
            hit = self._search(pattern)
            if len(self._cache) > 20000:
                self._cache.clear()
            self._cache[pattern] = hit
        return hit

    def _search(self, pattern: str) -> frozenset[int]:
        c = _compiled(pattern)
        names = self._bytes
        # only the names that hold a literal every match needs are searched (none: -ncmoe's layers beyond the
        # model's): a drag's new "blk\.14\.ffn_(up|down)_exps" runs the regex on 3 names, not on all 1,131
        req = c.required
        cand = range(len(names)) if req is None else self.holding(req)
        if not cand:
            return frozenset()
        if c.fast is not None and self._short:
            search = c.fast.search
            return frozenset(i for i in cand if search(names[i]))
        rx = c.rx
        deadline = time.monotonic() + self.budget_s
        found = []
        try:
            for i in cand:
                name = names[i]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if rx.search(name, timeout=left):
                    found.append(i)
        except TimeoutError:
            raise PlacementError(
                f"the override pattern {pattern!r} takes too long to match the model's tensor names "
                f"(more than {self.budget_s:g} s; llama.cpp's std::regex would be as slow or slower): simplify it, "
                "e.g. without a repeated group inside a repeat like (.+)+."
            ) from None
        return frozenset(found)

    def holding(self, literal: bytes) -> list[int]:
        """Indices of the names that contain ``literal``, in order: ``bytes.find`` over the names end to end, a
        match counted only where it lies inside one name (so whatever bytes a hostile name holds, the separator
        included). 0.01 ms for a layer's literal over 1,131 names, where ``literal in name`` per name took 0.27."""
        blob, starts, names = self._blob, self._starts, self._bytes
        n, last = len(literal), len(starts) - 1
        out: list[int] = []
        p = blob.find(literal) if names else -1
        while p != -1:
            i = bisect_right(starts, p) - 1
            if p + n <= starts[i] + len(names[i]):
                out.append(i)
                if i == last:
                    break
                p = blob.find(literal, starts[i + 1])
            else:
                p = blob.find(literal, p + 1)
        return out

    def resolve(self, overrides: list[tuple[str, str]]) -> dict[int, str]:
        """Tensor index -> buffer type name of the first matching override."""
        out: dict[int, str] = {}
        for pattern, buft in overrides:
            for i in self.matches(pattern):
                if i not in out:
                    out[i] = buft
        return out


@dataclass
class WeightPlacement:
    """Per-tensor device (``CPU`` for host buffers) and the layer devices behind it."""

    tensor_device: list[str]  # parallel to model.tensors; "" for skipped tensors
    layer_device: list[str]  # n_layer_all + 1 entries; last is the output layer
    duplicated_output: str | None  # device holding a second copy of token_embd (tied embeddings)
    devices: list[Lane]  # the model devices, in llama.cpp's order
    has_overrides: bool = False  # any -ot/-cmoe/-ncmoe in effect (turns pipeline parallelism off)

    #: bytes_by_device before the tied output's copy, when :func:`place_weights` made this placement
    _by_device: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def bytes_by_device(self, model: Model) -> dict[str, int]:
        if self._by_device is not None:
            out = dict(self._by_device)
        else:
            out = {}
            get = out.get
            for nb, dev in zip(model.index.tensor_nbytes, self.tensor_device):
                out[dev] = get(dev, 0) + nb
            out.pop("", None)  # skipped tensors
        if self.duplicated_output:
            te = next(t for t in model.tensors if t.name == "token_embd.weight")
            out[self.duplicated_output] = out.get(self.duplicated_output, 0) + te.nbytes
        return out


def place_weights(
    model: Model, devices: list[Lane], settings: LlamaSettings, matcher: OverrideMatcher | None = None
) -> WeightPlacement:
    """Where llama.cpp puts each tensor for ``settings``; ``matcher`` (one per model) caches override matches."""
    devs = model_devices(devices, settings)
    n_all = model.params.n_layer
    layers = layer_devices(n_all, devs, settings)
    buft_to_dev = {"CPU": CPU}
    for d in devices:
        buft_to_dev[d.buft] = d.name
    if settings.overrides and matcher is None:
        matcher = OverrideMatcher([t.name for t in model.tensors])
    over = matcher.resolve(settings.overrides) if matcher is not None and settings.overrides else {}
    for _, buft in settings.overrides:
        if buft not in buft_to_dev:
            raise PlacementError(
                f"override target {buft!r} is not a buffer type llama.cpp knows here "
                f"(available: {', '.join(buft_to_dev)})."
            )
    tl = model.index.tensor_layer
    # devices whose backend refuses some weights (a Vulkan size limit): those weights stay in host memory
    limited = {d.name: d for d in devs if d.max_tensor_bytes is not None or backend_of(d) == "vulkan"}
    tensors = model.tensors
    # --spec-type draft-mtp loads the NextN/MTP layers' tensors too (load_mtp: no TENSOR_SKIP)
    skipped = () if settings.load_mtp else model.index.skipped_ids
    # each tensor's layer's device, the CPU for an input tensor: a lookup per tensor in C (0.07 -> 0.02 ms for
    # 1,131 tensors, on every drag preview); the skipped ones are set below, after the overrides, as before
    slots = [*layers, CPU]
    tensor_device = list(map(slots.__getitem__, tl))
    moved = set(over)  # tensors not on their layer's device
    for name, limited_lane in limited.items():
        refused = refused_weights(model, limited_lane)
        for i in refused:
            if tensor_device[i] == name:
                tensor_device[i] = CPU  # select_weight_buft: the device refuses the weight's op, the host takes it
                moved.add(i)
    for i, buft in over.items():  # an override to a device's buffer type is taken as given (llama-model-loader.cpp)
        tensor_device[i] = buft_to_dev[buft]
    for i in skipped:
        tensor_device[i] = ""
        moved.add(i)
    # bytes per device: each layer's on its device, then the moved tensors (a drag preview's 40 -ot patterns move
    # 120 of 1,131 tensors: 0.3 ms less than adding up every tensor)
    by_dev: dict[str, int] = {}
    for il, nb in model.index.layer_nbytes.items():
        dev = CPU if il < 0 else layers[il]
        by_dev[dev] = by_dev.get(dev, 0) + nb
    nbytes = model.index.tensor_nbytes
    for i in moved:
        il = tl[i]
        home = CPU if il < 0 else layers[il]
        by_dev[home] -= nbytes[i]
        by_dev[tensor_device[i]] = by_dev.get(tensor_device[i], 0) + nbytes[i]
    by_dev.pop("", None)
    dup = None
    if model.params.tied_embeddings:
        out_dev = layers[n_all]
        te = model.index.token_embd
        assert te is not None  # tied embeddings are detected from token_embd.weight, so the file has it
        if te in over:
            out_dev = buft_to_dev[over[te]]
        else:
            lane = limited.get(out_dev)
            if lane is not None and refuses(lane, tensors[te], model.params, "MUL_MAT"):  # loaded as the output
                out_dev = CPU
                if _token_embd_in_host_buffer(model, devs, settings, te) and not _uses_mmap(settings):
                    # the output's copy went to the plain CPU buffer, token_embd to the device's host buffer
                    # (Vulkan_Host): two buffer types, so llama.cpp keeps two copies (create_tensor's
                    # TENSOR_DUPLICATED reuses a tensor only within one buffer type), both in host memory
                    dup = CPU
        if out_dev != tensor_device[te]:
            dup = out_dev
        elif model.params.arch in OUTPUT_FIRST_ARCHS and not (out_dev == CPU and _uses_mmap(settings)):
            # the output's copy is created before token_embd, so create_tensor finds nothing to reuse in the shared
            # buffer type and keeps two copies (a mapped host buffer maps both onto the same file range)
            dup = out_dev
    placement = WeightPlacement(tensor_device, layers, dup, devs, bool(settings.overrides))
    placement._by_device = {dev: nb for dev, nb in by_dev.items() if nb or dev in tensor_device}
    return placement


#: Architectures whose loader creates the tied output (``token_embd`` with ``TENSOR_DUPLICATED``) before
#: ``token_embd`` itself (``src/models/gemma3n.cpp``, ``gemma4.cpp``).
OUTPUT_FIRST_ARCHS = frozenset({"gemma3n", "gemma4"})

#: Backends whose devices bring a host buffer type (``ggml_backend_dev_host_buffer_type``); RPC and Metal do not.
_HOST_BUFFER_BACKENDS = ("cuda", "rocm", "vulkan", "sycl")


def _token_embd_in_host_buffer(model: Model, devs: list[Lane], settings: LlamaSettings, te: int) -> bool:
    """Whether token_embd lands in the first device's host buffer type (``make_cpu_buft_list``): there is one,
    ``--no-host`` is off, and that device accepts the weight's GET_ROWS."""
    if not settings.use_host:
        return False
    first = next((d for d in devs if backend_of(d) in _HOST_BUFFER_BACKENDS), None)
    return first is not None and not refuses(first, model.tensors[te], model.params, "GET_ROWS")


def _uses_mmap(settings: LlamaSettings) -> bool:
    """llama-fit-params loads with LLAMA_LOAD_MODE_NONE; otherwise auto, mmap and mmap+mlock map the file
    (``llama_model_loader``: use_mmap), and a mapped load puts host-buffer weights in the plain CPU buffer."""
    if settings.tool == "fit-params":
        return False
    return settings.load_mode in (None, "auto", "mmap", "mmap+mlock")
