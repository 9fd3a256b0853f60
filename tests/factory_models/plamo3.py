"""PLaMo 3 (``plamo3``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/plamo3.cpp``: a fused
``attn_qkv``, per-head ``attn_q_norm`` / ``attn_k_norm``, ``attn_output``, the post norms, an FFN whose ``ffn_up``
is 2 x feed_forward_length wide (gate and up together: ``ggml_swiglu``); ``attention.sliding_window`` optional
(then 7 of every 8 layers slide); ``output`` optional. The loader names the two post norms without a ``.weight``
suffix (``tn(LLM_TENSOR_ATTN_POST_NORM, i)``): ``blk.N.post_attention_norm`` and ``blk.N.post_ffw_norm``."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    ff = int(hp["n_ff"])
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    if hp["sliding_window"]:
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, hd * (n_head + 2 * n_kv)))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        s.add(p + "post_attention_norm", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_ffw_norm", (n_embd,), "norm")
        s.add(p + "ffn_up.weight", (n_embd, 2 * ff))
        s.add(p + "ffn_down.weight", (ff, n_embd))


register(
    "plamo3",
    build=_build,
    tiny=dict(head_dim=32, n_ff=192, sliding_window=64),
    sparse={
        # a PLaMo 3 of 8B size (its configuration is not available here): 32 layers of 4096, 32 query / 8 KV heads
        # of 128, intermediate 14336, a 2048-token window on 7 of every 8 layers, vocabulary 100000
        "plamo3-8b": dict(
            name="plamo-3-8b", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
            sliding_window=2048, n_ctx_train=65536, n_vocab=100000, quant="q4_k_m", file_type=15),
    },
)
