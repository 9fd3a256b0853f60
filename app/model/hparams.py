"""Model hyper-parameters from GGUF metadata, normalised to per-layer values.

Keys follow llama.cpp's ``src/llama-arch.cpp`` (``LLM_KV_*``): most are
``<arch>.<name>``; head counts and feed-forward sizes may be scalars or
per-layer arrays (``llama_model_loader::get_key_or_arr``).

Every value is read through :class:`Meta`, which checks it the way llama.cpp's
``llama_model_loader::get_key`` does: a key llama.cpp reads as ``u32`` must be
stored as ``u32`` (``key X has wrong type str but expected type u32``), a
per-layer array must hold exactly ``block_count`` entries, and so on. A value
of the wrong type or an impossible value raises :class:`MetadataError` naming
the key, the type found and the type wanted, so a file llama.cpp refuses is
refused here too, with its reason, instead of failing later with a
``ValueError`` or ``IndexError`` (or silently planning a file that will not
load). ``block_count`` must be 1..512 (``LLAMA_MAX_LAYERS``) and, given the
tensor names, must match the ``blk.N`` layers of the tensor table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import llama_keys
from .errors import LayerCountError, MetadataError, UnsupportedArchitectureError
from .gguf_reader import (
    LLAMA_TYPE_NAMES,
    T_ARRAY,
    T_BOOL,
    T_FLOAT32,
    T_INT32,
    T_STRING,
    T_UINT16,
    T_UINT32,
    LazyArray,
)

#: llama.cpp's LLAMA_MAX_LAYERS and LLAMA_MAX_EXPERTS (src/llama-hparams.h).
LLAMA_MAX_LAYERS = 512
LLAMA_MAX_EXPERTS = 1024
#: Architectures whose rope.dimension_count must equal the head size (llama_model_base::load_hparams).
_N_ROT_EQUALS_HEAD = {"llama", "deci", "falcon", "llama-embed"}
#: Element types llama.cpp accepts in a per-layer u32 array (get_arr into std::array<uint32_t, N>).
_LAYER_ARRAY_ITEMS = (T_UINT32, T_INT32, T_BOOL)
_LAYER_NAME_RE = re.compile(r"^(?:enc\.|dec\.)?blk\.([^.]*)\..")  # T5: enc.blk.N / dec.blk.N

#: general.file_type values (llama.h ``llama_ftype``) to their usual names.
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}

#: Architectures llama.cpp treats as recurrent or hybrid (llm_arch_is_recurrent / llm_arch_is_hybrid).
RECURRENT_ARCHS = {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"}
#: Hybrids whose linear-attention layers are Kimi delta attention sized from ``kda.head_dim`` (Ling 3.0,
#: Kimi-Linear, Kimi K3 and GLM5-Next).
KDA_ARCHS = frozenset({"bailingmoe3", "kimi-linear", "kimi-k3", "glm5-next"})
#: The RWKV architectures (``wkv.head_size``, token shifts: ``llama_hparams::n_embd_r``/``n_embd_s`` for RWKV).
RWKV_ARCHS = frozenset({"rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHS = {
    "jamba",
    "falcon-h1",
    "granitehybrid",
    "nemotron_h",
    "nemotron_h_moe",
    "lfm2",
    "lfm2moe",
    "qwen3next",
    "plamo2",
    "kimi-linear",
    "kimi-k3",
    "qwen35",
    "qwen35moe",
    "bailingmoe3",
    "glm5-next",
    "minimax-01",
}


#: Architectures made only of NextN layers, loaded as the model's own (gemma4-assistant.cpp: no TENSOR_SKIP)
NEXTN_ONLY_ARCHS = frozenset({"gemma4-assistant"})


def _describe(value: Any, vtype: int | None) -> str:
    """What was found, in llama.cpp's type names, with the value when it is short."""
    if isinstance(value, LazyArray):
        return f"arr of {LLAMA_TYPE_NAMES.get(value.item_type, '?')} ({len(value):,} items)"
    if vtype is None:
        vtype = _infer_type(value)
    name = LLAMA_TYPE_NAMES.get(vtype, f"type {vtype}") if vtype is not None else type(value).__name__
    if isinstance(value, list):
        return f"arr ({len(value):,} items)"
    text = repr(value)
    return f"{name} ({text[:40]}{'...' if len(text) > 40 else ''})"


def _infer_type(value: Any) -> int | None:
    """The GGUF type a Python value stands for, for metadata without a type table (the demo's JSON)."""
    if isinstance(value, bool):
        return T_BOOL
    if isinstance(value, int):
        return T_UINT32 if 0 <= value < 1 << 32 else None
    if isinstance(value, float):
        return T_FLOAT32
    if isinstance(value, str):
        return T_STRING
    if isinstance(value, (list, LazyArray)):
        return T_ARRAY
    return None


class Meta:
    """Typed reads of one model's metadata: each returns the value or raises :class:`MetadataError`.

    ``types`` is the GGUF type of each key (``GGUFHeader.metadata_types``); without it (metadata from
    JSON) a value's Python type stands in. ``arch`` fills ``{arch}`` in key names.
    """

    def __init__(
        self,
        meta: dict[str, Any],
        types: dict[str, int] | None = None,
        path: str | None = None,
        array_types: dict[str, int] | None = None,
    ):
        self.meta = meta
        self.types = types
        self.array_types = array_types or {}
        #: values ignored because they are unusable and llama.cpp never reads them for this architecture
        self.warnings: list[str] = []
        self.path = path
        self.where = f"{os.path.basename(path)}: " if path else ""
        self.arch = ""

    def key(self, name: str) -> str:
        return name.replace("{arch}", self.arch)

    def type_of(self, key: str) -> int | None:
        if self.types is not None and key in self.types:
            return self.types[key]
        return _infer_type(self.meta.get(key))

    def has(self, name: str) -> bool:
        return self.key(name) in self.meta

    def error(self, key: str, problem: str, found: str = "", wanted: str = "", llama: str = "") -> MetadataError:
        said = f' (llama.cpp: "{llama}")' if llama else ""
        return MetadataError(
            f"{self.where}metadata key {key} {problem}{said}: the file is corrupt or was written by a broken "
            "converter; convert or download it again.",
            self.path,
            key=key,
            found=found,
            wanted=wanted,
        )

    def wrong_type(self, key: str, wanted: str) -> MetadataError:
        value = self.meta[key]
        vtype = self.type_of(key)
        found = _describe(value, vtype)
        short = LLAMA_TYPE_NAMES.get(vtype, "?") if vtype is not None else type(value).__name__
        return self.error(
            key,
            f"holds {found}, but llama.cpp reads it as {wanted}",
            found,
            wanted,
            f"key {key} has wrong type {short} but expected type {wanted}",
        )

    def missing(self, key: str) -> MetadataError:
        return self.error(key, "is missing, and llama.cpp requires it", "nothing", "", f"key not found in model: {key}")

    def _unread(self, name: str) -> bool:
        """Whether llama.cpp never reads this architecture-specific key for this (known) architecture."""
        if not name.startswith("{arch}."):
            return False
        readers = llama_keys.READERS.get(name[len("{arch}.") :])
        return readers is not None and self.arch in llama_keys.KNOWN_ARCHS and self.arch not in readers

    def _ignore(self, exc: MetadataError) -> None:
        self.warnings.append(
            f"metadata key {exc.key} holds {exc.found} instead of {exc.wanted}; llama.cpp does not read it for "
            f"a {self.arch} model, so Layerdeck ignores it too"
        )

    def _scalar(self, name: str, vtype: int, wanted: str) -> Any:
        key = self.key(name)
        if self.type_of(key) != vtype:
            raise self.wrong_type(key, wanted)
        return self.meta[key]

    def u32(self, name: str, default: int = 0, required: bool = False) -> int:
        """An unsigned 32-bit value (llama.cpp's ``get_key`` into ``uint32_t``)."""
        if not self.has(name):
            if required:
                raise self.missing(self.key(name))
            return default
        try:
            return int(self._scalar(name, T_UINT32, "u32"))
        except MetadataError as exc:
            if not self._unread(name):
                raise
            self._ignore(exc)
            return default

    def u16(self, name: str, default: int = 0, required: bool = False) -> int:
        if not self.has(name):
            if required:
                raise self.missing(self.key(name))
            return default
        return int(self._scalar(name, T_UINT16, "u16"))

    def i32(self, name: str, default: int = 0, required: bool = False) -> int:
        if not self.has(name):
            if required:
                raise self.missing(self.key(name))
            return default
        return int(self._scalar(name, T_INT32, "i32"))

    def f32(self, name: str, default: float = 0.0) -> float:
        """A float (llama.cpp's ``get_key`` into ``float``: only an f32 value is accepted)."""
        if not self.has(name):
            return default
        return float(self._scalar(name, T_FLOAT32, "f32"))

    def string(self, name: str, default: str = "") -> str:
        if not self.has(name):
            return default
        return str(self._scalar(name, T_STRING, "str"))

    def array_len(self, name: str) -> int | None:
        """The length of an array (``get_arr_n``), or None when the key is absent."""
        if not self.has(name):
            return None
        key = self.key(name)
        if self.type_of(key) != T_ARRAY:
            raise self.wrong_type(key, "arr")
        return len(self.meta[key])

    def _int_array(self, key: str, max_len: int, exact: int | None = None) -> list[int]:
        value = self.meta[key]
        if exact is not None and len(value) != exact:
            raise self.error(
                key,
                f"holds {len(value):,} values, but block_count says {exact:,} layers",
                f"arr ({len(value):,} items)",
                f"{exact} values",
                f"key {key} has wrong array length; expected {exact}, got {len(value)}",
            )
        if len(value) > max_len:
            raise self.error(
                key,
                f"holds {len(value):,} values, more than llama.cpp reads ({max_len})",
                f"arr ({len(value):,} items)",
                f"at most {max_len} values",
                f"array length {len(value)} for key {key} exceeds max {max_len}",
            )
        if isinstance(value, LazyArray):
            item = value.item_type
            if item not in _LAYER_ARRAY_ITEMS:
                raise self.wrong_item(key, LLAMA_TYPE_NAMES.get(item, str(item)))
            value = value.load()
        vals = []
        for v in value:
            if isinstance(v, bool):
                v = int(v)
            if not isinstance(v, int):
                raise self.wrong_item(key, _describe(v, None))
            if v < 0:
                raise self.error(key, f"holds a negative count ({v})", f"i32 ({v})", "u32")
            vals.append(v)
        return vals

    def wrong_item(self, key: str, found: str) -> MetadataError:
        return self.error(
            key,
            f"is an array of {found}, but llama.cpp reads it as u32 values",
            f"arr of {found}",
            "u32 or arr of u32/i32",
            f"{key} has wrong array element type {found}",
        )

    def _check_items(self, key: str) -> None:
        """The element type of a per-layer array: llama.cpp takes u32, i32 and bool elements only."""
        item = self.array_types.get(key)
        if item is not None and item not in _LAYER_ARRAY_ITEMS:
            raise self.wrong_item(key, LLAMA_TYPE_NAMES.get(item, str(item)))

    def per_layer(self, name: str, n_layer: int, default: list[int] | int = 0) -> list[int]:
        """A u32 scalar for every layer or one u32 per layer (``get_key_or_arr``): always ``n_layer`` values."""
        fallback = list(default) if isinstance(default, list) else [default] * n_layer
        if not self.has(name):
            return fallback
        key = self.key(name)
        try:
            if self.type_of(key) == T_ARRAY:
                self._check_items(key)
                return self._int_array(key, LLAMA_MAX_LAYERS, exact=n_layer)
            return [self.u32(name)] * n_layer
        except MetadataError as exc:
            if not self._unread(name):
                raise
            self._ignore(exc)
            return fallback

    def layer_flags(self, name: str) -> list[bool] | int | None:
        """A per-layer bool/u32 array (``get_arr`` into ``std::array``) or a u32 scalar; None when absent."""
        if not self.has(name):
            return None
        key = self.key(name)
        try:
            if self.type_of(key) == T_ARRAY:
                self._check_items(key)
                return [bool(v) for v in self._int_array(key, LLAMA_MAX_LAYERS)]
            return self.u32(name)
        except MetadataError as exc:
            if not self._unread(name):
                raise
            self._ignore(exc)
            return None


