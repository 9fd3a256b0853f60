"""The public entry: bind a built graph to a placement, schedule, allocate, and memoise the results."""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter

from ...lanes import CPU
from ...model import Model
from ...units import fmt_bytes
from ..backends import BackendAbort, alignment_of, backend_of, cuda_like, host_buffer_of, offloads_ops
from ..kv import CACHE_TYPE_BLOCKS, ENCODER_DECODER_ARCHS, ContextShape
from ..layout import WeightPlacement
from ..settings import NGL_ALL, NGL_AUTO, LlamaSettings
from .alloc import Trace, allocate_graph, allocate_traced
from .approx import approx_peaks, approximate_note
from .builder import Builder
from .compress import compress, pad_layers
from .context import Ctx
from .ggml import INPUT, OUTPUT, VIEW_OPS, nbytes, ne4, nelements
from .models import family_of
from .mtp import add_sampling
from .schedule import refuses_nothing, schedule, supports_op, weight_users
from .schedule import shape as sched_shape
from .vk_optimize import reorder as vk_reorder
from .vk_optimize import use_counts

log = logging.getLogger("app.memory.compute")

_CACHE_SIZE = 256  # results per model (a drag revisits the same placements)
_GRAPHS = 32  # built graphs per model (one per context shape, layer structure and kept-layer count)


def _getter(idx):
    """A function returning the tuple ``(seq[i] for i in idx)`` (C speed for the common case)."""
    if not idx:
        return lambda seq: ()
    if len(idx) == 1:
        return lambda seq, i=idx[0]: (seq[i],)
    return itemgetter(*idx)


def _interleaved(kinds: list[int]) -> bool:
    """Runs of 3+ layers of one structure recur between layers of another (3 sliding-window layers before each
    global one). A middle pipelined device's peak then depends on the allocator's state after
    two such periods, which a neighbourhood of one layer either side does not keep: Trinity-Mini (afmoe)
    ``-ts 1,2,1 -cmoe -np 4``, RPC1 62.89 MiB cut vs 90.89 uncut and in llama-fit-params (K-EXAONE's and
    Step-3.5's families set ``hood=2`` for the same reason)."""
    runs = []  # (kind, length)
    i = 0
    while i < len(kinds):
        j = i
        while j < len(kinds) and kinds[j] == kinds[i]:
            j += 1
        runs.append((kinds[i], j - i))
        i = j
    long = [k for k, n in runs[1:-1] if n >= 3]
    return len(long) > len(set(long))  # one structure's runs of 3+ recur: a pattern, not a dense lead or a tail


def model_facts(model: Model) -> dict:
    """Per-model constants (tensor index by name, shapes, tensors per layer, each layer's structure) and the
    caches of built graphs and results; :class:`app.memory.estimator.Estimator` keeps one per model."""
    p = model.params
    names = {}
    per_layer: list[list[int]] = [[] for _ in range(p.n_layer)]
    suffixes: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(p.n_layer)]
    types: list[list[int]] = [[] for _ in range(p.n_layer)]
    for i, t in enumerate(model.tensors):
        names[t.name] = i
        b = model.block_of(t.name)
        if b.layer is not None and b.layer < p.n_layer:
            per_layer[b.layer].append(i)
            pre, _, rest = t.name.partition("blk.")  # T5's enc./dec. prefix stays, the layer number goes
            suffixes[b.layer].append((pre + rest.split(".", 1)[-1], t.shape))
            types[b.layer].append(t.type_id)
    n_main = p.n_layer - p.nextn_layers
    kinds: list[int] = []
    kind_ids: dict[tuple, int] = {}
    layer_kind = family_of(p.arch).layer_kind
    for il in range(n_main):
        k = (
            p.swa_layers[il] if p.has_swa else False,
            p.recurrent_layers[il],
            p.n_head[il],
            p.n_head_kv[il],
            p.n_ff[il],
            il < p.n_layer_dense_lead,
            il == n_main - 1,
            tuple(suffixes[il]),
            layer_kind(p, il) if layer_kind is not None else None,
        )
        kinds.append(kind_ids.setdefault(k, len(kind_ids)))
    getters = [_getter(idx) for idx in per_layer[:n_main]]
    glob = [i for i, t in enumerate(model.tensors) if model.block_of(t.name).layer is None]
    f = {
        "names": names,
        "getters": getters,
        "kinds": kinds,
        # hybrids (an attention layer among recurrent ones) and interleaved layers (3+ sliding-window layers
        # between global ones) need a wider neighbourhood in compress()
        "hood": max(
            2 if any(p.recurrent_layers[:n_main]) and not all(p.recurrent_layers[:n_main]) else 1,
            2 if _interleaved(kinds) else 1,
            family_of(p.arch).hood,
        ),
        # recurrent layers are never cut: build_rs copies n_rs - n_seqs = 0 "extra" states, and ggml's allocator
        # turns each such zero-size tensor into a zero-size free block that can sit out of address order and keep
        # two neighbouring free blocks from merging, so the fragmentation (and a device's peak) grows with the
        # number of recurrent layers simulated (Nemotron-H -cmoe: 18 MiB; Mamba2 -np 4: 0.25 MiB)
        "uncut": any(p.recurrent_layers[:n_main]) or family_of(p.arch).uncut,
        "glob": _getter(glob),
        # per layer, its tensors' types: layers of one structure but other quantizations (Q4_K_M puts Q6_K on
        # some) differ where weight bytes matter, in the copy of an offloaded weight and a backend's size limit
        "types": [tuple(x) for x in types[:n_main]],
        "shapes": [ne4(t.shape) for t in model.tensors],
        "results": OrderedDict(),
        "graphs": OrderedDict(),
    }
    return f


