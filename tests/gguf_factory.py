"""Write GGUF model files that the real llama.cpp accepts, for tests.

Two kinds of files:

* **Tiny models** (:func:`write_tiny_model`): a few layers of width 64 with
  real llama.cpp metadata keys and tensor names/shapes, random (seeded,
  deterministic) weights and a byte-level SentencePiece-style vocabulary.
  ``llama-server`` loads them in well under a second and answers
  ``/completion`` with nonsense text.  Weights are a realistic *mix* of types:
  f32 norms/routers/biases, f16, Q8_0, Q4_0, synthesized Q4_K/Q6_K blocks where
  a row is a multiple of 256, and MXFP4 experts for gpt-oss.

* **Sparse full-size models** (:func:`write_sparse_model`): the real header and
  tensor table of e.g. Qwen3-30B-A3B at Q4_K_M, with the data region left as a
  hole (the file is extended with ``os.truncate``).  The file has its true
  apparent size but takes only the header's worth of disk.  Tools that never
  read tensor data (``llama-fit-params``, which does a no-alloc dry run, or any
  GGUF header parser) treat them like the real thing.

Every file is described first by a :class:`ModelSpec` (metadata plus a list of
:class:`TensorSpec`), built by :func:`model_spec`; the writers only serialise
it.  Tests can use the spec to know what a file contains without reading it.

The vocabulary is always tokenizer model ``llama`` (SPM): ``<unk>``, ``<s>``
(bos, 1), ``</s>`` (eos, 2), the 256 byte tokens ``<0x00>``..``<0xFF>`` and
filler pieces.  Sparse models pad it with ``tok_N`` entries to the model's real
vocabulary size, so ``token_embd``/``output`` have real shapes; the real models
use BPE tokenizers, which are irrelevant to memory planning.

Tensor shapes are given in ggml order (``ne0`` first), exactly as in
llama.cpp's ``create_tensor`` calls (``src/models/*.cpp``).

llama.cpp behaviour these files follow (llama-cpp-python 0.3.36's tree):

* ``llama``: ``rope.dimension_count`` must equal the head size, and although
  ``head_count_kv`` may be a per-layer array, every layer's K/V tensors are
  checked against layer 0's value, so only uniform arrays load
  (``check_tensor_dims: tensor 'blk.1.attn_k.weight' has wrong shape``).
* ``deepseek2`` MLA: ``key_length`` = kv_lora_rank + rope dims and
  ``value_length`` = kv_lora_rank (the cached latent), ``key_length_mla`` /
  ``value_length_mla`` the per-head sizes; MLA is on only when both ``*_mla``
  keys are set, and then ``attn_k_b`` {nope, kv_lora, n_head} and ``attn_v_b``
  {kv_lora, v_dim, n_head} replace ``attn_kv_b``.
* ``gpt-oss``: real files carry ``attention.sliding_window`` but no pattern
  key; llama.cpp then uses period 2 (even layers SWA).  ``swa_pattern``
  writes one (int period or bool list) if wanted.
* ``glm4moe``: the NextN/MTP block counts in ``block_count``; without MTP
  speculation llama.cpp skips its tensors and logs ``model has unused tensor``.
* ``granitehybrid``: a layer is recurrent iff ``head_count_kv[il] == 0``;
  ``ssm.inner_size`` must be ``2 * n_embd``; ``ssm_conv1d`` must be f32.
* ``qwen2moe`` and ``gpt-oss`` require ``output.weight`` (no tied embeddings).
* ``gemma3``: SWA layers follow ``sliding_window_pattern`` or, without it,
  period 6 (layers 0-4 of every 6 slide); ``output.weight`` is optional
  (published files tie it to ``token_embd``, which llama.cpp then loads twice).
* gguf-py cannot quantize k-quants, so Q4_K/Q6_K tensors in tiny files are
  random well-formed blocks with small scales.
"""

from __future__ import annotations

import importlib
import math
import os
import pkgutil
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as VT
from gguf import GGUFWriter, TokenType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize as _gguf_quantize

__all__ = [
    "ARCHS",
    "BASE_VOCAB",
    "GGUF_ARCH",
    "HAVE_MXFP4",
    "SPARSE_SPECS",
    "ModelSpec",
    "TensorSpec",
    "disk_usage",
    "model_spec",
    "sparse_spec",
    "tensor_data",
    "tiny_hparams",
    "write_sparse_model",
    "write_spec",
    "write_tiny_model",
]

#: Factory names of the tiny architectures (see :data:`GGUF_ARCH` for the
#: ``general.architecture`` each one writes).
ARCHS: tuple[str, ...] = (
    "llama",          # dense Llama
    "mixtral",        # llama arch with 8 experts (Mixtral layout: n_ff is the expert width)
    "qwen3moe",       # q/k norm, head_dim*n_head != n_embd
    "qwen2moe",       # shared expert with ffn_gate_inp_shexp, qkv biases
    "deepseek2",      # MLA (q/kv lora, split attn_k_b/attn_v_b), 1 leading dense block, shared expert, groups
    "gpt-oss",        # SWA (window 128, default period 2), attn sinks, biases everywhere, MXFP4 experts
    "llama4",         # MoE every 2nd layer with a shared expert, chunked attention (3 chunked : 1 full)
    "glm4moe",        # partial rope, 1 leading dense block, shared expert, + 1 NextN/MTP block
    "granitehybrid",  # Mamba2 + attention hybrid (head_count_kv 0 marks recurrent layers), MoE + shared expert
    "gemma3",         # SWA 5:1 (default period 6), q/k norm, post-attention and post-FFN norms, GELU FFN
    "qwen3",          # dense Qwen3: q/k norm, head_dim*n_head != n_embd
    "qwen2",          # dense Qwen2/2.5: qkv biases
    "granite",        # dense Granite 3.x: embedding, residual, attention and logit scales
    "granitemoe",     # Granite MoE: the same scales, experts with normalised top-k weights
    "olmoe",          # OLMoE: q/k norm over the whole projection, 2-D before the reshape to heads
    "mistral3",       # Ministral 3: llama layer + attention-temperature input scaling Q (YaRN original context)
    "seed_oss",       # Seed-OSS: qkv biases, the FFN normed by post_attention_norm
    "smollm3",        # SmolLM3: no rope on every 4th layer, tied embeddings
    "mamba2",         # pure Mamba2 (every layer recurrent, no attention, no FFN)
    "ernie4_5-moe",   # ERNIE 4.5 MoE: 1 leading dense block, experts with selection bias, ungated shared expert
    "hunyuan-moe",    # Hunyuan-A13B: q/k norms after rope, experts + shared MLP on every layer
    "glm4",           # GLM-4-0414: post norms, fused up projection (2 x n_ff) with a single-tensor SwiGLU
    "exaone4",        # EXAONE 4.0: no pre-norms, post norms, q/k norms; 64 layers: SWA 3:1, rope on SWA layers only
    "qwen35",         # Qwen3.5 dense: gated delta-net (linear attention) layers, full gated attention every 4th
    "qwen35moe",      # Qwen3.5 MoE: the same layers, routed experts + a sigmoid-gated shared expert
    "qwen3next",      # Qwen3-Next: as qwen35moe with fused beta/alpha (ssm_ba), NEOX rope, q/k heads repeated
    "phimoe",         # Phi-3.5-MoE: the phi3 graph (Q scaled before attention), biases on norms, qkv, output
    "dots1",          # dots.llm1: q/k norms, 1 leading dense block, sigmoid experts with selection bias + shared
    "bailingmoe2",    # Ling 2.0: fused qkv, partial rope, q/k norms, grouped sigmoid experts + shared, + 1 NextN
    "lfm2",           # LFM2: short-conv layers (head_count_kv 0) + attention with q/k norms, output norm in token_embd_norm
    "lfm2moe",        # LFM2-MoE: the same layers, dense leading blocks, sigmoid experts with selection bias
)

#: ``general.architecture`` per factory name.
GGUF_ARCH: dict[str, str] = {a: a for a in ARCHS}
GGUF_ARCH["mixtral"] = "llama"

ALIGNMENT = 32  # GGUF default data alignment (general.alignment not written)

F32, F16 = Q.F32, Q.F16


def _can_quantize(q: Q) -> bool:
    try:
        _gguf_quantize(np.zeros((1, 256), np.float32), q)
        return True
    except Exception:  # NotImplementedError, or an old gguf-py without the type
        return False


#: gguf-py can write MXFP4 blocks (gguf >= 0.18); without it gpt-oss experts fall back to Q8_0.
HAVE_MXFP4 = _can_quantize(Q.MXFP4)


# --------------------------------------------------------------------------- specs


@dataclass
class TensorSpec:
    """One tensor: name, shape in ggml order (ne0 first), type and value kind."""

    name: str
    shape: tuple[int, ...]
    qtype: Q
    kind: str = "weight"  # weight | norm | bias | zero | router | ssm_a | ones | ids (i32)

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        block, size = GGML_QUANT_SIZES[self.qtype]
        assert self.shape[0] % block == 0, (self.name, self.shape, self.qtype)
        return self.n_elements // block * size

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape))


@dataclass
class ModelSpec:
    """Everything a GGUF file will contain, before it is written."""

    arch: str                     # factory name ("mixtral", "gpt-oss", ...)
    gguf_arch: str                # general.architecture
    hparams: dict[str, Any]       # the hyperparameters it was built from
    kv: dict[str, tuple[Any, VT, VT | None]] = field(default_factory=dict)
    tensors: list[TensorSpec] = field(default_factory=list)

    # helpers used by the builders -------------------------------------------------
    def key(self, name: str) -> str:
        return name.replace("{arch}", self.gguf_arch)

    def set(self, name: str, value: Any, vtype: VT | None = None) -> None:
        """Set a metadata key (``{arch}`` is replaced). Type is inferred if not given."""
        name = self.key(name)
        sub = None
        if isinstance(value, (list, tuple)):
            value = list(value)
            sub = vtype or _infer_vtype(value[0])
            self.kv[name] = (value, VT.ARRAY, sub)
            return
        self.kv[name] = (value, vtype or _infer_vtype(value), None)

    def add(self, name: str, shape: Sequence[int], kind: str = "weight") -> None:
        self.tensors.append(TensorSpec(name, tuple(int(d) for d in shape), F16, kind))

    # inspection -----------------------------------------------------------------
    @property
    def n_vocab(self) -> int:
        return len(self.kv["tokenizer.ggml.tokens"][0])

    @property
    def n_layer(self) -> int:
        return int(self.kv[self.key("{arch}.block_count")][0])

    @property
    def data_nbytes(self) -> int:
        """Size of the tensor data region (each tensor padded to the alignment)."""
        return sum(_pad(t.nbytes) for t in self.tensors)

    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def qtype_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.qtype.name] = out.get(t.qtype.name, 0) + 1
        return out


