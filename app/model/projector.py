"""A multimodal projector file (``--mmproj``): a GGUF of architecture ``clip`` that llama-server loads beside
the model through libmtmd (``tools/mtmd/clip.cpp``).

Only the header is read: the projector type (``clip.projector_type``, or ``clip.vision.projector_type`` /
``clip.audio.projector_type`` for files with both encoders), which encoders it has, the hyperparameters under
``clip.vision.*`` / ``clip.audio.*`` and the tensor table. Memory is :mod:`app.memory.projector`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MetadataError
from .gguf_reader import GGUFHeader, TensorInfo, read_header


class NotAProjectorError(MetadataError):
    """The file is a GGUF, but not a projector (``general.architecture`` is not ``clip``)."""


@dataclass(frozen=True)
class Projector:
    path: Path
    header: GGUFHeader
    proj_type: str  # the vision projector type (or the audio one for an audio-only file)
    audio_type: str | None  # the audio projector type of a file with an audio encoder
    vision: bool
    audio: bool

    @property
    def tensors(self) -> list[TensorInfo]:
        return self.header.tensors

    @property
    def metadata(self) -> dict[str, Any]:
        return self.header.metadata

    def get(self, key: str, default: Any = None) -> Any:
        return self.header.metadata.get(key, default)

    def vision_hp(self, name: str, default: Any = None) -> Any:
        """``clip.vision.<name>``."""
        return self.header.metadata.get(f"clip.vision.{name}", default)

    def audio_hp(self, name: str, default: Any = None) -> Any:
        return self.header.metadata.get(f"clip.audio.{name}", default)

    @property
    def weight_bytes(self) -> int:
        """The tensors' bytes as the file holds them (before the backend's alignment padding)."""
        return sum(t.nbytes for t in self.header.tensors)

    @property
    def title(self) -> str:
        name = self.header.metadata.get("general.name")
        kinds = "+".join(k for k, on in (("vision", self.vision), ("audio", self.audio)) if on) or "no encoder"
        return f"{name or self.path.name} ({self.types}, {kinds})"

    @property
    def types(self) -> str:
        """The projector type, and the audio encoder's after a "+" where a file with both encoders differs."""
        if self.vision and self.audio and self.audio_type and self.audio_type != self.proj_type:
            return f"{self.proj_type} + {self.audio_type}"
        return self.proj_type


#: gguf type ids (gguf.h)
_INT32, _UINT32, _FLOAT32, _BOOL, _STRING, _ARRAY = 5, 4, 6, 7, 8, 9
_INT32_MAX = (1 << 31) - 1
#: keys clip_model_loader::load_hparams reads with get_u32 (``gguf_get_val_u32``, which aborts on another type),
#: per encoder prefix; (key, required)
_U32_KEYS = (
    ("embedding_length", True),
    ("attention.head_count", True),
    ("attention.head_dim", False),
    ("feed_forward_length", True),
    ("block_count", True),
    ("projection_dim", True),
    ("attention.head_count_kv", False),
)
_U32_VISION = (
    ("image_size", True),
    ("patch_size", True),
    ("projector.scale_factor", False),
    ("spatial_merge_size", False),
    ("n_wa_pattern", False),
    ("image_min_pixels", False),
    ("image_max_pixels", False),
)
#: DeepSeek-OCR's SAM keys (load_hparams; OCR 2 also requires the KV heads)
_SAM_KEYS = (
    ("sam.block_count", True),
    ("sam.head_count", True),
    ("sam.embedding_length", True),
    ("window_size", True),
    ("preproc_min_tiles", False),
    ("preproc_max_tiles", False),
)
#: per vision projector type, the get_u32 keys its load_hparams reads beyond every type's; (key, required)
_U32_VISION_BY_TYPE = {
    "granite4_vision": (("projector.query_side", True), ("projector.window_side", True)),
    "deepseekocr": _SAM_KEYS,
    "deepseekocr2": _SAM_KEYS + (("attention.head_count_kv", True),),
}
_U32_AUDIO = (("num_mel_bins", True), ("projector.stack_factor", False))
#: per audio projector type, the get_u32 keys its load_hparams reads beyond every type's; (key, required)
_U32_AUDIO_BY_TYPE = {
    "parakeet": (("subsampling_factor", True), ("conv_kernel_size", True)),
    "granite_speech": (
        ("chunk_size", True),
        ("conv_kernel_size", True),
        ("max_pos_emb", True),
        ("projector.window_size", True),
        ("projector.downsample_rate", True),
        ("projector.head_count", True),
    ),
    "mimo_audio": (
        ("rvq.num_quantizers", False),
        ("window_size", True),
        ("local_block_count", True),
        ("local_group_size", True),
    ),
}
#: vision types without the standard layers (clip.cpp ``has_standard_layers``)
_NO_STANDARD_LAYERS = ("gemma3nv", "qwen3tts_spkenc", "pockettts_gen")
#: audio types whose "mel bins" are raw-waveform frames (no [1, 256] bound)
_NOT_FFT = ("gemma4ua", "pockettts_spkenc")