def layer_numbers(tensor_names: Iterable[str], where: str = "", path: str | None = None) -> dict[str, int]:
    """``{tensor name: layer}`` for the ``blk.N.`` tensors (T5's ``enc.blk.N.`` / ``dec.blk.N.`` too); a layer
    number llama.cpp never writes is corrupt.

    llama.cpp names layer tensors ``blk.%d.``: a name like ``blk.03.x`` or ``blk.x.y`` matches no tensor it
    creates, so it refuses the file (``done_getting_tensors: wrong number of tensors``).
    """
    out: dict[str, int] = {}
    for name in tensor_names:
        if not name.startswith(("blk.", "enc.blk.", "dec.blk.")):
            continue
        m = _LAYER_NAME_RE.match(name)
        digits = m.group(1) if m is not None else ""
        if (
            m is None
            or not digits.isascii()
            or not digits.isdigit()
            or (len(digits) > 1 and digits[0] == "0")
            or len(digits) > 9
        ):
            raise LayerCountError(
                f"{where}tensor {name!r} is not named like a layer tensor llama.cpp writes (blk.N.NAME with "
                'N = 0, 1, 2, ...), so llama.cpp would not load it ("wrong number of tensors"): the tensor table '
                "is corrupt; convert or download the file again.",
                path,
            )
        out[name] = int(digits)
    return out


@dataclass
class ModelParams:
    """What the estimator, speed model and board need to know about a model."""

    arch: str
    name: str = ""
    n_layer: int = 0
    n_ctx_train: int = 0
    n_embd: int = 0
    n_vocab: int = 0
    n_head: list[int] = field(default_factory=list)
    n_head_kv: list[int] = field(default_factory=list)
    n_ff: list[int] = field(default_factory=list)
    head_dim_k: int = 0
    head_dim_v: int = 0
    head_dim_k_swa: int = 0
    head_dim_v_swa: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    n_expert_shared: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    n_layer_dense_lead: int = 0
    n_swa: int = 0
    swa_layers: list[bool] = field(default_factory=list)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    key_length_mla: int = 0  # llama.cpp treats a model as MLA only when both *_mla lengths are present
    value_length_mla: int = 0
    n_rot: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    shortconv_l_cache: int = 0  # LFM2 short-conv kernel length (its conv state keeps l_cache - 1 columns)
    #: RWKV (llama_hparams::wkv_head_size, token_shift_count): the WKV head size (0 for every other architecture)
    #: and the number of token shifts kept in the recurrent ``r`` state
    wkv_head_size: int = 0
    token_shift_count: int = 0
    #: HRM-Text (src/models/hrm-text.cpp): (layers per stack, high cycles, low cycles); its ``n_layer`` is the
    #: cache-slot count, layers_per_stack x h_cycles x (l_cycles + 1), over 2 x layers_per_stack physical blocks
    #: (the low stack, then the high stack) that later passes alias; None for every other architecture
    hrm_stack: tuple[int, int, int] | None = None
    #: Granite Switch (src/models/granite-switch.cpp): the router's one-head attention layer that llama.cpp adds
    #: after the ``block_count`` real layers (``router_layer`` = block_count, ``n_layer_all`` one more: -ngl, -ts
    #: and the KV cache count it; it has no tensors), and the adapters (count, LoRA rank); -1 / 0 elsewhere
    router_layer: int = -1
    n_adapters: int = 0
    lora_rank: int = 0
    #: T5 (llama_model_t5::load_arch_hparams): the decoder's layer count (``decoder_block_count``, default
    #: ``block_count``, the encoder's): the decoder runs its first this-many layers; 0 elsewhere
    dec_n_layer: int = 0
    #: Kimi delta attention (llama_hparams::n_embd_head_kda, ``kda.head_dim``; read for :data:`KDA_ARCHS`): the KDA
    #: layers' head size (their conv state is ``3 * (d_conv - 1) * n_head * head_dim``, the delta-rule state
    #: ``head_dim * head_dim * n_head``); 0 elsewhere
    kda_head_dim: int = 0
    #: DFlash heads (llama_model_dflash::load_arch_hparams, all optional): the u32 ``block_size``,
    #: ``conv_kernel_size``, ``conv_group_size``, ``selector_rank``, ``selector_top_k`` and the f32
    #: ``embedding_scale``, ``attention.scale``, ``attention.value_scale``, ``logit_scale``,
    #: ``final_logit_softcapping`` (0 where absent), and ``sample_from_anchor`` (1 or 0); empty elsewhere
    dflash: dict[str, float] = field(default_factory=dict)
    #: EAGLE-3 and DFlash heads (``{arch}.target_layers``): the target layers whose inputs they read, as
    #: llama.cpp's ``std::vector<int32_t>`` holds them (u32 values above 2^31 wrap); empty elsewhere
    target_layers: tuple[int, ...] = ()
    recurrent_layers: list[bool] = field(default_factory=list)
    nextn_layers: int = 0
    #: llama_hparams::n_layer_kv_from_start: when >= 0 only the first that many layers own a KV cache; later layers
    #: attend over an earlier layer's cache (gemma3n: 20, then layer 18's for sliding layers, 19's for full ones)
    n_layer_kv_from_start: int = -1
    #: llama_hparams::n_deepstack_layers (qwen3vl/qwen3vlmoe): the input row is n_embd * (1 + this) wide
    #: (n_embd_inp), its extra parts added to the outputs of the first this-many layers
    n_deepstack_layers: int = 0
    #: llama_hparams::n_embd_per_layer (gemma4): width of the per-layer embedding input, 0 = none
    n_embd_per_layer: int = 0
    #: DSA lightning indexer (deepseek32, glm-dsa): query heads, key length (its own K-only cache of one head per
    #: indexed layer, ``llama_kv_cache_dsa``) and the cells each token keeps
    indexer_head_count: int = 0
    indexer_head_size: int = 0
    indexer_top_k: int = 0
    #: per layer: the layer runs its own indexer and caches its keys ("full"); a "shared" GLM-5.2 layer reuses the
    #: top-k of the full layer before it (``llama_hparams::is_indexer_full``); empty without DSA
    indexer_full: list[bool] = field(default_factory=list)
    #: glm5-next's k-pool indexer (``attention.indexer.kpool``, ``kpool_select_tail``) and hyper-connections
    #: (``hyper_connection.count`` residual streams, ``sinkhorn_iterations``); 0 elsewhere
    indexer_kpool: int = 0
    indexer_kpool_select_tail: bool = False
    hc_mult: int = 0
    hc_sinkhorn_iters: int = 0
    #: deepseek4 (``attention.compress_ratios``, one per layer): 0 = the raw sliding window only, 4 = CSA (a
    #: compressed cache of one row per 4 tokens plus the lightning indexer's), 128 = HCA; empty elsewhere
    compress_ratios: list[int] = field(default_factory=list)
    file_type: int | None = None
    tied_embeddings: bool = False

    @property
    def file_type_name(self) -> str:
        if self.file_type is None:
            return "unknown"
        return FILE_TYPES.get(self.file_type, f"type {self.file_type}")

    @property
    def layer_note(self) -> str:
        """The layer count with what it counts, where that is not the file's blocks; empty elsewhere."""
        if self.hrm_stack:  # HRM-Text: block_count counts cache slots, the file holds two stacks of blocks
            lps, h, low = self.hrm_stack
            return (
                f"{self.n_layer} cache slots: {h} cycles of {low} low {'pass' if low == 1 else 'passes'} and 1 high pass over "
                f"2 stacks of {lps} blocks (-ngl counts slots)"
            )
        if self.arch == "t5":  # enc.blk.N and dec.blk.N are one layer to llama.cpp's placement
            return f"{self.n_layer} (each holds the encoder's and the decoder's layer of that number, placed together)"
        if self.router_layer >= 0:
            return (
                f"{self.n_layer}: {self.router_layer} layers and the adapter router's attention layer, which has a KV cache and "
                "no weights (-ngl and -ts count it)"
            )
        return ""

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def is_mla(self) -> bool:
        return self.key_length_mla > 0 and self.value_length_mla > 0  # llama_hparams::is_mla

    @property
    def has_swa(self) -> bool:
        return self.n_swa > 0 and any(self.swa_layers)


