"""MiniMax-Text-01 / MiniMax-M1 (``minimax-01``): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/minimax-01.cpp`` with the tensors its converter writes (``conversion/minimax.py``): lightning-attention
layers (``attention.recurrent_layers``, else every layer but each ``full_attention_interval``-th, default 8) with a
fused ``attn_qkv`` (3 x n_head x head_dim, no KV heads of their own), a sigmoid gate ``attn_gate`` and an RMS norm of
the attention's output ``attn_norm_2``; softmax-attention layers with Q/K/V; ``attn_output`` on both; every layer's
FFN is routed experts only (softmax gating, normalised weights). ``residual_scale`` is required (the DeepNorm alpha
the residuals are scaled by); ``output`` is optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, _experts, register


def recurrent(hp: dict[str, Any]) -> list[bool]:
    """``is_recr_impl`` as ``load_arch_hparams`` sets it from ``full_attention_interval``."""
    k = int(hp["full_attention_interval"])
    return [(il + 1) % k != 0 for il in range(int(hp["n_layer"]))]


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"] or hd))
    s.set("{arch}.residual_scale", float(hp["residual_scale"]))
    if hp["recurrent_array"]:
        s.set("{arch}.attention.recurrent_layers", recurrent(hp))
    else:
        s.set("{arch}.full_attention_interval", int(hp["full_attention_interval"]))
    _embeddings(s, hp)
    for i, recr in enumerate(recurrent(hp)):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if recr:
            s.add(p + "attn_norm_2.weight", (hd * n_head,), "norm")
            s.add(p + "attn_qkv.weight", (n_embd, 3 * hd * n_head))
            s.add(p + "attn_gate.weight", (n_embd, hd * n_head))
            s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        else:
            _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])


register(
    "minimax-01",
    build=_build,
    # 4 layers, the last a softmax-attention one: 4 heads of 32 (2 KV heads), rope on 16, 8 experts of 64 (2 used)
    tiny=dict(head_dim=32, rope_dim=16, n_ff=64, n_expert=8, n_expert_used=2, full_attention_interval=4,
              recurrent_array=False, residual_scale=3.5, rms_eps=1e-5, rope_base=10000000.0),
    sparse={
        # MiniMax-Text-01 (MiniMaxAI/MiniMax-Text-01 config.json): 80 layers of 6144, every 8th softmax attention,
        # 64 query / 8 KV heads of 128 (rotary_dim 64), 32 experts of 9216 (2 used), vocabulary 200064, residual
        # alpha 3.5565588200778455 (DeepNorm: (2 * 80) ** 0.25)
        "minimax-text-01": dict(
            name="MiniMax-Text-01", n_layer=80, n_embd=6144, n_head=64, n_head_kv=8, head_dim=128, rope_dim=64,
            n_ff=9216, n_expert=32, n_expert_used=2, full_attention_interval=8, recurrent_array=False,
            residual_scale=3.5565588200778455, n_ctx_train=1048576, rope_base=10000000.0, n_vocab=200064,
            quant="q4_k_m", file_type=15),
        # MiniMax-M1 (MiniMaxAI/MiniMax-M1-40k: the same shape), its layer kinds given as the per-layer array
        "minimax-m1-40k": dict(
            name="MiniMax-M1-40k", n_layer=80, n_embd=6144, n_head=64, n_head_kv=8, head_dim=128, rope_dim=64,
            n_ff=9216, n_expert=32, n_expert_used=2, full_attention_interval=8, recurrent_array=True,
            residual_scale=3.5565588200778455, n_ctx_train=40960, rope_base=10000000.0, n_vocab=200064,
            quant="q4_k_m", file_type=15),
    },
)
