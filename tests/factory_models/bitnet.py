"""BitNet b1.58 (``bitnet``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/bitnet.cpp``: per layer
the llama projections each with an optional per-tensor ``.scale`` ({1}; written here, as the converter does for the
ternary weights), ``attn_sub_norm`` (n_embd) before ``attn_output``, ``ffn_sub_norm`` (n_ff) before ``ffn_down``;
no ``output`` tensor at all (the logits multiply ``token_embd``)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    _common_kv(s, hp, nl)
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        s.add(p + "attn_sub_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "ffn_sub_norm.weight", (hp["n_ff"],), "norm")
        for w in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            s.add(p + w + ".scale", (1,), "ones")


register(
    "bitnet",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # microsoft/bitnet-b1.58-2B-4T: 30 layers of 2560, 20 query / 5 KV heads, intermediate 6912, vocabulary
        # 128256, 4096 positions
        "bitnet-2b-4t": dict(
            name="bitnet-b1.58-2B-4T", n_layer=30, n_embd=2560, n_head=20, n_head_kv=5, n_ff=6912,
            n_ctx_train=4096, rope_base=500000.0, n_vocab=128256, quant="q4_k_m", file_type=15),
    },
)
