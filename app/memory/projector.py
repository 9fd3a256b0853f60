"""The multimodal projector's memory (``--mmproj``), as libmtmd allocates it in llama-server.

``clip_ctx`` (``tools/mtmd/clip.cpp``) puts the projector on one backend:

- none (the CPU) with ``--no-mmproj-offload`` or ``-mmdev none`` (or ``-dev none``);
- the ``-mmdev`` device; else the first ``-dev`` device (``common/arg.cpp``: the mmproj device "follows
  --device");
- else ``ggml_backend_init_by_type(GPU)`` then ``IGPU``: the first device of that type in the *registry*
  order, where the local backends (CUDA, Vulkan, ...) come before the RPC devices (``--rpc`` adds them to the
  registry after loading), and an RPC device counts as a GPU (``ggml-rpc.cpp`` ``get_type``). So with a
  CPU+RPC build it is RPC0, with a Vulkan build it is Vulkan0 even when RPC devices are listed first.

The weights are one buffer of that backend's default buffer type (``ggml_backend_alloc_ctx_tensors_from_buft``:
each tensor padded to the buffer's alignment; CUDA pads quantized rows to 512). The compute buffers come from
``ggml_backend_sched_reserve`` of the warmup image's graph over [that backend, CPU] (the CPU holds the raw
image input when the projector is on a device): replayed with :mod:`app.memory.compute.schedule` and
:mod:`app.memory.compute.alloc` for the projector types :data:`~app.memory.compute.projector_graphs.GRAPHS`
knows; for the others an approximation, said so in the notes.

Flash attention follows ``-fa``: ``auto`` reserves with it on and, where the backend refuses the op, reserves
again without it; the scheduler keeps the larger buffer of the two reserves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..lanes import CPU, DeviceKind, Lane
from ..model.projector import Projector, minicpmv_query_num
from .backends import CPU_ALIGNMENT, alignment_of, backend_of, cuda_like
from .compute.alloc import allocate_graph
from .compute.projector_graphs import AUDIO_GRAPHS, GRAPHS, ClipHParams, make_weight, wtype
from .compute.schedule import schedule
from .compute.vk_optimize import reorder as vk_reorder
from .compute.vk_optimize import use_counts
from .settings import LlamaSettings

MiB = 1 << 20


@dataclass
class ProjectorMemory:
    device: str  # where the weights go: a lane name or "CPU"
    weights: int  # bytes of the weights buffer on that device
    compute: dict[str, int]  # compute buffer bytes per device name (the chosen device and/or "CPU")
    exact: bool  # compute replayed from this projector type's graph (else approximate)
    notes: list[str] = field(default_factory=list)
    weights_raw: int = 0  # the tensors' bytes unpadded (what libmtmd counts and llama-server logs as "model size")
    #: per encoder context: (kind "vision"/"audio", projector type, compute bytes per device; empty where not counted)
    encoders: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)

    def mtmd_usage(self) -> dict[str, int]:
        """``mtmd_get_memory_usage`` per device: the unpadded weights plus the compute buffers, which llama-server
        adds to --fit's per-device targets (``fit_params_target``) before fitting the model."""
        out = dict(self.compute)
        out[self.device] = out.get(self.device, 0) + self.weights_raw
        return out

    @property
    def total(self) -> int:
        return self.weights + sum(self.compute.values())

    def on(self, name: str) -> int:
        """Bytes on device ``name`` (weights if it holds them, plus its compute buffer)."""
        return (self.weights if name == self.device else 0) + self.compute.get(name, 0)


class ProjectorDeviceError(ValueError):
    """-mmdev / -dev names a device llama.cpp does not have."""


_GPU_KINDS = (DeviceKind.GPU, DeviceKind.RPC, DeviceKind.PLANNED)


def registry_order(devices: list[Lane]) -> list[Lane]:
    """The devices in ggml's registry order: local backends first, then the RPC devices (``--rpc`` registers them
    after the backends are loaded)."""
    return [d for d in devices if d.kind is not DeviceKind.RPC] + [d for d in devices if d.kind is DeviceKind.RPC]