def _check(name: str, header: GGUFHeader, prefix: str, extra, proj_type: str) -> None:
    """What clip_model_loader::load_hparams and load_tensors refuse for one encoder, said as llama.cpp says it:
    a key of another type than it reads (gguf.cpp aborts), a missing required key, a value above INT32_MAX,
    values the graph divides by, and a block count past the layers in the file (a required tensor missing)."""
    md, types = header.metadata, header.metadata_types
    values = {}
    for short, required in _U32_KEYS + extra:
        key = f"clip.{prefix}.{short}"
        if key not in md:
            if required:
                raise MetadataError(
                    f"{name}: llama.cpp refuses this projector: 'Key not found: {key}'. Get the "
                    "file again (it was cut or written by a broken converter).",
                    key=key,
                )
            continue
        if types.get(key) != _UINT32:
            raise MetadataError(
                f"{name}: {key} is a {type(md[key]).__name__} ({md[key]!r:.40}), but llama.cpp reads it as a 32-bit "
                "unsigned integer and aborts on anything else. The file is damaged or was written by a broken "
                "converter: get it again.",
                key=key,
                found=type(md[key]).__name__,
                wanted="uint32",
            )
        if md[key] > _INT32_MAX:
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'value {md[key]} for key '{key}' exceeds INT32_MAX'.",
                key=key,
                found=str(md[key]),
                wanted="<= 2147483647",
            )
        values[short] = md[key]
    eps = f"clip.{prefix}.attention.layer_norm_epsilon"
    if eps not in md:
        raise MetadataError(f"{name}: llama.cpp refuses this projector: 'Key not found: {eps}'.", key=eps)
    for short in ("embedding_length", "attention.head_count") + (("patch_size",) if prefix == "vision" else ()):
        if values[short] == 0:
            raise MetadataError(
                f"{name}: clip.{prefix}.{short} is 0, which llama.cpp divides by (it would crash). "
                "The file is damaged: get it again.",
                key=f"clip.{prefix}.{short}",
                found="0",
            )
    if prefix == "audio" and proj_type not in _NOT_FFT and not 1 <= values["num_mel_bins"] <= 256:
        raise MetadataError(
            f"{name}: llama.cpp refuses this projector: 'n_mel_bins ({values['num_mel_bins']}) "
            "must be in range [1, 256]'.",
            key="clip.audio.num_mel_bins",
        )
    feats = md.get(f"clip.{prefix}.feature_layer")
    if feats is not None:
        if not isinstance(feats, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in feats):
            raise MetadataError(
                f"{name}: clip.{prefix}.feature_layer is not a list of integers; llama.cpp aborts "
                "reading it. Get the file again.",
                key=f"clip.{prefix}.feature_layer",
            )
        for v in feats:
            if v > values["block_count"]:
                raise MetadataError(
                    f"{name}: llama.cpp refuses this projector: 'feature layer index {v} is out of range (n_layer: "
                    f"{values['block_count']})'.",
                    key=f"clip.{prefix}.feature_layer",
                    found=str(v),
                )
    if proj_type in _NO_STANDARD_LAYERS:
        return
    have = {t.name for t in header.tensors}
    short = "v" if prefix == "vision" else "a"
    for il in range(values["block_count"]):
        tensor = f"{short}.blk.{il}.attn_out.weight"
        if tensor not in have:
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'unable to find tensor {tensor}' (clip.{prefix}."
                f"block_count says {values['block_count']} layers). The file is damaged: get it again.",
                key=f"clip.{prefix}.block_count",
                found=str(values["block_count"]),
            )