@dataclass(frozen=True)
class GraphInputs:
    """What a compute-buffer figure depends on besides the context shape: the backend (index into ``devs``,
    ``cpu`` = the host) of every tensor, layer and KV cache, each layer's signature (its structure and where
    its tensors and cache live), the graph's global tensors' backends, and the scheduler's switches. The graph
    replay (:func:`compute_buffers`) and the learned figures' keys (``app.memory.learned``) both read it, so a
    key names exactly what the replay depends on."""

    devs: list
    cpu: int
    tbe: list[int]
    layer_be: list[int]
    kv_be: list[int]
    sigs: list[tuple]
    glob: tuple
    offload: bool  # op offload to a GPU is on and there is a GPU
    limited: bool  # a device refuses tensors above a size (lavapipe's 128 MiB)
    pin: bool
    pin_cpu: bool
    host_weights: bool
    #: backend index of each device name (the host's name: ``cpu``)
    be_of: dict = field(default_factory=dict, compare=False)
    #: the pins of ``resolve_fused_ops``' probe graph (one token per sequence, built and split without the reset
    #: of the dry run: graph_reserve(..., split_only) -> ggml_backend_sched_split_graph), see graph_inputs
    pin_probe: bool = False


def graph_inputs(
    model: Model, facts: dict, placement: WeightPlacement, settings: LlamaSettings, shape: ContextShape
) -> GraphInputs:
    p = model.params
    devs = placement.devices
    cpu = len(devs)
    be_of = {d.name: i for i, d in enumerate(devs)}
    be_of[CPU] = cpu
    tbe = list(map(be_of.get, placement.tensor_device, repeat(cpu)))  # be_of.get(d, cpu) per tensor, in C
    layer_be = [be_of.get(d, cpu) for d in placement.layer_device]
    kv_be = [cpu if settings.no_kv_offload else layer_be[il] for il in range(p.n_layer)]
    getters = facts["getters"]
    offload = settings.op_offload and any(offloads_ops(d) for d in devs)
    limited = any(d.max_tensor_bytes is not None for d in devs)
    types = facts["types"]
    # a size limit (lavapipe's 128 MiB) refuses some weights' ops by their bytes, so layers of one structure
    # but another quantization are scheduled differently; without one the types change no peak measured
    # (CUDA-like op offload of mixed Q4_K_M layers: Qwen3-30B/235B, Mixtral, DeepSeek-V2-Lite, identical)
    sigs = [
        (kind, kv_be[il], layer_be[il], getters[il](tbe), types[il] if limited else None)
        for il, kind in enumerate(facts["kinds"])
    ]
    ngl = settings.n_gpu_layers
    if ngl is None or ngl in (NGL_AUTO, NGL_ALL):
        ngl = p.n_layer + 1
    # Backends set while the graph is built: graph_get_cb pins each layer's "norm" ops to the layer's device
    # when the batch is small or every layer is offloaded, and -nkvo pins the attention output to the CPU.
    # The dry run that llama-fit-params reports (ggml_backend_sched_reserve_size) resets the scheduler after
    # the graph is built, which drops both.
    real_run = settings.tool != "fit-params"
    pin = real_run and (min(shape.n_ctx, shape.n_ubatch) < 32 or ngl > p.n_layer)
    return GraphInputs(
        devs=devs,
        cpu=cpu,
        tbe=tbe,
        layer_be=layer_be,
        kv_be=kv_be,
        sigs=sigs,
        glob=facts["glob"](tbe),
        offload=offload,
        limited=limited,
        pin=pin,
        pin_cpu=real_run and settings.no_kv_offload,
        host_weights=not (settings.repack and not settings.use_host),
        # llama_context::resolve_fused_ops probes with n_tokens = n_seqs (every probe in the pinned sources is one
        # token per sequence but GDN chunked, which no family here declares) and keeps graph_get_cb's pins whatever
        # the tool: e.g. deepseek4's "l_last" (its DSV4_HC_POST) stays on the layer's device there even where the
        # big batch of a partial offload lets the scheduler move it to the next layer's
        pin_probe=max(1, shape.n_seq) < 32 or ngl > p.n_layer,
        be_of=be_of,
    )


