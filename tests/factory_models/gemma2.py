"""Gemma 2 (``gemma2``, ``src/models/gemma2.cpp``): gemma3's layer without q/k norms, sliding window (4096 by
default) on every other layer, attention-logit and final-logit soft-capping (``attn_logit_softcapping``,
``final_logit_softcapping``), and the output always ``token_embd`` again (``TENSOR_DUPLICATED``)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = gf._per_layer(hp["n_head_kv"], nl)
    gf._common_kv(s, hp, nl)
    if hp["sliding_window"]:
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attn_logit_softcapping", float(hp["attn_softcap"]))
    s.set("{arch}.final_logit_softcapping", float(hp["final_softcap"]))
    gf._embeddings(s, dict(hp, tied_embeddings=True))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")


gf.register(
    "gemma2",
    build=build,
    tiny=dict(head_dim=32, n_ff=128, sliding_window=128, attn_softcap=50.0, final_softcap=30.0, rms_eps=1e-6),
    sparse={
        # google/gemma-2-9b-it and gemma-2-27b-it (the 27B scales Q by 1/sqrt(n_embd / n_head), not the head size)
        "gemma-2-9b": dict(
            name="gemma-2-9b-it", n_layer=42, n_embd=3584, n_head=16, n_head_kv=8, head_dim=256, n_ff=14336,
            sliding_window=4096, n_ctx_train=8192, n_vocab=256000, quant="q4_k_m", file_type=15),
        "gemma-2-27b": dict(
            name="gemma-2-27b-it", n_layer=46, n_embd=4608, n_head=32, n_head_kv=16, head_dim=128, n_ff=36864,
            sliding_window=4096, n_ctx_train=8192, n_vocab=256000, quant="q4_k_m", file_type=15),
    },
)