#: per vision projector type, the keys clip.cpp's load_hparams reads as required beyond every type's
_REQUIRED_BY_TYPE = {
    "youtuvl": ("clip.vision.window_size", "clip.vision.wa_layer_indexes"),
    "dots3note_v": (
        "clip.vision.spatial_merge_size",
        "clip.vision.image_min_pixels",
        "clip.vision.image_max_pixels",
        "clip.vision.expert_used_count",
    ),
    "granite4_vision": ("clip.vision.projector.spatial_offsets",),
    "mimovl": (
        "clip.vision.attention.head_count_kv",
        "clip.vision.window_size",
        "clip.vision.wa_pattern_mode",
        "clip.vision.image_min_pixels",
        "clip.vision.image_max_pixels",
    ),
}


def minicpmv_query_num(md: dict) -> int:
    """MiniCPM-V's resampler queries as ``load_hparams`` reads them: ``clip.minicpmv_query_num``, else 64 for
    versions 3-6 and 100045 (4.5), 96 for the others (version 2, the default)."""
    n = md.get("clip.minicpmv_query_num")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    return 64 if md.get("clip.minicpmv_version") in (3, 4, 5, 6, 100045) else 96


def _check_resampler(name: str, header: GGUFHeader) -> None:
    """MiniCPM-V's resampler (``models/minicpmv.cpp``): its query count comes from ``clip.minicpmv_query_num`` (a
    u32), else from ``clip.minicpmv_version`` (an i32: 64 queries for 3-6 and 100045, else 96), and the graph
    reshapes the learned queries to it in heads of 128: a file whose ``resampler.query`` has another count, or whose
    projection width is not a multiple of 128, stops llama.cpp on a failed assertion in ``ggml_reshape_3d``."""
    md, types = header.metadata, header.metadata_types
    for key, ty, what in (("clip.minicpmv_query_num", _UINT32, "uint32"), ("clip.minicpmv_version", _INT32, "int32")):
        if key in md and types.get(key) != ty:
            raise MetadataError(
                f"{name}: {key} is a {type(md[key]).__name__} ({md[key]!r:.40}), but llama.cpp reads it as {what} "
                "and aborts on anything else. The file is damaged or was written by a broken converter: get it again.",
                key=key,
                wanted=what,
            )
    shapes = {t.name: t.shape for t in header.tensors}
    for tensor in ("resampler.query", "resampler.proj.weight"):
        if tensor not in shapes:
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'unable to find tensor {tensor}'. The file is damaged: "
                "get it again.",
                key=tensor,
            )
    n = minicpmv_query_num(md)
    query, proj = shapes["resampler.query"], shapes["resampler.proj.weight"]
    rows = query[1] if len(query) > 1 else 1
    if rows != n or proj[0] % 128:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (a failed assertion in ggml_reshape_3d): its resampler "
            f"has {rows} learned queries {query[0]} wide, where the file's minicpmv keys say {n} queries and the "
            f"projection is {proj[0]} wide (heads of 128). The file is damaged or was written by a broken converter: "
            "get it again.",
            key="clip.minicpmv_query_num",
            found=str(rows),
            wanted=str(n),
        )


def _int_array(name: str, header: GGUFHeader, key: str) -> list[int] | None:
    """``clip_model_loader::get_arr_int``: an array of int32, or None where the key is absent; another type is
    refused as llama.cpp refuses it."""
    md = header.metadata
    if key not in md:
        return None
    if header.metadata_types.get(key) != _ARRAY or header.array_types.get(key) != _INT32:
        raise MetadataError(
            f"{name}: llama.cpp refuses this projector: {key} is not an array of int32 (get_arr_int). Get the file "
            "again.",
            key=key,
            wanted="int32 array",
        )
    return md[key]