def _infer_vtype(v: Any) -> VT:
    if isinstance(v, bool):
        return VT.BOOL
    if isinstance(v, (int, np.integer)):
        return VT.UINT32
    if isinstance(v, (float, np.floating)):
        return VT.FLOAT32
    if isinstance(v, str):
        return VT.STRING
    raise TypeError(f"cannot infer GGUF type of {v!r}")


def _pad(n: int, align: int = ALIGNMENT) -> int:
    return (n + align - 1) // align * align


# --------------------------------------------------------------------------- hparams

_COMMON_TINY: dict[str, Any] = dict(
    n_layer=4,
    n_embd=64,
    n_head=4,
    n_head_kv=2,
    head_dim=None,          # attention.key_length/value_length; None = n_embd / n_head (not written)
    rope_dim=None,          # rope.dimension_count; None = head_dim
    n_ff=128,
    n_ctx_train=4096,
    rms_eps=1e-5,
    rope_base=10000.0,
    rope_scaling=None,      # None or dict(type="yarn", factor=.., original_context_length=.., yarn_log_multiplier=..)
    n_vocab=None,           # None = the small byte vocabulary (+ vocab_extra)
    vocab_extra=0,
    tied_embeddings=False,
    quant="mixed",          # mixed | f16 | f32 | q4_k_m | gpt-oss
    file_type=None,         # general.file_type to write (None = not written)
    name=None,
)

_TINY: dict[str, dict[str, Any]] = {
    "llama": dict(n_ff=256),
    "mixtral": dict(n_ff=64, n_expert=8, n_expert_used=2),
    "qwen3moe": dict(head_dim=32, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, rms_eps=1e-6,
                     rope_base=1000000.0),
    "qwen2moe": dict(n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128, rms_eps=1e-6),
    "deepseek2": dict(n_layer=3, n_head_kv=1, n_ff=256, n_expert=8, n_expert_used=2, n_ff_exp=64,
                      n_expert_shared=1, n_layer_dense_lead=1, q_lora_rank=32, kv_lora_rank=64,
                      qk_rope_dim=16, qk_nope_dim=32, v_head_dim=32, n_expert_groups=4, n_group_used=2,
                      expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True,
                      exp_probs_b=True, rms_eps=1e-6, n_nextn=0),
    "gpt-oss": dict(head_dim=32, n_ff=64, n_expert=8, n_expert_used=2, n_ff_exp=64, sliding_window=128,
                    swa_pattern=None, rope_base=150000.0, quant="gpt-oss"),
    "llama4": dict(n_ff=128, n_expert=8, n_expert_used=1, n_ff_exp=64, moe_every=2, rope_base=500000.0),
    "glm4moe": dict(n_layer=3, n_nextn=1, head_dim=32, rope_dim=16, n_ff=128, n_expert=8, n_expert_used=2,
                    n_ff_exp=64, n_expert_shared=1, n_layer_dense_lead=1, expert_gating_func=2,
                    expert_weights_scale=2.5, expert_weights_norm=True, qk_norm=False),
    "granitehybrid": dict(attn_layers=(2,), n_ff=64, n_expert=8, n_expert_used=2, n_ff_shexp=128,
                          ssm_d_conv=4, ssm_d_state=16, ssm_n_group=1, ssm_n_head=4,
                          embedding_scale=12.0, residual_scale=0.22, logit_scale=8.0, attention_scale=0.0078125),
    "qwen3": dict(head_dim=32, n_ff=192, rms_eps=1e-6, rope_base=1000000.0),
    "qwen2": dict(n_ff=192, rms_eps=1e-6, rope_base=1000000.0),
    "granite": dict(n_ff=192, embedding_scale=12.0, residual_scale=0.22, logit_scale=16.0,
                    attention_scale=0.0078125),
    "granitemoe": dict(n_ff=64, n_expert=8, n_expert_used=2, embedding_scale=12.0, residual_scale=0.22,
                       logit_scale=6.0, attention_scale=0.015625),
    "olmoe": dict(n_head_kv=4, n_ff=64, n_expert=8, n_expert_used=2),
    "mistral3": dict(n_ff=192, attn_temperature_scale=0.1, rope_base=1000000.0,
                     rope_scaling=dict(type="yarn", factor=16.0, original_context_length=256)),
    "seed_oss": dict(n_ff=192, head_dim=32, rope_base=10000000.0),
    "smollm3": dict(n_ff=192, rope_base=5000000.0),
    "mamba2": dict(n_head=0, n_head_kv=0, n_ff=0, ssm_d_conv=4, ssm_d_inner=128, ssm_d_state=16, ssm_n_group=1,
                   ssm_n_head=4),
    "ernie4_5-moe": dict(n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128, n_layer_dense_lead=1,
                         moe_every=1, rope_base=500000.0),
    "hunyuan-moe": dict(head_dim=32, n_ff=64, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=64),
    "glm4": dict(head_dim=32, rope_dim=16, n_ff=128),
    "exaone4": dict(n_ff=192, sliding_window=None),
    "gemma3": dict(n_layer=6, head_dim=32, n_ff=128, sliding_window=128, swa_pattern=None, rms_eps=1e-6,
                   rope_base=1000000.0, final_logit_softcapping=None),
    # Qwen3.5: linear-attention heads (ssm_n_group key heads, ssm_n_head value heads, ssm_d_state wide each)
    "qwen35": dict(head_dim=32, rope_dim=16, rope_sections=(3, 3, 2, 0), n_ff=128, full_attention_interval=4,
                   recurrent_layers=None, ssm_d_conv=4, ssm_d_state=16, ssm_n_group=2, ssm_n_head=4, n_nextn=0,
                   rms_eps=1e-6, rope_base=10000000.0),
    "qwen35moe": dict(head_dim=32, rope_dim=16, rope_sections=(3, 3, 2, 0), n_ff=128, full_attention_interval=4,
                      recurrent_layers=None, ssm_d_conv=4, ssm_d_state=16, ssm_n_group=2, ssm_n_head=4, n_nextn=0,
                      n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=64, rms_eps=1e-6, rope_base=10000000.0),
    # ssm_in: the legacy single qkvz projection instead of attn_qkv + attn_gate
    "qwen3next": dict(head_dim=32, rope_dim=16, n_ff=128, full_attention_interval=4, recurrent_layers=None,
                      ssm_d_conv=4, ssm_d_state=16, ssm_n_group=2, ssm_n_head=4, ssm_in=False, n_expert=8,
                      n_expert_used=2, n_ff_exp=64, n_ff_shexp=64, rms_eps=1e-6, rope_base=10000000.0, n_nextn=0),
    # rope_factors: the LongRoPE long/short factor tensors (global, one copy per buffer type in llama.cpp; the
    # full-size spec has them, the tiny default keeps to per-layer and input/output blocks)
    "phimoe": dict(n_ff=64, n_expert=8, n_expert_used=2, rope_factors=False),
    "dots1": dict(head_dim=32, n_head_kv=4, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=1,
                  n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True,
                  exp_probs_b=True, rope_base=10000000.0),
    "bailingmoe2": dict(n_layer=3, n_nextn=1, rope_dim=8, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64,
                        n_expert_shared=1, n_layer_dense_lead=1, n_expert_groups=4, n_group_used=2,
                        expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True, exp_probs_b=True,
                        rope_base=600000.0, rms_eps=1e-6),
    # attn_layers: the attention layers (the others short-conv); l_cache: the conv kernel length
    "lfm2": dict(attn_layers=(2,), l_cache=3, n_ff=128, rope_base=1000000.0),
    "lfm2moe": dict(attn_layers=(2,), l_cache=3, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64,
                    n_layer_dense_lead=1, expert_gating_func=2, rope_base=1000000.0),
}


def tiny_hparams(arch: str) -> dict[str, Any]:
    """The default hyperparameters of a tiny ``arch`` model (a fresh dict)."""
    if arch not in _TINY:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}")
    hp = dict(_COMMON_TINY)
    hp.update(_TINY[arch])
    return hp


