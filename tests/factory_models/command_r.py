"""Command R / R+ (``command-r``) and Command R7B / Command A (``cohere2``): ``load_arch_tensors`` /
``load_arch_hparams`` of ``src/models/command-r.cpp`` and ``src/models/cohere2.cpp``.

Every layer: ``attn_norm`` (a layer norm; ``attention.layer_norm_epsilon`` is required), Q/K/V/O without biases,
a SwiGLU FFN, no FFN norm (a parallel block). command-r: Q and K layer norms per head (``attn_q_norm`` of
head_dim x n_head, ``attn_k_norm`` of head_dim x n_head_kv) on models of 64 layers or more (R+), ``logit_scale``
optional. cohere2: ``attention.sliding_window`` and ``logit_scale`` required, the sliding pattern of period 4
by default (3 sliding, 1 global). The head is always the token embedding (``TENSOR_DUPLICATED``): no
``output.weight``.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    s.set("{arch}.vocab_size", _n_vocab(hp))
    if hp["logit_scale"]:
        s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    if s.arch == "cohere2":
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if s.arch == "command-r" and nl >= 64:
            s.add(p + "attn_q_norm.weight", (hd, n_head), "norm")
            s.add(p + "attn_k_norm.weight", (hd, n_kv), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "command-r",
    build=_build,
    tiny=dict(n_ff=192, logit_scale=0.0625, rope_base=8000000.0),
    sparse={
        # CohereForAI/c4ai-command-r-08-2024: 40 layers of 8192, 64 query / 8 KV heads, intermediate 22528,
        # vocabulary 256000, logit scale 0.0625, rope theta 4e6, 131072 context (32.3B)
        "command-r-35b": dict(
            name="c4ai-command-r-08-2024", n_layer=40, n_embd=8192, n_head=64, n_head_kv=8, n_ff=22528,
            logit_scale=0.0625, n_ctx_train=131072, rope_base=4000000.0, n_vocab=256000, quant="q4_k_m",
            file_type=15),
        # CohereForAI/c4ai-command-r-plus-08-2024: 64 layers of 12288 (per-head Q/K layer norms), 96 query /
        # 8 KV heads, intermediate 33792, logit scale 0.8333, rope theta 7.5e7 (104B)
        "command-r-plus-104b": dict(
            name="c4ai-command-r-plus-08-2024", n_layer=64, n_embd=12288, n_head=96, n_head_kv=8, n_ff=33792,
            logit_scale=0.8333, n_ctx_train=131072, rope_base=75000000.0, n_vocab=256000, quant="q4_k_m",
            file_type=15),
    },
)

register(
    "cohere2",
    build=_build,
    # 4 layers: 3 sliding over 128 tokens, then 1 global (NoPE)
    tiny=dict(n_ff=192, logit_scale=0.25, sliding_window=128, rope_base=50000.0),
    sparse={
        # CohereForAI/c4ai-command-r7b-12-2024 (Cohere2ForCausalLM): 32 layers of 4096 (3 sliding over 4096 : 1
        # global), 32 query / 8 KV heads, intermediate 14336, vocabulary 256000, logit scale 0.25, rope theta
        # 50000, 132096 positions (8.0B)
        "command-r7b": dict(
            name="c4ai-command-r7b-12-2024", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336,
            logit_scale=0.25, sliding_window=4096, n_ctx_train=132096, rope_base=50000.0, n_vocab=256000,
            quant="q4_k_m", file_type=15),
        # CohereForAI/c4ai-command-a-03-2025: 64 layers of 12288 (3:1 sliding over 4096), 96 query / 8 KV
        # heads, intermediate 36864, logit scale 0.25, 256k positions (111B)
        "command-a-111b": dict(
            name="c4ai-command-a-03-2025", n_layer=64, n_embd=12288, n_head=96, n_head_kv=8, n_ff=36864,
            logit_scale=0.25, sliding_window=4096, n_ctx_train=262144, rope_base=50000.0, n_vocab=256000,
            quant="q4_k_m", file_type=15),
    },
)