def projector_lane(devices: list[Lane], settings: LlamaSettings) -> Lane | None:
    """The lane ``clip_ctx`` puts the projector on, or None for the CPU."""
    if not settings.mmproj_offload:
        return None
    name = settings.mmproj_device
    if name is None and settings.devices:
        name = settings.devices[0]
    if name is not None:
        if name.lower() == "none":
            return None
        for d in devices:
            if d.name.lower() == name.lower():  # ggml_backend_dev_by_name compares case-insensitively
                return d
        raise ProjectorDeviceError(
            f"-mmdev {name}: no such device (the devices are: {', '.join(d.name for d in devices) or 'none'})"
        )
    ordered = registry_order(devices)
    for kinds in (_GPU_KINDS, (DeviceKind.IGPU,)):
        for d in ordered:
            if d.kind in kinds:
                return d
    return None


_FLOAT = ("f32", "f16", "bf16")
#: the Qwen-VL projector types (clip-impl.h names) that share the 46x46-token warmup
_QWEN_VL = ("qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "ling3vl")
#: projector types without a replayed graph whose warmup is ``set_warmup_n_tokens(n)`` (load_hparams): type ->
#: (n, default n_merge), for the approximate figure
_WARMUP_TOKENS = {
    "phi4": (256, 1),
    "lightonocr": (256, 1),
    "dots_ocr": (2116, 2),
    "dots3note_v": (2116, 2),
    "kimivl": (256, 2),
    "minimax_m3": (256, 2),
    "muse-glimmer": (1024, 2),
    "mimovl": (2116, 2),
    "youtuvl": (256, 2),
    "glm4v": (2116, 2),
    "glm5v": (2116, 2),
    "paddleocr": (784, 2),
    "hunyuanvl": (1024, 2),
    "exaone4_5": (2116, 2),
}


#: tensors clip.cpp reads as scalars (``get_scalar``: Gemma 4's clamp bounds) and does not load into the buffer
_SCALARS = (".input_max", ".input_min", ".output_max", ".output_min")
#: Parakeet's mel filters and window, which ``load_tensors`` reads into hparams (``get_vector``), not a buffer
_VECTORS = ("a.mel_filters", "a.window")


def loaded_tensors(proj: Projector):
    """The tensors ``clip_model_loader`` loads into the weights buffers (one per encoder): not the scalars and
    vectors it reads into hparams, and not the audio encoder's where ``clip_init`` skips it (Gemma 3n)."""
    skip_audio = proj.vision and proj.proj_type in _SKIPS_AUDIO
    return [
        t
        for t in proj.tensors
        if not t.name.endswith(_SCALARS)
        and t.name not in _VECTORS
        and not (skip_audio and t.name.startswith(("a.", "mm.a.")))
    ]


#: tensors ``clip_model_loader::load_tensors`` asks for by fixed "v." names, whatever the encoder: the audio
#: context of a file with both encoders loads them a second time, into its own buffer
_UNPREFIXED = (
    "v.class_embd",
    "v.patch_embd.weight",
    "v.patch_embd.weight.1",
    "v.patch_embd.bias",
    "v.norm_embd.weight",
    "v.norm_embd.bias",
)


def _audio_reloads(proj: Projector) -> list:
    """The vision tensors the audio encoder's context loads again (mtmd counts them twice, and they take room in
    both contexts' buffers): the fixed-name patch embeddings, and the deepstack tensors of the audio layers."""
    if not (proj.vision and proj.audio) or proj.proj_type in _SKIPS_AUDIO:
        return []
    n_layer = int(proj.audio_hp("block_count", 0) or 0)
    deepstack = tuple(f"v.deepstack.{il}." for il in range(n_layer))
    return [t for t in proj.tensors if t.name in _UNPREFIXED or t.name.startswith(deepstack)]


def weights_bytes(proj: Projector, lane: Lane | None) -> int:
    """The weights buffers: every loaded tensor's allocation size padded to the buffer type's alignment (the
    tensors both encoders' contexts load, twice)."""
    align = alignment_of(lane) if lane is not None else CPU_ALIGNMENT
    cuda = lane is not None and cuda_like(lane)
    total = 0
    for t in loaded_tensors(proj) + _audio_reloads(proj):
        size = t.nbytes
        ne0 = t.shape[0] if t.shape else 1
        if cuda and t.type_name.lower() not in _FLOAT and ne0 % 512 and t.n_elements:
            # ggml_backend_cuda_buffer_type_get_alloc_size: quantized rows padded to MATRIX_ROW_PADDING
            size += (512 - ne0 % 512) * t.nbytes // t.n_elements
        total += (size + align - 1) // align * align
    return total


def _feature_layers(value) -> tuple[int, ...]:
    """``clip.vision.feature_layer`` (LLaVA / Granite Vision): the layer indices whose inputs are stacked."""
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool) and v >= 0)