#: Full-size models for :func:`write_sparse_model`: name -> (arch, hparams overriding the tiny defaults).
SPARSE_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3-30b-a3b": ("qwen3moe", dict(
        name="Qwen3-30B-A3B", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=6144,
        n_expert=128, n_expert_used=8, n_ff_exp=768, n_ctx_train=40960, rope_base=1000000.0, rms_eps=1e-6,
        n_vocab=151936, quant="q4_k_m", file_type=15)),
    "qwen3-235b-a22b": ("qwen3moe", dict(
        name="Qwen3-235B-A22B", n_layer=94, n_embd=4096, n_head=64, n_head_kv=4, head_dim=128, n_ff=12288,
        n_expert=128, n_expert_used=8, n_ff_exp=1536, n_ctx_train=40960, rope_base=1000000.0, rms_eps=1e-6,
        n_vocab=151936, quant="q4_k_m", file_type=15)),
    "deepseek-v3": ("deepseek2", dict(
        name="DeepSeek-V3", n_layer=61, n_embd=7168, n_head=128, n_head_kv=1, n_ff=18432,
        n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=3,
        q_lora_rank=1536, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128,
        n_expert_groups=8, n_group_used=4, expert_gating_func=2, expert_weights_scale=2.5,
        expert_weights_norm=True, exp_probs_b=True, n_ctx_train=163840, rope_base=10000.0, rms_eps=1e-6,
        rope_scaling=dict(type="yarn", factor=40.0, original_context_length=4096, yarn_log_multiplier=0.1),
        n_vocab=129280, quant="q4_k_m", file_type=15)),
    # DeepSeek-V3's first dense layer, one MoE layer and its NextN/MTP block at full size (the MTP context's
    # buffers depend on the NextN layer only), small enough for llama-server to load
    "deepseek-v3-slice": ("deepseek2", dict(
        name="DeepSeek-V3-slice", n_layer=2, n_nextn=1, n_embd=7168, n_head=128, n_head_kv=1, n_ff=18432,
        n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=1,
        q_lora_rank=1536, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128,
        n_expert_groups=8, n_group_used=4, expert_gating_func=2, expert_weights_scale=2.5,
        expert_weights_norm=True, exp_probs_b=True, n_ctx_train=163840, rope_base=10000.0, rms_eps=1e-6,
        rope_scaling=dict(type="yarn", factor=40.0, original_context_length=4096, yarn_log_multiplier=0.1),
        n_vocab=129280, quant="q4_k_m", file_type=15)),
    "gpt-oss-120b": ("gpt-oss", dict(
        name="gpt-oss-120b", n_layer=36, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_ff=2880,
        n_expert=128, n_expert_used=4, n_ff_exp=2880, sliding_window=128, n_ctx_train=131072,
        rope_base=150000.0, rope_scaling=dict(type="yarn", factor=32.0, original_context_length=4096),
        n_vocab=201088, quant="gpt-oss", file_type=38)),
    # one full-size model per tiny architecture, so every compared buffer is tens of MiB or more
    "llama-3.1-8b": ("llama", dict(
        name="Llama-3.1-8B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336, n_ctx_train=131072,
        rope_base=500000.0, n_vocab=128256, quant="q4_k_m", file_type=15)),
    "mixtral-8x7b": ("mixtral", dict(
        name="Mixtral-8x7B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336, n_expert=8,
        n_expert_used=2, n_ctx_train=32768, rope_base=1000000.0, n_vocab=32000, quant="q4_k_m", file_type=15)),
    "qwen2-57b-a14b": ("qwen2moe", dict(
        name="Qwen2-57B-A14B", n_layer=28, n_embd=3584, n_head=28, n_head_kv=4, n_ff=18944, n_expert=64,
        n_expert_used=8, n_ff_exp=2560, n_ff_shexp=20480, n_ctx_train=32768, rope_base=1000000.0, rms_eps=1e-6,
        n_vocab=151936, quant="q4_k_m", file_type=15)),
    "deepseek-v2-lite": ("deepseek2", dict(
        name="DeepSeek-V2-Lite", n_layer=27, n_embd=2048, n_head=16, n_head_kv=1, n_ff=10944, n_expert=64,
        n_expert_used=6, n_ff_exp=1408, n_expert_shared=2, n_layer_dense_lead=1, q_lora_rank=0, kv_lora_rank=512,
        qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128, n_expert_groups=0, n_group_used=0, expert_gating_func=1,
        expert_weights_scale=1.0, expert_weights_norm=False, exp_probs_b=False, n_ctx_train=163840,
        rope_base=10000.0, rms_eps=1e-6, n_vocab=102400, quant="q4_k_m", file_type=15)),
    "gpt-oss-20b": ("gpt-oss", dict(
        name="gpt-oss-20b", n_layer=24, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_ff=2880,
        n_expert=32, n_expert_used=4, n_ff_exp=2880, sliding_window=128, n_ctx_train=131072,
        rope_base=150000.0, rope_scaling=dict(type="yarn", factor=32.0, original_context_length=4096),
        n_vocab=201088, quant="gpt-oss", file_type=38)),
    "llama-4-scout": ("llama4", dict(
        name="Llama-4-Scout-17B-16E", n_layer=48, n_embd=5120, n_head=40, n_head_kv=8, head_dim=128, n_ff=16384,
        n_expert=16, n_expert_used=1, n_ff_exp=8192, moe_every=1, n_ctx_train=10485760, rope_base=500000.0,
        n_vocab=202048, quant="q4_k_m", file_type=15)),
    "glm-4.5-air": ("glm4moe", dict(
        name="GLM-4.5-Air", n_layer=46, n_nextn=1, n_embd=4096, n_head=96, n_head_kv=8, head_dim=128,
        rope_dim=64, n_ff=10944, n_expert=128, n_expert_used=8, n_ff_exp=1408, n_expert_shared=1,
        n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=1.0, expert_weights_norm=True,
        qk_norm=False, n_ctx_train=131072, rope_base=1000000.0, n_vocab=151552, quant="q4_k_m", file_type=15)),
    "granite-4.0-h-small": ("granitehybrid", dict(
        name="granite-4.0-h-small", n_layer=40, n_embd=4096, n_head=32, n_head_kv=8, attn_layers=(5, 15, 25, 35),
        n_ff=768, n_expert=72, n_expert_used=10, n_ff_shexp=8192, ssm_d_conv=4, ssm_d_state=128, ssm_n_group=1,
        ssm_n_head=128, n_ctx_train=1048576, rope_base=10000.0, n_vocab=100352, quant="q4_k_m", file_type=15)),
    "qwen3-8b": ("qwen3", dict(
        name="Qwen3-8B", n_layer=36, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=12288,
        n_ctx_train=40960, rope_base=1000000.0, rms_eps=1e-6, n_vocab=151936, quant="q4_k_m", file_type=15)),
    "qwen3-4b": ("qwen3", dict(
        name="Qwen3-4B", n_layer=36, n_embd=2560, n_head=32, n_head_kv=8, head_dim=128, n_ff=9728,
        n_ctx_train=40960, rope_base=1000000.0, rms_eps=1e-6, n_vocab=151936, tied_embeddings=True,
        quant="q4_k_m", file_type=15)),
    # Qwen3-0.6B: the usual draft for the Qwen3 family (config.json: 28 layers, 1024 wide, 16/8 heads of 128,
    # 3072 FFN, tied embeddings, 40960 trained context)
    "qwen3-0.6b": ("qwen3", dict(
        name="Qwen3-0.6B", n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072,
        n_ctx_train=40960, rope_base=1000000.0, rms_eps=1e-6, n_vocab=151936, tied_embeddings=True,
        quant="q4_k_m", file_type=15)),
    "qwen2.5-7b": ("qwen2", dict(
        name="Qwen2.5-7B", n_layer=28, n_embd=3584, n_head=28, n_head_kv=4, n_ff=18944, n_ctx_train=32768,
        rope_base=1000000.0, rms_eps=1e-6, n_vocab=152064, quant="q4_k_m", file_type=15)),
    "granite-3.3-8b": ("granite", dict(
        name="granite-3.3-8b-instruct", n_layer=40, n_embd=4096, n_head=32, n_head_kv=8, n_ff=12800,
        n_ctx_train=131072, rope_base=10000000.0, n_vocab=49159, tied_embeddings=True, logit_scale=16.0,
        quant="q4_k_m", file_type=15)),
    "granite-3.1-3b-a800m": ("granitemoe", dict(
        name="granite-3.1-3b-a800m-instruct", n_layer=32, n_embd=1536, n_head=24, n_head_kv=8, n_ff=512,
        n_expert=40, n_expert_used=8, n_ctx_train=131072, rope_base=10000000.0, n_vocab=49155,
        tied_embeddings=True, quant="q4_k_m", file_type=15)),
    "olmoe-1b-7b": ("olmoe", dict(
        name="OLMoE-1B-7B-0924", n_layer=16, n_embd=2048, n_head=16, n_head_kv=16, n_ff=1024, n_expert=64,
        n_expert_used=8, n_ctx_train=4096, rope_base=10000.0, n_vocab=50304, quant="q4_k_m", file_type=15)),
    "ministral-3-14b": ("mistral3", dict(
        name="Ministral-3-14B-Instruct-2512", n_layer=40, n_embd=5120, n_head=32, n_head_kv=8, head_dim=128,
        n_ff=16384, n_ctx_train=262144, rope_base=1000000000.0, attn_temperature_scale=0.1,
        rope_scaling=dict(type="yarn", factor=16.0, original_context_length=16384), n_vocab=131072,
        quant="q4_k_m", file_type=15)),
    "seed-oss-36b": ("seed_oss", dict(
        name="Seed-OSS-36B-Instruct", n_layer=64, n_embd=5120, n_head=80, n_head_kv=8, head_dim=128, n_ff=27648,
        n_ctx_train=524288, rope_base=10000000.0, n_vocab=155136, quant="q4_k_m", file_type=15)),
    "smollm3-3b": ("smollm3", dict(
        name="SmolLM3-3B", n_layer=36, n_embd=2048, n_head=16, n_head_kv=4, n_ff=11008, n_ctx_train=65536,
        rope_base=5000000.0, n_vocab=128256, tied_embeddings=True, quant="q4_k_m", file_type=15)),
    "mamba2-2.7b": ("mamba2", dict(
        name="mamba2-2.7b", n_layer=64, n_embd=2560, ssm_d_inner=5120, ssm_d_state=128, ssm_n_group=1,
        ssm_n_head=80, ssm_d_conv=4, n_ctx_train=1048576, n_vocab=50288, tied_embeddings=True, rms_eps=1e-5,
        quant="q4_k_m", file_type=15)),
    "mamba-codestral-7b": ("mamba2", dict(
        name="Mamba-Codestral-7B-v0.1", n_layer=64, n_embd=4096, ssm_d_inner=8192, ssm_d_state=128, ssm_n_group=8,
        ssm_n_head=128, ssm_d_conv=4, n_ctx_train=1048576, n_vocab=32768, rms_eps=1e-5, quant="q4_k_m",
        file_type=15)),
    "ernie-4.5-21b-a3b": ("ernie4_5-moe", dict(
        name="ERNIE-4.5-21B-A3B", n_layer=28, n_embd=2560, n_head=20, n_head_kv=4, head_dim=128, n_ff=12288,
        n_expert=64, n_expert_used=6, n_ff_exp=1536, n_ff_shexp=3072, n_layer_dense_lead=1, moe_every=1,
        n_ctx_train=131072, rope_base=500000.0, n_vocab=103424, tied_embeddings=True, quant="q4_k_m",
        file_type=15)),
    "hunyuan-a13b": ("hunyuan-moe", dict(
        name="Hunyuan-A13B-Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=3072,
        n_expert=64, n_expert_used=8, n_ff_exp=3072, n_ff_shexp=3072, n_ctx_train=262144, rope_base=11158840.0,
        n_vocab=128167, tied_embeddings=True, quant="q4_k_m", file_type=15)),
    "glm-4-32b-0414": ("glm4", dict(
        name="GLM-4-32B-0414", n_layer=61, n_embd=6144, n_head=48, n_head_kv=2, head_dim=128, rope_dim=64,
        n_ff=23040, n_ctx_train=32768, rope_base=10000.0, n_vocab=151552, quant="q4_k_m", file_type=15)),
    "exaone-4.0-32b": ("exaone4", dict(
        name="EXAONE-4.0-32B", n_layer=64, n_embd=5120, n_head=40, n_head_kv=8, head_dim=128, n_ff=27392,
        sliding_window=4096, n_ctx_train=131072, rope_base=1000000.0, n_vocab=102400, quant="q4_k_m",
        file_type=15)),
    "exaone-4.0-1.2b": ("exaone4", dict(
        name="EXAONE-4.0-1.2B", n_layer=30, n_embd=2048, n_head=32, n_head_kv=8, head_dim=64, n_ff=4096,
        n_ctx_train=65536, rope_base=1000000.0, n_vocab=102400, tied_embeddings=True, quant="q4_k_m",
        file_type=15)),
    "gemma-3-27b": ("gemma3", dict(
        name="gemma-3-27b-it", n_layer=62, n_embd=5376, n_head=32, n_head_kv=16, head_dim=128, n_ff=21504,
        sliding_window=1024, n_ctx_train=131072, rope_base=1000000.0, n_vocab=262208, tied_embeddings=True,
        quant="q4_k_m", file_type=15)),
    "gemma-3-4b": ("gemma3", dict(
        name="gemma-3-4b-it", n_layer=34, n_embd=2560, n_head=8, n_head_kv=4, head_dim=256, n_ff=10240,
        sliding_window=1024, n_ctx_train=131072, rope_base=1000000.0, n_vocab=262208, tied_embeddings=True,
        quant="q4_k_m", file_type=15)),
    # Qwen3.5 (config.json): 27B dense, 64 layers of 3 gated delta-net : 1 full attention (interval 4), 24 query
    # heads / 4 KV heads of 256 (rope on 64 dims, mrope sections 11/11/10), linear attention 16 key heads and 48
    # value heads of 128, conv kernel 4, FFN 17408, vocabulary 248320, 262144 context, + 1 MTP block
    "qwen3.5-27b": ("qwen35", dict(
        name="Qwen3.5-27B", n_layer=64, n_nextn=1, n_embd=5120, n_head=24, n_head_kv=4, head_dim=256, rope_dim=64,
        rope_sections=(11, 11, 10, 0), n_ff=17408, full_attention_interval=4, ssm_d_conv=4, ssm_d_state=128,
        ssm_n_group=16, ssm_n_head=48, n_ctx_train=262144, rope_base=10000000.0, rms_eps=1e-6, n_vocab=248320,
        quant="q4_k_m", file_type=15)),
    # 35B-A3B: 40 layers (interval 4), 16 query / 2 KV heads of 256, linear attention 16 key / 32 value heads,
    # 256 experts of 512 (8 used) + a shared expert of 512
    # Qwen3-Next-80B-A3B: 48 layers (interval 4), 16 query / 2 KV heads of 256 (rope on 64 dims), linear attention
    # 16 key / 32 value heads of 128, 512 experts of 512 (10 used) + a shared expert of 512, vocabulary 151936
    "qwen3-next-80b-a3b": ("qwen3next", dict(
        name="Qwen3-Next-80B-A3B-Instruct", n_layer=48, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
        rope_dim=64, n_ff=5120, full_attention_interval=4, ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16,
        ssm_n_head=32, n_expert=512, n_expert_used=10, n_ff_exp=512, n_ff_shexp=512, n_ctx_train=262144,
        rope_base=10000000.0, rms_eps=1e-6, n_vocab=151936, quant="q4_k_m", file_type=15)),
    # the same in the layout of early conversions: one ssm_in (qkvz) projection instead of attn_qkv + attn_gate
    # the same with its MTP block (num_nextn_predict_layers 1: one full-attention MoE block after the trunk)
    "qwen3-next-80b-a3b-mtp": ("qwen3next", dict(
        name="Qwen3-Next-80B-A3B-Instruct", n_layer=48, n_nextn=1, n_embd=2048, n_head=16, n_head_kv=2,
        head_dim=256, rope_dim=64, n_ff=5120, full_attention_interval=4, ssm_d_conv=4, ssm_d_state=128,
        ssm_n_group=16, ssm_n_head=32, n_expert=512, n_expert_used=10, n_ff_exp=512, n_ff_shexp=512,
        n_ctx_train=262144, rope_base=10000000.0, rms_eps=1e-6, n_vocab=151936, quant="q4_k_m", file_type=15)),
    "qwen3-next-80b-a3b-ssm-in": ("qwen3next", dict(
        name="Qwen3-Next-80B-A3B-Instruct", n_layer=48, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
        rope_dim=64, n_ff=5120, full_attention_interval=4, ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16,
        ssm_n_head=32, ssm_in=True, n_expert=512, n_expert_used=10, n_ff_exp=512, n_ff_shexp=512,
        n_ctx_train=262144, rope_base=10000000.0, rms_eps=1e-6, n_vocab=151936, quant="q4_k_m", file_type=15)),
    "qwen3.5-35b-a3b": ("qwen35moe", dict(
        name="Qwen3.5-35B-A3B", n_layer=40, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256, rope_dim=64,
        rope_sections=(11, 11, 10, 0), n_ff=512, full_attention_interval=4, ssm_d_conv=4, ssm_d_state=128,
        ssm_n_group=16, ssm_n_head=32, n_expert=256, n_expert_used=8, n_ff_exp=512, n_ff_shexp=512,
        n_ctx_train=262144, rope_base=10000000.0, rms_eps=1e-6, n_vocab=248320, quant="q4_k_m", file_type=15)),
    # the same with its MTP block, as the published GGUFs keep it (a MoE NextN layer after the 40)
    "qwen3.5-35b-a3b-mtp": ("qwen35moe", dict(
        name="Qwen3.5-35B-A3B", n_layer=40, n_nextn=1, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
        rope_dim=64, rope_sections=(11, 11, 10, 0), n_ff=512, full_attention_interval=4, ssm_d_conv=4,
        ssm_d_state=128, ssm_n_group=16, ssm_n_head=32, n_expert=256, n_expert_used=8, n_ff_exp=512,
        n_ff_shexp=512, n_ctx_train=262144, rope_base=10000000.0, rms_eps=1e-6, n_vocab=248320, quant="q4_k_m",
        file_type=15)),
    # Phi-3.5-MoE-instruct (config.json): 32 layers, 32 query / 8 KV heads of 128, 16 experts of 6400 (2 used),
    # LongRoPE factors, vocabulary 32064, 131072 context
    "phi-3.5-moe": ("phimoe", dict(
        name="Phi 3.5 MoE Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=6400, n_expert=16,
        n_expert_used=2, n_ctx_train=131072, rope_base=10000.0, n_vocab=32064, rope_factors=True, quant="q4_k_m",
        file_type=15)),
    # dots.llm1.inst: 62 layers (the first dense, FFN 10944), 32 heads of 128 (MHA), 128 experts of 1408 (6 used,
    # sigmoid with selection bias, normalised, x2.5) + 2 shared, vocabulary 152064, 32768 context
    "dots.llm1": ("dots1", dict(
        name="dots.llm1.inst", n_layer=62, n_embd=4096, n_head=32, n_head_kv=32, head_dim=128, n_ff=10944,
        n_expert=128, n_expert_used=6, n_ff_exp=1408, n_expert_shared=2, n_ctx_train=32768, rope_base=10000000.0,
        n_vocab=152064, quant="q4_k_m", file_type=15)),
    # Ling-mini-2.0: 20 layers (the first dense, FFN 5120) + 1 NextN block, 16 query / 4 KV heads of 128 (rope on
    # half), 256 experts of 512 in 8 groups (4 used, 8 experts used, sigmoid + bias, x2.5) + 1 shared, vocab 157184
    "ling-mini-2.0": ("bailingmoe2", dict(
        name="Ling-mini-2.0", n_layer=20, n_nextn=1, n_embd=2048, n_head=16, n_head_kv=4, rope_dim=64, n_ff=5120,
        n_expert=256, n_expert_used=8, n_ff_exp=512, n_expert_shared=1, n_expert_groups=8, n_group_used=4,
        n_ctx_train=32768, rope_base=600000.0, n_vocab=157184, quant="q4_k_m", file_type=15)),
    # LFM2-1.2B: 16 layers (attention at 2, 5, 8, 10, 12, 14, short conv elsewhere, kernel 3), 32 query / 8 KV
    # heads of 64, FFN 8192, vocabulary 65536, tied embeddings, 128000 context
    "lfm2-1.2b": ("lfm2", dict(
        name="LFM2-1.2B", n_layer=16, attn_layers=(2, 5, 8, 10, 12, 14), n_embd=2048, n_head=32, n_head_kv=8,
        n_ff=8192, n_ctx_train=128000, n_vocab=65536, tied_embeddings=True, quant="q4_k_m", file_type=15)),
    # LFM2-8B-A1B: 24 layers (attention at 2, 6, 10, 14, 18, 21), 2 dense leading blocks (FFN 7168), 32 experts
    # of 1792 (4 used, sigmoid + selection bias, normalised)
    "lfm2-8b-a1b": ("lfm2moe", dict(
        name="LFM2-8B-A1B", n_layer=24, attn_layers=(2, 6, 10, 14, 18, 21), n_embd=2048, n_head=32, n_head_kv=8,
        n_ff=7168, n_expert=32, n_expert_used=4, n_ff_exp=1792, n_layer_dense_lead=2, n_ctx_train=128000,
        n_vocab=65536, tied_embeddings=True, quant="q4_k_m", file_type=15)),
    # Ling-flash-2.0: 32 layers + 1 NextN, 32 query / 4 KV heads of 128, 256 experts of 1024 + 1 shared
    "ling-flash-2.0": ("bailingmoe2", dict(
        name="Ling-flash-2.0", n_layer=32, n_nextn=1, n_embd=4096, n_head=32, n_head_kv=4, rope_dim=64, n_ff=9216,
        n_expert=256, n_expert_used=8, n_ff_exp=1024, n_expert_shared=1, n_expert_groups=8, n_group_used=4,
        n_ctx_train=32768, rope_base=600000.0, n_vocab=157184, quant="q4_k_m", file_type=15)),
}