def _tensor_layers(model: Model) -> list[int]:
    """Each tensor's layer (-1 for global tensors)."""
    return [-1 if (b := model.block_of(t.name)).layer is None else b.layer for t in model.tensors]


def compute_buffers(
    model: Model,
    placement: WeightPlacement,
    settings: LlamaSettings,
    shape: ContextShape,
    pipeline: bool,
    facts: dict | None = None,
    notes: list[str] | None = None,
    cut: bool = False,
    borrowed: tuple[tuple, ...] = (),
) -> dict[str, int]:
    """Compute buffer bytes per device name (``Host`` for the CPU backend's buffer).

    ``pipeline``: pipeline parallelism is on (the scheduler keeps 4 copies of every input).
    ``notes``: where the graph cannot be built and the sizes come from :func:`approx_peaks` instead, the note
    saying so is appended here (also logged as a warning, once per model); never silent.
    ``cut``: replay representative layers only (:func:`compress`, for a drag preview). Not exact: the allocator's
    state drifts over repeated layers, so a device's peak can differ from the whole graph's (a sweep of every
    sparse model on 3 RPC devices, 4 placements each: phi-4-mini -ngl 30 -ts 1,1,1 -ub 1024, RPC2 817.5 MiB cut vs
    805.5 uncut and in llama-fit-params; smollm3 -ngl 30, RPC1 161 vs 169; gemma-4-31b -ts 1,2,1 -cmoe, RPC0 181.8
    vs 197.8). Without it every layer is replayed, as llama.cpp builds the graph.
    ``borrowed``: (name, device, bytes, shape, ggml type) of another model's tensors the graph reads where the
    model has none of its own (an EAGLE-3 head's ``ctx_other`` token embeddings and lm_head).
    """
    p = model.params
    if p.n_layer <= 0 or p.n_embd <= 0:
        return {}
    if facts is None:
        facts = model_facts(model)
    g = graph_inputs(model, facts, placement, settings, shape)
    devs, cpu, tbe, layer_be, kv_be, sigs = g.devs, g.cpu, g.tbe, g.layer_be, g.kv_be, g.sigs
    offload, pin, pin_cpu, host_weights, glob = g.offload, g.pin, g.pin_cpu, g.host_weights, g.glob
    pin_probe = g.pin_probe
    key: tuple = (
        shape,
        settings.type_k,
        settings.type_v,
        settings.no_kv_offload,
        offload,
        host_weights,
        pin,
        pin_cpu,
        pin_probe,
        pipeline,
        tuple((d.name, d.kind, d.max_tensor_bytes, d.refused_ops) for d in devs),
        glob,
        placement.duplicated_output,
        settings.spec_draft_backend_sampling and shape.mtp,
        _fa_auto(settings, shape),
        tuple((name, dev, size) for name, dev, size, _, _ in borrowed),
    )
    n_main = p.n_layer - p.nextn_layers
    family = family_of(p.arch)
    if shape.mtp:
        if family.build_mtp is None:
            raise ValueError(f"no MTP graph is replayed for {p.arch}")
        layers, build = list(range(n_main, p.n_layer)), family.build_mtp
        # the MTP draft context's graph reads the NextN layers only: key on where their tensors and caches are
        nextn = facts.get("nextn_getter")
        if nextn is None:
            nextn = facts["nextn_getter"] = _getter([i for i, il in enumerate(_tensor_layers(model)) if il >= n_main])
        key += (tuple(sigs[n_main:]), tuple(layer_be[n_main : p.n_layer]), tuple(kv_be[n_main:]), nextn(tbe))
    else:
        uncut = facts["uncut"] or not cut
        nums = _sig_numbers(facts, sigs)  # compared and hashed below: numbers, not nested tuples
        keep = None if uncut else compress(nums, facts["hood"])
        layers = list(range(len(nums))) if keep is None else pad_layers(keep, len(nums))
        build = family.build
        if keep is not None and facts.get("warm"):
            _warm(facts, model, settings, shape, keep, nums, n_main, build, borrowed, g, placement, pipeline)
        # the replay reads only the kept layers (their signatures hold their structure and where their tensors,
        # layer and cache live), so placements that differ only in layers the compression drops give the same
        # figures: one cache entry (layer_be too, for the approximation's per-layer sums)
        key += (tuple([nums[il] for il in layers]), tuple(layer_be))
    results = facts["results"]
    hit = results.get(key)
    if hit is not None:
        results.move_to_end(key)
        cached, cached_note = hit
        if cached_note and notes is not None:
            notes.append(cached_note)
        return dict(cached)
    # what binding a kept layer depends on, for the allocator's trace (alloc.Trace): its signature and the types of
    # its weights (the signature holds them only where a device limits tensor sizes); the NextN layers of the MTP
    # draft context have no signature: not traced
    types = facts["types"]
    fp = None if shape.mtp else [(nums[il], types[il]) for il in layers]
    gkey = (
        shape,
        settings.type_k,
        settings.type_v,
        tuple(facts["kinds"][il] if il < n_main else il for il in layers),
        tuple((name, shp, ty) for name, _, _, shp, ty in borrowed),
    )
    approximate: str | None = None
    # the MTP draft context reserves twice: its graph, then (llama_set_sampler) the graph with the draft's
    # backend sampler; each backend's buffer keeps the larger size (ggml_gallocr_reserve_n only grows)
    variants = (False, True) if shape.mtp and settings.spec_draft_backend_sampling else (False,)
    # llama_context::resolve_fused_ops resolves -fa auto first (llm_fused_op_flash_attn_probe), then the family's
    fused = (("FLASH_ATTN",) if _fa_auto(settings, shape) else ()) + family.fused
    try:
        be_of = g.be_of
        lent = {}
        for name, dev, size, _, _ in borrowed:
            if dev not in be_of:
                # ggml_backend_sched_backend_from_buffer: no backend of the head's context reads that buffer, and the
                # leaf is pre-allocated (seen: llama-server -dev RPC0 -devd RPC1 with a head without output.weight)
                cache = name.startswith("target:cache_")
                # a shared cache tensor takes the name of the draft's layer that last shared it (cache_k_l<N>)
                bare = name.removeprefix("target:")
                tensor = "cache_k_l..." if bare.startswith("cache_k") else "cache_v_l..." if cache else bare
                what = "KV cache (of the layer whose cache it shares)" if cache else bare
                raise BackendAbort(
                    f"llama.cpp aborts on this placement: the draft model (-md) reads the main model's {what}, which "
                    f"is on {dev}, a device the draft's context does not use, so its scheduler stops with "
                    f'"pre-allocated tensor ({tensor}) in a buffer ({dev}) that cannot run the operation". Give the '
                    "draft that device too (-devd), or keep that tensor where the draft runs."
                )
            lent[name] = (be_of[dev], size)
        run = (placement, devs, tbe, layer_be, kv_be, cpu, pin, pin_cpu, offload, host_weights, pipeline, lent)
        peaks: list[int] = []

        def graph(vkey, unfused, sampling, n_probe=0):
            return _graph(facts, vkey, model, settings, shape, layers, build, borrowed, unfused, sampling, n_probe)

        for sampling in variants:
            unfused: frozenset[str] = frozenset()
            probe = 0  # resolve_fused_ops: the next fused op to check, in the family's order
            while True:
                vkey = gkey + (unfused, sampling)
                b = graph(vkey, unfused, sampling)
                got = _run(model, b, layers, *run, fp=fp)
                # the probe graph's backends: its pins (and -nkvo's), and no GPU op offload below 32 tokens; an
                # encoder-decoder's probe is a graph of its own, where each op's batch decides (T5's cross K/V
                # project n_ctx_train encoder rows whatever the tokens: offloaded, they move its cross attention's
                # flash-attention node off a CPU layer, and llama.cpp turns flash attention off)
                enc_dec = p.arch in ENCODER_DECODER_ARCHS
                probe_offload = offload if enc_dec else offload and max(1, shape.n_seq) >= 32
                probe_run = run[:6] + (pin_probe, settings.no_kv_offload, probe_offload) + run[9:]
                pb = b
                if probe < len(fused) and (enc_dec or any(d.max_tensor_bytes is not None for d in devs)):
                    # the probe reserves its own graph of one token per sequence: a device with a tensor size
                    # limit (Vulkan's maxStorageBufferRange) refuses ops by their size, so the probe's backends
                    # come from that graph's shapes (a 1024-token ubatch's flash attention can exceed the limit
                    # where the probe's does not: hy4-preview -ngl 40 -ub 1024 on lavapipe, 128 MiB)
                    try:
                        pb = graph(vkey + ("probe",), unfused, sampling, max(1, shape.n_seq))
                    except Exception:  # noqa: BLE001 - a family whose graph needs a full ubatch: the ubatch's
                        log.debug("no probe graph for %s: probing the ubatch's", p.arch, exc_info=True)
                if pb is not b:
                    _run(model, pb, layers, *probe_run, schedule_only=True, bind=True)
                elif probe < len(fused) and probe_run != run:
                    _run(model, b, layers, *probe_run, schedule_only=True)  # the backends are all it reads
                while probe < len(fused) and not _fused_off(pb, fused[probe], layer_be, layers):
                    probe += 1
                if probe == len(fused):
                    break
                unfused |= {fused[probe]}
                probe += 1
            peaks = [max(x, y) for x, y in zip(peaks, got)] if peaks else got
            if not sampling:
                facts["unfused"] = unfused  # the fused ops this context runs without (_warm builds for it)
    except BackendAbort:
        raise
    except Exception as exc:  # noqa: BLE001 - an architecture whose tensors the generic graph cannot follow
        approximate = approximate_note(p.arch, exc)
        if not facts.get("approximate_logged"):
            facts["approximate_logged"] = True
            log.warning("%s", approximate, exc_info=True)
        else:
            log.debug("%s", approximate)
        peaks = approx_peaks(p, shape, layer_be, cpu, pipeline)
    if approximate and notes is not None:
        notes.append(approximate)
    out: dict[str, int] = {}
    for i, size in enumerate(peaks):
        name = CPU if i == cpu else devs[i].name
        out[name] = out.get(name, 0) + size
    results[key] = (out, approximate)
    if len(results) > _CACHE_SIZE:
        results.popitem(last=False)
    return dict(out)


