"""Per-device memory estimate: weights, context (KV cache + recurrent state) and compute buffers.

The result mirrors what ``llama-fit-params --fit-print on`` reports (model,
context and compute per device, then Host), plus the logits output buffer
that llama.cpp keeps in host memory and the fit table leaves out. See
``docs/memory-model.md`` for the rules and the calibration of the compute
buffer model.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..lanes import CPU, DeviceKind, Lane
from ..model import Model
from ..model.projector import Projector
from ..units import fmt_bytes
from .compute import UNCHECKED, compute_buffers, model_facts, unchecked_note
from .compute.ggml import ne4
from .compute.models import family_of
from .draft import (
    DFLASH_SPEC_TYPES,
    check_dflash_head,
    draft_settings,
    inferred_mtp,
    target_layers,
    with_detected_spec_type,
)
from .kv import (
    CACHE_TYPE_BLOCKS,
    NO_FLASH_ATTN_ARCHS,
    NO_MEMORY_ARCHS,
    ONE_SEQ_RESERVE_ARCHS,
    SHARED_KV_ARCHS,
    ContextShape,
    SettingsError,
    context_shape,
    kv_bytes_per_layer,
    output_buffer_bytes,
    recurrent_bytes_per_layer,
    state_is_modelled,
)
from .layout import OverrideMatcher, PlacementError, WeightPlacement, model_devices, place_weights
from .settings import RS_SEQ_SPEC_TYPES, LlamaSettings
from .split_mode import check_split_mode

if TYPE_CHECKING:
    from ..model.hparams import ModelParams
    from .projector import ProjectorMemory


@dataclass
class DeviceMemory:
    name: str
    model: int = 0
    kv: int = 0
    recurrent: int = 0
    compute: int = 0
    output: int = 0  # logits buffer (host memory only)
    capacity: int | None = None
    draft: int = 0  # the draft model's weights, context, compute and output on this device (-md)
    projector: int = 0  # the multimodal projector's weights and compute buffers on this device (--mmproj)

    @property
    def context(self) -> int:
        return self.kv + self.recurrent

    @property
    def total(self) -> int:
        return self.model + self.context + self.compute + self.output + self.draft + self.projector


@dataclass
class Estimate:
    devices: list[DeviceMemory]  # model devices in llama.cpp order, Host last
    shape: ContextShape
    placement: WeightPlacement
    pipeline_parallel: bool
    notes: list[str] = field(default_factory=list)
    #: the draft model's own estimate (-md): its figures per device are also in each device's ``draft``
    draft: Estimate | None = None
    #: the projector's memory (--mmproj, :class:`app.memory.projector.ProjectorMemory`): also in ``projector``
    projector: ProjectorMemory | None = None

    def device(self, name: str) -> DeviceMemory:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def host(self) -> DeviceMemory:
        return self.devices[-1]


#: How many draft models and projectors an estimator keeps open for undo.
_KEPT_FILES = 4


def _recent(kept: list, latest) -> list:
    """``latest`` first, then the others kept before it, at most :data:`_KEPT_FILES` in all."""
    return [latest] + [x for x in kept if x is not latest][: _KEPT_FILES - 1]


class Estimator:
    """The memory estimate for one model, with that model's caches: which tensors each ``-ot`` pattern
    matches, and the compute graphs and results already built. Whoever estimates many placements of one
    model (a session, auto-fit, the fastest search) keeps one; it lives and dies with its owner."""

    def __init__(self, model: Model, draft: Model | None = None, projector: Projector | None = None):
        self.model = model
        self.matcher = OverrideMatcher([t.name for t in model.tensors])
        self.compute_facts = model_facts(model)
        #: the draft model's estimator (-md), when the draft file is open
        self.draft: Estimator | None = Estimator(draft) if draft is not None else None
        #: the multimodal projector (--mmproj), when its file is open
        self.projector: Projector | None = projector
        #: the draft models and projectors opened before (the latest few), so that undoing back to one of them
        #: finds it open again
        self._drafts: list[Estimator] = [self.draft] if self.draft is not None else []
        self._projectors: list[Projector] = [projector] if projector is not None else []
        #: projector figures per (file, lanes, projector flags): see ``_projector``
        self.projector_cache: dict[tuple, ProjectorMemory] = {}

    def use_draft(self, draft: Model | Estimator) -> Estimator:
        """Make ``draft`` (a model, or its estimator) the open draft model, keeping the ones opened before it
        within reach of undo."""
        if isinstance(draft, Estimator):
            d = draft
        else:
            d = next((e for e in self._drafts if e.model is draft), None) or Estimator(draft)
        self._drafts = _recent(self._drafts, d)
        self.draft = d
        return d

    def use_projector(self, projector: Projector) -> None:
        """Make ``projector`` the open projector, keeping the ones opened before it within reach of undo."""
        self._projectors = _recent(self._projectors, projector)
        self.projector = projector

    def place(self, devices: list[Lane], settings: LlamaSettings) -> WeightPlacement:
        return place_weights(self.model, devices, settings, self.matcher)

    def draft_for(self, settings: LlamaSettings) -> Estimator | None:
        """The open draft's estimator when it is the file ``settings`` name (-md), else None; a draft opened
        before (undo back to it) becomes the open one again."""
        if not settings.draft_model:
            return None
        d = self.draft
        if d is not None and _same_file(d.model, settings.draft_model):
            return d
        d = next((e for e in self._drafts if _same_file(e.model, settings.draft_model)), None)
        if d is not None:
            self.draft = d
        return d

    def projector_for(self, settings: LlamaSettings) -> Projector | None:
        """The open projector when it is the file ``settings`` name (--mmproj), else None; one opened before
        becomes the open one again."""
        if not settings.mmproj:
            return None
        p = self.projector
        if p is not None and _same_path(p.path, settings.mmproj):
            return p
        p = next((x for x in self._projectors if _same_path(x.path, settings.mmproj)), None)
        if p is not None:
            self.projector = p
        return p

    def estimate(
        self,
        devices: list[Lane],
        settings: LlamaSettings,
        placement: WeightPlacement | None = None,
        quick: bool = False,
    ) -> Estimate:
        """``quick``: the compute graph may be cut to representative layers (a drag preview: 3-4x faster on a
        94-layer model, but a device's compute buffer can be off by a few MiB; see
        :func:`app.memory.compute.core.compute_buffers`); otherwise every layer is replayed, as llama.cpp builds
        it."""
        return _estimate(self.model, devices, settings, placement, self, quick)

    def warm(
        self,
        devices: list[Lane],
        settings: LlamaSettings,
        placement: WeightPlacement | None = None,
        sizes: int = 3,
    ) -> bool:
        """Get ready for a drag from this placement while the board is still: its drag preview (quick) estimated,
        and one at a time the cut graphs of the next ``sizes`` sizes built (a preview that keeps more layers
        than the placement's cut needs one: 16-30 ms to build for a 94-layer model, paid by the first such
        preview otherwise). True where it built one (or the placement's own, with its preview): call it again for
        the next. Built ahead only for a model whose main layers but the first and the last are all of one kind
        (another's cut is not known ahead: :func:`app.memory.compute.core._warm`). Raises what :meth:`estimate`
        raises."""
        facts = self.compute_facts
        facts["warm"] = sizes
        try:
            self.estimate(devices, settings, placement, quick=True)
        finally:
            facts.pop("warm", None)
        return bool(facts.pop("warmed", False))


#: Weight types the CPU backend may repack into CPU_REPACK buffers (ggml-cpu/repack.cpp
#: ggml_repack_get_optimal_repack_type; which ones depends on
#: the CPU's instruction sets).
_REPACKED_TYPES = frozenset({"Q1_0", "Q2_K", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0"})


def estimate(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    placement: WeightPlacement | None = None,
    estimator: Estimator | None = None,
    draft: Model | None = None,
) -> Estimate:
    """Estimate memory per device for ``model`` launched with ``settings`` on ``devices`` (see
    :func:`_estimate`); pass an :class:`Estimator` of the same model to reuse its caches, and the draft
    model (``-md``) as ``draft`` or in the estimator."""
    if draft is not None and (estimator is None or estimator.draft is None):
        estimator = Estimator(model, draft)
    return _estimate(model, devices, settings, placement, estimator)


def _kv_per_layer(
    p: ModelParams, settings: LlamaSettings, shape: ContextShape, estimator: Estimator | None
) -> list[int]:
    """:func:`~app.memory.kv.kv_bytes_per_layer`, kept per cache type and context shape (all it reads of the
    settings) in the estimator's per-model facts: a drag previews many placements of one context."""
    if estimator is None:
        return kv_bytes_per_layer(p, settings, shape)
    cache = estimator.compute_facts.setdefault("kv_per_layer", {})
    key = (settings.type_k, settings.type_v, settings.swa_full, shape)
    got = cache.get(key)
    if got is None:
        if len(cache) >= 64:
            cache.clear()
        got = cache[key] = kv_bytes_per_layer(p, settings, shape)
    return got


def _estimate(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    placement: WeightPlacement | None,
    estimator: Estimator | None,
    quick: bool = False,
    borrowed: tuple[tuple, ...] = (),
) -> Estimate:
    """Estimate memory per device for ``model`` launched with ``settings`` on ``devices``.

    ``devices`` are the non-CPU devices llama.cpp sees (RPC first, then GPUs),
    as :func:`app.devices` reports them or as planned by the user. ``placement``
    (from :meth:`app.placement.Placement.weight_placement`) replaces the
    layer/override rules of ``settings`` when given. ``borrowed``: tensors of another model the graph reads
    (an EAGLE-3 head's, :func:`_borrowed`).
    """
    inferred = ""
    if estimator is not None and settings.draft_model and not settings.spec_types:
        drafter = estimator.draft_for(settings)
        settings = with_detected_spec_type(settings, drafter.model if drafter is not None else None)
        if settings.spec_types:
            inferred = (
                f"no --spec-type given: llama.cpp infers {settings.spec_types[0]} from the draft file "
                "(common_speculative_types_from_gguf), and so does this estimate"
            )
        elif drafter is not None and inferred_mtp(settings, drafter.model):
            inferred = (
                "no --spec-type given: llama.cpp infers draft-mtp from this -md file (its last block holds NextN "
                "layers) and loads the main model's MTP layers; this estimate does not follow that inference and "
                "counts the draft as a plain -md model: give --spec-type explicitly"
            )
    p = model.params
    shape = context_shape(p, settings)
    if settings.load_mtp and not settings.draft_model:
        _check_mtp(p.arch, p.nextn_layers)
    meta = check_split_mode(p.arch, model_devices(devices, settings), settings)
    fa_aborts = family_of(p.arch).fa_aborts
    if fa_aborts and settings.flash_attn != "off":
        raise SettingsError(f"-fa {settings.flash_attn}: {fa_aborts}. Use -fa off.")
    if meta is not None:
        if settings.draft_model:
            raise SettingsError(
                "-sm tensor with a draft model (-md): how the draft shares the devices llama.cpp joins into one "
                "Meta() device is not modelled; estimate with -sm layer, or use Verify for llama.cpp's own figures"
            )
        if placement is not None:
            raise SettingsError(
                "-sm tensor makes one Meta() device of all GPUs and RPC devices, which the board, placing blocks "
                "on each device, cannot show yet: plan with -sm layer here, or estimate the tensor split with "
                "`layerdeck estimate` (it shows llama.cpp's Meta() figures)."
            )
        members = ", ".join(d.name for d in model_devices(devices, settings))
        # llama.cpp's figures for the Meta device are those of the whole model on one device (checked against
        # --fit-print on RPC members: -ngl, -cmoe, -np and -ts give the -sm none figures of one device)
        est = _estimate(
            model,
            [meta],
            replace(settings, split_mode="none", main_gpu=0, devices=None, tensor_split=None),
            None,
            estimator,
        )
        est.notes.append(
            f"-sm tensor: llama.cpp splits every weight and the KV cache across {members} and reports them as one "
            "device, Meta(), with their memory added up; the figures are Meta()'s as llama-fit-params prints them "
            "(checked with RPC devices); each device's own share is not shown by llama.cpp nor sized here"
        )
        return est
    if placement is None:
        placement = place_weights(model, devices, settings, estimator.matcher if estimator else None)
    elif settings.split_mode == "none":
        allowed = {d.name for d in model_devices(devices, settings)} | {CPU}
        stray = sorted({d for d in placement.tensor_device if d and d not in allowed})
        if stray:
            main = ", ".join(sorted(allowed - {CPU})) or "no device"
            raise SettingsError(
                f"-sm none loads the model on {main} (--main-gpu {settings.main_gpu}) and the CPU only: the blocks "
                f"on {', '.join(stray)} cannot go there. Move them, or use -sm layer (the default)."
            )
    names = [d.name for d in placement.devices]
    mem: dict[str, DeviceMemory] = {}
    for n in names:
        _slot(mem, devices, n)
    mem[CPU] = DeviceMemory(CPU)
    for dev, nbytes in placement.bytes_by_device(model).items():
        mem.setdefault(dev, DeviceMemory(dev)).model += nbytes
    kv = _kv_per_layer(p, settings, shape, estimator)
    rs = recurrent_bytes_per_layer(p, shape)
    for il in range(p.n_layer):
        dev = CPU if settings.no_kv_offload else placement.layer_device[il]
        mem[dev].kv += kv[il]
        mem[dev].recurrent += rs[il]
    mem[CPU].output = output_buffer_bytes(p, shape)
    pipeline = (
        len(placement.devices) > 1
        and settings.split_mode == "layer"
        and not settings.no_kv_offload
        and not placement.has_overrides
        and all(d != CPU for d in placement.layer_device)
    )
    notes: list[str] = [inferred] if inferred else []
    if p.arch in NO_MEMORY_ARCHS:
        notes.append(
            f"'{p.arch}' is a diffusion model: llama.cpp gives it no KV cache (non-causal attention over each batch) "
            "and runs it with llama-diffusion-cli; llama-server loads it but cannot generate with it"
        )
    if p.arch == "t5":
        notes.append(
            "'t5' is an encoder-decoder: llama-server runs its encoder only in the warm-up, never on a request's "
            "prompt (tools/server calls no llama_encode), so its answers attend to the warm-up's encoding; llama-cli "
            "runs T5 (the figures here are llama.cpp's for either)"
        )
    if p.arch in NO_FLASH_ATTN_ARCHS and settings.flash_attn != "off":
        notes.append(
            f'-fa {settings.flash_attn}: llama.cpp turns flash attention off for Grok ("flash_attn is not '
            'compatible with Grok - forcing off"): sized without it, the V cache transposed'
        )
    reserved = _reserved_compute(model, placement, settings, shape, pipeline, estimator, notes, quick, borrowed)
    for dev, nbytes in reserved.items():
        mem.setdefault(dev, DeviceMemory(dev)).compute += nbytes
    unknown = [d for d in placement.devices if d.kind is DeviceKind.RPC and not (d.free or d.total)]
    if unknown:
        notes.append(
            f"memory of {', '.join(f'{d.name} ({d.endpoint})' for d in unknown)} is unknown: llama.cpp did not "
            "list that RPC host, so one device of unknown memory is assumed per host; per-device use is exact, "
            "capacity and free space cannot be checked"
        )
    if settings.tool == "fit-params" and settings.repack:
        repackable = sum(
            t.nbytes
            for t, dev in zip(model.tensors, placement.tensor_device)
            if dev == CPU and t.type_name in _REPACKED_TYPES and t.name != "token_embd.weight"
        )
        if repackable:
            notes.append(
                f"llama-fit-params leaves the CPU_REPACK buffer out of its Host figure: up to "
                f"{repackable / 2**20:.0f} MiB of host weights of the types the CPU backend repacks "
                f"({', '.join(sorted(_REPACKED_TYPES))}) are counted here, as llama-server allocates them, and "
                "not in llama.cpp's dry run; with --no-repack the two agree"
            )
    unchecked = unchecked_note(p.arch, state_is_modelled(p))
    if unchecked:
        notes.append(unchecked)
    loops = model.metadata.get(f"{p.arch}.num_loops") if p.arch == "nanbeige" else None
    if isinstance(loops, int) and loops > 1:
        # src/models/nanbeige.cpp: the layers run num_loops times, each pass with its own KV cells
        notes.append(
            f"{UNCHECKED} for looped layers: this '{p.arch}' model runs its {p.n_layer} layers {loops} times "
            f"(nanbeige.num_loops), each pass with its own KV cache; Layerdeck sizes one pass, so KV and compute "
            "are low; use Verify (llama-fit-params)"
        )
    big_rpc = [
        d.name
        for d in placement.devices
        if d.kind is DeviceKind.RPC and not d.alignment and mem[d.name].compute > 1 << 30  # limits not asked
    ]
    if big_rpc:
        notes.append(
            f"compute buffers of {', '.join(big_rpc)} are over 1 GiB and the RPC server's buffer limits are not "
            "known: if it serves a Vulkan, Metal or SYCL device, llama.cpp splits them into buffers of the device's "
            "largest size and may need more than shown (Layerdeck assumes one buffer, as a CPU or CUDA host gives)"
        )
    if p.tied_embeddings and placement.duplicated_output:
        notes.append(f"tied embeddings: token_embd is loaded twice (host and {placement.duplicated_output})")
    if pipeline:
        notes.append(
            "pipeline parallelism is on (all layers on 2+ devices, no overrides): compute buffers hold 4 input copies"
        )
    draft = _draft(model, devices, settings, shape, estimator, mem, notes, placement)
    if draft is None and settings.load_mtp:
        draft = _mtp(model, devices, settings, shape, placement, pipeline, estimator, mem, notes)
    if draft is not None:
        names += [d.name for d in draft.devices[:-1] if d.name not in names]
    proj = _projector(devices, settings, estimator, mem, notes)
    if proj is not None:
        names += [n for n in mem if n != CPU and n not in names]
    ordered = [mem[n] for n in names] + [mem[CPU]]
    return Estimate(ordered, shape, placement, pipeline, notes, draft, proj)


#: graph families whose replay sets the extracted layer inputs of an EAGLE-3 or DFlash head as outputs
#: (``t_layer_inp``: llama.cpp's llama-style graphs and deepseek4.cpp)
LAYER_INP_FAMILIES = frozenset({"llama", "deepseek4"})


def _reserved_compute(
    model: Model,
    placement: WeightPlacement,
    settings: LlamaSettings,
    shape: ContextShape,
    pipeline: bool,
    estimator: Estimator | None,
    notes: list[str],
    quick: bool,
    borrowed: tuple[tuple, ...] = (),
) -> dict[str, int]:
    """Compute buffers per device over every graph the context reserves (each backend's buffer keeps the
    largest, ``ggml_gallocr_reserve_n`` only grows): its own, and for EAGLE-3 speculation (``--spec-type
    draft-eagle3``) the target's graph again with the extracted layer inputs as outputs (``llama_context::decode``
    reserves anew once ``llama_set_embeddings_layer_inp`` changed the outputs) or the head's graph again with its
    backend sampler (``llama_set_sampler``, ``common_speculative_impl_draft_eagle3``)."""
    p = model.params
    shapes = [shape]
    drafter = estimator.draft_for(settings) if estimator is not None else None
    extract = target_layers(settings, drafter.model if drafter else None, p.n_layer, p.arch)
    if extract:  # (the last layer's output, n_layer, only where the graph sets it: FINAL_LAYER_INP_ARCHS)
        shapes.append(replace(shape, layer_inp_out=tuple(extract)))
    if p.arch in ("eagle3", "dflash") and settings.spec_draft_backend_sampling:  # the head's own context
        # (draft_settings); a DFlash2 head gets no backend sampler (its graph adds none then)
        shapes.append(replace(shape, backend_sampler=True))
    if p.arch in ONE_SEQ_RESERVE_ARCHS and shape.n_seq > 1 and settings.tool != "fit-params" and not shape.mtp:
        # sched_reserve's last pp graph has one sequence; llama-fit-params prints the first reserve's sizes
        shapes.append(replace(shape, ubatch_seqs=1))
    facts = estimator.compute_facts if estimator else None
    out: dict[str, int] = {}
    for sh in shapes:
        said: list[str] = []
        got = compute_buffers(model, placement, settings, sh, pipeline, facts, said, cut=quick, borrowed=borrowed)
        for dev, nbytes in got.items():
            out[dev] = max(out.get(dev, 0), nbytes)
        notes.extend(n for n in said if n not in notes)
    return out


def _projector(
    devices: list[Lane],
    settings: LlamaSettings,
    estimator: Estimator | None,
    mem: dict[str, DeviceMemory],
    notes: list[str],
) -> ProjectorMemory | None:
    """The projector's memory (--mmproj), added to ``mem`` per device; None without one."""
    if not settings.mmproj:
        return None
    proj = estimator.projector_for(settings) if estimator is not None else None
    if proj is None:
        notes.append(
            f"the projector {settings.mmproj} (--mmproj) is not open, so its weights and compute buffers are not "
            "counted: open it to include them"
        )
        return None
    from .projector import ProjectorDeviceError, projector_memory

    # the projector's figures depend on its file, the lanes and a few flags, not on where the model's blocks are:
    # a drag (every preview an estimate) replays its graphs once, not on every move
    key = (
        id(proj),
        tuple(devices),
        settings.mmproj_offload,
        settings.mmproj_device,
        tuple(settings.devices or ()),
        settings.flash_attn,
        settings.image_max_tokens,
    )
    cache = estimator.projector_cache if estimator is not None else None
    pm = cache.get(key) if cache is not None else None
    if pm is None:
        try:
            pm = projector_memory(proj, devices, settings)
        except ProjectorDeviceError as exc:
            raise PlacementError(str(exc)) from None
        if cache is not None:
            if len(cache) >= 16:
                cache.pop(next(iter(cache)))
            cache[key] = pm
    _slot(mem, devices, pm.device).projector += pm.weights
    for dev, nbytes in pm.compute.items():
        _slot(mem, devices, dev).projector += nbytes
    parts = ", ".join(f"{d} {n / 2**20:.0f} MiB" for d, n in pm.compute.items() if n)
    notes.append(
        f"projector {proj.path.name} ({proj.types}, --mmproj) on {pm.device}: weights "
        f"{pm.weights / 2**20:.0f} MiB, compute {parts or '0 MiB'}"
    )
    notes.extend(pm.notes)
    return pm


def _slot(mem: dict[str, DeviceMemory], devices: list[Lane], name: str) -> DeviceMemory:
    """``mem[name]``, made with the lane's capacity the first time (None: unknown, an RPC host llama.cpp did not
    list; never 0, which would read as "full")."""
    got = mem.get(name)
    if got is None:
        cap = next((d.total or None for d in devices if d.name == name), None) if name != CPU else None
        got = mem[name] = DeviceMemory(name, capacity=cap)
    return got


def _same_file(model: Model, path: str) -> bool:
    if model.source and model.source == path:
        return True
    return _same_path(model.path, path)


def _same_path(a: os.PathLike | str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.fspath(a) == b


#: Architectures with an MTP draft graph in the pinned llama.cpp (``LLM_GRAPH_TYPE_DECODER_MTP`` in
#: ``src/models/*.cpp``); for others llama-server cannot create the MTP context and stops at start (glm5-next:
#: its build_arch_graph throws "GLM5-Next NextN graph not implemented yet").
LLAMA_MTP_ARCHS = frozenset(
    {
        "bailingmoe3",
        "cohere2moe",
        "deepseek2",
        "deepseek32",
        "deepseek4",
        "glm-dsa",
        "glm4moe",
        "hy_v3",
        "mimo2",
        "nemotron_h_moe",
        "qwen35",
        "qwen35moe",
        "qwen3next",
        "step35",
    }
)


def _check_mtp(arch: str, nextn_layers: int) -> None:
    """``--spec-type draft-mtp`` without ``-md`` on a model llama.cpp cannot draft from: llama-server logs
    "failed to create MTP context" and exits (checked with the pinned build)."""
    if not nextn_layers:
        why = 'this file has no NextN/MTP layers (llama_init_from_model: "model doesn\'t contain MTP layers")'
    elif arch not in LLAMA_MTP_ARCHS:
        why = f"llama.cpp has no MTP draft graph for {arch}, although the file has NextN layers"
    else:
        return
    raise SettingsError(
        f"--spec-type draft-mtp: llama-server stops at start (failed to create MTP context): {why}. Drop draft-mtp, "
        "or give a draft model with -md and --spec-type draft-simple."
    )


def _mtp(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    shape: ContextShape,
    placement: WeightPlacement,
    pipeline: bool,
    estimator: Estimator | None,
    mem: dict[str, DeviceMemory],
    notes: list[str],
) -> Estimate | None:
    """The MTP draft context (``--spec-type draft-mtp`` without ``-md``): a second context on the main model's own
    NextN layers (``common_speculative_init_result``: ``LLAMA_CONTEXT_TYPE_MTP``, the cparams of
    ``common_base_params_to_speculative``: the draft's cache types, f16 unless ``-ctkd``/``-ctvd``, the target's
    cells, one output row per slot, no snapshots). No weights of its own; its KV cache holds the NextN layers on
    their devices and its graph is the architecture's ``graph_mtp``. None when the model has no NextN layers."""
    p = model.params
    if not p.nextn_layers:
        return None
    d_settings = settings.copy(
        n_ctx=shape.n_ctx, type_k=settings.draft_type_k, type_v=settings.draft_type_v, spec_types=[], draft_model=None
    )
    try:
        d_shape = replace(context_shape(p, d_settings), mtp=True)
    except SettingsError as exc:  # llama-server: "failed to create MTP context"
        raise SettingsError(
            f"the MTP draft context takes the draft's cache types (-ctkd {d_settings.type_k}, -ctvd "
            f"{d_settings.type_v}), and llama.cpp refuses them: {exc} (here: -ctkd and -ctvd)"
        ) from None
    if p.arch == "deepseek4" and p.head_dim_k == p.indexer_head_size:
        # llama_kv_cache's constructor forces attn_rot_k on deepseek4 when the head equals the indexer's, also on
        # the MTP context's empty non-SWA cache, whose build_input_k_rot then divides by zero (n_embd_head_k_all
        # 0: SIGFPE in build_attn_inp_k_iswa, seen with the pinned llama-server)
        raise SettingsError(
            f"llama.cpp crashes creating this model's MTP draft context (--spec-type draft-mtp): its attention "
            f"head ({p.head_dim_k}) equals the lightning indexer's, and llama.cpp then divides by zero sizing "
            "a rotation for the draft context's empty cache. Drop --spec-type draft-mtp for this model."
        )
    dm: dict[str, DeviceMemory] = {d.name: DeviceMemory(d.name) for d in placement.devices}
    dm[CPU] = DeviceMemory(CPU)
    for il, nbytes in enumerate(kv_bytes_per_layer(p, d_settings, d_shape)):
        if nbytes:
            dm[CPU if settings.no_kv_offload else placement.layer_device[il]].kv += nbytes
    dm[CPU].output = output_buffer_bytes(p, d_shape)
    family = family_of(p.arch)
    sized = family.build_mtp is not None and p.arch in family.mtp_exact
    if sized:
        facts = estimator.compute_facts if estimator else None
        for dev, nbytes in compute_buffers(model, placement, d_settings, d_shape, pipeline, facts, notes).items():
            dm.setdefault(dev, DeviceMemory(dev)).compute += nbytes
    est = Estimate(list(dm.values()), d_shape, placement, pipeline, [], None, None)
    for d in est.devices:
        _slot(mem, devices, d.name).draft += d.total
    where = ", ".join(f"{d.name} {d.total / 2**20:.0f} MiB" for d in est.devices if d.total)
    notes.append(
        f"MTP draft context (--spec-type draft-mtp) on the model's {p.nextn_layers} NextN layer"
        f"{'s' if p.nextn_layers > 1 else ''}: {where} (its own {d_settings.type_k}/{d_settings.type_v} KV cache of "
        f"{d_shape.n_ctx} cells"
        + (", compute" if sized else "")
        + f", {d_shape.n_outputs_max} output rows)"
        + (
            ""
            if sized
            else f"; its compute buffers are not sized for {p.arch} (no replay of its graph_mtp): use Verify"
        )
    )
    return est


def _borrowed(
    model: Model, head: Model, placement: WeightPlacement, settings: LlamaSettings, shape: ContextShape
) -> tuple[tuple, ...]:
    """The main model's tensors a draft head's graph reads (``cparams.ctx_other``): (name, device, bytes, shape,
    ggml type) each, where the main model keeps them. An EAGLE-3 head reads ``model_other->tok_embd`` and
    ``model_other->output`` in place of those it lacks (src/models/eagle3.cpp), a DFlash head likewise, its own
    token_embd serving as its lm_head where it has no output (src/models/dflash.cpp); Gemma 4's assistant reads the
    target's token embeddings and the caches of its last two layers (:func:`_assistant_borrowed`)."""
    if head.params.arch in SHARED_KV_ARCHS:
        return _assistant_borrowed(model, head, placement, settings, shape)
    if head.params.arch not in ("eagle3", "dflash"):
        return ()
    own = {t.name for t in head.tensors}
    if head.params.arch == "dflash" and "token_embd.weight" in own:
        own.add("output.weight")  # load_arch_tensors: output = its token_embd, TENSOR_DUPLICATED
    idx = {t.name: i for i, t in enumerate(model.tensors)}
    out = []
    for name in ("token_embd.weight", "output.weight"):
        if name in own:
            continue
        i = idx.get(name)
        dev = None
        if i is not None:
            dev = placement.tensor_device[i]
        elif name == "output.weight" and "token_embd.weight" in idx:  # tied: the output's copy of token_embd
            i = idx["token_embd.weight"]
            dev = placement.duplicated_output or placement.tensor_device[i]
        if i is None or not dev:
            continue
        t = model.tensors[i]
        out.append((name, dev, t.nbytes, ne4(t.shape), t.type_name.lower()))
    return tuple(out)


def _assistant_borrowed(
    model: Model, head: Model, placement: WeightPlacement, settings: LlamaSettings, shape: ContextShape
) -> tuple[tuple, ...]:
    """What Gemma 4's assistant reads of its target (src/models/gemma4-assistant.cpp): ``model_other->tok_embd``
    for its input, and as its whole KV cache the target's layer ``n_layer - 2`` (its sliding layers) and
    ``n_layer - 1`` (its full layers), or the layers those reuse (``n_layer_kv_from_start``: E2B's last layers
    read layer 13's and 14's caches), as ``llama_model::create_memory``'s ``share`` maps them; with them the
    rotations those caches apply (``attn_rot_k``/``attn_rot_v``, copied from the shared cache: gemma4.py's), as
    ``target:rot_{k,v}_{swa,full}`` entries of (n, n) (no tensor of the target: their size only). Raises
    :class:`SettingsError` for a target llama.cpp cannot pair it with."""
    from .compute.ggml import row_size
    from .compute.models.gemma4 import rot_size
    from .compute.models.gemma4_assistant import TARGET_EMBD, cache_name, rot_name

    p, h = model.params, head.params
    width = int(head.metadata.get(f"{h.arch}.embedding_length_out") or 0)
    why = (
        f"it drafts for Gemma 4 (its caches are a sliding-window / full pair), not for {p.arch}"
        if p.arch != "gemma4"
        else f"its input is {width} wide, the model's hidden state {p.n_embd}"
        if width != p.n_embd
        else f"its head sizes ({h.head_dim_k_swa}/{h.head_dim_k}) are not the model's caches' "
        f"({p.head_dim_k_swa}/{p.head_dim_k})"
        if (h.head_dim_k_swa, h.head_dim_k) != (p.head_dim_k_swa, p.head_dim_k)
        else ""
    )
    if why:
        raise SettingsError(
            f"the draft model {head.path.name} is a Gemma 4 assistant that llama.cpp cannot run with this model: "
            f"{why}. Use the assistant published for this model."
        )
    out = []
    idx = {t.name: i for i, t in enumerate(model.tensors)}
    i = idx.get("token_embd.weight")
    if i is not None and placement.tensor_device[i]:
        t = model.tensors[i]
        out.append((TARGET_EMBD, placement.tensor_device[i], t.nbytes, ne4(t.shape), t.type_name.lower()))
    n_layer = p.n_layer - p.nextn_layers  # llama_model_n_layer: the trunk's
    dims_v = [(p.head_dim_v_swa if p.swa_layers[il] else p.head_dim_v) * p.n_head_kv[il] for il in range(n_layer)]
    max_v = max(dims_v)
    ns = 1 if shape.unified else max(1, shape.n_stream)
    quantized_k = CACHE_TYPE_BLOCKS.get(settings.type_k, (1, 2))[0] > 1
    quantized_v = CACHE_TYPE_BLOCKS.get(settings.type_v, (1, 2))[0] > 1
    head0_k = p.head_dim_k_swa if p.swa_layers[0] else p.head_dim_k
    head0_v = p.head_dim_v_swa if p.swa_layers[0] else p.head_dim_v
    for swa, il in ((True, n_layer - 2), (False, n_layer - 1)):
        if p.n_layer_kv_from_start >= 0 and il >= p.n_layer_kv_from_start:
            il = p.n_layer_kv_from_start - (2 if p.swa_layers[il] else 1)
        dev = CPU if settings.no_kv_offload else placement.layer_device[il]
        cells = shape.size_swa if p.swa_layers[il] and shape.size_swa else shape.n_ctx_seq
        hk = p.head_dim_k_swa if p.swa_layers[il] else p.head_dim_k
        n_k = hk * p.n_head_kv[il]
        n_v = max_v if not shape.flash_attn else dims_v[il]  # a transposed V is padded to the widest layer's
        for which, ty, w in (("k", settings.type_k, n_k), ("v", settings.type_v, n_v)):
            out.append((cache_name(which, swa), dev, row_size(ty, w) * cells * ns, (w, cells, ns, 1), ty))
        rk = rot_size(hk, quantized_k, head0_k)
        rv = 64 if quantized_v and head0_v % 64 == 0 else 0
        for which, n in (("k", rk), ("v", rv)):
            if n:
                out.append((rot_name(which, swa), CPU, 0, (n, n, 1, 1), "f32"))
    return tuple(out)


def _draft(
    model: Model,
    devices: list[Lane],
    settings: LlamaSettings,
    shape: ContextShape,
    estimator: Estimator | None,
    mem: dict[str, DeviceMemory],
    notes: list[str],
    placement: WeightPlacement | None = None,
) -> Estimate | None:
    """The draft model's estimate (-md), its totals added to ``mem`` per device; None without a draft.
    ``placement``: the main model's, for the tensors an EAGLE-3 head reads from it (:func:`_borrowed`)."""
    if settings.load_mtp and model.params.nextn_layers:
        nextn = sum(t.nbytes for t, s in zip(model.tensors, model.index.skipped) if s)
        notes.append(
            "--spec-type draft-mtp makes llama.cpp load the NextN/MTP layers' weights too (load_mtp): "
            f"{fmt_bytes(nextn)}, counted on their layers' devices"
        )
    if shape.n_rs_seq:
        family = family_of(model.params.arch)
        replayed = family.rs_seq and model.params.arch in family.exact
        notes.append(
            f"--spec-type {', '.join(t for t in settings.spec_types if t in RS_SEQ_SPEC_TYPES)} keeps "
            f"{shape.n_rs_seq} recurrent-state snapshots per sequence (n_rs_seq = --spec-draft-n-max) to roll "
            f"drafts back: the recurrent state is {1 + shape.n_rs_seq}x as large"
            + ("" if replayed else f"; the compute graph's snapshot copies are not replayed for {model.params.arch}")
        )
    if not settings.draft_model:
        heads = [t for t in settings.spec_types if t in ("draft-eagle3", *DFLASH_SPEC_TYPES)]
        if heads:  # common_speculative_init: add_config_if_enabled(.., ctx_dft != nullptr)
            notes.append(
                f"--spec-type {', '.join(heads)} without -md: llama.cpp drafts nothing with it (the EAGLE-3 or "
                "DFlash head is the -md model); only the main context's extra output rows are counted"
            )
        return None
    drafter = estimator.draft_for(settings) if estimator is not None else None
    if drafter is None:
        notes.append(
            f"the draft model {settings.draft_model} (-md) is not open, so its weights, KV cache and compute "
            "buffers are not counted: open it to include them"
        )
        return None
    check_dflash_head(drafter.model)
    d_settings = draft_settings(settings, shape)
    borrowed = _borrowed(model, drafter.model, placement, settings, shape) if placement is not None else ()
    try:
        est = _estimate(drafter.model, devices, d_settings, None, drafter, borrowed=borrowed)
    except SettingsError as exc:  # llama-server: "failed to create MTP context" (any draft's context)
        # the draft's cache types are -ctkd/-ctvd, not the -ctk/-ctv the check names for a main model
        why = re.sub(r"(?<!\S)-ct([kv])(?=\s)", r"-ct\1d", str(exc))
        raise SettingsError(f"the draft model {drafter.model.path.name} (-md): {why}") from None
    for d in est.devices:
        _slot(mem, devices, d.name).draft += d.total
    where = ", ".join(f"{d.name} {d.total / 2**20:.0f} MiB" for d in est.devices if d.total)
    cache = (
        "no KV cache of its own: it reads the main model's last two layers' caches"
        if drafter.model.params.arch in SHARED_KV_ARCHS
        else f"its own KV cache of {est.shape.n_ctx} cells as the main context"
    )
    notes.append(
        f"draft model {drafter.model.path.name} (-md): {where} (weights, {cache}, compute, {shape.n_seq} output "
        f"row{'s' if shape.n_seq > 1 else ''})"
    )
    notes.extend(f"draft: {n}" for n in est.notes)
    p = model.params
    extract = target_layers(settings, drafter.model, p.n_layer, p.arch)
    if extract:
        grows = len(extract) * p.n_embd * shape.n_batch * 4  # output_reserve: n_embd x n_batch floats per layer
        replayed = family_of(p.arch).name in LAYER_INP_FAMILIES and p.arch in family_of(p.arch).exact
        kind = (
            "EAGLE-3 head (--spec-type draft-eagle3)"
            if drafter.model.params.arch == "eagle3"
            else f"DFlash head (--spec-type {', '.join(t for t in settings.spec_types if t in DFLASH_SPEC_TYPES)})"
        )
        notes.append(
            f"{kind}: the main context extracts the hidden states of layers {', '.join(map(str, extract))} for it"
            + (
                ", its compute buffers counted as reserved again with those layer inputs as outputs"
                if replayed
                else f"; its compute reserved again with those outputs is not replayed for {p.arch}"
            )
            + f"; not counted: the host output buffer grows by {fmt_bytes(grows)} at the first decode "
            "(output_reserve: one row of n_embd floats per -b token and layer), the head's by its rows"
        )
    return est