def _swa_pattern(arch: str, m: Meta, n_layer: int, n_swa: int) -> list[bool]:
    if n_swa <= 0:
        return [False] * n_layer
    pattern = m.layer_flags("{arch}.attention.sliding_window_pattern")
    if arch == "llama4" and pattern is None:
        period = 4  # 3 chunked layers, then 1 full (src/models/llama4.cpp load_swa_pattern(ml, 4))
        return [(il % period) < (period - 1) for il in range(n_layer)]
    if arch in ("smallthinker", "laguna") and not isinstance(pattern, list):
        # src/models/smallthinker.cpp, laguna.cpp load_swa_pattern(ml, 4, dense_first=true): layer il slides iff
        # il % p != 0
        period = 4 if pattern is None else pattern
        return [period == 0 or il % period != 0 for il in range(n_layer)]
    if isinstance(pattern, list):
        vals = pattern[:n_layer]
        return vals + [False] * (n_layer - len(vals))
    # Period form: layer il is SWA iff il % p < p-1 (llama_hparams::set_swa_pattern).
    period = (
        pattern
        if pattern is not None
        else {
            "gemma3": 6,
            "gemma3n": 5,
            "gpt-oss": 2,
            "gemma2": 2,
            "cohere2": 4,
            "exaone4": 4,
            "exaone-moe": 4,
            "afmoe": 4,
            "olmo2": 4,
            "mellum": 4,  # src/models/mellum.cpp: load_swa_pattern(ml, 4)
            "plamo3": 8,  # src/models/plamo3.cpp: load_swa_pattern(ml, 8)
            "muse-glimmer": 4,  # src/models/muse-glimmer.cpp: load_swa_pattern(ml, 4)
        }.get(arch, 0)
    )
    if period <= 0:
        # A window without pattern: every layer uses it (e.g. Mistral-style sliding window).
        return [True] * n_layer
    if period == 1:
        return [False] * n_layer
    return [(il % period) < (period - 1) for il in range(n_layer)]


def _architecture(m: Meta) -> str:
    key = "general.architecture"
    if key not in m.meta:
        raise m.error(
            key,
            "is missing, so the file names no architecture and llama.cpp refuses it",
            "nothing",
            "str",
            "unknown model architecture: ''",
        )
    arch = m.string(key)
    if not arch:
        raise m.error(
            key, "is empty, so llama.cpp refuses the file", "str ('')", "str", "unknown model architecture: ''"
        )
    if arch not in llama_keys.KNOWN_ARCHS:
        # llama_model_load: llm_arch_from_string, then llama_model_mapping, before any hyperparameter is read
        if arch in llama_keys.UNSUPPORTED_ARCHS:
            said, why = "unsupported", "is in llama.cpp's table, but this llama.cpp builds no model for it"
        else:
            said, why = "unknown", "is not one this llama.cpp knows (a typo, or a model newer than this llama.cpp)"
        raise UnsupportedArchitectureError(
            f"{m.where}general.architecture is {arch[:80]!r}, which {why}, so llama.cpp refuses the file "
            f"(llama.cpp: \"{said} model architecture: '{arch[:80]}'\"): use a llama.cpp that runs this "
            "architecture, or a GGUF converted for one this llama.cpp runs.",
            m.path,
        )
    return arch


def _block_count(m: Meta, arch: str) -> int:
    key = f"{arch}.block_count"
    if key not in m.meta:
        others = sorted(k for k in m.meta if k.endswith(".block_count") and k.count(".") == 1)
        if others:
            raise m.error(
                key,
                f"is missing, but the file has {others[0]}: general.architecture ({arch!r}) does not match the "
                "names of its other keys, so llama.cpp refuses it",
                "nothing",
                "u32",
                f"key not found in model: {key}",
            )
        raise m.missing(key)
    n = m.u32(key)
    if not 1 <= n <= LLAMA_MAX_LAYERS:
        raise LayerCountError(
            f"{m.where}metadata key {key} is {n:,}, but llama.cpp loads 1 to {LLAMA_MAX_LAYERS} layers "
            "(LLAMA_MAX_LAYERS; it aborts on anything else): the file is corrupt; convert or download it again.",
            m.path,
        )
    return n


def _hrm_stack(m: Meta, n_layer: int) -> tuple[int, int, int]:
    """HRM-Text's stack shape (``llama_model_hrm_text::load_arch_hparams``): the three counts are required and
    positive, and ``block_count`` must be the cache-slot count they make (llama.cpp asserts both)."""
    got = []
    for what in ("layers_per_stack", "h_cycles", "l_cycles"):
        key = f"{m.arch}.hrm.{what}"
        n = m.u32(key, required=True)
        if n <= 0:
            raise m.error(key, "is 0", "u32 (0)", "at least 1", f"GGML_ASSERT(hparams.n_hrm_{what} > 0) failed")
        got.append(n)
    lps, h, low = got
    slots = lps * h * (low + 1) & 0xFFFFFFFF  # llama.cpp's uint32_t n_slot
    if slots != n_layer:
        raise m.error(
            f"{m.arch}.block_count",
            f"is {n_layer:,}, but an HRM-Text model's block count is its cache-slot count, layers_per_stack x "
            f"h_cycles x (l_cycles + 1) = {lps} x {h} x {low + 1} = {slots:,}",
            f"u32 ({n_layer})",
            f"u32 ({slots})",
            "GGML_ASSERT(hparams.n_layer() == n_slot) failed",
        )
    return lps, h, low