#: layer signatures numbered per model before the numbering starts over (its numbers go on: a result or a trace
#: record keyed on an earlier number never meets a later signature)
_SIG_NUMBERS = 1 << 16


def _sig_numbers(facts, sigs) -> list[int]:
    """Each layer signature's number in this model's facts: equal exactly where the signatures are, so the cut
    (:func:`compress`), the result key and the allocator's trace compare and hash numbers (compress of a
    94-layer model 0.15 -> 0.10 ms)."""
    numbers = facts.get("sig_numbers")
    if numbers is None or len(numbers) > _SIG_NUMBERS:
        numbers = facts["sig_numbers"] = {}
    nxt = facts.get("sig_next", 0)
    out = []
    for sig in sigs:
        k = numbers.get(sig)
        if k is None:
            k = numbers[sig] = nxt
            nxt += 1
        out.append(k)
    facts["sig_next"] = nxt
    return out


def _warm(facts, model, settings, shape, keep, sigs, n_main, build, borrowed, g, placement, pipeline) -> None:
    """Build the first missing graph of the ``facts["warm"]`` cut sizes above this placement's (``keep``, the layers it
    keeps of those with signatures ``sigs``, numbered: :func:`_sig_numbers`), so that a drag's previews that keep a
    layer or a few more find theirs built (16-30 ms each for a 94-layer model); where this placement's own is
    missing, none (the estimate builds it). Only for a model whose main layers but the first and the last are all of
    one kind: every cut keeps those two (compress), so a cut of a size keeps layers of the same kinds whatever it
    keeps, and its graph is the one built here (another model's cut is not known ahead). The graph is then replayed
    once for this placement with skipped layers added up to its size (exact: :func:`pad_layers`), so that the
    allocator's trace has a run of it and the first preview on it replays only where it differs (the figures are not
    kept). Sets ``facts["warmed"]`` when it built one (or left this placement's own to the estimate). A family whose
    graph cannot be built or replayed is left to the estimate, which says why."""
    kinds = facts["kinds"]
    if facts.get("warmed") or len(set(kinds[1 : n_main - 1])) > 1:
        return
    n = len(sigs)
    unfused = facts.get("unfused", frozenset())
    borrowed_key = tuple((name, shp, ty) for name, _, _, shp, ty in borrowed)

    def vkey(layers):
        kinds_key = tuple(kinds[il] if il < n_main else il for il in layers)
        return (shape, settings.type_k, settings.type_v, kinds_key, borrowed_key, unfused, False)

    have = pad_layers(keep, n)
    if vkey(have) not in facts["graphs"]:
        facts["warmed"] = True  # this placement's own graph: the estimate builds it now, the next call goes on
        return
    for _ in range(facts["warm"]):
        layers = pad_layers(keep, n, len(have) + 1)
        if len(layers) == len(have):
            return  # every layer: the uncut graph
        have = layers
        key = vkey(layers)
        if key in facts["graphs"]:
            continue
        try:
            b = _graph(facts, key, model, settings, shape, layers, build, borrowed, unfused, False)
            if not borrowed:  # (another model's tensors are bound by the estimate, which checks their devices)
                run = (placement, g.devs, g.tbe, g.layer_be, g.kv_be, g.cpu, g.pin, g.pin_cpu, g.offload)
                types = facts["types"]
                _run(model, b, layers, *run, g.host_weights, pipeline, {}, fp=[(sigs[il], types[il]) for il in layers])
        except Exception:  # noqa: BLE001 - the estimate itself says where the graph cannot be built or replayed
            log.debug("no graph built ahead for %s", model.params.arch, exc_info=True)
            return
        facts["warmed"] = True
        return


