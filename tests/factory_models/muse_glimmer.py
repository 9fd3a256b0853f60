"""Muse Glimmer (``muse-glimmer``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/muse-glimmer.cpp``:
``attention.sliding_window`` and ``logit_scale`` required (``final_logit_softcapping`` optional, the pattern
period 4 by default); per layer the llama attention with per-head Q/K norms, ``attn_gate`` (n_embd x n_head*head,
one sigmoid gate per element), ``post_attention_norm``, ``ffn_norm``, ``post_ffw_norm``, a SwiGLU FFN; ``output``
required."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.logit_scale", 0.5)
    if hp["final_softcap"]:
        s.set("{arch}.final_logit_softcapping", float(hp["final_softcap"]))
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_gate.weight", (n_embd, hd * n_head))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "muse-glimmer",
    build=_build,
    tiny=dict(head_dim=32, n_ff=192, sliding_window=64, final_softcap=30.0),
    sparse={
        # a Muse Glimmer of 8B size (its configuration is not available here): 32 layers of 4096, 32 query / 8 KV
        # heads of 128, intermediate 14336, a 4096-token window on 3 of every 4 layers (the global ones NoPE),
        # final logits soft-capped at 30, vocabulary 131072
        "muse-glimmer-8b": dict(
            name="Muse-Glimmer-8B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
            sliding_window=4096, final_softcap=30.0, n_ctx_train=131072, n_vocab=131072, quant="q4_k_m",
            file_type=15),
    },
)