# --------------------------------------------------------------------------- vocabulary

_FILLERS = (
    "▁", "▁the", "▁a", "▁to", "▁of", "▁and", "▁in", "▁is", "▁it", "▁that", "▁for", "▁on", "▁with",
    "▁as", "▁be", "▁at", "▁by", "▁this", "▁from", "▁or", "▁an", "▁not", "▁are", "▁was", "▁we",
    "▁you", "▁can", "▁all", "▁one", "▁has", "▁hello", "▁world", "▁test", "▁model", "▁layer",
    "e", "t", "a", "o", "i", "n", "s", "r", "h", "l", "d", "c", "u", "m", "f", "p", "g", "w", "y", "b",
    "er", "in", "on", "an", "re", "ed",
)
BASE_VOCAB = 3 + 256 + len(_FILLERS)  # 320


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + list(_FILLERS)
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    types += [TokenType.NORMAL] * len(_FILLERS)
    scores = [0.0] * 259 + [-float(i) for i in range(len(_FILLERS))]
    if n_vocab < len(tokens):
        raise ValueError(f"n_vocab must be at least {len(tokens)}")
    extra = n_vocab - len(tokens)
    tokens += [f"tok_{i}" for i in range(len(tokens), n_vocab)]
    types += [TokenType.NORMAL] * extra
    scores += [-1000.0] * extra
    return tokens, scores, [int(t) for t in types]