def _check_minicpmv4_6(name: str, header: GGUFHeader) -> None:
    """MiniCPM-V 4.6 (``load_hparams``): ``clip.vision.projector.scale_factor`` (4 by default) must be 2 or 4
    (a GGML_ASSERT), and the first of ``clip.vision.wa_layer_indexes``, where present, names the layer its ViT
    merger follows: one past the layers is refused."""
    md = header.metadata
    n_merge = md.get("clip.vision.projector.scale_factor", 4)
    if n_merge not in (2, 4):
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(hparams.n_merge == 2 || hparams.n_merge == "
            f"4)): clip.vision.projector.scale_factor is {n_merge}. Get the file again.",
            key="clip.vision.projector.scale_factor",
            found=str(n_merge),
            wanted="2 or 4",
        )
    layers, n_layer = _int_array(name, header, "clip.vision.wa_layer_indexes"), md["clip.vision.block_count"]
    if layers and not 0 <= layers[0] < n_layer:
        raise MetadataError(
            f"{name}: llama.cpp refuses this projector: 'layer index {layers[0]} is out of range (n_layer: "
            f"{n_layer})' (clip.vision.wa_layer_indexes). Get the file again.",
            key="clip.vision.wa_layer_indexes",
            found=str(layers[0]),
        )


def _check_granite4_vision(name: str, header: GGUFHeader) -> None:
    """Granite Vision 4.1 (``load_hparams`` and ``models/granite4-vision.cpp``): a spatial offset per feature layer
    (it throws where the counts differ, through a broken format string), each feature layer one of the ViT's (a
    GGML_ASSERT in the graph), and a tile of whole windows: the warmup's patch grid (``image_size / patch_size`` a
    side) cut into ``window_side`` windows and, for a pooling block (offset -1), average-pooled to ``side /
    window_side * query_side`` a side; otherwise the graph divides by zero or fails an assertion in a reshape."""
    md = header.metadata
    layers = _int_array(name, header, "clip.vision.feature_layer") or []
    offsets = _int_array(name, header, "clip.vision.projector.spatial_offsets")
    if offsets is None or len(offsets) != len(layers):
        raise MetadataError(
            f"{name}: llama.cpp refuses this projector: clip.vision.projector.spatial_offsets has "
            f"{len(offsets) if offsets is not None else 'no'} entries for {len(layers)} feature layers "
            "(clip.vision.feature_layer). Get the file again.",
            key="clip.vision.projector.spatial_offsets",
        )
    n_layer = md["clip.vision.block_count"]
    for layer in layers:
        if not 0 <= layer < n_layer:
            raise MetadataError(
                f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(vlayer >= 0 && vlayer < n_layer)): "
                f"feature layer {layer} of {n_layer} layers. Get the file again.",
                key="clip.vision.feature_layer",
                found=str(layer),
            )
    side = md["clip.vision.image_size"] // md["clip.vision.patch_size"]  # _check: both present, the patch not 0
    window, query = md.get("clip.vision.projector.window_side"), md.get("clip.vision.projector.query_side")
    new_side = side // window * query if window else 0
    kernel = side // new_side if new_side else 0
    pooled = any(o < 0 for o in offsets)
    if not window or not query or side % window or (pooled and (not kernel or side // kernel != new_side)):
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (a division by zero or a failed assertion in the "
            f"graph): its {side}x{side}-patch tile does not make whole windows of {window} (query side {query}"
            f"{', pooled' if pooled else ''}). Get the file again.",
            key="clip.vision.projector.window_side",
            found=str(window),
        )


#: the SAM tensors ``load_tensors`` requires of DeepSeek-OCR (1 and 2), in its order ({} per SAM layer)
_SAM_HEAD = ("v.sam.pos_embd.weight", "v.sam.patch_embd.weight", "v.sam.patch_embd.bias")
_SAM_LAYER = tuple(
    f"v.sam.blk.{{}}.{t}"
    for t in (
        "attn.qkv.weight",
        "attn.qkv.bias",
        "attn.out.weight",
        "attn.out.bias",
        "pre_ln.weight",
        "pre_ln.bias",
        "post_ln.weight",
        "post_ln.bias",
        "attn.pos_h.weight",
        "attn.pos_w.weight",
        "mlp.lin1.weight",
        "mlp.lin1.bias",
        "mlp.lin2.weight",
        "mlp.lin2.bias",
    )
)
_SAM_TAIL = (
    "v.sam.neck.0.weight",
    "v.sam.neck.1.bias",
    "v.sam.neck.1.weight",
    "v.sam.neck.2.weight",
    "v.sam.neck.3.bias",
    "v.sam.neck.3.weight",
    "v.sam.net_2.weight",
    "v.sam.net_3.weight",
    "v.view_seperator",
    "mm.model.fc.weight",
    "mm.model.fc.bias",
)


def _check_deepseekocr(name: str, header: GGUFHeader, ocr2: bool) -> None:
    """DeepSeek-OCR 1 and 2 (``load_hparams``, ``load_tensors``, ``models/deepseekocr.cpp``/``deepseekocr2.cpp``):
    the tile limits (min 2, max 9, 6 for OCR 2, unless the file says; a GGML_ASSERT), a window of at most 4096,
    every SAM tensor of ``clip.vision.sam.block_count`` layers; the graph divides by the SAM heads and the window,
    and OCR 2 asserts KV heads that divide the heads and 144 or 256 SAM tokens (its 1024x1024 warmup through the
    patch kernel and the three convs that follow, two with stride 2)."""
    md = header.metadata
    lo = md.get("clip.vision.preproc_min_tiles", 2)
    hi = md.get("clip.vision.preproc_max_tiles", 6 if ocr2 else 9)
    if not 0 <= lo <= hi <= 256:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(hparams.preproc_min_tiles >= 0 && "
            f"hparams.preproc_min_tiles <= hparams.preproc_max_tiles && hparams.preproc_max_tiles <= 256)): the "
            f"tiles are {lo} to {hi}. Get the file again.",
            key="clip.vision.preproc_max_tiles",
            found=f"{lo}..{hi}",
        )
    window = md["clip.vision.window_size"]  # _check: the SAM keys are present
    if window > 4096:
        raise MetadataError(
            f"{name}: llama.cpp refuses this projector: 'attn_window_size ({window}) is too large (max 4096)'. Get "
            "the file again.",
            key="clip.vision.window_size",
            found=str(window),
        )
    tensors = {t.name: t for t in header.tensors}
    n_sam = md["clip.vision.sam.block_count"]
    layers = (t.format(il) for il in range(n_sam) for t in _SAM_LAYER)
    for tensor in (*_SAM_HEAD, *layers, *_SAM_TAIL):
        if tensor not in tensors:
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'unable to find tensor {tensor}' (clip.vision.sam."
                f"block_count says {n_sam} SAM layers). The file is damaged: get it again.",
                key="clip.vision.sam.block_count",
                found=str(n_sam),
            )
    for key in ("clip.vision.sam.head_count", "clip.vision.window_size"):
        if md[key] == 0:
            raise MetadataError(
                f"{name}: {key} is 0, which llama.cpp divides by (it would crash). The file is damaged: get it again.",
                key=key,
                found="0",
            )
    if not ocr2:
        _needs(name, tensors, ("v.class_embd", "v.position_embd.weight", "v.image_newline"))
        return
    n_head, n_kv = md["clip.vision.attention.head_count"], md["clip.vision.attention.head_count_kv"]
    if n_kv == 0 or n_head % n_kv:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(n_head % hparams.n_head_kv == 0)): "
            f"{n_head} heads, {n_kv} KV heads. Get the file again.",
            key="clip.vision.attention.head_count_kv",
            found=str(n_kv),
        )
    shape = tensors["v.sam.patch_embd.weight"].shape
    sides = [1024 // k if k else 0 for k in shape[:2]]  # the patch conv, strided by its own kernel
    for _ in range(2):  # net_2 and net_3: 3x3, stride 2, padding 1
        sides = [(s - 1) // 2 + 1 if s > 0 else 0 for s in sides]
    if sides[0] * sides[1] not in (144, 256):
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(num_image_tokens == 144 || "
            f"num_image_tokens == 256)): its SAM patch kernel {shape[0]}x{shape[1]} makes {sides[0] * sides[1]} "
            "tokens of the 1024x1024 image. Get the file again.",
            key="v.sam.patch_embd.weight",
        )
    _needs(name, tensors, (f"v.resample_query_{1024 if sides[0] * sides[1] == 256 else 768}.weight",))


def _needs(name: str, tensors: dict, names: tuple[str, ...]) -> None:
    """Tensors ``load_tensors`` takes as optional but the warmup graph reads (a null pointer there: a crash)."""
    for tensor in names:
        if tensor not in tensors:
            raise MetadataError(
                f"{name}: llama.cpp would crash on this projector: its warmup graph reads {tensor}, which the file "
                "lacks. Get the file again.",
                key=tensor,
            )


def mobilenetv5_blocks(has) -> tuple[list[str], list[int]]:
    """``load_tensors`` for Gemma 3n's MobileNetV5: the blocks ``v.blk.{stage}.{i}.`` of stages 0-3 as found (an
    edge residual's ``conv_exp``, an inverted residual's ``dw_start`` or ``pw_exp``, an attention's
    ``attn.query.proj``), each stage ending at its first missing block; (block prefixes, each stage's last block's
    index among them). ``has(name)``: whether the file has that tensor."""
    blocks: list[str] = []
    ends: list[int] = []
    kinds = ("conv_exp.weight", "dw_start.conv.weight", "pw_exp.conv.weight", "attn.query.proj.weight")
    for stage in range(4):
        found = 0
        while any(has(f"v.blk.{stage}.{found}.{n}") for n in kinds):
            blocks.append(f"v.blk.{stage}.{found}.")
            found += 1
        if found:
            ends.append(len(blocks) - 1)
    return blocks, ends


def _check_gemma3nv(name: str, header: GGUFHeader) -> None:
    """Gemma 3n's MobileNetV5 (``load_tensors`` and ``models/mobilenetv5.cpp``): the stem conv, and the channels
    the graph ends with equal to ``clip.vision.embedding_length`` (a GGML_ASSERT): each block's last conv sets them
    (an edge residual's ``conv_pwl``, an attention block's output projection, an inverted residual's ``pw_proj``
    or ``pw_exp``), the fused features (the ends of stages 2 and 3, or the last block) add up, and the fusion
    adapter's FFN convs set them again."""
    shapes = {t.name: t.shape for t in header.tensors}
    stem = shapes.get("v.conv_stem.conv.weight")
    if stem is None or len(stem) < 4:
        raise MetadataError(
            f"{name}: llama.cpp would crash on this projector: it has no 4-D MobileNetV5 stem conv "
            "(v.conv_stem.conv.weight). Get the file again.",
            key="v.conv_stem.conv.weight",
        )
    ch = stem[3]
    outs: list[int] = []
    blocks, ends = mobilenetv5_blocks(shapes.__contains__)
    for p in blocks:
        last = next(
            (
                shapes[p + n]
                for n in ("conv_pwl.weight", "attn.output.proj.weight", "pw_proj.conv.weight", "pw_exp.conv.weight")
                if p + n in shapes
            ),
            None,
        )
        ch = last[3] if last is not None and len(last) > 3 else ch
        outs.append(ch)
    fused = [outs[e] for e in ends[2:4]] if len(ends) >= 4 else outs[-1:]
    c = sum(fused) if fused else ch
    for conv in ("v.msfa.ffn.pw_exp.conv.weight", "v.msfa.ffn.pw_proj.conv.weight"):
        if fused and len(shapes.get(conv, ())) > 3:
            c = shapes[conv][3]
    n_embd = header.metadata["clip.vision.embedding_length"]
    if c != n_embd:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(C == hparams.n_embd)): its MobileNetV5 "
            f"ends with {c} channels, where clip.vision.embedding_length is {n_embd}. Get the file again.",
            key="clip.vision.embedding_length",
            found=str(n_embd),
            wanted=str(c),
        )


