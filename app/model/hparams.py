"""Model hyper-parameters from GGUF metadata, normalised to per-layer values.

Keys follow llama.cpp's ``src/llama-arch.cpp`` (``LLM_KV_*``): most are
``<arch>.<name>``; head counts and feed-forward sizes may be scalars or
per-layer arrays (``llama_model_loader::get_key_or_arr``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .gguf_reader import LazyArray

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
}

#: Architectures llama.cpp treats as recurrent or hybrid (llm_arch_is_recurrent / llm_arch_is_hybrid).
RECURRENT_ARCHS = {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"}
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
    "qwen35",
    "qwen35moe",
}


def _per_layer(value: Any, n_layer: int, default: int = 0) -> list[int]:
    if value is None:
        return [default] * n_layer
    if isinstance(value, LazyArray):
        value = value.load()
    if isinstance(value, list):
        vals = [int(v) for v in value[:n_layer]]
        return vals + [vals[-1] if vals else default] * (n_layer - len(vals))
    return [int(value)] * n_layer


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
    recurrent_layers: list[bool] = field(default_factory=list)
    nextn_layers: int = 0
    file_type: int | None = None
    tied_embeddings: bool = False

    @property
    def file_type_name(self) -> str:
        if self.file_type is None:
            return "unknown"
        return FILE_TYPES.get(self.file_type, f"type {self.file_type}")

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def is_mla(self) -> bool:
        return self.key_length_mla > 0 and self.value_length_mla > 0  # llama_hparams::is_mla

    @property
    def has_swa(self) -> bool:
        return self.n_swa > 0 and any(self.swa_layers)


def _swa_pattern(arch: str, meta: dict[str, Any], n_layer: int, n_swa: int) -> list[bool]:
    if n_swa <= 0:
        return [False] * n_layer
    if arch == "llama4" and meta.get(f"{arch}.attention.sliding_window_pattern") is None:
        period = 4  # 3 chunked layers, then 1 full (src/models/llama4.cpp load_swa_pattern(ml, 4))
        return [(il % period) < (period - 1) for il in range(n_layer)]
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, LazyArray):
        pattern = pattern.load()
    if isinstance(pattern, list):
        vals = [bool(v) for v in pattern[:n_layer]]
        return vals + [False] * (n_layer - len(vals))
    # Period form: layer il is SWA iff il % p < p-1 (llama_hparams::set_swa_pattern).
    period = (
        int(pattern) if pattern is not None else {"gemma3": 6, "gpt-oss": 2, "gemma2": 2, "cohere2": 4}.get(arch, 0)
    )
    if period <= 0:
        # A window without pattern: every layer uses it (e.g. Mistral-style sliding window).
        return [True] * n_layer
    if period == 1:
        return [False] * n_layer
    return [(il % period) < (period - 1) for il in range(n_layer)]


def extract_params(meta: dict[str, Any], tensor_names: set[str] | None = None) -> ModelParams:
    arch = str(meta.get("general.architecture", "unknown"))

    def g(key: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{key}", default)

    n_layer = int(g("block_count", 0) or 0)
    n_embd = int(g("embedding_length", 0) or 0)
    n_head = _per_layer(g("attention.head_count"), n_layer)
    n_head_kv = _per_layer(g("attention.head_count_kv"), n_layer, default=0)
    if not any(n_head_kv):
        n_head_kv = list(n_head)
    max_head = max(n_head) if n_head else 0
    head_dim_k = int(g("attention.key_length", 0) or (n_embd // max_head if max_head else 0))
    head_dim_v = int(g("attention.value_length", 0) or (n_embd // max_head if max_head else 0))
    tokens = meta.get("tokenizer.ggml.tokens")
    n_vocab = int(g("vocab_size", 0) or (len(tokens) if tokens is not None else 0))
    n_swa = int(g("attention.sliding_window", 0) or 0)
    if arch == "llama4":
        # chunked attention with 8192-token chunks unless the file sets the window to 0 (src/models/llama4.cpp)
        n_swa = 0 if g("attention.sliding_window") == 0 else 8192
    p = ModelParams(
        arch=arch,
        name=str(meta.get("general.name", "")),
        n_layer=n_layer,
        n_ctx_train=int(g("context_length", 0) or 0),
        n_embd=n_embd,
        n_vocab=n_vocab,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=_per_layer(g("feed_forward_length"), n_layer),
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        head_dim_k_swa=int(g("attention.key_length_swa", 0) or head_dim_k),
        head_dim_v_swa=int(g("attention.value_length_swa", 0) or head_dim_v),
        n_expert=int(g("expert_count", 0) or 0),
        n_expert_used=int(g("expert_used_count", 0) or 0),
        n_expert_shared=int(g("expert_shared_count", 0) or 0),
        n_ff_exp=int(g("expert_feed_forward_length", 0) or 0),
        n_ff_shexp=int(g("expert_shared_feed_forward_length", 0) or 0),
        n_layer_dense_lead=int(g("leading_dense_block_count", 0) or 0),
        n_swa=n_swa,
        swa_layers=_swa_pattern(arch, meta, n_layer, n_swa),
        kv_lora_rank=int(g("attention.kv_lora_rank", 0) or 0),
        q_lora_rank=int(g("attention.q_lora_rank", 0) or 0),
        key_length_mla=int(g("attention.key_length_mla", 0) or 0),
        value_length_mla=int(g("attention.value_length_mla", 0) or 0),
        n_rot=int(g("rope.dimension_count", 0) or 0),
        ssm_d_conv=int(g("ssm.conv_kernel", 0) or 0),
        ssm_d_inner=int(g("ssm.inner_size", 0) or 0),
        ssm_d_state=int(g("ssm.state_size", 0) or 0),
        ssm_dt_rank=int(g("ssm.time_step_rank", 0) or 0),
        ssm_n_group=int(g("ssm.group_count", 0) or 0),
        nextn_layers=int(g("nextn_predict_layers", 0) or 0),
        file_type=meta.get("general.file_type"),
    )
    p.recurrent_layers = _recurrent_layers(p, meta)
    if tensor_names is not None:
        p.tied_embeddings = "output.weight" not in tensor_names and "token_embd.weight" in tensor_names
    return p


def _recurrent_layers(p: ModelParams, meta: dict[str, Any]) -> list[bool]:
    if p.arch in RECURRENT_ARCHS:
        return [True] * p.n_layer
    if p.arch not in HYBRID_ARCHS:
        return [False] * p.n_layer
    # Hybrids mark attention layers by a zero KV-head count per layer, or by a fixed interval.
    interval = meta.get(f"{p.arch}.full_attention_interval")
    if interval:
        k = int(interval)
        return [((il + 1) % k) != 0 for il in range(p.n_layer)]
    return [h == 0 for h in p.n_head_kv]