#: the keys ``llama_model_dots3note::load_arch_hparams`` reads with ``get_key`` (required)
_DOTS3NOTE_KEYS = (
    "expert_shared_count",
    "expert_feed_forward_length",
    "leading_dense_block_count",
    "expert_gating_func",
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.kv_lora_rank_swa",
    "attention.key_length_mla_swa",
    "attention.value_length_mla_swa",
    "attention.sliding_window",
    "attention.indexer.head_count",
    "attention.indexer.key_length",
    "attention.indexer.top_k",
)


def _dots3note(m: Meta, p: ModelParams, nextn: int) -> None:
    """dots3-note's keys (``llama_model_dots3note::load_arch_hparams``): the MoE, both MLA geometries, the window,
    ``rope.freq_base_swa`` and the indexer's keys are required, the sliding-window pattern and the indexer types
    are required arrays (``get_arr``: missing entries are false). A layer runs the DSA indexer and caches its keys
    where the types array says so (``filter_lid``); the NextN block never does."""
    for key in _DOTS3NOTE_KEYS:
        m.u32("{arch}." + key, required=True)
    if not m.has("{arch}.rope.freq_base_swa"):
        raise m.missing(m.key("{arch}.rope.freq_base_swa"))
    for key in ("attention.sliding_window_pattern", "attention.indexer.types"):
        full_key = m.key("{arch}." + key)
        if full_key not in m.meta:
            raise m.missing(full_key)
        if m.type_of(full_key) != T_ARRAY:
            raise m.wrong_type(full_key, "arr")
    flags = m.layer_flags("{arch}.attention.indexer.types")
    given = flags if isinstance(flags, list) else []
    n_main = p.n_layer - nextn
    p.indexer_full = [il < n_main and il < len(given) and given[il] for il in range(p.n_layer)]


#: llama_model_granite_switch::load_arch_hparams bounds the counts that size the adapter tensors
_MAX_ADAPTERS = 4096


#: llama.cpp's refusal of a draft head without its target layers (``load_arch_hparams``), by architecture
_NO_TARGET_LAYERS = {
    "eagle3": "EAGLE3 model requires 'extract_layers' in GGUF metadata",
    "dflash": "DFlash model requires 'target_layers' in GGUF metadata",
}