def _check_parakeet(name: str, header: GGUFHeader) -> None:
    """Parakeet (``load_hparams`` and mtmd's ``mtmd_audio_preprocessor_parakeet::initialize``): a subsampling
    factor of 8 and an odd conv kernel (GGML_ASSERTs), and the f32 ``a.mel_filters`` (``num_mel_bins`` x 257) and
    ``a.window`` (400 samples) that ``load_tensors`` reads with ``get_vector`` and the preprocessor asserts the
    sizes of."""
    md = header.metadata
    factor, kernel = md["clip.audio.subsampling_factor"], md["clip.audio.conv_kernel_size"]  # _check: both present
    for ok, what, key, found in (
        (factor == 8, "hparams.subsampling_factor == 8", "subsampling_factor", factor),
        (
            kernel > 0 and kernel % 2 == 1,
            "hparams.audio_conv_kernel_size > 0 && hparams.audio_conv_kernel_size % 2 == 1",
            "conv_kernel_size",
            kernel,
        ),
    ):
        if not ok:
            raise MetadataError(
                f"{name}: llama.cpp would stop on this projector (GGML_ASSERT({what})): clip.audio.{key} is {found}. "
                "Get the file again.",
                key=f"clip.audio.{key}",
                found=str(found),
            )
    tensors = {t.name: t for t in header.tensors}
    for tensor, n in (("a.mel_filters", md["clip.audio.num_mel_bins"] * 257), ("a.window", 400)):
        t = tensors.get(tensor)
        if t is not None and t.type_name.lower() != "f32":
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: '{tensor} must be f32, was {t.type_name.lower()}'. Get "
                "the file again.",
                key=tensor,
            )
        if t is None or t.n_elements != n:
            raise MetadataError(
                f"{name}: llama.cpp would stop on this projector (a GGML_ASSERT in mtmd's Parakeet preprocessor): "
                f"its {tensor} has {t.n_elements if t is not None else 'no'} values where {n} are needed. Get the "
                "file again.",
                key=tensor,
            )


