"""Phi-3 / Phi-4 dense (``phi3``, ``src/models/phi3.cpp``): a fused ``attn_qkv``, no biases, one fused ``ffn_up`` of
width ``2 * n_ff`` halved by a single-tensor SwiGLU; LongRoPE factor tensors (``rope_factors_long``/``_short``,
n_rot / 2 each, created with layer 0) on the 128k models; ``sliding_window`` written (0 marks Phi-4), which
llama.cpp reads and then disables; tied embeddings on Phi-4-mini (``output`` falls back to ``token_embd``)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    n_rot = int(hp["rope_dim"] or hd)
    kv = gf._per_layer(hp["n_head_kv"], nl)
    gf._common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", n_rot)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.rope.scaling.original_context_length", int(hp["n_ctx_orig"]))
    gf._embeddings(s, hp)
    if hp["rope_factors"]:
        s.add("rope_factors_long.weight", (n_rot // 2,), "ones")
        s.add("rope_factors_short.weight", (n_rot // 2,), "ones")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, n_embd + 2 * hd * kv[i]))
        s.add(p + "attn_output.weight", (n_embd, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_down.weight", (hp["n_ff"], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, 2 * hp["n_ff"]))


gf.register(
    "phi3",
    build=build,
    # (a name with "phi3" in it makes llama-vocab look up "<|endoftext|>", which the byte vocabulary lacks)
    tiny=dict(n_ff=128, rope_factors=True, sliding_window=2048, n_ctx_orig=1024, name="layerdeck-tiny-phi"),
    sparse={
        # microsoft/phi-4 (14B): 40 layers, GQA 40/10, 16k context, no rope factors, sliding_window 0
        "phi-4": dict(
            name="phi-4", n_layer=40, n_embd=5120, n_head=40, n_head_kv=10, n_ff=17920, n_ctx_train=16384,
            n_ctx_orig=16384, rope_base=250000.0, rope_factors=False, sliding_window=0, n_vocab=100352,
            quant="q4_k_m", file_type=15),
        # microsoft/Phi-4-mini-instruct (3.8B): 32 layers, 24/8 heads, partial rotary 0.75 (96 of 128), LongRoPE
        # to 128k from 4k, tied embeddings, 200k vocabulary
        "phi-4-mini": dict(
            name="Phi-4-mini-instruct", n_layer=32, n_embd=3072, n_head=24, n_head_kv=8, n_ff=8192, rope_dim=96,
            n_ctx_train=131072, n_ctx_orig=4096, rope_base=10000.0, rope_factors=True, sliding_window=262144,
            tied_embeddings=True, n_vocab=200064, quant="q4_k_m", file_type=15),
    },
)