def clip_hparams(proj: Projector, settings: LlamaSettings | None = None) -> ClipHParams:
    """``clip_model_loader::load_hparams`` for the vision encoder (the keys the graphs' shapes read)."""
    hp = proj.vision_hp
    ptype = _VISION_ALIAS.get(proj.proj_type, proj.proj_type)  # Qwen2.5-Omni's legacy "qwen2.5o" is Qwen2.5-VL's
    n_embd = int(hp("embedding_length", 0))
    n_head = int(hp("attention.head_count", 1)) or 1
    d_head = int(hp("attention.head_dim", 0) or 0) or n_embd // n_head
    if ptype == "mimovl":  # clip_graph_mimovl: the head width from the fused qkv's rows
        qkv = next((t for t in proj.tensors if t.name == "v.blk.0.attn_qkv.weight"), None)
        n_kv = int(hp("attention.head_count_kv", n_head) or n_head)
        if qkv is not None and len(qkv.shape) > 1 and n_head + 2 * n_kv > 0:
            d_head = qkv.shape[1] // (n_head + 2 * n_kv) or d_head
    image_size = int(hp("image_size", 0))
    if proj.get("clip.use_gelu"):
        ffn = "gelu"
    elif proj.get("clip.use_silu"):
        ffn = "silu"
    else:
        ffn = "gelu_quick"
    patch = int(hp("patch_size", 1)) or 1
    warmup = image_size
    if ptype in _QWEN_VL:
        # n_merge 2 unless spatial_merge_size says; set_warmup_n_tokens(46*46), whatever --image-max-tokens says
        n_merge = int(hp("spatial_merge_size", 0) or 0) or 2
        warmup = 46 * patch * n_merge
    elif ptype == "gemma4v":  # pooling kernel 3 unless the file says; set_warmup_n_tokens(256)
        n_merge = int(hp("projector.scale_factor", 0) or 0) or 3
        warmup = 16 * patch * n_merge
    elif ptype == "gemma4uv":  # the "unified" variant merges in its patch: patch * kernel, no merge after
        patch *= int(hp("projector.scale_factor", 0) or 0) or 3
        n_merge = 1
        warmup = 16 * patch
    elif ptype == "lfm2":
        # set_limit_image_tokens(64, 256): the warmup is the side of the largest image, --image-max-tokens's
        n_merge = int(hp("projector.scale_factor", 0) or 0) or 1
        max_tokens = (settings.image_max_tokens if settings and settings.image_max_tokens else 0) or 256
        warmup = math.isqrt(max_tokens * patch * patch * n_merge * n_merge)
    elif ptype in _WARMUP_TOKENS:
        n_tok, default_merge = _WARMUP_TOKENS[ptype]
        n_merge = int(hp("spatial_merge_size", 0) or hp("projector.scale_factor", 0) or 0) or default_merge
        if ptype == "paddleocr":  # load_hparams sets 2 and reads no key
            n_merge = 2
        elif ptype == "phi4":  # load_hparams sets 1
            n_merge = 1
        warmup = math.isqrt(n_tok) * patch * n_merge
    elif ptype == "kimik25":
        # the file's pixel limits set the warmup side (sqrt of the largest); else set_limit_image_tokens(2, 4096):
        # the largest image of --image-max-tokens (or 4096) merged tokens
        n_merge = int(hp("projector.scale_factor", 0) or 0) or 1
        min_px, max_px = int(hp("image_min_pixels", 0) or 0), int(hp("image_max_pixels", 0) or 0)
        if min_px > 0 and max_px > 0:
            warmup = math.isqrt(max_px)
        else:
            max_tokens = (settings.image_max_tokens if settings and settings.image_max_tokens else 0) or 4096
            warmup = math.isqrt(max_tokens * patch * patch * n_merge * n_merge)
    elif ptype == "deepseek4v":
        # the side of min(256, the block's token cap) merged tokens: the cap is 384, or --image-max-tokens (>= 16)
        n_merge = int(hp("projector.scale_factor", 0) or 0) or 1
        cap = max(settings.image_max_tokens, 16) if settings and settings.image_max_tokens else 384
        warmup = math.isqrt(min(256, cap)) * patch * n_merge
    elif ptype in ("deepseekocr", "deepseekocr2"):  # load_hparams sets a 16-pixel patch and a 1024x1024 warmup
        n_merge = 1
        patch = 16
        warmup = 1024
    elif ptype == "pixtral":  # n_merge 1 unless spatial_merge_size; set_warmup_n_tokens(256)
        n_merge = int(hp("spatial_merge_size", 0) or 0) or 1
        warmup = 16 * patch * n_merge
    else:  # MiniCPM-V 4.6: 4 (its ViT merger and final merger, 2x2 each) unless the file says 2
        n_merge = int(hp("projector.scale_factor", 0) or 0) or (4 if ptype in ("gemma3", "minicpmv4_6") else 1)
    granite = ptype == "granite4_vision"  # open_projector checked its keys
    ocr = ptype in ("deepseekocr", "deepseekocr2")
    return ClipHParams(
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=int(hp("attention.head_count_kv", n_head) or n_head),
        d_head=d_head,
        n_ff=int(hp("feed_forward_length", 0)),
        n_layer=int(hp("block_count", 0)),
        patch_size=patch,
        image_size=image_size,
        warmup_image_size=warmup,
        n_merge=n_merge,
        ffn_op=ffn,
        n_wa_pattern=int(hp("n_wa_pattern", 0) or 0),
        feature_layers=_feature_layers(hp("feature_layer", None)),
        query_num=minicpmv_query_num(proj.header.metadata) if ptype == "resampler" else 0,
        # Youtu-VL's full-attention layers; MiniCPM-V 4.6 borrows the key for its ViT merger's layer (the first)
        wa_layers=_feature_layers(hp("wa_layer_indexes", None)) if ptype in ("youtuvl", "minicpmv4_6") else (),
        wa_modes=_int_list(hp("wa_pattern_mode", None)) if ptype == "mimovl" else (),
        n_expert_used=int(hp("expert_used_count", 0) or 0),
        spatial_offsets=_int_list(hp("projector.spatial_offsets", None)) if granite else (),
        query_side=int(hp("projector.query_side", 0)) if granite else 0,
        window_side=int(hp("projector.window_side", 0)) if granite else 0,
        # DeepSeek-OCR's SAM keys, read for it alone (open_projector checked them; another type's may be anything)
        sam_n_layer=int(hp("sam.block_count", 0) or 0) if ocr else 0,
        sam_n_head=int(hp("sam.head_count", 0) or 0) if ocr else 0,
        sam_n_embd=int(hp("sam.embedding_length", 0) or 0) if ocr else 0,
        attn_window_size=int(hp("window_size", 0) or 0) if ocr else 0,
    )


