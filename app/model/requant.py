"""What-if quantization: the tensor types and sizes ``llama-quantize`` would write, from one GGUF header.

A port of the pinned llama.cpp's ``src/llama-quant.cpp`` (``llama_model_quantize_impl``'s type choice, no
tensor data): the tensor order (``llama_model_loader::weights_map``, sorted by layer then name),
``init_quantize_state_counters`` (``n_attention_wv``, ``n_ffn_*`` = ``n_layer_all``, tied embeddings),
``tensor_get_category``, ``tensor_allows_quantization``, ``llama_tensor_get_type`` (``--token-embedding-type``,
``--output-tensor-type``, ``--tensor-type`` patterns, ``--pure``), ``llama_tensor_get_type_impl`` (the
per-ftype mixtures: ``use_more_bits``, the counters, ``n_gqa()``, ``n_expert``, the 70B rule, ``has_imatrix``),
``tensor_type_fallback`` (row lengths a type cannot take), ``tensor_requires_imatrix`` and
``llama_ftype_get_default_type``; and ``tools/quantize/quantize.cpp``'s ``QUANT_OPTIONS`` (the type names the
tool accepts). ``llama-quantize --dry-run`` prints the same choices (tests/model/test_requant.py compares).

:func:`target_types` gives ``[(name, ggml type id)]``; :func:`plan` the whole choice with sizes and the
tensors that need an importance matrix; :func:`predict_model` a :class:`~app.model.Model` with those types
and sizes (the estimator and board take it as they take a file), marked ``predicted_from``.

Not modelled: ``--prune-layers``, ``--keep-split``, ``--override-kv``, ``--include/--exclude-weights`` (an
imatrix is taken to cover every tensor), and the header of an output written with an imatrix (its
``quantize.imatrix.*`` keys: the file size is then given without them, and says so).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import build_blocks
from .errors import GGUFError
from .gguf_reader import TensorInfo, read_header
from .model import Model


class RequantError(GGUFError):
    """llama-quantize would refuse this quantization (its reason is the message)."""


# --------------------------------------------------------------------------- ggml types (ggml/src/ggml.c)

#: ggml type id -> (ggml_type_name, block size, bytes per block, ggml_is_quantized) of the pinned ggml
GGML_TYPES: dict[int, tuple[str, int, int, bool]] = {
    0: ("f32", 1, 4, False),
    1: ("f16", 1, 2, False),
    2: ("q4_0", 32, 18, True),
    3: ("q4_1", 32, 20, True),
    6: ("q5_0", 32, 22, True),
    7: ("q5_1", 32, 24, True),
    8: ("q8_0", 32, 34, True),
    9: ("q8_1", 32, 36, True),
    10: ("q2_K", 256, 84, True),
    11: ("q3_K", 256, 110, True),
    12: ("q4_K", 256, 144, True),
    13: ("q5_K", 256, 176, True),
    14: ("q6_K", 256, 210, True),
    15: ("q8_K", 256, 292, True),
    16: ("iq2_xxs", 256, 66, True),
    17: ("iq2_xs", 256, 74, True),
    18: ("iq3_xxs", 256, 98, True),
    19: ("iq1_s", 256, 50, True),
    20: ("iq4_nl", 32, 18, True),
    21: ("iq3_s", 256, 110, True),
    22: ("iq2_s", 256, 82, True),
    23: ("iq4_xs", 256, 136, True),
    24: ("i8", 1, 1, False),
    25: ("i16", 1, 2, False),
    26: ("i32", 1, 4, False),
    27: ("i64", 1, 8, False),
    28: ("f64", 1, 8, False),
    29: ("iq1_m", 256, 56, True),
    30: ("bf16", 1, 2, False),
    34: ("tq1_0", 256, 54, True),
    35: ("tq2_0", 256, 66, True),
    39: ("mxfp4", 32, 17, True),
    40: ("nvfp4", 64, 36, True),
    41: ("q1_0", 128, 18, True),
    42: ("q2_0", 64, 18, True),
}
_TYPE_BY_NAME = {v[0].lower(): k for k, v in GGML_TYPES.items()}

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K = 10, 11, 12, 13, 14
IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M = 16, 17, 18, 19, 20, 21, 22, 23, 29
BF16, TQ1_0, TQ2_0, MXFP4, Q1_0, Q2_0 = 30, 34, 35, 39, 41, 42


def type_name(type_id: int) -> str:
    """The name :class:`~app.model.gguf_reader.TensorInfo` uses (gguf-py's spelling: ``Q4_K``, ``BF16``)."""
    return GGML_TYPES[type_id][0].upper() if type_id in GGML_TYPES else f"type {type_id}"


def parse_ggml_type(name: str) -> int:
    """A ggml type by name, case-insensitively (quantize.cpp ``parse_ggml_type``)."""
    try:
        return _TYPE_BY_NAME[name.strip().lower()]
    except KeyError:
        raise RequantError(
            f"unknown ggml type {name!r}; known: {', '.join(v[0] for v in GGML_TYPES.values())}"
        ) from None


def row_size(type_id: int, ne0: int) -> int:
    """``ggml_row_size``: bytes of one row of ``ne0`` elements."""
    _, block, size, _ = GGML_TYPES[type_id]
    return size * ne0 // block


def tensor_nbytes(type_id: int, shape: Sequence[int]) -> int:
    """What llama-quantize writes for a tensor of ``shape`` in ``type_id``: ``ggml_nrows * ggml_row_size``."""
    nrows = 1
    for d in shape[1:]:
        nrows *= d
    return nrows * row_size(type_id, shape[0])


# --------------------------------------------------------------------------- ftypes (include/llama.h, quantize.cpp)

#: ``QUANT_OPTIONS`` of tools/quantize/quantize.cpp, in its order: name -> llama_ftype ("Q4_K" etc. are aliases)
QUANT_OPTIONS: dict[str, int] = {
    "Q1_0": 40,
    "Q2_0": 41,
    "Q4_0": 2,
    "Q4_1": 3,
    "MXFP4_MOE": 38,
    "Q5_0": 8,
    "Q5_1": 9,
    "IQ2_XXS": 19,
    "IQ2_XS": 20,
    "IQ2_S": 28,
    "IQ2_M": 29,
    "IQ1_S": 24,
    "IQ1_M": 31,
    "TQ1_0": 36,
    "TQ2_0": 37,
    "Q2_K": 10,
    "Q2_K_S": 21,
    "IQ3_XXS": 23,
    "IQ3_S": 26,
    "IQ3_M": 27,
    "Q3_K": 12,
    "IQ3_XS": 22,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "IQ4_NL": 25,
    "IQ4_XS": 30,
    "Q4_K": 15,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K": 17,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "Q8_0": 7,
    "F16": 1,
    "BF16": 32,
    "F32": 0,
    "COPY": 0,
}
#: The names that are not aliases of another (every ftype llama-quantize offers, once)
FTYPE_NAMES: tuple[str, ...] = tuple(n for n in QUANT_OPTIONS if n not in ("Q3_K", "Q4_K", "Q5_K"))

(
    FT_F32,
    FT_F16,
    FT_Q4_0,
    FT_Q4_1,
    FT_Q8_0,
    FT_Q5_0,
    FT_Q5_1,
    FT_Q2_K,
    FT_Q3_K_S,
    FT_Q3_K_M,
    FT_Q3_K_L,
    FT_Q4_K_S,
    FT_Q4_K_M,
    FT_Q5_K_S,
    FT_Q5_K_M,
    FT_Q6_K,
) = (0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)
FT_IQ2_XXS, FT_IQ2_XS, FT_Q2_K_S, FT_IQ3_XS, FT_IQ3_XXS, FT_IQ1_S, FT_IQ4_NL = 19, 20, 21, 22, 23, 24, 25
FT_IQ3_S, FT_IQ3_M, FT_IQ2_S, FT_IQ2_M, FT_IQ4_XS, FT_IQ1_M, FT_BF16 = 26, 27, 28, 29, 30, 31, 32
FT_TQ1_0, FT_TQ2_0, FT_MXFP4_MOE, FT_Q1_0, FT_Q2_0 = 36, 37, 38, 40, 41

#: ``llama_ftype_get_default_type``
DEFAULT_TYPE: dict[int, int] = {
    FT_Q4_0: Q4_0,
    FT_Q4_1: Q4_1,
    FT_Q5_0: Q5_0,
    FT_Q5_1: Q5_1,
    FT_Q8_0: Q8_0,
    FT_F16: F16,
    FT_BF16: BF16,
    FT_F32: F32,
    FT_Q1_0: Q1_0,
    FT_Q2_0: Q2_0,
    FT_MXFP4_MOE: MXFP4,
    FT_Q2_K_S: Q2_K,
    FT_Q2_K: Q2_K,
    FT_IQ3_XS: IQ3_S,
    FT_Q3_K_S: Q3_K,
    FT_Q3_K_M: Q3_K,
    FT_Q3_K_L: Q3_K,
    FT_Q4_K_S: Q4_K,
    FT_Q4_K_M: Q4_K,
    FT_Q5_K_S: Q5_K,
    FT_Q5_K_M: Q5_K,
    FT_Q6_K: Q6_K,
    FT_TQ1_0: TQ1_0,
    FT_TQ2_0: TQ2_0,
    FT_IQ2_XXS: IQ2_XXS,
    FT_IQ2_XS: IQ2_XS,
    FT_IQ2_S: IQ2_XS,
    FT_IQ2_M: IQ2_S,
    FT_IQ3_XXS: IQ3_XXS,
    FT_IQ1_S: IQ1_S,
    FT_IQ1_M: IQ1_M,
    FT_IQ4_NL: IQ4_NL,
    FT_IQ4_XS: IQ4_XS,
    FT_IQ3_S: IQ3_S,
    FT_IQ3_M: IQ3_S,
}


def parse_ftype(ftype: str | int) -> tuple[str, int]:
    """``(name, llama_ftype)`` the way quantize.cpp's ``try_parse_ftype`` reads its TYPE argument: a name of
    :data:`QUANT_OPTIONS` (any case), or a number (the first option with that ftype)."""
    if isinstance(ftype, int):
        text = str(ftype)
    else:
        text = ftype.strip().upper()
        if text in QUANT_OPTIONS:
            return text, QUANT_OPTIONS[text]
    try:
        number = int(text)
    except ValueError:
        number = None
    if number is not None:
        for name, ft in QUANT_OPTIONS.items():
            if ft == number:
                return name, ft
    raise RequantError(f"llama-quantize has no type {ftype!r}; it takes: {', '.join(FTYPE_NAMES)}")


# --------------------------------------------------------------------------- categories (llama-quant.cpp)

TOKEN_EMBD, ATTN_Q, ATTN_V, ATTN_K, ATTN_QKV, ATTN_KV_B, ATTN_OUTPUT = range(7)
FFN_UP, FFN_GATE, FFN_DOWN, OUTPUT, OTHER = range(7, 12)


def _is_token_embd(name: str) -> bool:
    return name in ("token_embd.weight", "per_layer_token_embd.weight")


def tensor_category(name: str) -> int:
    """``tensor_get_category``."""
    if name == "output.weight":
        return OUTPUT
    if _is_token_embd(name):
        return TOKEN_EMBD
    for needle, cat in (
        ("attn_qkv.weight", ATTN_QKV),
        ("attn_kv_b.weight", ATTN_KV_B),
        ("attn_v.weight", ATTN_V),
        ("attn_k.weight", ATTN_K),
        ("attn_q.weight", ATTN_Q),
        ("attn_output.weight", ATTN_OUTPUT),
        ("ffn_up", FFN_UP),
        ("ffn_gate", FFN_GATE),
        ("ffn_down", FFN_DOWN),
    ):
        if needle in name:
            return cat
    return OTHER


def _is_attn_v(cat: int) -> bool:
    return cat in (ATTN_V, ATTN_QKV, ATTN_KV_B)


_NOT_QUANTIZED = (
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
)
_GLM5_NEXT_NOT_QUANTIZED = (
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
)


def n_dims(shape: Sequence[int]) -> int:
    """``ggml_n_dims``: 1 + the last dimension above 1 (a ``[n, 1]`` tensor is 1-D)."""
    for i in range(len(shape) - 1, 0, -1):
        if shape[i] > 1:
            return i + 1
    return 1


def allows_quantization(name: str, shape: Sequence[int], arch: str, *, only_copy: bool = False,
                        quantize_output_tensor: bool = True) -> bool:  # fmt: skip
    """``tensor_allows_quantization``."""
    if only_copy or n_dims(shape) < 2:
        return False
    # name.rfind("weight") == name.size() - 6, in size_t arithmetic (a 5-character name without it passes)
    pos = name.rfind("weight")
    if (len(name) - 6) % 2**64 != (pos if pos >= 0 else 2**64 - 1):
        return False
    if not quantize_output_tensor and name == "output.weight":
        return False
    if any(s in name for s in _NOT_QUANTIZED):
        return False
    if name in ("position_embd.weight", "token_types.weight"):
        return False
    if arch == "glm5-next" and any(s in name for s in _GLM5_NEXT_NOT_QUANTIZED):
        return False
    return True


def requires_imatrix(name: str, type_id: int, ftype: int) -> bool:
    """``tensor_requires_imatrix``."""
    if _is_token_embd(name) or name == "output.weight":
        return False
    if type_id in (IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_M, IQ1_S):
        return True
    return type_id == Q2_K and ftype == FT_Q2_K_S


# --------------------------------------------------------------------------- the model facts it consults


@dataclass(frozen=True)
class QuantFacts:
    """What ``llama_model_quantize_impl`` reads from the model besides its tensors (``load_hparams``)."""

    arch: str
    n_layer_all: int
    n_expert: int
    n_head: int  # layer 0's (n_gqa() is layer 0's)
    n_head_kv: int
    is_70b: bool

    @property
    def n_gqa(self) -> int:
        return self.n_head // self.n_head_kv if self.n_head_kv else 0


def _first(v: Any, default: int) -> int:
    if v is None:
        return default
    if isinstance(v, (list, tuple)):
        return int(v[0]) if len(v) else default
    if hasattr(v, "load"):  # a LazyArray
        vals = v.load()
        return int(vals[0]) if vals else default
    return int(v)


def quant_facts(model: Model) -> QuantFacts:
    md = model.metadata
    arch = str(md.get("general.architecture", model.params.arch))
    n_layer_all = int(md.get(f"{arch}.block_count", model.params.n_layer))
    n_nextn = int(md.get(f"{arch}.nextn_predict_layers", 0) or 0)
    n_expert = int(md.get(f"{arch}.expert_count", 0) or 0)
    n_head = _first(md.get(f"{arch}.attention.head_count"), 0)
    n_head_kv = _first(md.get(f"{arch}.attention.head_count_kv"), n_head)
    n_layer = n_layer_all - n_nextn
    # LLM_TYPE_70B (src/models/*.cpp load_arch_hparams): the only model type llama-quant.cpp looks at
    is_70b = (
        (arch == "llama" and n_expert != 8 and n_layer == 80 and n_head != n_head_kv)
        or (arch in ("qwen2", "deci", "olmo") and n_layer == 80)
        or (arch == "jais2" and n_layer == 68)
    )
    return QuantFacts(arch, n_layer_all, n_expert, n_head, n_head_kv, is_70b)


# --------------------------------------------------------------------------- the choice


@dataclass(frozen=True)
class TensorChoice:
    name: str
    shape: tuple[int, ...]
    old_type: int
    new_type: int
    nbytes: int
    #: the row length did not fit the type the rules chose (``tensor_type_fallback``)
    fallback: bool = False
    #: quantizing to ``new_type`` needs an importance matrix (llama-quantize refuses without one)
    needs_imatrix: bool = False


@dataclass
class Requant:
    """One ``llama-quantize`` run as predicted: the tensors in the order it writes them."""

    ftype_name: str
    ftype: int
    imatrix: bool
    tensors: list[TensorChoice] = field(default_factory=list)

    @property
    def types(self) -> list[tuple[str, int]]:
        return [(c.name, c.new_type) for c in self.tensors]

    @property
    def tensor_bytes(self) -> int:
        return sum(c.nbytes for c in self.tensors)

    @property
    def needs_imatrix(self) -> list[str]:
        """Tensors llama-quantize refuses to quantize without ``--imatrix`` (empty with one)."""
        return [] if self.imatrix else [c.name for c in self.tensors if c.needs_imatrix]

    @property
    def n_fallback(self) -> int:
        return sum(c.fallback for c in self.tensors)


def _layer_key(name: str) -> int:
    m = re.match(r"blk\.\s*([+-]?\d+)", name)  # sscanf(name, "blk.%d.", &layer)
    return int(m.group(1)) if m else -1


def quantize_order(names: Iterable[str]) -> list[str]:
    """``weights_map``'s order (``weight_name_comparer``): by layer (non-layer tensors first), then by name."""
    return sorted(names, key=lambda n: (_layer_key(n), n.encode()))


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or _cmod(i_layer - n_layers // 8, 3) == 2


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


class _State:
    def __init__(self, facts: QuantFacts, names: list[str], imatrix: bool):
        self.f = facts
        self.has_imatrix = imatrix
        cats = [tensor_category(n) for n in names]
        self.n_attention_wv = sum(_is_attn_v(c) for c in cats)
        self.has_tied_embeddings = OUTPUT not in cats
        self.n_ffn_down = self.n_ffn_gate = self.n_ffn_up = facts.n_layer_all
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0


def _layer_info(st: _State, i_layer: int, n_layer: int, name: str) -> tuple[int, int]:
    if max(1, st.f.n_expert) > 1:
        m = re.match(r"blk\.\s*([+-]?\d+)", name)
        if m is None:
            raise RequantError(f"llama-quantize: Failed to determine layer for tensor {name}")
        i_layer = int(m.group(1))
        if i_layer < 0 or i_layer >= n_layer:
            raise RequantError(f"llama-quantize: Bad layer {i_layer} for tensor {name}. Must be in [0, {n_layer})")
    return i_layer, n_layer


def _impl(st: _State, new_type: int, name: str, shape: Sequence[int], ftype: int, cat: int,
          output_tensor_type: int | None, token_embedding_type: int | None) -> int:  # fmt: skip
    """``llama_tensor_get_type_impl``, branch for branch."""
    f = st.f
    arch = f.arch
    IQ12 = (FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M)
    if arch == "glm5-next" and ("attn_q_a" in name or "attn_q_b" in name or "nextn.eh_proj" in name):
        if new_type not in (F32, BF16, F16):
            return Q8_0
    if cat == OUTPUT or (st.has_tied_embeddings and cat == TOKEN_EMBD):
        if output_tensor_type is not None:
            new_type = output_tensor_type
        else:
            nx = shape[0]
            qk_k = GGML_TYPES[new_type][1]
            if ftype == FT_MXFP4_MOE:
                new_type = Q8_0
            elif arch == "falcon" or nx % qk_k != 0:
                new_type = Q8_0
            elif ftype in (FT_IQ2_XXS, FT_IQ2_XS, FT_IQ3_XXS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M):
                new_type = Q5_K
            elif new_type != Q8_0:
                new_type = Q6_K
    elif ftype == FT_MXFP4_MOE:
        is_bailing_expert = arch == "bailingmoe3" and cat in (FFN_UP, FFN_GATE, FFN_DOWN)
        ne2 = shape[2] if len(shape) > 2 else 1
        new_type = MXFP4 if ne2 > 1 and (arch != "bailingmoe3" or is_bailing_expert) else Q8_0
    elif cat == TOKEN_EMBD:
        if token_embedding_type is not None:
            new_type = token_embedding_type
        elif ftype in (FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ1_M):
            new_type = Q2_K
        elif ftype in (FT_IQ2_S, FT_IQ2_M, FT_IQ3_XXS):
            new_type = IQ3_S
        elif ftype in (FT_TQ1_0, FT_TQ2_0, FT_Q2_0):
            new_type = Q4_K
    elif ftype in IQ12:
        if _is_attn_v(cat):
            if f.n_gqa >= 4 or f.n_expert >= 4:
                new_type = Q4_K
            else:
                new_type = IQ3_S if ftype in (FT_IQ2_S, FT_IQ2_M) else Q2_K
            st.i_attention_wv += 1
        elif f.n_expert == 8 and cat == ATTN_K:
            new_type = Q4_K
        elif cat == FFN_DOWN:
            if st.i_ffn_down < st.n_ffn_down // 8:
                new_type = IQ3_S if ftype in (FT_IQ2_S, FT_IQ2_M) else Q2_K
            st.i_ffn_down += 1
        elif cat == ATTN_OUTPUT:
            if f.n_expert == 8:
                new_type = Q5_K
            elif ftype in (FT_IQ1_S, FT_IQ1_M):
                new_type = IQ2_XXS
            elif ftype in (FT_IQ2_S, FT_IQ2_M):
                new_type = IQ3_S
    elif _is_attn_v(cat):
        gqa4 = f.n_gqa >= 4
        if ftype == FT_Q2_K:
            new_type = Q4_K if gqa4 else Q3_K
        elif ftype == FT_Q2_K_S and gqa4:
            new_type = Q4_K
        elif ftype == FT_IQ3_XXS:
            new_type = Q4_K if gqa4 else (IQ3_S if not st.has_imatrix else IQ3_XXS)
        elif ftype in (FT_IQ3_XS, FT_IQ3_S) and gqa4:
            new_type = Q4_K
        elif ftype == FT_IQ3_M:
            new_type = Q4_K
        elif ftype == FT_Q3_K_M:
            new_type = Q5_K if st.i_attention_wv < 2 else Q4_K
        elif ftype == FT_Q3_K_L:
            new_type = Q5_K
        elif ftype in (FT_IQ4_NL, FT_IQ4_XS) and gqa4:
            new_type = Q5_K
        elif ftype in (FT_Q4_K_M, FT_Q5_K_M) and _use_more_bits(st.i_attention_wv, st.n_attention_wv):
            new_type = Q6_K
        elif ftype == FT_Q4_K_S and st.i_attention_wv < 4:
            new_type = Q5_K
        if f.is_70b and new_type in (Q3_K, Q4_K):
            new_type = Q5_K
        if f.n_expert == 8:
            new_type = Q8_0
        st.i_attention_wv += 1
    elif cat == ATTN_K:
        if f.n_expert == 8:
            new_type = Q8_0
        elif ftype == FT_IQ3_XS:
            new_type = IQ3_XXS
        elif ftype == FT_IQ3_XXS:
            new_type = IQ2_S
    elif cat == ATTN_Q:
        if ftype == FT_IQ3_XS:
            new_type = IQ3_XXS
        elif ftype == FT_IQ3_XXS:
            new_type = IQ2_S
    elif cat == FFN_DOWN:
        i_layer, n_layer = _layer_info(st, st.i_ffn_down, st.n_ffn_down, name)
        falcon = arch == "falcon"
        if ftype == FT_Q2_K:
            new_type = Q3_K
        elif ftype == FT_Q2_K_S:
            if i_layer < n_layer // 8:
                new_type = Q4_K
        elif ftype == FT_IQ3_XXS and not st.has_imatrix:
            new_type = Q4_K if i_layer < n_layer // 8 else Q3_K
        elif ftype == FT_Q3_K_M:
            if i_layer < n_layer // 16:
                new_type = Q5_K
            elif not falcon or _use_more_bits(i_layer, n_layer):
                new_type = Q4_K
            else:
                new_type = Q3_K
        elif ftype == FT_IQ3_M and (i_layer < n_layer // 8 or (f.n_expert == 8 and _use_more_bits(i_layer, n_layer))):
            new_type = Q4_K
        elif ftype == FT_Q3_K_L:
            new_type = Q4_K if falcon else Q5_K
        elif ftype == FT_Q4_K_M:
            if falcon:
                if i_layer < n_layer // 16:
                    new_type = Q6_K
                elif _use_more_bits(i_layer, n_layer):
                    new_type = Q5_K
                else:
                    new_type = Q4_K
            elif _use_more_bits(i_layer, n_layer):
                new_type = Q6_K
        elif i_layer < n_layer // 8 and ftype in (FT_IQ4_NL, FT_IQ4_XS) and not st.has_imatrix:
            new_type = Q5_K
        elif ftype == FT_Q5_K_M and _use_more_bits(i_layer, n_layer):
            new_type = Q6_K
        elif ftype == FT_Q4_K_S and not falcon and i_layer < n_layer // 8:
            new_type = Q5_K
        elif ftype in (FT_Q4_0, FT_Q5_0) and st.has_imatrix and i_layer < n_layer // 8:
            new_type = Q4_1 if ftype == FT_Q4_0 else Q5_1
        st.i_ffn_down += 1
    elif cat == ATTN_OUTPUT:
        if arch != "falcon":
            if f.n_expert == 8:
                if ftype in (
                    FT_Q2_K,
                    FT_IQ3_XS,
                    FT_IQ3_XXS,
                    FT_Q3_K_S,
                    FT_Q3_K_M,
                    FT_IQ4_NL,
                    FT_Q4_K_S,
                    FT_Q4_K_M,
                    FT_IQ3_S,
                    FT_IQ3_M,
                    FT_IQ4_XS,
                ):
                    new_type = Q5_K
            else:
                new_type = {FT_Q2_K: Q3_K, FT_IQ3_XXS: IQ3_S, FT_Q3_K_M: Q4_K, FT_Q3_K_L: Q5_K, FT_IQ3_M: Q4_K}.get(
                    ftype, new_type
                )
        elif ftype == FT_Q3_K_L:
            new_type = Q4_K
    elif cat == ATTN_QKV:
        if ftype in (FT_Q3_K_M, FT_Q3_K_L, FT_IQ3_M):
            new_type = Q4_K
        elif ftype == FT_Q4_K_M:
            new_type = Q5_K
        elif ftype == FT_Q5_K_M:
            new_type = Q6_K
    elif cat in (FFN_GATE, FFN_UP):
        counter = st.i_ffn_gate if cat == FFN_GATE else st.i_ffn_up
        n = st.n_ffn_gate if cat == FFN_GATE else st.n_ffn_up
        i_layer, n_layer = _layer_info(st, counter, n, name)
        if ftype == FT_IQ3_XS and n_layer // 8 <= i_layer < 7 * n_layer // 8:
            new_type = IQ3_XXS
        if cat == FFN_GATE:
            st.i_ffn_gate += 1
        else:
            st.i_ffn_up += 1
    return new_type


_FALLBACK = {
    IQ1_S: IQ4_NL,
    IQ1_M: IQ4_NL,
    IQ2_XXS: IQ4_NL,
    IQ2_XS: IQ4_NL,
    IQ2_S: IQ4_NL,
    IQ3_XXS: IQ4_NL,
    IQ3_S: IQ4_NL,
    IQ4_XS: IQ4_NL,
    Q2_0: Q4_0,
    Q2_K: Q4_0,
    Q3_K: Q4_0,
    TQ1_0: Q4_0,
    TQ2_0: Q4_0,
    Q4_K: Q5_0,
    Q5_K: Q5_1,
    Q6_K: Q8_0,
}


def _fallback(name: str, ncols: int, target: int) -> tuple[int, bool]:
    """``tensor_type_fallback``: ``(type, fell back)``."""
    qk_k = GGML_TYPES[target][1]
    if ncols % qk_k == 0:
        return target, False
    if target in _FALLBACK:
        out = _FALLBACK[target]
    elif qk_k <= 32:
        out = target
    else:
        raise RequantError(
            f"llama-quantize: {name} has rows of {ncols} (not a multiple of {qk_k}, required for type "
            f"{GGML_TYPES[target][0]}) and no tensor type fallback is defined for type {GGML_TYPES[target][0]}"
        )
    if ncols % GGML_TYPES[out][1] != 0:
        out = F16
    return out, True


def _as_type(t: int | str | None) -> int | None:
    if t is None:
        return None
    return parse_ggml_type(t) if isinstance(t, str) else int(t)


def plan(
    model: Model,
    ftype: str | int,
    *,
    imatrix: bool = False,
    tensor_type_overrides: Sequence[tuple[str, int | str]] | None = None,
    output_tensor_type: int | str | None = None,
    token_embedding_type: int | str | None = None,
    pure: bool = False,
    leave_output_tensor: bool = False,
) -> Requant:
    """What ``llama-quantize [--imatrix F] [--tensor-type P=T ...] [--output-tensor-type T]
    [--token-embedding-type T] [--pure] [--leave-output-tensor] MODEL TYPE`` writes, tensor by tensor.

    ``tensor_type_overrides`` are ``--tensor-type`` pairs ``(pattern, type)``: the pattern is lower-cased and
    searched in the name as a regular expression (quantize.cpp / ``std::regex_search``; Python's ``re`` here,
    the same for the patterns people write). Raises :class:`RequantError` where llama-quantize stops.
    """
    name, ft = parse_ftype(ftype)
    only_copy = name == "COPY"
    default_type = DEFAULT_TYPE[ft]
    out_t, emb_t = _as_type(output_tensor_type), _as_type(token_embedding_type)
    patterns = [(re.compile(p.lower()), _as_type(t)) for p, t in (tensor_type_overrides or ())]
    facts = quant_facts(model)
    by_name = {t.name: t for t in model.tensors}
    order = quantize_order(by_name)
    st = _State(facts, order, imatrix)
    result = Requant(name, ft, imatrix)
    for tname in order:
        t = by_name[tname]
        shape = tuple(t.shape)
        cat = tensor_category(tname)
        new_type, fell_back = t.type_id, False
        allowed = allows_quantization(
            tname, shape, facts.arch, only_copy=only_copy, quantize_output_tensor=not leave_output_tensor
        )
        if allowed:
            new_type, fell_back = _get_type(st, t, shape, cat, ft, default_type, out_t, emb_t, patterns, pure)
        needs = allowed and requires_imatrix(tname, new_type, ft)
        nbytes = t.nbytes if new_type == t.type_id else tensor_nbytes(new_type, shape)
        written = shape[: n_dims(shape)]  # gguf writes ggml_n_dims dimensions: trailing 1s are dropped
        result.tensors.append(TensorChoice(tname, written, t.type_id, new_type, nbytes, fell_back, needs))
    return result


def _get_type(st, t, shape, cat, ft, default_type, out_t, emb_t, patterns, pure) -> tuple[int, bool]:
    """``llama_tensor_get_type`` for a tensor that allows quantization."""
    if emb_t is not None and cat == TOKEN_EMBD:
        named = t.name == "per_layer_token_embd.weight" and any(p.search(t.name) for p, _ in patterns)
        if not named:
            return emb_t, False
    if out_t is not None and cat == OUTPUT:
        return out_t, False
    new_type = default_type
    if not GGML_TYPES[default_type][3]:  # not quantized (F16, BF16, F32): no mixture, no fallback
        return new_type, False
    manual = False
    for p, qtype in patterns:
        if p.search(t.name):
            new_type, manual = qtype, True
            break
    if not manual and not pure:
        new_type = _impl(st, new_type, t.name, shape, ft, cat, out_t, emb_t)
    return _fallback(t.name, shape[0], new_type)


def target_types(model: Model, ftype: str | int, **options: Any) -> list[tuple[str, int]]:
    """``[(tensor name, ggml type id)]`` llama-quantize would write, in its order (options as :func:`plan`)."""
    return plan(model, ftype, **options).types


# --------------------------------------------------------------------------- the predicted model

GGUF_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT: llama-quantize pads every tensor's data to it


def _kv_bytes(key: str) -> int:
    """Bytes of one u32 key/value pair in a GGUF header (key length, key, value type, value)."""
    return 8 + len(key.encode()) + 4 + 4


def _output_header_size(model: Model) -> int:
    """``gguf_get_meta_size`` of the file llama-quantize writes (one file, padded): the input's header with
    ``general.quantization_version`` and ``general.file_type`` set as u32, the ``split.*`` keys removed,
    every shard's tensor entries in it, each with ``ggml_n_dims`` dimensions."""
    h = read_header(model.paths[0])
    end = _header_end(h)
    md, types = h.metadata, h.metadata_types
    delta = 0
    for key in ("general.quantization_version", "general.file_type"):
        if key not in md:
            delta += _kv_bytes(key)
        elif types.get(key) not in (4, 5):  # not a 4-byte value: replaced by a u32
            delta += 4 - _value_bytes(types.get(key))
    for key in ("split.no", "split.count", "split.tensors.count"):
        if key in md:
            delta -= 8 + len(key.encode()) + 4 + _value_bytes(types.get(key))
    for t in model.tensors:
        if t.shard:  # the other shards' tensor entries join the first's
            delta += 8 + len(t.name.encode()) + 4 + 8 * n_dims(t.shape) + 4 + 8
        else:  # each entry is written with ggml_n_dims dimensions (trailing 1s dropped)
            delta -= 8 * (len(t.shape) - n_dims(t.shape))
    n = end + delta
    return (n + GGUF_ALIGNMENT - 1) // GGUF_ALIGNMENT * GGUF_ALIGNMENT


def _value_bytes(vtype: int | None) -> int:
    return {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}.get(vtype or 0, 0)


def _header_end(h) -> int:
    """The unpadded end of a header: ``header_size`` when the reader recorded it, else the data offset."""
    return int(h.header_size) if getattr(h, "header_size", 0) else int(h.data_offset)


def predict_model(model: Model, ftype: str | int, **options: Any) -> Model:
    """The :class:`Model` llama-quantize would write from ``model`` as ``ftype`` (options as :func:`plan`):
    its tensors (in the order written) with their new types, sizes and offsets, the new ``general.file_type``,
    and the predicted file size; ``predicted_from`` names the source, ``warnings`` say what was predicted.

    Raises :class:`RequantError` where llama-quantize would refuse, including a type that needs an importance
    matrix when ``imatrix`` is false (pass ``imatrix=True`` to predict the run with one)."""
    rq = plan(model, ftype, **options)
    if rq.needs_imatrix:
        shown = ", ".join(rq.needs_imatrix[:3]) + (
            f" and {len(rq.needs_imatrix) - 3} more" if len(rq.needs_imatrix) > 3 else ""
        )
        first = next(c for c in rq.tensors if c.name == rq.needs_imatrix[0])
        raise RequantError(
            f'llama-quantize refuses {rq.ftype_name} without an importance matrix ("this quantization requires an '
            f'imatrix!": {shown} would be {GGML_TYPES[first.new_type][0]}); make one with llama-imatrix and '
            "quantize with --imatrix (imatrix=True, or --imatrix on the command line, predicts that run)"
        )
    header = _output_header_size(model) if model.paths and not (model.is_demo or model.source) else None
    tensors: list[TensorInfo] = []
    offset = header or 0
    for c in rq.tensors:
        tensors.append(
            TensorInfo(
                c.name,
                c.new_type,
                type_name(c.new_type),
                c.shape,
                _elements(c.shape),
                c.nbytes,
                offset,
                0,
            )
        )
        offset += (c.nbytes + GGUF_ALIGNMENT - 1) // GGUF_ALIGNMENT * GGUF_ALIGNMENT
    metadata = dict(model.metadata)
    metadata["general.file_type"] = rq.ftype if rq.ftype_name != "COPY" else model.metadata.get("general.file_type")
    metadata["general.quantization_version"] = 2  # GGML_QNT_VERSION
    for key in ("split.no", "split.count", "split.tensors.count"):
        metadata.pop(key, None)
    params = dataclasses.replace(model.params, file_type=metadata["general.file_type"])
    source = model.path.name if model.paths else (model.title or "the model")
    mix = model.quant_mix()
    total = max(model.tensor_bytes, 1)
    was = "its " + ", ".join(f"{q.type_name} {100 * q.nbytes / total:.0f}%" for q in mix[:2]) + " tensors"
    note = f"predicted: {source} as {rq.ftype_name} by llama-quantize's rules of the pinned llama.cpp"
    warnings = [*model.warnings, note + f" (from {was}{', with an importance matrix' if rq.imatrix else ''})"]
    if rq.n_fallback:
        warnings.append(
            f"{rq.n_fallback} of {len(rq.tensors)} tensors have rows their {rq.ftype_name} type cannot take and "
            "fall back to another type, as llama-quantize does"
        )
    if metadata["general.file_type"] is None:  # COPY of a file without one: llama.cpp writes the type it guesses
        warnings.append("general.file_type: the input has none, and llama-quantize COPY writes the one it guesses")
    if header is None:
        file_size = sum((c.nbytes + GGUF_ALIGNMENT - 1) // GGUF_ALIGNMENT * GGUF_ALIGNMENT for c in rq.tensors)
        warnings.append("the predicted file size counts the tensor data only (the header was not read from a file)")
    else:
        file_size = offset
        if rq.imatrix:
            warnings.append(
                "the predicted file size leaves out the quantize.imatrix.* keys llama-quantize adds to the header "
                "(a few hundred bytes, with the imatrix's file name)"
            )
    predicted = Model(
        paths=list(model.paths[:1]),  # one file, whatever the input's shards
        file_size=file_size,
        version=model.version,
        metadata=metadata,
        params=params,
        tensors=tensors,
        blocks=build_blocks(tensors, params),
        warnings=warnings,
        is_demo=model.is_demo,
        title=model.title,
        file_sizes=[file_size],
        source=model.source,
        predicted_from=f"{source} as {rq.ftype_name}",
    )
    return predicted


def _elements(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