#: the optional u32 keys of a DFlash head (:attr:`ModelParams.dflash`)
_DFLASH_KEYS = ("block_size", "conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
#: the optional f32 keys of a DFlash head (``get_key`` into floats: another type is refused)
_DFLASH_FLOATS = (
    "embedding_scale",
    "attention.scale",
    "attention.value_scale",
    "logit_scale",
    "final_logit_softcapping",
)


def _target_layers(m: Meta) -> tuple[int, ...]:
    """A draft head's ``target_layers`` (``llama_model_eagle3`` / ``llama_model_dflash::load_arch_hparams``:
    ``get_arr`` into int32 ids, not required, so a missing or non-array key is llama.cpp's own refusal; elements
    other than i32/u32 are refused by ``get_arr``; EAGLE-3 takes exactly three; an empty list leaves ``fc``
    without inputs, which no converter writes)."""
    key = m.key("{arch}.target_layers")
    if key not in m.meta or m.type_of(key) != T_ARRAY:
        raise m.error(key, "is missing or not an array, and llama.cpp requires it", llama=_NO_TARGET_LAYERS[m.arch])
    item = m.array_types.get(key)
    if item is not None and item not in (T_INT32, T_UINT32):
        found = LLAMA_TYPE_NAMES.get(item, str(item))
        raise m.error(
            key,
            f"is an array of {found}, not of layer ids (i32)",
            f"arr of {found}",
            "arr of i32",
            f"{key} has wrong array element type {found}",
        )
    ids = m.meta[key]
    ids = ids.load() if isinstance(ids, LazyArray) else ids
    if any(isinstance(v, bool) or not isinstance(v, int) for v in ids):
        raise m.error(key, "holds values that are not layer ids", "arr", "arr of i32")
    if not ids or (m.arch == "eagle3" and len(ids) != 3):
        raise m.error(
            key,
            f"holds {len(ids)} layer ids",
            f"arr ({len(ids)} items)",
            "3" if m.arch == "eagle3" else "at least 1",
            "EAGLE3 requires exactly 3 entries in 'extract_layers'" if m.arch == "eagle3" else "",
        )
    return tuple(v - (1 << 32) if v >= 1 << 31 else v for v in ids)


def _granite_switch(m: Meta, p: ModelParams) -> None:
    """Granite Switch's adapters (``llama_model_granite_switch::load_arch_hparams`` / ``load_arch_tensors``): the
    count and LoRA rank are required and at most 4096, one activating and one substitute token per adapter, every
    substitute inside the vocabulary. Then the router layer llama.cpp appends: ``n_layer`` grows by one (one query
    and one KV head, no FFN), as ``n_layer_all`` does there."""
    n_ad = m.u32("{arch}.adapters.count", required=True)
    rank = m.u32("{arch}.adapters.lora_rank", required=True)
    for key, n, what in (("adapters.count", n_ad, "adapter count"), ("adapters.lora_rank", rank, "lora rank")):
        if n > _MAX_ADAPTERS:
            raise m.error(
                m.key("{arch}." + key),
                f"is {n:,}, more than the {_MAX_ADAPTERS} llama.cpp accepts",
                f"u32 ({n})",
                f"at most {_MAX_ADAPTERS}",
                f"graniteswitch: invalid {what} {n}",
            )
    arrays = {}
    for which in ("activate", "substitute"):
        key = m.key(f"{{arch}}.adapters.token_ids_{which}")
        if key not in m.meta:
            raise m.missing(key)
        if m.type_of(key) != T_ARRAY:
            raise m.wrong_type(key, "arr")
        item = m.array_types.get(key)
        if item is not None and item not in (T_INT32, T_UINT32):  # get_arr into std::vector<llama_token>
            found = LLAMA_TYPE_NAMES.get(item, str(item))
            raise m.error(
                key,
                f"is an array of {found}, not of token ids (i32)",
                f"arr of {found}",
                "arr of i32",
                f"{key} has wrong array element type {found}",
            )
        arrays[which] = m.meta[key]
    n_act, n_sub = len(arrays["activate"]), len(arrays["substitute"])
    if n_act != n_ad or n_sub != n_ad:
        raise m.error(
            m.key("{arch}.adapters.token_ids_activate"),
            f"and token_ids_substitute hold {n_act} and {n_sub} token ids, but adapters.count is {n_ad}",
            f"arr ({n_act}, {n_sub} items)",
            f"{n_ad} each",
            f"graniteswitch: adapter token id arrays ({n_act} activate, {n_sub} substitute) do not match adapter "
            f"count {n_ad}",
        )
    key = m.key("{arch}.adapters.token_ids_substitute")
    subs = arrays["substitute"]
    subs = subs.load() if isinstance(subs, LazyArray) else subs
    if any(isinstance(v, bool) or not isinstance(v, int) for v in subs):
        raise m.error(key, "is not an array of token ids", "arr", "arr of i32", f"{key} has wrong element type")
    bad = next((t for t in subs if t < 0 or (p.n_vocab and t >= p.n_vocab)), None)
    if bad is not None:
        raise m.error(
            key,
            f"holds the token id {bad:,}, outside the vocabulary of {p.n_vocab:,} tokens",
            f"i32 ({bad})",
            f"0 to {p.n_vocab - 1}",
            f"graniteswitch: substitute token id {bad} out of range [0, {p.n_vocab})",
        )
    # n_real = n_layer() (block_count less any nextn_predict_layers), then n_layer_all = n_real + 1 with
    # n_layer_nextn repurposed as 1: the router is layer n_real, and there is no MTP layer
    n_real = p.n_layer - p.nextn_layers
    if n_real >= LLAMA_MAX_LAYERS:
        raise m.error(
            m.key("{arch}.block_count"),
            f"is {p.n_layer}, but llama.cpp appends Granite Switch's router layer, which must stay below "
            f"LLAMA_MAX_LAYERS ({LLAMA_MAX_LAYERS})",
            f"u32 ({p.n_layer})",
            f"at most {LLAMA_MAX_LAYERS - 1}",
            f"graniteswitch: block count {n_real} exceeds LLAMA_MAX_LAYERS",
        )
    p.n_adapters, p.lora_rank = n_ad, rank
    p.router_layer = n_real
    p.n_layer = n_real + 1
    p.nextn_layers = 0
    p.n_head = [*p.n_head[:n_real], 1]
    p.n_head_kv = [*p.n_head_kv[:n_real], 1]
    p.n_ff = [*p.n_ff[:n_real], 0]
    p.swa_layers = [*p.swa_layers[:n_real], False]


def check_layers(
    m: Meta, arch: str, n_layer: int, nextn: int, tensor_names: Iterable[str], physical: bool = False
) -> None:
    """``block_count`` against the tensor table: every ``blk.N`` below it, and no more layers than the table
    holds (NextN/MTP layers may have been stripped from the file, so they may be missing). ``physical``: the
    count is not ``block_count`` but the blocks the file must hold (HRM-Text's two stacks)."""
    key = f"{arch}.block_count" if not physical else f"2 x {arch}.hrm.layers_per_stack"
    layers = layer_numbers(tensor_names, m.where, m.path)
    for name, layer in layers.items():  # the first such tensor in the table
        if layer >= n_layer:
            raise LayerCountError(
                f"{m.where}tensor {name!r} belongs to layer {layer:,}, but {key} is {n_layer:,} (layers 0 to "
                f'{n_layer - 1:,}): llama.cpp does not load such a file ("done_getting_tensors: wrong number of '
                'tensors"): the file is corrupt; convert or download it again.',
                m.path,
            )
    highest = max(layers.values(), default=-1)
    if n_layer > highest + 1 + nextn:
        holds = f"layers 0 to {highest:,}" if highest >= 0 else "no layer tensors (blk.N.*)"
        raise LayerCountError(
            f"{m.where}metadata key {key} is {n_layer:,}, but the tensor table holds {holds}"
            + (f" (+ {nextn} NextN layer{'s' if nextn != 1 else ''})" if nextn else "")
            + ": llama.cpp would miss the tensors of the other layers (\"missing tensor 'blk."
            + f"{highest + 1}....'\"): the file is corrupt or incomplete; convert or download it again.",
            m.path,
        )


def extract_params(
    meta: dict[str, Any],
    tensor_names: Iterable[str] | None = None,
    types: dict[str, int] | None = None,
    path: str | None = None,
    array_types: dict[str, int] | None = None,
    warnings: list[str] | None = None,
) -> ModelParams:
    """The model's parameters; raises :class:`MetadataError` / :class:`LayerCountError` for what llama.cpp
    refuses (see the module docstring). ``tensor_names`` (when given) checks ``block_count`` against the
    tensor table and decides tied embeddings. An unusable value of a key llama.cpp does not read for this
    architecture (:mod:`app.model.llama_keys`) is ignored, with a sentence appended to ``warnings``."""
    m = Meta(meta, types, path, array_types)
    arch = m.arch = _architecture(m)
    ordered = list(tensor_names) if tensor_names is not None else None  # table order, for messages
    names = set(ordered) if ordered is not None else None

    n_layer = _block_count(m, arch)
    nextn = m.u32("{arch}.nextn_predict_layers")
    if nextn > n_layer:
        raise m.error(
            f"{arch}.nextn_predict_layers",
            f"is {nextn:,}, more than {arch}.block_count ({n_layer:,})",
            f"u32 ({nextn})",
            f"at most {n_layer}",
            "GGML_ASSERT(hparams.n_layer_nextn <= hparams.n_layer_all) failed",
        )
    hrm = _hrm_stack(m, n_layer) if arch == "hrm_text" else None
    if ordered is not None:
        # HRM-Text's file holds the two stacks' physical blocks, not one per cache slot
        check_layers(m, arch, 2 * hrm[0] if hrm else n_layer, nextn, ordered, hrm is not None)
    n_ctx_train = m.u32("{arch}.context_length", required=True)
    n_embd = m.u32("{arch}.embedding_length", required=True)
    n_head = m.per_layer("{arch}.attention.head_count", n_layer)
    n_head_kv = m.per_layer("{arch}.attention.head_count_kv", n_layer, default=n_head)
    if not any(n_head_kv):
        n_head_kv = list(n_head)
    n_ff = m.per_layer("{arch}.feed_forward_length", n_layer)
    _check_experts(m, arch, n_layer)
    max_head = max(n_head) if n_head else 0
    head_dim_k = m.u32("{arch}.attention.key_length") or (n_embd // max_head if max_head else 0)
    head_dim_v = m.u32("{arch}.attention.value_length") or (n_embd // max_head if max_head else 0)
    n_rot = m.u32("{arch}.rope.dimension_count")
    if arch in _N_ROT_EQUALS_HEAD and n_head and n_head[0] > 0:
        # llama_model_base::load_hparams: head size from layer 0's head count, n_rot defaults to it
        head_k = m.u32("{arch}.attention.key_length", n_embd // n_head[0])
        rot = m.u32("{arch}.rope.dimension_count", head_k)
        if rot != head_k:
            raise m.error(
                f"{arch}.rope.dimension_count",
                f"is {rot}, but a {arch} model's rotary dimensions must equal its head size ({head_k})",
                f"u32 ({rot})",
                f"u32 ({head_k})",
                f"invalid n_rot: {rot}, expected {head_k}",
            )
    tokens = _check_vocab(m)
    n_vocab = m.u32("{arch}.vocab_size") or (tokens or 0)
    n_swa = m.u32("{arch}.attention.sliding_window")
    if arch == "llama4":
        # chunked attention with 8192-token chunks unless the file sets the window to 0 (src/models/llama4.cpp)
        n_swa = 0 if m.has("{arch}.attention.sliding_window") and n_swa == 0 else 8192
    if arch == "smallthinker" and n_swa > 0:
        n_swa = 4096  # src/models/smallthinker.cpp: a window key > 0 turns SWA on, its width is always 4096
    if arch == "exaone-moe":
        # src/models/exaone-moe.cpp: the window key is required (the 128 default is always overwritten)
        n_swa = m.u32("{arch}.attention.sliding_window", required=True)
    if arch == "afmoe":
        m.u32("{arch}.expert_shared_count", required=True)  # src/models/afmoe.cpp reads it without a default
    if arch == "exaone4":
        # src/models/exaone4.cpp: only the 64-layer (32B) model slides (window 4096 unless the file says, period 4);
        # for other sizes the window key is read but no layer slides
        n_swa = (n_swa if m.has("{arch}.attention.sliding_window") else 4096) if n_layer == 64 else 0
    if arch == "phi3":
        n_swa = 0  # src/models/phi3.cpp: "Phi SWA is currently disabled" (the window key is read, then dropped)
    n_expert_used = m.per_layer("{arch}.expert_used_count", n_layer)
    n_ff_exp = m.per_layer("{arch}.expert_feed_forward_length", n_layer)
    file_type = m.u32("general.file_type") if m.has("general.file_type") else None
    p = ModelParams(
        arch=arch,
        name=m.string("general.name"),
        n_layer=n_layer,
        n_ctx_train=n_ctx_train,
        n_embd=n_embd,
        n_vocab=n_vocab,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        head_dim_k_swa=m.u32("{arch}.attention.key_length_swa") or head_dim_k,
        head_dim_v_swa=m.u32("{arch}.attention.value_length_swa") or head_dim_v,
        n_expert=_n_expert(m, arch),
        n_expert_used=max(n_expert_used, default=0) if _n_expert(m, arch) else 0,
        n_expert_shared=m.u32("{arch}.expert_shared_count"),
        n_ff_exp=max(n_ff_exp, default=0),
        n_ff_shexp=m.u32("{arch}.expert_shared_feed_forward_length"),
        n_layer_dense_lead=m.u32("{arch}.leading_dense_block_count"),
        n_swa=n_swa,
        swa_layers=_swa_pattern(arch, m, n_layer, n_swa),
        kv_lora_rank=m.u32("{arch}.attention.kv_lora_rank"),
        q_lora_rank=m.u32("{arch}.attention.q_lora_rank"),
        key_length_mla=m.u32("{arch}.attention.key_length_mla"),
        value_length_mla=m.u32("{arch}.attention.value_length_mla"),
        n_rot=n_rot,
        ssm_d_conv=m.u32("{arch}.ssm.conv_kernel"),
        ssm_d_inner=m.u32("{arch}.ssm.inner_size"),
        ssm_d_state=m.u32("{arch}.ssm.state_size"),
        ssm_dt_rank=m.u32("{arch}.ssm.time_step_rank"),
        ssm_n_group=m.u32("{arch}.ssm.group_count"),
        shortconv_l_cache=m.u32("{arch}.shortconv.l_cache", required=arch in SHORTCONV_ARCHS),
        # Gemma 4's assistant is made only of NextN layers, without a trunk (n_layer() 0, n_layer_all =
        # n_layer_nextn): its loader creates them without TENSOR_SKIP and llama.cpp places them by n_layer_all as
        # any layer (no MTP filter on its memory: "a model is entirely n_layer_nextn layers and has no trunk");
        # other architectures' loaders skip NextN layers whatever their count
        nextn_layers=0 if arch in NEXTN_ONLY_ARCHS else nextn,
        indexer_head_count=m.u32("{arch}.attention.indexer.head_count"),
        indexer_head_size=m.u32("{arch}.attention.indexer.key_length"),
        indexer_top_k=m.u32("{arch}.attention.indexer.top_k"),
        file_type=file_type,
    )
    if arch == "graniteswitch":
        _granite_switch(m, p)
    if arch in _NO_TARGET_LAYERS:
        p.target_layers = _target_layers(m)
    if arch == "dflash":
        p.dflash = {k: m.u32("{arch}." + k) for k in _DFLASH_KEYS}
        p.dflash.update({k: m.f32("{arch}." + k) for k in _DFLASH_FLOATS})
        # read as a string and compared with "true" (llama_model_meta_val_str), true where absent
        anchor = m.meta.get(m.key("{arch}.sample_from_anchor"))
        p.dflash["sample_from_anchor"] = float(anchor is None or anchor is True or anchor == "true")
        p.hc_mult = m.u32("{arch}.hyper_connection.count")
        if p.hc_mult > 0:
            _dsv4_dspark_keys(m, p, n_layer)
    if arch == "t5":
        p.dec_n_layer = m.u32("{arch}.decoder_block_count", n_layer)
        if p.dec_n_layer > n_layer:
            raise m.error(
                m.key("{arch}.decoder_block_count"),
                f"is {p.dec_n_layer:,}, more than block_count ({n_layer}): llama.cpp places the decoder's layer N "
                "with the encoder's, and has no device for a decoder layer past the encoder's",
                f"u32 ({p.dec_n_layer})",
                f"at most {n_layer}",
                "vector::_M_range_check",
            )
    p.recurrent_layers = _recurrent_layers(p, m)
    p.hrm_stack = hrm
    if arch in RWKV_ARCHS:
        # llama_model_rwkv6/rwkv7::load_arch_hparams: the head size is required, token shifts default to 2
        p.wkv_head_size = m.u32("{arch}.wkv.head_size", required=True)
        p.token_shift_count = m.u32("{arch}.token_shift_count", 2)
    if arch in KDA_ARCHS:
        # llama_model_bailingmoe3/kimi_linear::load_arch_hparams: KDA head size and conv kernel required (Ling's
        # gate must be the "safe" one, the default, with a negative lower bound: GGML_ASSERTs); kimi-linear's
        # shared experts are n_ff_exp * n_expert_shared wide (load_arch_tensors)
        p.kda_head_dim = m.u32("{arch}.kda.head_dim", required=True)
        p.ssm_d_conv = m.u32("{arch}.ssm.conv_kernel", required=True)
        if p.n_ff_shexp == 0:
            p.n_ff_shexp = p.n_ff_exp * max(1, p.n_expert_shared)
    if arch in ("deepseek32", "glm-dsa"):
        p.indexer_full = _indexer_full(arch, m, n_layer, nextn, n_ctx_train)
    if arch == "hy_v4":
        p.indexer_full = _hy_v4_indexer_full(m, n_layer, p.indexer_top_k)
    if arch == "dots3note":
        _dots3note(m, p, nextn)
    for key in _REQUIRED_KEYS.get(arch, ()):
        if not m.has("{arch}." + key):
            raise m.missing(m.key("{arch}." + key))
    if arch == "glm5-next":
        # llama_model_glm5_next::load_arch_hparams: the indexer keys, kpool (> 1, dividing top_k) and the mHC keys
        # (count 4) are required; indexer.types defaults to every layer full
        for key in ("head_count", "key_length", "top_k", "kpool"):
            m.u32("{arch}.attention.indexer." + key, required=True)
        p.indexer_kpool = m.u32("{arch}.attention.indexer.kpool")
        p.indexer_kpool_select_tail = bool(m.meta.get(m.key("{arch}.attention.indexer.kpool_select_tail"), False))
        p.hc_mult = m.u32("{arch}.hyper_connection.count", required=True)
        p.hc_sinkhorn_iters = m.u32("{arch}.hyper_connection.sinkhorn_iterations", required=True)
        p.indexer_full = _indexer_full(arch, m, n_layer, nextn, n_ctx_train)
    if arch == "deepseek4":
        # llama_model_deepseek4::load_arch_hparams: q LoRA, window, indexer, output groups/LoRA, mHC and hash-layer
        # keys required; compress_ratios at least block_count long, each 0, 4 or 128 (load_arch_tensors); every
        # layer slides (set_swa_pattern(0)) over one K-only head of key_length (llama_kv_cache_dsv4)
        for key in (
            "attention.q_lora_rank",
            "attention.sliding_window",
            "attention.indexer.head_count",
            "attention.indexer.key_length",
            "attention.indexer.top_k",
            "attention.output_group_count",
            "attention.output_lora_rank",
            "hyper_connection.count",
            "hash_layer_count",
        ):
            m.u32("{arch}." + key, required=True)
        ratios = m.meta.get(m.key("{arch}.attention.compress_ratios"))
        if not isinstance(ratios, list) or len(ratios) < n_layer:
            raise m.missing(m.key("{arch}.attention.compress_ratios"))
        p.compress_ratios = [int(r) for r in ratios[:n_layer]]
        bad = next((r for r in p.compress_ratios if r not in (0, 4, 128)), None)
        if bad is not None:
            raise m.error(
                m.key("{arch}.attention.compress_ratios"),
                f"holds the ratio {bad}, but llama.cpp loads DeepSeek-V4 layers of ratio 0, 4 or 128 only",
                f"u32 ({bad})",
                "0, 4 or 128",
                "DeepSeek-V4 loader only supports compression ratios 0, 4, and 128",
            )
        if m.u32("{arch}.expert_gating_func", required=True) != 4:
            raise m.error(
                m.key("{arch}.expert_gating_func"),
                "is not 4 (sqrt-softplus), the only MoE scoring llama.cpp's DeepSeek-V4 loader accepts",
                f"u32 ({m.u32('{arch}.expert_gating_func')})",
                "u32 (4)",
                "DeepSeek-V4 loader currently expects sqrtsoftplus MoE scoring",
            )
        p.hc_mult = m.u32("{arch}.hyper_connection.count")
        p.hc_sinkhorn_iters = m.u32("{arch}.hyper_connection.sinkhorn_iterations")
        p.swa_layers = [True] * n_layer
    if arch == "gemma3n":
        p.n_layer_kv_from_start = 20  # llama_model_gemma3n::load_arch_hparams (shared_kv_layers is not read)
    if arch == "gemma4":
        # llama_model_gemma4::load_arch_hparams: the last attention.shared_kv_layers layers reuse earlier caches
        p.n_layer_kv_from_start = n_layer - m.u32("{arch}.attention.shared_kv_layers")
        p.n_embd_per_layer = m.u32("{arch}.embedding_length_per_layer_input", required=True)
    if arch == "lfm2":
        p.n_layer_dense_lead = n_layer  # llama_model_lfm2::load_arch_hparams: every layer's FFN is dense
    if arch in ("qwen3vl", "qwen3vlmoe"):
        # llama_model_qwen3vl(moe)::load_arch_hparams: deepstack count optional, rope sections required (IMRoPE)
        p.n_deepstack_layers = m.u32("{arch}.n_deepstack_layers")
        if not m.has("{arch}.rope.dimension_sections"):
            raise m.missing(m.key("{arch}.rope.dimension_sections"))
    if warnings is not None:
        warnings.extend(m.warnings)
    if names is not None:
        # bitnet.cpp creates no output tensor, not even a TENSOR_DUPLICATED one: its logits multiply token_embd
        # itself, so there is no second copy to place
        p.tied_embeddings = "output.weight" not in names and "token_embd.weight" in names and arch != "bitnet"
    return p


#: The tokenizer models llama_vocab::impl::load knows (src/llama-vocab.cpp); any other is "unknown tokenizer".
TOKENIZER_MODELS = frozenset(
    {"no_vocab", "none", "llama", "bert", "gpt2", "hybriddna", "whitespace", "t5", "rwkv", "test", "plamo2", "gemma4"}
)


def _check_vocab(m: Meta) -> int | None:
    """The vocabulary keys as llama_vocab::impl::load checks them; returns the number of tokens (or None).

    Unless ``tokenizer.ggml.model`` is ``no_vocab``/``none``, the tokens must be an array of strings, the
    scores an array of f32 or i32 and the token types an array of i32, each at least as long as the tokens.
    (llama.cpp also requires ``tokenizer.ggml.model`` and the tokens; test files without a vocabulary are
    still read, so their absence is not refused. Metadata without a type table, the demo's, is not checked.)
    """
    tokens_key = "tokenizer.ggml.tokens"
    if m.types is None:
        return m.array_len(tokens_key)
    if "tokenizer.ggml.model" not in m.meta:  # ml.get_key(LLM_KV_TOKENIZER_MODEL, tokenizer_model): required
        raise m.missing("tokenizer.ggml.model")
    model = m.string("tokenizer.ggml.model")
    if model not in TOKENIZER_MODELS:
        raise m.error(
            "tokenizer.ggml.model",
            f"names the tokenizer {model!r}, which llama.cpp does not know ({', '.join(sorted(TOKENIZER_MODELS))})",
            repr(model),
            "a known tokenizer",
            f"unknown tokenizer: '{model}'",
        )
    if model in ("no_vocab", "none"):
        return len(m.meta[tokens_key]) if m.type_of(tokens_key) == T_ARRAY else None
    if tokens_key not in m.meta:
        raise m.error(
            tokens_key,
            "is missing, and llama.cpp requires the vocabulary",
            "nothing",
            "",
            "cannot find tokenizer vocab in model file",
        )
    merges = "tokenizer.ggml.merges"
    bpe = model in ("gpt2", "hybriddna", "whitespace", "gemma4")
    if bpe and merges not in m.meta and not (model != "gemma4" and m.meta.get("tokenizer.ggml.pre") == "kimi-k2"):
        raise m.error(
            merges,
            "is missing, and llama.cpp needs the merges of a BPE vocabulary",
            "nothing",
            "",
            "cannot find tokenizer merges in model file",
        )
    n_tokens = 0
    for key, items in (
        (tokens_key, (T_STRING,)),
        ("tokenizer.ggml.scores", (T_FLOAT32, T_INT32)),
        ("tokenizer.ggml.token_type", (T_INT32,)),
    ):
        if key not in m.meta:
            continue
        item = m.array_types.get(key) if m.type_of(key) == T_ARRAY else None
        wanted = " or ".join(f"arr of {LLAMA_TYPE_NAMES[i]}" for i in items)
        if item not in items:
            found = (
                _describe(m.meta[key], m.type_of(key)) if item is None else f"arr of {LLAMA_TYPE_NAMES.get(item, '?')}"
            )
            raise m.error(
                key, f"holds {found}, but llama.cpp reads {wanted}", found, wanted, f"invalid gguf type for {key}"
            )
        n = len(m.meta[key])
        if key == tokens_key:
            n_tokens = n
        elif n < n_tokens:
            raise m.error(
                key,
                f"holds {n:,} values for {n_tokens:,} tokens",
                f"arr ({n:,} items)",
                f"{n_tokens:,} values",
                f"Index out of array bounds for {key.rsplit('.', 1)[1]} ({n} < {n_tokens})",
            )
    return n_tokens


def _dsv4_dspark_keys(m: Meta, p: ModelParams, n_layer: int) -> None:
    """``llama_model_dflash::load_arch_hparams``' DeepSeek-V4 DSpark branch (``hyper_connection.count`` > 0): its
    stage keys required, sqrt-softplus scoring, every stage uncompressed (``compress_ratios`` all 0) and sliding
    over the draft's ring (a window above 0, ``output_group_count`` above 0: both asserted)."""
    for key in (
        "attention.q_lora_rank",
        "attention.sliding_window",
        "expert_feed_forward_length",
        "expert_shared_count",
        "expert_weights_scale",
        "expert_weights_norm",
        "expert_gating_func",
        "swiglu_clamp_exp",
        "attention.output_group_count",
        "attention.output_lora_rank",
        "hyper_connection.sinkhorn_iterations",
        "hyper_connection.epsilon",
    ):
        if not m.has("{arch}." + key):
            raise m.missing(m.key("{arch}." + key))
    for key, llama in (
        ("attention.output_group_count", "GGML_ASSERT(hparams.dsv4_o_group_count > 0) failed"),
        ("attention.sliding_window", "GGML_ASSERT(hparams.n_swa > 0) failed"),
    ):
        if m.u32("{arch}." + key) == 0:
            raise m.error(m.key("{arch}." + key), "is 0, and llama.cpp aborts on it", "0", "above 0", llama)
    gating = m.u32("{arch}.expert_gating_func")
    if gating != 4:
        raise m.error(
            m.key("{arch}.expert_gating_func"),
            "is not 4 (sqrt-softplus), the only MoE scoring llama.cpp's DeepSeek-V4 DSpark loader accepts",
            f"u32 ({gating})",
            "u32 (4)",
            "DSpark DSV4 draft expects sqrtsoftplus MoE scoring",
        )
    # read with required = false into a zeroed array: absent or short is all 0
    ratios = m.meta.get(m.key("{arch}.attention.compress_ratios"))
    bad = next((r for r in (ratios if isinstance(ratios, list) else [])[:n_layer] if r != 0), None)
    if bad is not None:
        raise m.error(
            m.key("{arch}.attention.compress_ratios"),
            f"holds the ratio {bad}, but a DeepSeek-V4 DSpark head's stages are all uncompressed",
            f"{bad}",
            "0",
            "DSpark DSV4 draft expects uncompressed attention on all stages",
        )
    p.hc_sinkhorn_iters = m.u32("{arch}.hyper_connection.sinkhorn_iterations")
    p.compress_ratios = [0] * n_layer
    p.swa_layers = [True] * n_layer  # set_swa_pattern(0), then every stage marked sliding


#: keys the architecture's load_arch_hparams reads without ``required = false`` (ml.get_key / get_arr /
#: get_key_or_arr), where a file may lack them: llama.cpp stops with "key not found in model"
_REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "t5": ("attention.relative_buckets_count",),  # src/models/t5.cpp
    "graniteswitch": ("logit_scale",),  # src/models/granite-switch.cpp
    "maple": (
        "attention.sliding_window",
        "expert_feed_forward_length",
        "attention.sliding_window_pattern",
        "swiglu_clamp_exp",
    ),  # src/models/maple.cpp
    "spark2_5": ("attention.sliding_window", "attention.sliding_window_pattern"),  # spark2-5.cpp
    "granite_swa": ("logit_scale", "attention.sliding_window_pattern", "attention.sliding_window"),
    "talkie": ("logit_scale",),  # talkie.cpp
    "muse-glimmer": ("attention.sliding_window", "logit_scale"),  # muse-glimmer.cpp
    "laguna": ("leading_dense_block_count", "expert_feed_forward_length"),  # laguna.cpp
    "plm": ("attention.kv_lora_rank",),  # plm.cpp
    "minicpm3": ("attention.q_lora_rank", "attention.kv_lora_rank"),  # minicpm3.cpp
    "mellum": ("expert_feed_forward_length",),  # mellum.cpp
    "bailingmoe": ("expert_feed_forward_length", "expert_shared_count"),  # bailingmoe.cpp
}

#: llama_model_base::load_hparams: for these an expert_count of 1 (Hunyuan's dense configs) means no experts
_ONE_EXPERT_IS_NONE = frozenset({"hunyuan_vl", "hunyuan-dense"})


def _n_expert(m: Meta, arch: str) -> int:
    n = m.u32("{arch}.expert_count")
    return 0 if arch in _ONE_EXPERT_IS_NONE and n <= 1 else n


def _check_experts(m: Meta, arch: str, n_layer: int) -> None:
    """llama.cpp's expert asserts (llama_model_base::load_hparams): a file that fails them aborts llama.cpp."""
    n_expert = _n_expert(m, arch)
    used = max(m.per_layer("{arch}.expert_used_count", n_layer), default=0) if n_expert else 0
    groups = m.u32("{arch}.expert_group_count")
    group_used = m.u32("{arch}.expert_group_used_count")
    problem = ""
    if n_expert > LLAMA_MAX_EXPERTS:
        problem = f"{arch}.expert_count is {n_expert:,}, more than llama.cpp's {LLAMA_MAX_EXPERTS} (LLAMA_MAX_EXPERTS)"
    elif used > n_expert:
        problem = f"{arch}.expert_used_count is {used:,}, more than the {n_expert:,} experts ({arch}.expert_count)"
    elif n_expert > 0 and used == 0:
        problem = f"the model has {n_expert:,} experts but {arch}.expert_used_count is 0 or missing"
    elif n_expert > 0 and groups >= n_expert:
        problem = f"{arch}.expert_group_count ({groups:,}) is not below the number of experts ({n_expert:,})"
    elif n_expert > 0 and groups > 1 and (n_expert % groups or group_used == 0 or group_used >= groups):
        problem = (
            f"{arch}.expert_count ({n_expert:,}), expert_group_count ({groups:,}) and expert_group_used_count "
            f"({group_used:,}) do not fit together"
        )
    elif n_expert == 0 and (used or groups):
        problem = f"the model has no experts ({arch}.expert_count) but sets expert_used_count or expert_group_count"
    if problem:
        raise LayerCountError(
            f"{m.where}{problem}: llama.cpp aborts on such a file (its expert checks in load_hparams fail): "
            "the file is corrupt; convert or download it again.",
            m.path,
        )


#: LFM2 hybrids: short-conv layers where ``head_count_kv[il]`` is 0, attention elsewhere (``src/models/lfm2.cpp``);
#: ``shortconv.l_cache`` is required.
SHORTCONV_ARCHS = frozenset({"lfm2", "lfm2moe"})


#: Hybrids of gated delta-net (linear attention) and full-attention layers (``src/models/qwen35.cpp`` ...):
#: ``attention.recurrent_layers`` (a per-layer bool array) or else ``full_attention_interval`` (default 4) marks
#: the recurrent layers; NextN/MTP blocks after the trunk are full-attention blocks.
DELTA_NET_ARCHS = frozenset({"qwen3next", "qwen35", "qwen35moe"})

#: ``full_attention_interval``'s default where ``load_arch_hparams`` marks recurrent layers the delta-net way:
#: MiniMax-01's lightning-attention layers (``src/models/minimax-01.cpp``: every 8th layer is softmax attention)
_FULL_ATTENTION_INTERVAL = {"minimax-01": 8}

#: Nemotron-H hybrids (``src/models/nemotron-h.cpp``): Mamba2 layers (no KV heads, no FFN), attention layers (no
#: FFN) and FFN-only or MoE-only layers (no KV heads), told apart by ``head_count_kv`` and ``feed_forward_length``.
NEMOTRON_H_ARCHS = frozenset({"nemotron_h", "nemotron_h_moe"})

#: Hybrids whose every layer runs attention and a Mamba2 block side by side (``src/models/falcon-h1.cpp``): every
#: layer is recurrent (``is_recr_impl`` all true) and every layer also owns a KV cache (the hybrid memory's attention
#: and recurrent layer filters both accept every layer).
PARALLEL_HYBRID_ARCHS = frozenset({"falcon-h1"})


#: ``GLM_5_2_DEFAULT_INDEXER_TYPES`` (``src/models/glm-dsa.cpp``): two full layers, then one full every four
_GLM_5_2_INDEXER = [True, True] + [il % 4 == 0 for il in range(76)]


def _hy_v4_indexer_full(m: Meta, n_layer: int, top_k: int) -> list[bool]:
    """``llama_model_hy_v4::load_arch_hparams``: without DSA (``indexer.top_k`` 0, the all-full-attention
    checkpoints) no layer has an indexer; with it ``indexer.types`` (scalar or per layer, default none) marks the
    layers that run theirs, and layer 0 must be one ("nothing precedes it to share")."""
    if top_k == 0:
        return [False] * n_layer
    given = m.layer_flags("{arch}.attention.indexer.types")
    if isinstance(given, list):
        if len(given) != n_layer:
            raise m.error(
                m.key("{arch}.attention.indexer.types"),
                f"has {len(given)} entries, not one per layer ({n_layer})",
                f"{len(given)} entries",
                f"{n_layer} entries",
                f"key {m.key('{arch}.attention.indexer.types')} has wrong array length; expected {n_layer}, "
                f"got {len(given)}",
            )
        full = list(given)
    else:
        full = [bool(given)] * n_layer
    if not full or not full[0]:
        raise m.error(
            m.key("{arch}.attention.indexer.types"),
            "does not mark layer 0 as running its own indexer",
            "layer 0 shared" if given is not None else "missing",
            "layer 0 full",
            "hy_v4: layer 0 must own an indexer, nothing precedes it to share",
        )
    return full


def _indexer_full(arch: str, m: Meta, n_layer: int, nextn: int, n_ctx_train: int) -> list[bool]:
    """Which trunk layers run the DSA indexer (``load_arch_hparams`` of deepseek32 / glm-dsa): every one for
    DeepSeek-V3.2 and for GLM-5/5.1 (``n_ctx_train`` < 1M, no ``indexer.types``); GLM-5.2's default pattern
    otherwise, and ``{arch}.attention.indexer.types`` (scalar or per layer) over either for glm-dsa."""
    n_main = n_layer - nextn
    if arch not in ("glm-dsa", "glm5-next"):
        return [il < n_main for il in range(n_layer)]
    if arch == "glm5-next":
        n_ctx_train = 0  # llama_model_glm5_next::load_arch_hparams: every layer full unless indexer.types says
    full = [True] * n_main if n_ctx_train < 1048576 else (_GLM_5_2_INDEXER + [False] * n_main)[:n_main]
    given = m.layer_flags("{arch}.attention.indexer.types")
    if isinstance(given, list):
        if len(given) != n_main:
            raise m.error(
                m.key("{arch}.attention.indexer.types"),
                f"has {len(given)} entries, not one per layer ({n_main})",
                f"{len(given)} entries",
                f"{n_main} entries",
                f"key {m.key('{arch}.attention.indexer.types')} has wrong array length; expected {n_main}, "
                f"got {len(given)}",
            )
        full = given
    elif given is not None:
        full = [bool(given)] * n_main
    return full + [False] * nextn


def _recurrent_layers(p: ModelParams, m: Meta) -> list[bool]:
    if p.arch in RECURRENT_ARCHS:
        return [True] * p.n_layer
    if p.arch not in HYBRID_ARCHS:
        return [False] * p.n_layer
    if p.arch in DELTA_NET_ARCHS or p.arch in _FULL_ATTENTION_INTERVAL:
        # load_arch_hparams: get_key_or_arr(LLM_KV_ATTENTION_RECURRENT_LAYERS, is_recr_impl, n_layer_all), else
        # is_recr = il < n_layer && (il + 1) % full_attention_interval != 0 with the interval defaulting to 4 (8)
        n_main = p.n_layer - p.nextn_layers
        flags = m.layer_flags("{arch}.attention.recurrent_layers")
        if isinstance(flags, list):
            if len(flags) != p.n_layer:
                key = m.key("{arch}.attention.recurrent_layers")
                raise m.error(
                    key,
                    f"holds {len(flags):,} values, but block_count says {p.n_layer:,} layers",
                    f"arr ({len(flags):,} items)",
                    f"{p.n_layer} values",
                    f"key {key} has wrong array length; expected {p.n_layer}, got {len(flags)}",
                )
            # the memory's layer filters keep NextN/MTP blocks out of the recurrent state either way
            return [f and il < n_main for il, f in enumerate(flags)]
        if flags is not None:
            return [bool(flags) and il < n_main for il in range(p.n_layer)]
        k = m.u32("{arch}.full_attention_interval", _FULL_ATTENTION_INTERVAL.get(p.arch, 4))
        if k == 0:
            raise m.error(
                m.key("{arch}.full_attention_interval"),
                "is 0, and llama.cpp divides by it",
                "u32 (0)",
                "u32 > 0",
                "floating point exception (modulo by zero)",
            )
        return [il < n_main and (il + 1) % k != 0 for il in range(p.n_layer)]
    if p.arch in PARALLEL_HYBRID_ARCHS:
        return [True] * p.n_layer
    if p.arch in NEMOTRON_H_ARCHS:
        # llama_model_nemotron_h::load_arch_hparams: recurrent iff head_count_kv[il] == 0 AND n_ff[il] == 0 (the
        # FFN-only / MoE-only layers have neither attention nor state); appended MTP blocks are not recurrent
        n_main = p.n_layer - p.nextn_layers
        return [il < n_main and h == 0 and f == 0 for il, (h, f) in enumerate(zip(p.n_head_kv, p.n_ff))]
    # Hybrids mark attention layers by a zero KV-head count per layer, or by a fixed interval.
    k = m.u32("{arch}.full_attention_interval")
    if k:
        return [((il + 1) % k) != 0 for il in range(p.n_layer)]
    return [h == 0 for h in p.n_head_kv]