# --------------------------------------------------------------------------- quant policies


def _use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's llama-quant.cpp rule for Q4_K_M's Q6_K layers."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _fit_type(t: TensorSpec, q: Q) -> Q:
    """Fall back like llama-quant does when ne0 is not a multiple of the block size."""
    while GGML_QUANT_SIZES[q][0] > 1 and t.shape[0] % GGML_QUANT_SIZES[q][0] != 0:
        q = {Q.Q4_K: Q.Q5_0, Q.Q6_K: Q.Q8_0, Q.Q5_K: Q.Q5_1, Q.Q5_0: Q.Q8_0, Q.Q5_1: Q.Q8_0}.get(q, F16)
    return q


_FLOAT_KINDS = ("norm", "bias", "zero", "router", "ssm_a", "ones")
_EXPERT_SUFFIXES = ("_exps.weight",)


def _layer_of(name: str) -> int | None:
    if name.startswith("blk."):
        return int(name.split(".")[1])
    return None


def _policy_mixed(t: TensorSpec, hp: dict[str, Any]) -> Q:
    """Tiny models: a non-trivial mix that gguf-py can write."""
    if t.kind in _FLOAT_KINDS or len(t.shape) == 1 or "ssm_conv1d" in t.name:
        return F32
    il = _layer_of(t.name) or 0
    n = t.name
    if n == "token_embd.weight":
        q = Q.Q8_0
    elif n == "output.weight":
        q = F16
    elif ".attn_v." in n or ".attn_kv_a_mqa." in n or ".attn_v_b." in n:
        q = Q.Q8_0
    elif ".attn_output." in n or ".attn_q_b." in n:
        q = Q.Q4_0
    elif n.endswith("_exps.weight"):
        q = Q.Q8_0 if il % 2 == 0 else Q.Q4_0
    elif ".ffn_down." in n:
        q = Q.Q6_K if il % 2 == 0 else Q.Q4_K
    elif ".ffn_gate." in n or ".ffn_up." in n:
        q = Q.Q4_0
    elif ".ssm_in." in n or ".ssm_out." in n:
        q = Q.Q8_0
    else:
        q = F16
    return _fit_type(t, q)


def _policy_q4_k_m(t: TensorSpec, hp: dict[str, Any]) -> Q:
    """A Q4_K_M-like mix (see llama-quant.cpp): Q4_K, Q6_K on 'more bits' layers, Q6_K output."""
    if t.kind in _FLOAT_KINDS or len(t.shape) == 1:
        return F32
    n = t.name
    il = _layer_of(n)
    nl = int(hp["n_layer"])
    if n == "output.weight":
        q = Q.Q6_K
    elif n == "token_embd.weight":
        q = Q.Q4_K
    elif ".attn_v." in n or ".attn_v_b." in n or ".ffn_down" in n:
        q = Q.Q6_K if il is not None and _use_more_bits(il, nl) else Q.Q4_K
    else:
        q = Q.Q4_K
    return _fit_type(t, q)


def _policy_gpt_oss(t: TensorSpec, hp: dict[str, Any]) -> Q:
    """gpt-oss as published: MXFP4 experts, Q8_0 other matrices, f32 the rest."""
    if t.kind in _FLOAT_KINDS or len(t.shape) == 1:
        return F32
    if t.name.endswith("_exps.weight"):
        return _fit_type(t, Q.MXFP4 if HAVE_MXFP4 else Q.Q8_0)
    if t.name.endswith("_exps.bias"):
        return F32
    return _fit_type(t, Q.Q8_0)


_POLICIES: dict[str, Callable[[TensorSpec, dict[str, Any]], Q]] = {
    "mixed": _policy_mixed,
    "q4_k_m": _policy_q4_k_m,
    "gpt-oss": _policy_gpt_oss,
    "f16": lambda t, hp: F32 if (t.kind in _FLOAT_KINDS or len(t.shape) == 1 or "ssm_conv1d" in t.name) else F16,
    "f32": lambda t, hp: F32,
}


# --------------------------------------------------------------------------- builders


def _per_layer(v: Any, n: int) -> list[int]:
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"per-layer value has {len(v)} entries, expected {n}")
        return [int(x) for x in v]
    return [int(v)] * n


def _common_kv(s: ModelSpec, hp: dict[str, Any], n_layer_all: int) -> None:
    s.set("general.name", hp.get("name") or f"layerdeck-tiny-{s.arch}")
    s.set("{arch}.context_length", int(hp["n_ctx_train"]))
    s.set("{arch}.embedding_length", int(hp["n_embd"]))
    s.set("{arch}.block_count", int(n_layer_all))
    if hp.get("n_ff") is not None:
        s.set("{arch}.feed_forward_length", _scalar_or_list(hp["n_ff"]))
    s.set("{arch}.attention.head_count", _scalar_or_list(hp["n_head"]))
    s.set("{arch}.attention.head_count_kv", _scalar_or_list(hp["n_head_kv"]))
    s.set("{arch}.attention.layer_norm_rms_epsilon", float(hp["rms_eps"]))
    s.set("{arch}.rope.freq_base", float(hp["rope_base"]))
    if hp.get("head_dim"):
        s.set("{arch}.attention.key_length", int(hp["head_dim"]))
        s.set("{arch}.attention.value_length", int(hp["head_dim"]))
    if hp.get("rope_dim"):
        s.set("{arch}.rope.dimension_count", int(hp["rope_dim"]))
    rs = hp.get("rope_scaling")
    if rs:
        s.set("{arch}.rope.scaling.type", rs["type"])
        s.set("{arch}.rope.scaling.factor", float(rs["factor"]))
        if "original_context_length" in rs:
            s.set("{arch}.rope.scaling.original_context_length", int(rs["original_context_length"]))
        if "yarn_log_multiplier" in rs:
            s.set("{arch}.rope.scaling.yarn_log_multiplier", float(rs["yarn_log_multiplier"]))
    if hp.get("n_expert"):
        s.set("{arch}.expert_count", int(hp["n_expert"]))
        s.set("{arch}.expert_used_count", int(hp["n_expert_used"]))
    if hp.get("n_ff_exp"):
        s.set("{arch}.expert_feed_forward_length", int(hp["n_ff_exp"]))
    if hp.get("file_type") is not None:
        s.set("general.file_type", int(hp["file_type"]))
        s.set("general.quantization_version", 2)

    tokens, scores, types = _vocab(_n_vocab(hp))
    s.set("tokenizer.ggml.model", "llama")
    s.kv["tokenizer.ggml.tokens"] = (tokens, VT.ARRAY, VT.STRING)
    s.kv["tokenizer.ggml.scores"] = (scores, VT.ARRAY, VT.FLOAT32)
    s.kv["tokenizer.ggml.token_type"] = (types, VT.ARRAY, VT.INT32)
    s.set("tokenizer.ggml.bos_token_id", 1)
    s.set("tokenizer.ggml.eos_token_id", 2)
    s.set("tokenizer.ggml.unknown_token_id", 0)
    s.set("tokenizer.ggml.add_bos_token", True)
    s.set("tokenizer.ggml.add_eos_token", False)


def _scalar_or_list(v: Any) -> Any:
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else int(v)


def _n_vocab(hp: dict[str, Any]) -> int:
    return int(hp["n_vocab"] or BASE_VOCAB) + int(hp.get("vocab_extra") or 0)


def _embeddings(s: ModelSpec, hp: dict[str, Any], output_required: bool = False) -> None:
    n_embd, n_vocab = hp["n_embd"], _n_vocab(hp)
    s.add("token_embd.weight", (n_embd, n_vocab))
    s.add("output_norm.weight", (n_embd,), "norm")
    if hp.get("tied_embeddings"):
        if output_required:
            raise ValueError(f"{s.arch}: llama.cpp requires output.weight for this architecture "
                             "(tied_embeddings is not supported)")
    else:
        s.add("output.weight", (n_embd, n_vocab))


