"""OLMo 2 / Olmo 3 (``olmo2``, ``src/models/olmo2.cpp``): no pre-norms; Q and K RMS-normed over the whole
projection (``attn_q_norm`` of n_embd, ``attn_k_norm`` of n_head_kv * head_dim), post-attention and post-FFN
norms; Olmo 3 adds a sliding window (``attention.sliding_window``, 3 sliding layers then 1 full by default)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = n_embd // n_head
    kv = gf._per_layer(hp["n_head_kv"], nl)
    gf._common_kv(s, hp, nl)
    if hp["sliding_window"]:
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    gf._embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        gf._attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd * kv[i],), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")


gf.register(
    "olmo2",
    build=build,
    tiny=dict(n_ff=192, sliding_window=128, rms_eps=1e-6, rope_base=500000.0),
    sparse={
        # allenai/Olmo-3-7B-Instruct: 32 layers of 4096, 32 heads (no GQA), window 4096 on 3 of every 4 layers
        "olmo-3-7b": dict(
            name="Olmo-3-7B-Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=11008,
            sliding_window=4096, n_ctx_train=65536, rope_base=500000.0, n_vocab=100278, quant="q4_k_m",
            file_type=15),
        # allenai/OLMo-2-1124-13B-Instruct: 40 layers of 5120, 40 heads, no sliding window
        "olmo-2-13b": dict(
            name="OLMo-2-1124-13B-Instruct", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13824,
            sliding_window=0, n_ctx_train=4096, rope_base=500000.0, n_vocab=100352, quant="q4_k_m", file_type=15),
    },
)
