"""ChatGLM3 / GLM-4-9B (``chatglm``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/chatglm.cpp``.
Every layer: ``attn_norm``, one fused ``attn_qkv`` with its bias (as the converter writes it), ``attn_output``,
``ffn_norm``, ``ffn_up`` of 2 x ``feed_forward_length`` (gate and up in one) and ``ffn_down``; a partial rope
(half the head); ``output.weight`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    n_ff = int(hp["n_ff"])
    n_qkv = n_embd + 2 * hd * n_kv
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, n_qkv))
        s.add(p + "attn_qkv.bias", (n_qkv,), "bias")
        s.add(p + "attn_output.weight", (n_embd, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_up.weight", (n_embd, 2 * n_ff))
        s.add(p + "ffn_down.weight", (n_ff, n_embd))


register(
    "chatglm",
    build=_build,
    tiny=dict(n_head_kv=2, n_ff=192, rope_dim=8),
    sparse={
        # THUDM/glm-4-9b-chat: 40 layers of 4096, 32 query / 2 KV heads of 128 (rope over 64), FFN 13696,
        # vocabulary 151552, 131072 positions
        "glm-4-9b-chat": dict(
            name="glm-4-9b-chat", n_layer=40, n_embd=4096, n_head=32, n_head_kv=2, n_ff=13696, rope_dim=64,
            n_ctx_train=131072, rope_base=5000000.0, n_vocab=151552, quant="q4_k_m", file_type=15),
        # THUDM/chatglm3-6b: 28 layers of 4096, 32 query / 2 KV heads, FFN 13696, vocabulary 65024
        "chatglm3-6b": dict(
            name="chatglm3-6b", n_layer=28, n_embd=4096, n_head=32, n_head_kv=2, n_ff=13696, rope_dim=64,
            n_ctx_train=8192, n_vocab=65024, quant="q4_k_m", file_type=15),
    },
)
