"""Deci / NAS-pruned Llama (``deci``: Llama-3.1/3.3-Nemotron Super 49B, Ultra 253B, Nemotron-51B):
``load_arch_tensors`` of ``src/models/deci.cpp``, per-layer ``head_count``, ``head_count_kv`` and
``feed_forward_length`` arrays. A layer with attention has ``attn_norm``, Q/K/V and ``attn_output``; one with
"linear" attention (``head_count`` > 0, ``head_count_kv`` 0) only ``attn_norm`` and an n_embd x n_embd
``attn_output``; one without attention (``head_count`` 0) none of them; a layer with an FFN (``n_ff`` > 0) has
``ffn_norm`` and the SwiGLU tensors."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _per_layer, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd = hp["n_layer"], hp["n_embd"]
    heads = _per_layer(hp["n_head"], nl)
    kv = _per_layer(hp["n_head_kv"], nl)
    ffs = _per_layer(hp["n_ff"], nl)
    hd = int(hp["head_dim"])
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        if heads[i] > 0:
            s.add(p + "attn_norm.weight", (n_embd,), "norm")
            if kv[i] > 0:
                _attn_qkvo(s, i, n_embd, hd * heads[i], hd * kv[i], hd * kv[i])
            else:
                s.add(p + "attn_output.weight", (n_embd, n_embd))
        if ffs[i] > 0:
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
            _dense_ffn(s, i, n_embd, ffs[i])


def _super49b_shape() -> tuple[list[int], list[int], list[int]]:
    """80 layers of 8192 as Super 49B's NAS leaves them, roughly: attention dropped from about a third of the
    middle layers, a few replaced by a linear layer, a handful without an FFN, FFN widths from 5376 to 28672."""
    heads, kv, ffs = [], [], []
    for i in range(80):
        if 20 <= i < 70 and i % 3 == 0:
            heads.append(0)
            kv.append(0)
        elif i in (41, 53):
            heads.append(64)
            kv.append(0)
        else:
            heads.append(64)
            kv.append(8)
        ffs.append(0 if i in (55, 62) else (28672 if i < 20 or i >= 70 else (14336 if i % 2 else 5376)))
    return heads, kv, ffs


_H, _KV, _FF = _super49b_shape()

register(
    "deci",
    build=_build,
    # 6 layers: full, no attention, linear attention, attention without FFN, full, full (wider FFN)
    tiny=dict(n_layer=6, head_dim=16, n_head=[4, 0, 4, 4, 4, 4], n_head_kv=[2, 0, 0, 2, 2, 2],
              n_ff=[128, 128, 128, 0, 128, 256], rope_base=500000.0),
    sparse={
        "nemotron-super-49b": dict(
            name="Llama-3.3-Nemotron-Super-49B-shaped", n_layer=80, n_embd=8192, head_dim=128, n_head=_H,
            n_head_kv=_KV, n_ff=_FF, n_ctx_train=131072, rope_base=500000.0, n_vocab=128256, quant="q4_k_m",
            file_type=15),
    },
)