def _int_list(value) -> tuple[int, ...]:
    """An integer array key (negative values kept), or () for anything else."""
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))


def _fa_supported(lane: Lane | None, hp: ClipHParams) -> bool:
    """Whether the projector's backend runs its FLASH_ATTN_EXT (the ``auto`` probe of ``warmup``)."""
    if lane is None:
        return True
    backend = backend_of(lane)
    if backend == "vulkan":  # ggml_backend_vk_device_supports_op: head sizes a multiple of 8
        return hp.d_head % 8 == 0
    if backend in ("cuda", "rocm"):  # ggml_cuda_get_best_fattn_kernel: the head sizes with kernels (K = V)
        return hp.d_head in (40, 64, 72, 80, 96, 112, 128, 256)
    return True


def _cpu_stuck(g) -> str | None:
    """The weight of a matrix product the CPU backend cannot run, if the graph has one: ``ggml_backend_cpu_device_
    supports_op`` takes a MUL_MAT only where its second source is f32 or the first's ``vec_dot_type`` (f16 for f16,
    bf16 for bf16, a q8 type for the quantized ones), so an f16 im2col (``ggml_conv_2d_dw``) against an F32 or
    quantized depthwise kernel has no backend on a CPU-only clip context, and its scheduler aborts
    (``GGML_ASSERT(*cur_backend_id != -1)``, seen with llama-server on MobileVLM V2's PEG and Gemma 3n's
    MobileNetV5 kernels)."""

    def ty(t) -> str:  # a weight's ggml type (a view's is its weight's)
        return wtype(t.vs if t.vs is not None else t) if t.ty == "w" else t.ty

    for t in g.nodes:
        if t.op != "MUL_MAT":
            continue
        a, b = t.src[0], t.src[1]
        if ty(b) != "f32" and not (ty(b) == ty(a) and ty(a) in ("f16", "bf16")):
            w = a if a.ty == "w" else b
            return f"{(w.vs if w.vs is not None else w).name} ({ty(w).upper()})"
    return None


