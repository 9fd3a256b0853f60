"""Chameleon (``chameleon``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/chameleon.cpp``: the
llama tensors plus per-head Q/K layer-norm weights (head x n_head, head x n_head_kv; biases optional, none
written), ``swin_norm`` optional (the 30B sets it), ``output`` optional. The vocabulary must reach the image
tokens the graph masks (4 .. 8196)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    _common_kv(s, hp, nl)
    if hp["swin_norm"]:
        s.set("{arch}.swin_norm", True)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd, n_head), "norm")
        s.add(p + "attn_k_norm.weight", (hd, n_kv), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "chameleon",
    build=_build,
    tiny=dict(n_ff=192, n_vocab=8448, swin_norm=False),
    sparse={
        # facebook/chameleon-7b: 32 layers of 4096, 32 heads (no GQA), intermediate 11008, vocabulary 65536
        "chameleon-7b": dict(
            name="chameleon-7b", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=11008, n_ctx_train=4096,
            n_vocab=65536, swin_norm=False, quant="q4_k_m", file_type=15),
        # facebook/chameleon-30b: 48 layers of 8192, 64 query / 8 KV heads, intermediate 22016, swin norm
        "chameleon-30b": dict(
            name="chameleon-30b", n_layer=48, n_embd=8192, n_head=64, n_head_kv=8, n_ff=22016, n_ctx_train=4096,
            n_vocab=65536, swin_norm=True, quant="q4_k_m", file_type=15),
    },
)