def _check_granite_speech(name: str, header: GGUFHeader) -> None:
    """Granite Speech (``load_hparams`` and ``models/granite-speech.cpp``): a chunk of 1 to 8192 frames (a
    GGML_ASSERT), and the QFormer's window, downsample rate and head count, which the graph divides by."""
    md = header.metadata
    chunk = md["clip.audio.chunk_size"]  # _check: every key present
    if not 0 < chunk <= 8192:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(hparams.audio_chunk_size > 0 && "
            f"hparams.audio_chunk_size <= 8192)): clip.audio.chunk_size is {chunk}. Get the file again.",
            key="clip.audio.chunk_size",
            found=str(chunk),
        )
    for short in ("projector.window_size", "projector.downsample_rate", "projector.head_count"):
        if md[f"clip.audio.{short}"] == 0:
            raise MetadataError(
                f"{name}: clip.audio.{short} is 0, which llama.cpp divides by (it would crash). The file is "
                "damaged: get it again.",
                key=f"clip.audio.{short}",
                found="0",
            )


def _check_mimo_audio(name: str, header: GGUFHeader) -> None:
    """MiMo-Audio (``load_hparams``, ``load_tensors`` and ``models/mimo-audio.cpp``), said as llama.cpp says it:
    quantizers, one codebook size each, within the codebook's and the code embeddings' rows (both tensors
    required), a window mode per layer, a local group of at least one frame, and more than 3 layers' worth of
    encoder for the skip connection it takes after layer 2 (a GGML_ASSERT in the graph)."""
    md = header.metadata
    n_q = md.get("clip.audio.rvq.num_quantizers", 0)
    bins = _int_array(name, header, "clip.audio.rvq.codebook_size") or []
    modes = _int_array(name, header, "clip.audio.wa_pattern_mode")
    n_layer = md["clip.audio.block_count"]
    shapes = {t.name: t.shape for t in header.tensors}
    codebook, embd = shapes.get("a.rvq.codebook.weight", ()), shapes.get("mm.a.code_embd.weight", ())
    for bad, said in (
        (n_q <= 0, "mimo_audio: missing clip.audio.rvq.num_quantizers"),
        (
            len(bins) != n_q,
            f"mimo_audio: clip.audio.rvq.codebook_size length ({len(bins)}) must equal "
            f"clip.audio.rvq.num_quantizers ({n_q})",
        ),
        (modes is None, "Key not found: clip.audio.wa_pattern_mode"),
        (
            modes is not None and len(modes) != n_layer,
            f"mimo_audio: clip.audio.wa_pattern_mode length ({len(modes or [])}) must equal n_layer ({n_layer})",
        ),
        (md["clip.audio.local_group_size"] <= 0, "mimo_audio: clip.audio.local_group_size must be > 0"),
        (not codebook or not embd, "mimo_audio: missing a.rvq.codebook.%s or mm.a.code_embd.%s"),
    ):
        if bad:
            raise MetadataError(f"{name}: llama.cpp refuses this projector: '{said}'. Get the file again.")
    for b in bins:
        if not 0 < b <= min(codebook[1] if len(codebook) > 1 else 1, embd[1] if len(embd) > 1 else 1):
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'mimo_audio: clip.audio.rvq.codebook_size entry ({b}) "
                "out of range for codebook/code_embd tensors'. Get the file again.",
                key="clip.audio.rvq.codebook_size",
                found=str(b),
            )
    if n_layer <= 2:
        raise MetadataError(
            f"{name}: llama.cpp would stop on this projector (GGML_ASSERT(n_layer > skip_capture_il)): its encoder "
            f"has {n_layer} layers, and MiMo-Audio's skip connection leaves layer 2. Get the file again.",
            key="clip.audio.block_count",
            found=str(n_layer),
        )