def _replay(
    proj: Projector, hp: ClipHParams, lane: Lane | None, fa: bool, build, stuck: list[str] | None = None
) -> tuple[list[int], bool]:
    """Schedule and allocate one encoder's warmup graph (``build(hp, w, fa)``): (peak bytes per backend ([lane,
    CPU] or [CPU]), whether the projector's backend refuses one of its FLASH_ATTN_EXT ops
    (``reserve_compute_meta``'s ``fattn``)). On the CPU, ``stuck`` gets the weight of a product the CPU backend
    cannot run (:func:`_cpu_stuck`)."""
    devs = [lane] if lane is not None else []
    cpu = len(devs)
    weights = {}
    for t in loaded_tensors(proj):
        w = make_weight(t.name, t.shape, t.type_name.lower(), t.nbytes)
        w.wbe = 0
        w.host = lane is None
        weights[t.name] = w

    g = build(hp, weights.get, fa)
    if lane is None and stuck is not None:
        got = _cpu_stuck(g)
        if got is not None:
            stuck.append(got)
    refused = False
    if fa and lane is not None:
        limit = lane.max_tensor_bytes
        for t in g.nodes:
            if t.op != "FLASH_ATTN_EXT":
                continue
            if not _fa_supported(lane, hp) or (
                limit is not None and any(x.size > limit for x in [t, *t.src])  # Vulkan: "larger than max size"
            ):
                refused = True
    limits = [(d.max_tensor_bytes, backend_of(d), d.refused_ops) for d in devs] + [(None, "cpu", ())]
    # clip_ctx's scheduler has op offload on, but every weight is on the projector's one backend
    splits = schedule(g.nodes, g.leafs, cpu, [], limits)
    aligns = [alignment_of(d) for d in devs] + [CPU_ALIGNMENT]  # the CPU backend's own buffer type
    max_sizes = [d.max_buffer for d in devs] + [0]
    nodes, deps = g.nodes, None
    if lane is not None and backend_of(lane) == "vulkan":  # clip's scheduler optimizes the Vulkan splits too
        nodes, deps = vk_reorder(g.nodes, splits, [True, False], use_counts(g.nodes), lambda t: t.wty)
    peaks = allocate_graph(nodes, g.leafs, splits, 1, cpu + 1, aligns, lambda t, be: t.size, max_sizes, deps)
    return peaks, refused