def _attn_qkvo(s: ModelSpec, i: int, n_embd: int, n_q: int, n_k: int, n_v: int, bias: bool = False,
               out_bias: bool = False) -> None:
    p = f"blk.{i}."
    s.add(p + "attn_q.weight", (n_embd, n_q))
    s.add(p + "attn_k.weight", (n_embd, n_k))
    s.add(p + "attn_v.weight", (n_embd, n_v))
    if bias:
        s.add(p + "attn_q.bias", (n_q,), "bias")
        s.add(p + "attn_k.bias", (n_k,), "bias")
        s.add(p + "attn_v.bias", (n_v,), "bias")
    s.add(p + "attn_output.weight", (n_q, n_embd))
    if out_bias:
        s.add(p + "attn_output.bias", (n_embd,), "bias")


def _dense_ffn(s: ModelSpec, i: int, n_embd: int, n_ff: int, prefix: str = "ffn") -> None:
    p = f"blk.{i}."
    s.add(p + f"{prefix}_gate.weight", (n_embd, n_ff))
    s.add(p + f"{prefix}_down.weight", (n_ff, n_embd))
    s.add(p + f"{prefix}_up.weight", (n_embd, n_ff))


def _experts(s: ModelSpec, i: int, n_embd: int, n_ff_exp: int, n_expert: int, bias: bool = False) -> None:
    p = f"blk.{i}."
    s.add(p + "ffn_gate_inp.weight", (n_embd, n_expert), "router")
    if bias:
        s.add(p + "ffn_gate_inp.bias", (n_expert,), "bias")
    s.add(p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert))
    s.add(p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert))
    s.add(p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert))
    if bias:
        s.add(p + "ffn_gate_exps.bias", (n_ff_exp, n_expert), "bias")
        s.add(p + "ffn_down_exps.bias", (n_embd, n_expert), "bias")
        s.add(p + "ffn_up_exps.bias", (n_ff_exp, n_expert), "bias")


def _shared_expert(s: ModelSpec, i: int, n_embd: int, n_ff_shexp: int) -> None:
    p = f"blk.{i}."
    s.add(p + "ffn_gate_shexp.weight", (n_embd, n_ff_shexp))
    s.add(p + "ffn_down_shexp.weight", (n_ff_shexp, n_embd))
    s.add(p + "ffn_up_shexp.weight", (n_embd, n_ff_shexp))


def _build_llama(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/llama.cpp (dense, or Mixtral-style experts when n_expert > 0)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    if hp.get("rope_dim") and hp["rope_dim"] != hd:
        raise ValueError("llama requires rope.dimension_count == head dim")
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.vocab_size", _n_vocab(hp))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if hp.get("n_expert"):
            _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_qwen3moe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/qwen3moe.cpp."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])


def _build_qwen3(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/qwen3.cpp (dense, q/k norm)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_qwen2(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/qwen2.cpp (dense, qkv biases)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i], bias=True)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_qwen2moe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/qwen2moe.cpp (qkv biases, gated shared expert)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i], bias=True)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
        s.add(p + "ffn_gate_inp_shexp.weight", (n_embd,), "router")
        _shared_expert(s, i, n_embd, hp["n_ff_shexp"])


