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
#: per vision projector type, the get_u32 keys its load_hparams reads beyond every type's; (key, required)
_U32_VISION_BY_TYPE = {"granite4_vision": (("projector.query_side", True), ("projector.window_side", True))}
_U32_AUDIO = (("num_mel_bins", True), ("projector.stack_factor", False))
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
    if audio and not (vision and v_type == "gemma3nv"):  # clip_init skips Gemma 3n's audio encoder
        _check(name, header, "audio", _U32_AUDIO, a_type if isinstance(a_type, str) else "")
    return Projector(Path(os.fspath(path)), header, proj, a_type if isinstance(a_type, str) else None, vision, audio)