def _graph(facts, vkey, model, settings, shape, layers, build, borrowed, unfused, sampling, n_probe=0):
    """The graph of ``layers`` built for ``vkey`` (kept in ``facts["graphs"]``, the last :data:`_GRAPHS` used):
    ``build`` (the family's) over a :class:`Builder`, without the fused ops ``unfused``, with the backend sampler
    where ``sampling``, and of ``n_probe`` tokens where set (resolve_fused_ops' probe)."""
    graphs = facts["graphs"]
    b = graphs.get(vkey)
    if b is None:
        c = Ctx(model, settings, shape, facts)
        if n_probe:  # resolve_fused_ops' graph_reserve(n_tokens_probe, n_seqs, n_tokens_probe)
            c.n_tokens = c.n_outputs = n_probe
        b = Builder(c, layers)
        b.__dict__["unfused"] = unfused  # read by the family's build (Family.fused)
        b.__dict__["borrowed"] = {name: (shp, ty) for name, _, _, shp, ty in borrowed}
        if "FLASH_ATTN" in unfused:  # cparams.flash_attn = false: the graph is rebuilt without it
            b.c.fa = False
        logits = build(b)
        if sampling:
            add_sampling(b, logits, max(1, shape.n_seq))
        b.all = b.g.nodes + b.g.leafs
        # ggml_set_output flags a view's source too (it walks view_src): an output view keeps its
        # source's memory for the whole graph (DFlash's t_logits over the d2t scatter's fill)
        for t in b.g.nodes:
            if t.fl0 & OUTPUT and t.vs is not None and not t.vs.fl0 & OUTPUT:
                t.vs.fl0 |= OUTPUT
                t.vs.flags |= OUTPUT
        graphs[vkey] = b
        if len(graphs) > _GRAPHS:
            graphs.popitem(last=False)
    else:
        graphs.move_to_end(vkey)
    return b