def _build_deepseek2(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/deepseek2.cpp, MLA in the split attn_k_b/attn_v_b form (conversion/deepseek.py). ``n_nextn``
    NextN/MTP blocks (DeepSeek-V3/R1, Kimi K2) are whole MoE layers after the trunk, counted in block_count, plus
    their nextn.* tensors at the end of the file."""
    n_nextn = int(hp.get("n_nextn") or 0)
    nl, n_embd, n_head = hp["n_layer"] + n_nextn, hp["n_embd"], int(hp["n_head"])
    q_lora, kv_lora = int(hp["q_lora_rank"]), int(hp["kv_lora_rank"])
    rope, nope, v_dim = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    k_mla = nope + rope
    _common_kv(s, hp, nl)
    s.set("{arch}.vocab_size", _n_vocab(hp))
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    s.set("{arch}.attention.key_length", kv_lora + rope)
    s.set("{arch}.attention.value_length", kv_lora)
    s.set("{arch}.attention.key_length_mla", k_mla)
    s.set("{arch}.attention.value_length_mla", v_dim)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    if hp.get("n_expert_groups"):
        s.set("{arch}.expert_group_count", int(hp["n_expert_groups"]))
        s.set("{arch}.expert_group_used_count", int(hp["n_group_used"]))
    _embeddings(s, hp)
    n_ff_shexp = hp["n_ff_exp"] * hp["n_expert_shared"]
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if q_lora > 0:
            s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
        s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
        if q_lora > 0:
            s.add(p + "attn_q_a.weight", (n_embd, q_lora))
            s.add(p + "attn_q_b.weight", (q_lora, n_head * k_mla))
        else:
            s.add(p + "attn_q.weight", (n_embd, n_head * k_mla))
        s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
        s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
        s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
        s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if hp.get("exp_probs_b"):
                s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, n_ff_shexp)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    for i in range(nl - n_nextn, nl):
        p = f"blk.{i}."
        s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
        s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
        s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
        s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


def _build_gpt_oss(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/openai-moe.cpp (arch name gpt-oss)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    if hp.get("swa_pattern") is not None:
        # real gpt-oss files have no pattern key; llama.cpp then uses period 2 (even layers SWA)
        pat = hp["swa_pattern"]
        value = [bool(x) for x in pat] if isinstance(pat, (list, tuple)) else int(pat)
        s.set("{arch}.attention.sliding_window_pattern", value)
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i], bias=True, out_bias=True)
        s.add(p + "attn_sinks.weight", (n_head,), "zero")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"], bias=True)


def _build_llama4(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/llama4.cpp (interleaved MoE layers with a shared expert)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    step = int(hp["moe_every"])
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.interleave_moe_layer_step", step)
    s.set("{arch}.vocab_size", _n_vocab(hp))
    if hp.get("sliding_window") is not None:
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if step > 0 and (i + 1) % step == 0:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            _shared_expert(s, i, n_embd, hp["n_ff_exp"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_glm4moe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/glm4-moe.cpp (+ NextN/MTP blocks counted in block_count)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    n_nextn = int(hp.get("n_nextn") or 0)
    hd = int(hp["head_dim"] or n_embd // n_head)
    nall = nl + n_nextn
    kv = _per_layer(hp["n_head_kv"], nall)
    _common_kv(s, hp, nall)
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i], bias=True)
        if hp.get("qk_norm"):
            s.add(p + "attn_q_norm.weight", (hd,), "norm")
            s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, hp["n_ff_exp"] * hp["n_expert_shared"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


def _build_granitehybrid(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/granite-hybrid.cpp: Mamba2 layers where head_count_kv[il] == 0, attention elsewhere."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    attn = set(int(i) for i in hp["attn_layers"])
    kv = [int(hp["n_head_kv"]) if i in attn else 0 for i in range(nl)]
    hp = dict(hp, n_head_kv=kv)
    d_inner = 2 * n_embd  # llama.cpp only supports an expansion factor of 2
    d_conv, d_state = int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    n_group, n_ssm_head = int(hp["ssm_n_group"]), int(hp["ssm_n_head"])
    d_in_proj = 2 * d_inner + 2 * n_group * d_state + n_ssm_head
    _common_kv(s, hp, nl)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", n_ssm_head)
    s.set("{arch}.ssm.group_count", n_group)
    s.set("{arch}.embedding_scale", float(hp["embedding_scale"]))
    s.set("{arch}.residual_scale", float(hp["residual_scale"]))
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.set("{arch}.attention.scale", float(hp["attention_scale"]))
    if hp.get("n_ff_shexp"):
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if kv[i] == 0:
            s.add(p + "ssm_in.weight", (n_embd, d_in_proj))
            s.add(p + "ssm_conv1d.weight", (d_conv, d_inner + 2 * n_group * d_state))
            s.add(p + "ssm_conv1d.bias", (d_inner + 2 * n_group * d_state,), "bias")
            s.add(p + "ssm_dt.bias", (n_ssm_head,), "bias")
            s.add(p + "ssm_a", (1, n_ssm_head), "ssm_a")
            s.add(p + "ssm_d", (1, n_ssm_head), "ones")
            s.add(p + "ssm_norm.weight", (d_inner // n_group, n_group), "norm")
            s.add(p + "ssm_out.weight", (d_inner, n_embd))
        else:
            _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if hp.get("n_expert"):
            _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
            if hp.get("n_ff_shexp"):
                _shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_granite(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/granite.cpp and granite-moe.cpp (n_ff is the expert width when n_expert > 0)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.embedding_scale", float(hp["embedding_scale"]))
    s.set("{arch}.residual_scale", float(hp["residual_scale"]))
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.set("{arch}.attention.scale", float(hp["attention_scale"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if hp.get("n_expert"):
            _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_olmoe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/olmoe.cpp (q/k norms of the full projection width, n_ff is the expert width)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    kv = _per_layer(hp["n_head_kv"], nl)
    if any(k != n_head for k in kv):
        raise ValueError("olmoe: llama.cpp sizes attn_k_norm as n_embd, so head_count_kv must equal head_count")
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_k_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])


def _build_llama_like(s: ModelSpec, hp: dict[str, Any]) -> None:
    """mistral3.cpp / smollm3.cpp: the llama tensors, rope dims = head dim, optional attention temperature."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    if hp.get("attn_temperature_scale"):
        s.set("{arch}.attention.temperature_scale", float(hp["attn_temperature_scale"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_seed_oss(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/seed-oss.cpp (qkv biases; post_attention_norm in place of ffn_norm)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i], bias=True)
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_mamba2(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/mamba2.cpp (no attention keys beyond head_count 0; ssm_norm grouped)."""
    nl, n_embd = hp["n_layer"], hp["n_embd"]
    d_inner, d_conv, d_state = int(hp["ssm_d_inner"]), int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    n_group, n_ssm_head = int(hp["ssm_n_group"]), int(hp["ssm_n_head"])
    conv_dim = d_inner + 2 * n_group * d_state
    _common_kv(s, hp, nl)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", n_ssm_head)
    s.set("{arch}.ssm.group_count", n_group)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "ssm_in.weight", (n_embd, d_inner + conv_dim + n_ssm_head))
        s.add(p + "ssm_conv1d.weight", (d_conv, conv_dim))
        s.add(p + "ssm_conv1d.bias", (conv_dim,), "bias")
        s.add(p + "ssm_dt.bias", (n_ssm_head,), "bias")
        s.add(p + "ssm_a", (1, n_ssm_head), "ssm_a")
        s.add(p + "ssm_d", (1, n_ssm_head), "ones")
        s.add(p + "ssm_norm.weight", (d_inner // n_group, n_group), "norm")
        s.add(p + "ssm_out.weight", (d_inner, n_embd))


def _build_ernie4_5_moe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/ernie4-5.cpp (experts on every layer from leading_dense_block_count on)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.interleave_moe_layer_step", int(hp["moe_every"]))
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    if hp.get("n_ff_shexp"):
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i >= hp["n_layer_dense_lead"]:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            if hp.get("n_ff_shexp"):
                _shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


def _build_hunyuan_moe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/hunyuan-moe.cpp (experts and a shared MLP on every layer, q/k norms of head size)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
        _shared_expert(s, i, n_embd, hp["n_ff_shexp"])


def _build_glm4(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/glm4.cpp (partial rope, ffn_up of width 2 * n_ff, no ffn_gate)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i], bias=True)
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_down.weight", (hp["n_ff"], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, 2 * hp["n_ff"]))
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")


def _build_exaone4(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/exaone4.cpp (no attn_norm/ffn_norm; SWA is decided by the layer count, see hparams)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    if hp.get("sliding_window"):
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")


def _build_gemma3(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/gemma3.cpp: SWA on 5 of every 6 layers unless a pattern is written, tied embeddings allowed."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    if hp.get("sliding_window"):
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
        if hp.get("swa_pattern") is not None:
            pat = hp["swa_pattern"]
            value = [bool(x) for x in pat] if isinstance(pat, (list, tuple)) else int(pat)
            s.set("{arch}.attention.sliding_window_pattern", value)
    if hp.get("final_logit_softcapping"):
        s.set("{arch}.final_logit_softcapping", float(hp["final_logit_softcapping"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")

def _build_qwen35(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/qwen35.cpp and qwen35moe.cpp: gated delta-net layers (fused attn_qkv + attn_gate, conv1d,
    beta/alpha, ssm_norm, ssm_out) and gated full attention (Q projection twice as wide: query and gate, q/k
    norms) on every ``full_attention_interval``-th layer (or where ``recurrent_layers`` is False), each followed
    by post_attention_norm and a dense FFN or (qwen35moe) routed experts + a gated shared expert. NextN/MTP
    blocks (``n_nextn``) are full-attention blocks after the trunk. ``qwen3next`` (src/models/qwen3next.cpp):
    one ``ssm_ba`` projection for beta and alpha, no mrope sections, always experts; ``ssm_in`` writes the
    legacy fused qkvz projection instead of attn_qkv + attn_gate."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nall)
    d_conv, d_state = int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    n_k, n_v = int(hp["ssm_n_group"]), int(hp["ssm_n_head"])
    key_dim, value_dim = d_state * n_k, d_state * n_v
    conv_dim = 2 * key_dim + value_dim
    if hp.get("recurrent_layers") is not None:
        recr = [bool(x) for x in hp["recurrent_layers"]][:nl]
    else:
        k = int(hp["full_attention_interval"])
        recr = [(i + 1) % k != 0 for i in range(nl)]
    moe = bool(hp.get("n_expert"))
    nxt = s.gguf_arch == "qwen3next"
    _common_kv(s, hp, nall)
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"] or hd))
    if not nxt:
        s.set("{arch}.rope.dimension_sections", [int(x) for x in hp["rope_sections"]], VT.INT32)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", value_dim)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", n_v)
    s.set("{arch}.ssm.group_count", n_k)
    if hp.get("recurrent_layers") is not None:
        s.set("{arch}.attention.recurrent_layers", recr + [False] * n_nextn, VT.BOOL)
    else:
        s.set("{arch}.full_attention_interval", int(hp["full_attention_interval"]))
    if moe and hp.get("n_ff_shexp"):
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        if i < nl and recr[i]:
            if nxt and hp.get("ssm_in"):
                s.add(p + "ssm_in.weight", (n_embd, 2 * key_dim + 2 * value_dim))
            else:
                s.add(p + "attn_qkv.weight", (n_embd, conv_dim))
                s.add(p + "attn_gate.weight", (n_embd, value_dim))
            s.add(p + "ssm_conv1d.weight", (d_conv, conv_dim), "norm")  # left unquantized (llama-quant)
            s.add(p + "ssm_dt.bias", (n_v,), "bias")
            s.add(p + "ssm_a", (n_v,), "ssm_a")
            if nxt:
                s.add(p + "ssm_ba.weight", (n_embd, 2 * n_v))
            else:
                s.add(p + "ssm_beta.weight", (n_embd, n_v))
                s.add(p + "ssm_alpha.weight", (n_embd, n_v))
            s.add(p + "ssm_norm.weight", (d_state,), "norm")
            s.add(p + "ssm_out.weight", (value_dim, n_embd))
        else:
            s.add(p + "attn_q.weight", (n_embd, 2 * hd * n_head))  # query and its output gate, per head
            s.add(p + "attn_k.weight", (n_embd, hd * kv[i]))
            s.add(p + "attn_v.weight", (n_embd, hd * kv[i]))
            s.add(p + "attn_output.weight", (hd * n_head, n_embd))
            s.add(p + "attn_q_norm.weight", (hd,), "norm")
            s.add(p + "attn_k_norm.weight", (hd,), "norm")
        if moe:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "ffn_gate_inp_shexp.weight", (n_embd,), "router")
            _shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


def _build_phimoe(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/phimoe.cpp: biased norms, q/k/v and output projections; experts (n_ff is the expert width);
    LongRoPE factor tensors created with layer 0 (``rope_factors_long``/``_short``, n_rot / 2 each)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    if hp.get("rope_factors"):
        s.set("{arch}.rope.scaling.original_context_length", min(4096, int(hp["n_ctx_train"])))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    s.add("output_norm.bias", (n_embd,), "bias")
    s.add("output.weight", (n_embd, _n_vocab(hp)))
    s.add("output.bias", (_n_vocab(hp),), "bias")
    if hp.get("rope_factors"):
        s.add("rope_factors_long.weight", (hd // 2,), "ones")
        s.add("rope_factors_short.weight", (hd // 2,), "ones")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.bias", (n_embd,), "bias")
        _attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i], bias=True, out_bias=True)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])


def _moe_keys(s: ModelSpec, hp: dict[str, Any]) -> None:
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    if hp.get("n_expert_groups"):
        s.set("{arch}.expert_group_count", int(hp["n_expert_groups"]))
        s.set("{arch}.expert_group_used_count", int(hp["n_group_used"]))


def _build_dots1(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/dots1.cpp (q/k norms of head size, dense leading blocks, experts + shared experts)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    if any(k != n_head for k in kv):
        raise ValueError("dots1: llama.cpp sizes attn_k/attn_v as head_dim * head_count (multi-head attention)")
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    _moe_keys(s, hp)
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if hp.get("exp_probs_b"):
                s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, hp["n_ff_exp"] * hp["n_expert_shared"])


def _build_bailingmoe2(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/bailingmoe2.cpp (fused attn_qkv, q/k norms, partial rope; NextN blocks counted in block_count,
    with their nextn.* tensors and layer_output_norm, skipped by llama.cpp without MTP)."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hd = n_embd // n_head
    kv = _per_layer(hp["n_head_kv"], nall)
    _common_kv(s, hp, nall)
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"] or hd))
    _moe_keys(s, hp)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp, output_required=True)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, n_embd + 2 * hd * kv[i]))
        s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if hp.get("exp_probs_b"):
                s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, hp["n_ff_exp"] * hp["n_expert_shared"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")
            s.add(p + "layer_output_norm.weight", (n_embd,), "norm")


def _build_lfm2(s: ModelSpec, hp: dict[str, Any]) -> None:
    """src/models/lfm2.cpp / lfm2moe.cpp: short-conv layers where head_count_kv[il] == 0 (in_proj to b, c, x;
    a depthwise conv of ``shortconv.l_cache`` taps kept f32, as llama-quant does), attention layers with q/k
    norms elsewhere; the output norm is named token_embd_norm; experts from leading_dense_block_count on."""
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    attn = set(int(i) for i in hp["attn_layers"])
    kv = [int(hp["n_head_kv"]) if i in attn else 0 for i in range(nl)]
    hp = dict(hp, n_head_kv=kv)
    moe = bool(hp.get("n_expert"))
    _common_kv(s, hp, nl)
    s.set("{arch}.shortconv.l_cache", int(hp["l_cache"]))
    if moe:
        s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
        s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("token_embd_norm.weight", (n_embd,), "norm")
    if not hp.get("tied_embeddings"):
        s.add("output.weight", (n_embd, _n_vocab(hp)))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if moe and i >= hp["n_layer_dense_lead"]:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if kv[i]:
            s.add(p + "attn_q_norm.weight", (hd,), "norm")
            s.add(p + "attn_k_norm.weight", (hd,), "norm")
            _attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i])
        else:
            s.add(p + "shortconv.conv.weight", (int(hp["l_cache"]), n_embd), "ones")
            s.add(p + "shortconv.in_proj.weight", (n_embd, 3 * n_embd))
            s.add(p + "shortconv.out_proj.weight", (n_embd, n_embd))


_BUILDERS: dict[str, Callable[[ModelSpec, dict[str, Any]], None]] = {
    "llama": _build_llama,
    "mixtral": _build_llama,
    "qwen3moe": _build_qwen3moe,
    "qwen2moe": _build_qwen2moe,
    "deepseek2": _build_deepseek2,
    "gpt-oss": _build_gpt_oss,
    "llama4": _build_llama4,
    "glm4moe": _build_glm4moe,
    "granitehybrid": _build_granitehybrid,
    "gemma3": _build_gemma3,
    "qwen3": _build_qwen3,
    "qwen2": _build_qwen2,
    "granite": _build_granite,
    "granitemoe": _build_granite,
    "olmoe": _build_olmoe,
    "mistral3": _build_llama_like,
    "seed_oss": _build_seed_oss,
    "smollm3": _build_llama_like,
    "mamba2": _build_mamba2,
    "ernie4_5-moe": _build_ernie4_5_moe,
    "hunyuan-moe": _build_hunyuan_moe,
    "glm4": _build_glm4,
    "exaone4": _build_exaone4,
    "qwen35": _build_qwen35,
    "qwen35moe": _build_qwen35,
    "qwen3next": _build_qwen35,
    "phimoe": _build_phimoe,
    "dots1": _build_dots1,
    "bailingmoe2": _build_bailingmoe2,
    "lfm2": _build_lfm2,
    "lfm2moe": _build_lfm2,
}


def model_spec(arch: str, **hparams: Any) -> ModelSpec:
    """Describe an ``arch`` model: tiny defaults (:func:`tiny_hparams`) updated with ``hparams``."""
    hp = tiny_hparams(arch)
    unknown = set(hparams) - set(hp)
    if unknown:
        raise TypeError(f"unknown hyperparameter(s) for {arch}: {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(sorted(hp))}")
    hp.update({k: v for k, v in hparams.items()})
    if hp["quant"] not in _POLICIES:
        raise ValueError(f"unknown quant policy {hp['quant']!r}; known: {', '.join(_POLICIES)}")
    spec = ModelSpec(arch=arch, gguf_arch=GGUF_ARCH[arch], hparams=hp)
    _BUILDERS[arch](spec, hp)
    policy = _POLICIES[hp["quant"]]
    for t in spec.tensors:
        t.qtype = Q.I32 if t.kind == "ids" else policy(t, hp)  # "ids": i32 tables (deepseek4's tid2eid)
    names = [t.name for t in spec.tensors]
    assert len(names) == len(set(names)), "duplicate tensor names"
    return spec


def sparse_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of a full-size model in :data:`SPARSE_SPECS`."""
    if name not in SPARSE_SPECS:
        raise ValueError(f"unknown sparse model {name!r}; known: {', '.join(SPARSE_SPECS)}")
    arch, hp = SPARSE_SPECS[name]
    return model_spec(arch, **hp)


# --------------------------------------------------------------------------- tensor data


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])


def _float_values(t: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    shape = t.numpy_shape
    if t.kind == "norm":
        return (1.0 + 0.01 * rng.standard_normal(shape)).astype(np.float32)
    if t.kind == "ones":
        return np.ones(shape, np.float32)
    if t.kind == "zero":
        return np.zeros(shape, np.float32)
    if t.kind == "bias":
        return (0.01 * rng.standard_normal(shape)).astype(np.float32)
    if t.kind == "ssm_a":
        return -rng.uniform(1.0, 4.0, shape).astype(np.float32)
    return (0.02 * rng.standard_normal(shape)).astype(np.float32)


def _synth_kquant(t: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    """Random but well-formed Q4_K / Q6_K blocks (gguf-py cannot quantize k-quants)."""
    block, size = GGML_QUANT_SIZES[t.qtype]
    n_blocks = t.n_elements // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if t.qtype == Q.Q4_K:  # d, dmin (f16), scales[12], qs[128]
        raw[:, 0:4] = np.frombuffer(np.array([1e-4, 1e-4], np.float16).tobytes(), np.uint8)
    elif t.qtype == Q.Q6_K:  # ql[128], qh[64], int8 scales[16], d (f16)
        raw[:, 192:208] = rng.integers(-8, 9, size=(n_blocks, 16), dtype=np.int8).view(np.uint8)
        raw[:, 208:210] = np.frombuffer(np.array([3e-4], np.float16).tobytes(), np.uint8)
    else:
        raise NotImplementedError(t.qtype.name)
    shape = list(t.numpy_shape)
    shape[-1] = shape[-1] // block * size
    return raw.reshape(shape)


def tensor_data(t: TensorSpec, seed: int = 0) -> np.ndarray:
    """The array written for ``t``: float32/float16 values, or uint8 quantized blocks."""
    rng = _rng(seed, t.name)
    if t.qtype == Q.I32:  # row r: r % ne0 + 0..ne0-1 modulo ne0, valid ids below ne0 (an expert id per slot)
        ne0 = t.shape[0]
        rows = np.arange(t.n_elements // ne0)[:, None] + np.arange(ne0)[None, :]
        return (rows % ne0).astype(np.int32).reshape(t.numpy_shape)
    if t.qtype == Q.I64:  # a vocabulary map (EAGLE-3's d2t): row i -> target token i
        return np.arange(t.n_elements, dtype=np.int64).reshape(t.numpy_shape)
    if t.qtype in (Q.Q4_K, Q.Q6_K):
        return _synth_kquant(t, rng)
    values = _float_values(t, rng)
    if t.qtype == F32:
        return values
    if t.qtype == F16:
        return values.astype(np.float16)
    return _gguf_quantize(values, t.qtype)


# --------------------------------------------------------------------------- writers


def _writer(spec: ModelSpec, path: Path, split_max_tensors: int = 0) -> GGUFWriter:
    w = GGUFWriter(path, spec.gguf_arch, split_max_tensors=split_max_tensors)
    for key, (value, vtype, sub) in spec.kv.items():
        if key == "general.architecture":
            continue
        w.add_key_value(key, value, vtype, sub_type=sub)
    return w


def write_spec(spec: ModelSpec, path: str | os.PathLike, *, seed: int = 0, sparse: bool = False,
               split_max_tensors: int = 0) -> Path:
    """Write ``spec`` to ``path``; ``sparse`` leaves the data region as a hole. ``split_max_tensors`` writes a
    split set instead (``PATH-0000i-of-0000n.gguf`` beside ``path``, at most that many tensors each; not with
    ``sparse``) and returns its first shard."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = _writer(spec, path, split_max_tensors)
    if sparse and split_max_tensors:
        raise ValueError("a sparse split set is not supported")
    if sparse:
        for t in spec.tensors:
            w.add_tensor_info(t.name, t.numpy_shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.qtype)
        w.write_header_to_file(path)
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        assert w.fout is not None
        header_end = w.fout[0].tell()
        w.close()
        total = _pad(header_end) + spec.data_nbytes
        with open(path, "r+b") as f:
            f.truncate(total)
        return path
    for t in spec.tensors:
        data = tensor_data(t, seed)
        if data.dtype == np.uint8:
            w.add_tensor(t.name, data, raw_dtype=t.qtype)
        else:
            w.add_tensor(t.name, data)
        assert w.tensors[-1][t.name].nbytes == t.nbytes, t.name
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if split_max_tensors:
        return sorted(path.parent.glob(f"{path.stem}-*-of-*.gguf"))[0]
    return path


def write_tiny_model(arch: str, path: str | os.PathLike, *, n_layer: int | None = None, n_ctx_train: int = 4096,
                     vocab_extra: int = 0, tied_embeddings: bool = False, seed: int = 0, **overrides: Any) -> Path:
    """Write a tiny ``arch`` model (one of :data:`ARCHS`) to ``path`` and return the path.

    ``overrides`` are hyperparameters from :func:`tiny_hparams` (``n_embd``,
    ``n_head``, ``n_head_kv`` (an int or a per-layer list), ``n_expert``,
    ``n_expert_used``, ``n_ff``, ``n_ff_exp``, ``head_dim``, ``quant``
    (``mixed``/``f16``/``f32``), ...).  ``tied_embeddings`` omits
    ``output.weight`` (not allowed for qwen2moe and gpt-oss, which require it).
    """
    hp: dict[str, Any] = dict(overrides, n_ctx_train=n_ctx_train, vocab_extra=vocab_extra,
                              tied_embeddings=tied_embeddings)
    if n_layer is not None:
        hp["n_layer"] = n_layer
    return write_spec(model_spec(arch, **hp), path, seed=seed)


def write_sparse_model(spec: str, path: str | os.PathLike) -> Path:
    """Write the full-size model ``spec`` (a key of :data:`SPARSE_SPECS`) as a sparse file."""
    return write_spec(sparse_spec(spec), path, sparse=True)


def disk_usage(path: str | os.PathLike) -> int:
    """Bytes actually allocated on disk for ``path`` (st_blocks * 512)."""
    return os.stat(path).st_blocks * 512


def iter_specs() -> Iterable[tuple[str, ModelSpec]]:
    """All tiny specs with default hyperparameters (for tests and docs)."""
    for a in ARCHS:
        yield a, model_spec(a)


# --------------------------------------------------------------------------- one file per architecture


def register(name: str, *, build: Callable[[ModelSpec, dict[str, Any]], None], tiny: dict[str, Any],
             sparse: dict[str, dict[str, Any]] | None = None, gguf_arch: str | None = None) -> None:
    """Add an architecture from a module of :mod:`tests.factory_models`: its factory name, the tensor builder,
    the tiny model's hyperparameters (over :data:`_COMMON_TINY`; arch-specific keys are declared here too),
    full-size sparse models (name -> hyperparameters over the tiny ones) and the ``general.architecture`` it
    writes (default: ``name``)."""
    global ARCHS
    if name in _TINY:
        raise RuntimeError(f"architecture {name!r} is registered twice")
    clash = set(sparse or ()) & set(SPARSE_SPECS)
    if clash:
        raise RuntimeError(f"sparse model(s) {sorted(clash)} registered twice")
    ARCHS = ARCHS + (name,)
    GGUF_ARCH[name] = gguf_arch or name
    _TINY[name] = dict(tiny)
    _BUILDERS[name] = build
    for spec_name, hp in (sparse or {}).items():
        SPARSE_SPECS[spec_name] = (name, dict(hp))


def _load_factory_models() -> None:
    """Import every module of ``tests/factory_models`` (each calls :func:`register`): adding an architecture to
    the factory is adding a file, as it is for the graph replay (``app/memory/compute/models``)."""
    folder = Path(__file__).with_name("factory_models")
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
        importlib.import_module(f"{__package__ or 'tests'}.factory_models.{info.name}")


_load_factory_models()
