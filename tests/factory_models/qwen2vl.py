"""Qwen2-VL / Qwen2.5-VL, the language model (``qwen2vl``, ``src/models/qwen2vl.cpp``): Qwen2's tensors (qkv
biases) with M-RoPE, whose ``rope.dimension_sections`` llama.cpp requires (``mrope_section`` padded to 4)."""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_qwen2(s, hp)
    s.set("{arch}.rope.dimension_sections", [int(x) for x in hp["rope_sections"]], VT.INT32)


gf.register(
    "qwen2vl",
    build=build,
    tiny=dict(n_ff=192, rms_eps=1e-6, rope_base=1000000.0, rope_sections=(2, 3, 3, 0)),
    sparse={
        # Qwen/Qwen2.5-VL-7B-Instruct's text model: 28 layers of 3584, 28/4 heads, mrope_section [16, 24, 24]
        "qwen2.5-vl-7b": dict(
            name="Qwen2.5-VL-7B-Instruct", n_layer=28, n_embd=3584, n_head=28, n_head_kv=4, n_ff=18944,
            rope_sections=(16, 24, 24, 0), n_ctx_train=128000, rope_base=1000000.0, n_vocab=152064, quant="q4_k_m",
            file_type=15),
        # Qwen/Qwen2.5-VL-3B-Instruct: 36 layers of 2048, 16/2 heads, tied embeddings
        "qwen2.5-vl-3b": dict(
            name="Qwen2.5-VL-3B-Instruct", n_layer=36, n_embd=2048, n_head=16, n_head_kv=2, n_ff=11008,
            rope_sections=(16, 24, 24, 0), n_ctx_train=128000, rope_base=1000000.0, n_vocab=151936,
            tied_embeddings=True, quant="q4_k_m", file_type=15),
    },
)