def _warmup(
    proj: Projector, hp: ClipHParams, lane: Lane | None, fa_mode: str, build, stuck: list[str] | None = None
) -> list[int]:
    """``clip_model_loader::warmup``: ``-fa auto`` reserves with flash attention on and, where the backend refuses
    it, again without; the second reserve keeps the larger buffer of the two (``ggml_gallocr_reserve_n`` grows,
    never shrinks). ``stuck``: as :func:`_replay`'s."""
    first, refused = _replay(proj, hp, lane, fa_mode != "off", build, stuck)
    if refused and fa_mode == "auto":
        again, _ = _replay(proj, hp, lane, False, build)
        return [max(a, b) for a, b in zip(first, again)]
    return first


def _approx(proj: Projector, hp: ClipHParams, lane: Lane | None, fa: bool) -> list[int]:
    """A ViT's compute peak without its graph: the attention scores (without flash attention) and a few
    activations of the widest layer, plus the raw image on the CPU. On the replayed types it is within about
    0.5x-2x of the exact figure (not the masks or extra inputs some graphs add)."""
    size = hp.warmup_image_size or hp.image_size
    n_pos = max((size // max(hp.patch_size, 1)) ** 2, 1)
    act = 3 * n_pos * max(hp.n_embd, hp.n_ff, 1) * 4
    if not fa:  # the scores, softmaxed in place
        act += n_pos * n_pos * max(hp.n_head, 1) * 4
    raw = size * size * 3 * 4
    if lane is None:
        return [act + raw]
    return [act, raw]


#: legacy projector types that clip_model_loader::load_hparams renames per encoder (Qwen2.5-Omni's "qwen2.5o")
_VISION_ALIAS = {"qwen2.5o": "qwen2.5vl_merger"}
_AUDIO_ALIAS = {"qwen2.5o": "qwen2a"}
#: clip_init skips the audio encoder of these vision types ("we don't support audio for Gemma 3N")
_SKIPS_AUDIO = ("gemma3nv",)


def audio_hparams(proj: Projector, a_type: str = "") -> ClipHParams:
    """``clip_model_loader::load_hparams`` for the audio encoder: the ``clip.audio.*`` keys, and the warmup
    ``clip_hparams::warmup_audio_size`` (3000 frames) of ``num_mel_bins`` rows (640 samples for the encoder-free
    ``gemma4ua``, whatever the file says); a type's own keys only for that type (``open_projector`` checked them),
    as ``load_hparams`` reads them."""
    hp = proj.audio_hp
    mimo, granite = a_type == "mimo_audio", a_type == "granite_speech"
    n_embd = int(hp("embedding_length", 0))
    n_head = int(hp("attention.head_count", 1)) or 1
    return ClipHParams(
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=int(hp("attention.head_count_kv", n_head) or n_head),
        d_head=int(hp("attention.head_dim", 0) or 0) or n_embd // n_head,
        n_ff=int(hp("feed_forward_length", 0)),
        n_layer=int(hp("block_count", 0)),
        patch_size=1,
        image_size=0,
        warmup_image_size=0,
        n_merge=1,
        ffn_op="gelu_erf",
        prefix="a",
        n_mel=640 if a_type == "gemma4ua" else int(hp("num_mel_bins", 0)),
        warmup_frames=3000,
        stack_factor=int(hp("projector.stack_factor", 0) or 0),
        conv_kernel=int(hp("conv_kernel_size")) if a_type == "parakeet" or granite else 0,
        wa_modes=_int_list(hp("wa_pattern_mode", None)) if mimo else (),
        rvq_bins=_int_list(hp("rvq.codebook_size", None)) if mimo else (),
        local_layers=int(hp("local_block_count")) if mimo else 0,
        local_group=int(hp("local_group_size")) if mimo else 0,
        feature_layers=_int_list(hp("feature_layer", None)) if granite else (),
        chunk_size=int(hp("chunk_size")) if granite else 0,
        proj_window=int(hp("projector.window_size")) if granite else 0,
        proj_downsample=int(hp("projector.downsample_rate")) if granite else 0,
        proj_heads=int(hp("projector.head_count")) if granite else 0,
    )


def projector_memory(proj: Projector, devices: list[Lane], settings: LlamaSettings) -> ProjectorMemory:
    """Where the projector goes and what it allocates there: its weights, and the compute buffers of each
    encoder's context (libmtmd makes one ``clip_ctx`` per encoder, vision and audio, on the same device, each
    with its own scheduler; ``mtmd_get_memory_usage`` adds them up per device)."""
    notes: list[str] = []
    lane = projector_lane(devices, settings)
    where = lane.name if lane is not None else CPU
    weights = weights_bytes(proj, lane)
    fa_mode = settings.flash_attn
    names = ([where] if lane is not None else []) + [CPU]
    compute: dict[str, int] = {}
    exact = True

    encoders: list[tuple[str, str, dict[str, int]]] = []
    stuck: list[str] = []  # weights of products the CPU backend cannot run (_cpu_stuck)

    def add(kind: str, ptype: str, peaks: list[int]) -> None:
        own = {name: size for name, size in zip(names, peaks) if size > 1}  # reserve_compute_meta logs (and mtmd
        for name, size in own.items():  # counts) only buffers above 1 byte
            compute[name] = compute.get(name, 0) + size
        encoders.append((kind, ptype, own))

    v_type = _VISION_ALIAS.get(proj.proj_type, proj.proj_type) if proj.vision else None
    if v_type is not None:
        hp = clip_hparams(proj, settings)
        peaks: list[int] | None = None
        if v_type in GRAPHS:
            try:
                peaks = _warmup(proj, hp, lane, fa_mode, GRAPHS[v_type], stuck)
            except (NotImplementedError, KeyError, AttributeError, TypeError) as exc:
                notes.append(f"The {v_type} projector's graph could not be replayed ({exc}).")
        if peaks is None:
            exact = False
            peaks = _approx(proj, hp, lane, fa_mode != "off" and _fa_supported(lane, hp))
            notes.append(
                f"The projector's compute buffers are approximate: Layerdeck does not replay the "
                f"{v_type!r} projector's graph yet. Verify measures them with the real llama-server."
            )
        add("vision", v_type, peaks)
    a_type = proj.audio_type or (proj.proj_type if not proj.vision else None)
    a_type = _AUDIO_ALIAS.get(a_type, a_type) if proj.audio and a_type else None
    if a_type is not None and v_type not in _SKIPS_AUDIO:
        hp = audio_hparams(proj, a_type)
        done = False
        if a_type in AUDIO_GRAPHS:
            try:
                add("audio", a_type, _warmup(proj, hp, lane, fa_mode, AUDIO_GRAPHS[a_type], stuck))
                done = True
            except (NotImplementedError, KeyError, AttributeError, TypeError) as exc:
                notes.append(f"The {a_type} audio encoder's graph could not be replayed ({exc}).")
        if not done:
            exact = False
            encoders.append(("audio", a_type, {}))
            notes.append(
                f"The projector's {a_type!r} audio encoder's compute buffer is not counted: Layerdeck does not "
                "replay its graph yet. Verify measures it with the real llama-server."
            )
    if stuck:
        notes.append(
            f"llama.cpp stops on this projector on the CPU: the CPU backend has no matrix product of {stuck[0]} by "
            "the f16 im2col its depthwise convolution (ggml_conv_2d_dw) makes, so clip's scheduler aborts "
            "(GGML_ASSERT(*cur_backend_id != -1), seen with llama-server). Offload the projector to a GPU "
            "(without --no-mmproj-offload) or use a file whose depthwise kernels are F16."
        )
    raw = sum(t.nbytes for t in loaded_tensors(proj) + _audio_reloads(proj))
    return ProjectorMemory(where, weights, compute, exact, notes, weights_raw=raw, encoders=encoders)