def _fa_auto(settings: LlamaSettings, shape: ContextShape) -> bool:
    """``-fa auto`` left for ``resolve_fused_ops`` to decide (``cparams.auto_fa``): llama_init_from_model turns
    it on outright for a quantized V cache and for ``-sm tensor`` (llama-context.cpp), and the probe only ever
    turns it off: where the scheduler puts a layer's FLASH_ATTN_EXT off the layer's device (a CPU layer's
    attention next to an offloaded one), the whole context runs without flash attention."""
    quantized_v = CACHE_TYPE_BLOCKS.get(settings.type_v, (1,))[0] > 1
    return settings.flash_attn == "auto" and shape.flash_attn and not quantized_v and settings.split_mode != "tensor"


def _fused_off(b, op, layer_be, layers):
    """``resolve_fused_ops``' check: a fused ``op`` node the scheduler put off its layer's device (the probe graph
    is the reserved one here, scheduled with the probe's pins: one token per sequence there, the same layer
    boundaries). The nodes hold kept-layer positions: a built graph serves every kept set of the same kinds."""
    return any(o == op and t.be != layer_be[layers[k]] for o, t, k in b.__dict__.get("fused_nodes", ()))


def _run(
    model,
    b,
    layers,
    placement,
    devs,
    tbe,
    layer_be,
    kv_be,
    cpu,
    pin,
    pin_cpu,
    offload,
    host_weights,
    pipeline,
    lent,
    schedule_only=False,
    bind=False,
    fp=None,
):
    """Bind a built graph to this placement, then schedule and allocate it (``schedule_only``: the backends of
    resolve_fused_ops' probe, no allocation; the graph was bound to the same placement by the run before it, so
    only the backends are reset; ``bind``: bind it first all the same, a graph of its own)."""
    limits = [(d.max_tensor_bytes, backend_of(d), d.refused_ops) for d in devs] + [(None, "cpu", ())]
    if schedule_only and not bind:
        if refuses_nothing(limits):
            # schedule() works the probe's backends out from the pins and the bound weights alone (_probed)
            _unpin(b)
        else:
            for t in b.all:
                t.be = t.force = -1
                t.flags = t.fl0
    else:
        _bind(model, b, layers, placement, devs, tbe, layer_be, kv_be, cpu, host_weights, lent)
    if not schedule_only and any(lim is not None for lim, _, _ in limits):
        _check_caches(b, layers, kv_be, cpu, devs, limits)
    pinned = []
    if pin:
        for t, k in b.pins:
            be = layer_be[layers[k]]
            # graph_get_cb pins a "norm" only where the layer's backend supports the op (ggml_backend_supports_op)
            if be == cpu or supports_op(t, be, limits):
                t.force = be
                pinned.append(t)
    if pin_cpu:
        for t in b.cpu_pins:
            t.force = cpu
    n_be = cpu + 1
    offload_to = [i for i, d in enumerate(devs) if offloads_ops(d)] if offload else []
    g = b.g
    users = b.__dict__.get("users")
    if users is None:
        users = b.__dict__["users"] = weight_users(g.nodes)
    forced = pinned + (b.cpu_pins if pin_cpu else [])
    wanted = None
    if schedule_only:  # the probe reads the fused nodes' backends only
        wanted = b.__dict__.get("fused_wanted")
        if wanted is None:
            fused_t = [t for _, t, _ in b.__dict__.get("fused_nodes", ())]
            of = set(fused_t)
            index = {t: i for i, t in enumerate(g.nodes) if t in of}
            wanted = b.__dict__["fused_wanted"] = (fused_t, index)
    pool = b.__dict__.get("copy_pool")
    if pool is None:
        pool = b.__dict__["copy_pool"] = {}
    subs: list | None = None
    if not schedule_only:  # the probe replaces no source
        subs = b.__dict__["subbed"] = []  # _bind puts these sources back
    real = b.__dict__.get("real")
    if real is None:
        real = b.__dict__["real"] = [t for t in g.nodes if t.op not in VIEW_OPS]
        b.__dict__["sched_shape"] = sched_shape(g.nodes, real, users)
    shape = b.__dict__["sched_shape"]
    splits = schedule(
        g.nodes, g.leafs, cpu, offload_to, limits, users, forced, schedule_only, wanted, pool, subs, real, shape
    )
    if schedule_only:
        return []
    host_align, host_max = host_buffer_of(devs)
    aligns = [alignment_of(d) for d in devs] + [host_align]
    max_sizes = [d.max_buffer for d in devs] + [host_max]
    cuda = [cuda_like(d) for d in devs] + [False]

    def alloc_size(t, be):
        size = t.size
        if cuda[be] and t.op == "FLASH_ATTN_EXT":
            # ggml_cuda_flash_attn_ext_get_alloc_size: the tile/MMA kernels used for prompt batches convert
            # a quantized K (and V unless it is a view of K) to f16 in space after the result
            k, v = t.cs[1], t.cs[2]
            if k.ty != "f16":
                size = (size + 127) // 128 * 128 + nelements(k) * 2
            if v.ty != "f16" and not (v.vs is not None and v.vs is k.vs and v.nb == k.nb):
                size = (size + 127) // 128 * 128 + nelements(v) * 2
        return size

    nodes, deps = g.nodes, None
    vulkan = [backend_of(d) == "vulkan" for d in devs] + [False]  # a Vulkan device behind RPC is an RPC backend
    if any(vulkan):
        nodes, deps = _vk_reorder(b, model, splits, vulkan)
    elif fp is not None and not pipeline and not any(max_sizes):
        marks = _marks(b)
        if marks is not None:
            traces = b.__dict__.setdefault("traces", {})
            tkey = (tuple(aligns), tuple(cuda), tuple(sorted(lent.items())))
            trace = traces.get(tkey)
            if trace is None:
                trace = traces[tkey] = Trace()
            shared = b.__dict__["shared_leafs"]
            return allocate_traced(nodes, g.leafs, shared, splits, n_be, aligns, alloc_size, trace, marks, fp, subs)
    return allocate_graph(nodes, g.leafs, splits, 4 if pipeline else 1, n_be, aligns, alloc_size, max_sizes, deps)


