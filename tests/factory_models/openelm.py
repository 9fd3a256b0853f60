"""OpenELM (``openelm``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/openelm.cpp``: per-layer
``attention.head_count`` / ``head_count_kv`` / ``feed_forward_length`` arrays (the converter writes OpenELM's
layer-wise scaling), one fused ``attn_qkv`` of (n_head + 2 n_head_kv) heads, per-head ``attn_q_norm`` /
``attn_k_norm``, no ``output`` (the embeddings are the head, TENSOR_DUPLICATED)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _n_vocab, register


def _scaled(lo: float, hi: float, n: int, mult: float = 1.0, div: int = 1) -> list[int]:
    """OpenELM's layer-wise scaling: ``lo`` to ``hi`` linearly over the layers, times ``mult``, rounded down to a
    multiple of ``div``."""
    out = []
    for i in range(n):
        x = (lo + (hi - lo) * i / max(1, n - 1)) * mult
        out.append(max(div, int(x) // div * div))
    return out


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, hd = hp["n_layer"], hp["n_embd"], int(hp["head_dim"])
    heads = _scaled(hp["q_heads"][0], hp["q_heads"][1], nl, div=int(hp["gqa"]))  # whole GQA groups
    kv = [h // int(hp["gqa"]) for h in heads]
    ff = _scaled(hp["ffn_mult"][0], hp["ffn_mult"][1], nl, n_embd, 256)
    hp = dict(hp, n_head=heads, n_head_kv=kv, n_ff=ff)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, (heads[i] + 2 * kv[i]) * hd))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_output.weight", (heads[i] * hd, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_gate.weight", (n_embd, ff[i]))
        s.add(p + "ffn_down.weight", (ff[i], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, ff[i]))


register(
    "openelm",
    build=_build,
    tiny=dict(head_dim=16, q_heads=(4, 8), gqa=4, ffn_mult=(0.5, 4.0)),
    sparse={
        # apple/OpenELM-3B-Instruct: 36 layers of 3072, heads of 128 scaled 12 -> 24 (KV 3 -> 6), FFN 0.5x -> 4x of
        # the model width, vocabulary 32000, 2048 positions
        "openelm-3b": dict(
            name="OpenELM-3B-Instruct", n_layer=36, n_embd=3072, head_dim=128, q_heads=(12, 24), gqa=4,
            ffn_mult=(0.5, 4.0), n_ctx_train=2048, n_vocab=32000, quant="q4_k_m", file_type=15),
        # apple/OpenELM-1_1B-Instruct: 28 layers of 2048, heads of 64 scaled 16 -> 32 (KV 4 -> 8)
        "openelm-1.1b": dict(
            name="OpenELM-1_1B-Instruct", n_layer=28, n_embd=2048, head_dim=64, q_heads=(16, 32), gqa=4,
            ffn_mult=(0.5, 4.0), n_ctx_train=2048, n_vocab=32000, quant="q4_k_m", file_type=15),
    },
)