def open_projector(path: str | os.PathLike) -> Projector:
    """Read the projector file at ``path``. Raises :class:`~app.model.errors.GGUFError` for a file that is not a
    readable GGUF, :class:`NotAProjectorError` for a GGUF that is not a projector (a model given as --mmproj)."""
    header = read_header(path)
    md = header.metadata
    arch = md.get("general.architecture")
    name = os.path.basename(os.fspath(path))
    if arch != "clip":
        raise NotAProjectorError(
            f"{name} is not a projector file: its architecture is {arch!r}, and a --mmproj file is one of "
            "architecture 'clip' (usually named mmproj-*.gguf, next to the model on its download page)."
        )
    for key in ("clip.has_vision_encoder", "clip.has_audio_encoder"):
        if key in md and header.metadata_types.get(key) != _BOOL:
            raise MetadataError(
                f"{name}: {key} is not a boolean ({md[key]!r:.40}); llama.cpp aborts reading it. Get the file again.",
                key=key,
                wanted="bool",
            )
    for key in ("clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type"):
        if key in md and header.metadata_types.get(key) != _STRING:
            raise MetadataError(
                f"{name}: {key} is not a string ({md[key]!r:.40}); llama.cpp aborts reading it. Get the file again.",
                key=key,
                wanted="string",
            )
    vision = bool(md.get("clip.has_vision_encoder", False))
    audio = bool(md.get("clip.has_audio_encoder", False))
    common = md.get("clip.projector_type")
    v_type = md.get("clip.vision.projector_type", common)
    a_type = md.get("clip.audio.projector_type", common) if audio else None
    proj = v_type if vision else a_type
    if not isinstance(proj, str) or not proj:
        raise MetadataError(
            f"{name} names no projector type (clip.projector_type): llama.cpp refuses it; get the file again."
        )
    if vision:
        v_name = v_type if isinstance(v_type, str) else ""
        _check(name, header, "vision", _U32_VISION + _U32_VISION_BY_TYPE.get(v_name, ()), v_name)
    if vision and v_type == "resampler":
        _check_resampler(name, header)
    if vision and v_type == "minicpmv4_6":
        _check_minicpmv4_6(name, header)
    for key in _REQUIRED_BY_TYPE.get(v_type if vision and isinstance(v_type, str) else "", ()):  # required keys
        if not md.get(key) and md.get(key) != 0:
            raise MetadataError(
                f"{name}: llama.cpp refuses this projector: 'Key not found: {key}'. Get the file again (it was "
                "cut or written by a broken converter).",
                key=key,
            )
    if vision and v_type == "mimovl":
        modes, n_layer = md.get("clip.vision.wa_pattern_mode"), md.get("clip.vision.block_count")
        if not isinstance(modes, list) or len(modes) != n_layer:
            raise MetadataError(
                f"{name}: llama.cpp would stop on this projector (GGML_ASSERT 'mimovl wa_pattern_mode length must "
                f"equal n_layer'): clip.vision.wa_pattern_mode has "
                f"{len(modes) if isinstance(modes, list) else 'no'} entries for {n_layer} layers. Get the file again.",
                key="clip.vision.wa_pattern_mode",
            )
    if vision and v_type == "granite4_vision":
        _check_granite4_vision(name, header)
    if vision and v_type in ("deepseekocr", "deepseekocr2"):
        _check_deepseekocr(name, header, v_type == "deepseekocr2")
    if vision and v_type == "gemma3nv":
        _check_gemma3nv(name, header)
    if audio and not (vision and v_type == "gemma3nv"):  # clip_init skips Gemma 3n's audio encoder
        a_name = a_type if isinstance(a_type, str) else ""
        _check(name, header, "audio", _U32_AUDIO + _U32_AUDIO_BY_TYPE.get(a_name, ()), a_name)
        if a_name == "parakeet":
            _check_parakeet(name, header)
        if a_name == "mimo_audio":
            _check_mimo_audio(name, header)
        if a_name == "granite_speech":
            _check_granite_speech(name, header)
    return Projector(Path(os.fspath(path)), header, proj, a_type if isinstance(a_type, str) else None, vision, audio)