def _marks(b):
    """Per kept layer, the index of its first node: the first that is or reads one of the layer's weights, caches or
    pinned norms (:class:`app.memory.compute.alloc.Trace`'s checkpoints). None where they do not follow the layer
    order or a layer reads another's cache (gemma3n's shared KV: what it reads is not in its signature)."""
    got = b.__dict__.get("marks", 0)
    if got != 0:
        return got
    marks = None
    if not b.__dict__.get("layer_crefs") and not any(t.fl0 & INPUT for t in b.g.nodes):
        pos = {}
        for t, k, _ in b.wrefs:
            if k >= 0:
                pos[t] = k
        for t, k, _, _ in b.pwrefs:
            pos[t] = k
        for t, k, _ in b.__dict__.get("drefs", ()):
            pos.setdefault(t, k)
        for t, k in b.crefs + b.pins:
            pos.setdefault(t, k)
        first: dict[int, int] = {}
        for i, t in enumerate(b.g.nodes):
            for s in (t, *t.src):
                k = pos.get(s)
                if k is not None and k not in first:
                    first[k] = i
        got = [first.get(k, -1) for k in range(len(b.layers))]
        if got and got[0] >= 0 and all(x < y for x, y in zip(got, got[1:])):
            marks = got
        # the leafs no kept layer owns (inputs, global weights): their backends are compared apart
        b.__dict__["shared_leafs"] = [t for t in b.g.leafs if t not in pos]
    b.__dict__["marks"] = marks
    return marks


def _unpin(b) -> None:
    """Clear the backends the last run pinned (graph_get_cb's norms, -nkvo's attention outputs)."""
    for t, _ in b.pins:
        t.force = -1
    for t in b.cpu_pins:
        t.force = -1


def _wrefs(b) -> list:
    """``b.wrefs`` with, per layer weight, its tensor index by layer (filled as layers are bound): binding looks
    an index up by layer number, not by a name made and hashed per weight (0.15 ms of a 94-layer cut's bind)."""
    got = b.__dict__.get("wrefs_by_layer")
    if got is None:
        tables: dict[str, dict[int, int]] = {}
        got = b.__dict__["wrefs_by_layer"] = [
            (t, k, sfx, tables.setdefault(sfx, {}) if k >= 0 else None) for t, k, sfx in b.wrefs
        ]
    return got


def _bind(model, b, layers, placement, devs, tbe, layer_be, kv_be, cpu, host_weights, lent):
    """Reset a built graph's per-run state and give its weights and caches this placement's buffers (``lent``:
    backend and bytes of another model's tensors it reads, by name)."""
    names = b.c.names
    tensors = model.tensors
    for t in b.all:
        t.be = t.addr = -1
        t.nch = t.nvw = 0
    # what only some tensors carry from a run: the pins' backends, the sources the scheduler replaced by copies,
    # and the inputs' flags (pipeline parallelism adds OUTPUT)
    _unpin(b)
    nodes = b.g.nodes
    for i, _, _ in b.__dict__.get("subbed", ()):
        nodes[i].cs = nodes[i].src
    inputs = b.__dict__.get("graph_inputs")
    if inputs is None:
        inputs = b.__dict__["graph_inputs"] = [t for t in b.all if t.fl0 & INPUT]
    for t in inputs:
        t.flags = t.fl0
    for t, k, sfx, of_layer in _wrefs(b):
        if k >= 0:
            il = layers[k]
            i = of_layer.get(il)
            if i is None:
                i = of_layer[il] = names[f"blk.{il}.{sfx}"]  # KeyError: the layer lacks it (not replayed)
            be = tbe[i]
        elif sfx == "token_embd.weight@output":  # tied embeddings: the output's copy of token_embd
            i = names["token_embd.weight"]
            dup_dev = placement.duplicated_output
            be = next((j for j, d in enumerate(devs) if d.name == dup_dev), tbe[i]) if dup_dev else tbe[i]
        else:
            i = names[sfx]
            be = tbe[i]
        t.wbe = be
        t.size = tensors[i].nbytes
        t.host = be == cpu and host_weights
    for t, k, pre, sfx in b.pwrefs:  # T5's encoder and decoder layers
        i = names[f"{pre}blk.{layers[k]}.{sfx}"]
        t.wbe = tbe[i]
        t.size = tensors[i].nbytes
        t.host = t.wbe == cpu and host_weights
    for t, k, name in b.__dict__.get("drefs", ()):
        # a global tensor every layer creates with TENSOR_DUPLICATED (LongRoPE factors): one copy per buffer
        # type, so a layer reads the copy on its own device
        i = names[name]
        t.wbe = layer_be[layers[k]]
        t.size = tensors[i].nbytes
        t.host = t.wbe == cpu and host_weights
    for t, k in b.crefs:
        t.wbe = kv_be[layers[k]]
    for t, il in b.__dict__.get("layer_crefs", ()):  # a cache another layer owns (gemma3n's shared KV)
        t.wbe = kv_be[il]
    for t, name in b.__dict__.get("brefs", ()):  # another model's tensor (an EAGLE-3 head's ctx_other)
        t.wbe, t.size = lent[name]  # the graph key names the borrowed tensors, so each has its entry
        t.host = t.wbe == cpu and host_weights


def _check_caches(b, layers, kv_be, cpu, devs, limits):
    """Pass 1 of the scheduler gives each cache leaf the backend of its buffer when that backend supports it
    (``ggml_backend_sched_backend_from_buffer``: no other backend reads a device buffer), else llama.cpp aborts
    (ggml-backend.cpp: ``GGML_ABORT("pre-allocated tensor (%s) in a buffer (%s) that cannot run the operation
    (%s)")``): a Vulkan device refuses any tensor above its maxStorageBufferRange, the cache leaf included
    (``ggml_backend_vk_device_supports_op``'s tensor_size_supported). Raised before the replay says a number."""
    for t, k in b.crefs:
        be = kv_be[layers[k]]
        if be != cpu and not supports_op(t, be, limits):
            name = f"{t.name.rsplit('_l', 1)[0]}_l{layers[k]}"  # a built graph serves other kept sets
            raise BackendAbort(
                f"llama.cpp aborts on this placement: its {name} ({fmt_bytes(nbytes(t.ty, t.ne, t.nb))}) is in "
                f"{devs[be].name}'s memory, and {devs[be].name} cannot run an op on a tensor above "
                f"{fmt_bytes(limits[be][0] or 0)} (the driver's storage-buffer range), so the scheduler stops with "
                f'"pre-allocated tensor ({name}) in a buffer ({devs[be].name}) that cannot run the operation". '
                "Lower the context (-c), quantize the cache further (-ctk/-ctv), or keep that layer's cache off "
                f"{devs[be].name} (fewer -ngl layers, or -nkvo)."
            )


def _vk_reorder(b, model, splits, vulkan):
    """:func:`app.memory.compute.vk_optimize.reorder` of the built graph (its use counts and its weights' types
    kept with it)."""
    uses = b.__dict__.get("vk_uses")
    if uses is None:
        uses = b.__dict__["vk_uses"] = use_counts(b.g.nodes)
    wtypes = b.__dict__.get("vk_wtypes")
    if wtypes is None:
        wtypes = b.__dict__["vk_wtypes"] = {t.name: t.type_name.lower() for t in model.tensors}
        wtypes.update((name, ty) for name, (_, ty) in b.__dict__.get("borrowed", {}).items() if name not in wtypes)

    def wtype(t):  # a weight's ggml type (the output's copy of tied embeddings: token_embd's)
        return wtypes[t.name.removesuffix("@output")]

    return vk_reorder(b.g.nodes, splits, vulkan, uses, wtype)
