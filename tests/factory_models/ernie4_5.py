"""ERNIE 4.5 dense (``ernie4_5``, ``src/models/ernie4-5.cpp``): the llama tensors and layer; tied embeddings on the
published files (``output`` falls back to ``token_embd``)."""

from __future__ import annotations

from tests import gguf_factory as gf

gf.register(
    "ernie4_5",
    build=gf._build_llama_like,
    tiny=dict(head_dim=32, n_ff=192, rope_base=500000.0),
    sparse={
        # baidu/ERNIE-4.5-0.3B-PT: 18 layers of 1024, 16 query / 2 KV heads of 64, 128k context, tied embeddings
        "ernie-4.5-0.3b": dict(
            name="ERNIE-4.5-0.3B-PT", n_layer=18, n_embd=1024, n_head=16, n_head_kv=2, head_dim=64, n_ff=3072,
            n_ctx_train=131072, rope_base=500000.0, n_vocab=103424, tied_embeddings=True, quant="f16", file_type=1),
    },
)


def _build_paddleocr(s: gf.ModelSpec, hp: dict) -> None:
    """PaddleOCR-VL's text model (``paddleocr``: ERNIE 4.5's loader, qwen2vl's M-RoPE graph): the ERNIE tensors
    and ``rope.dimension_sections`` (its converter writes the M-RoPE sections)."""
    from gguf import GGUFValueType as VT

    gf._build_llama_like(s, hp)
    s.set("{arch}.rope.dimension_sections", [int(x) for x in hp["rope_sections"]], VT.INT32)


gf.register(
    "paddleocr",
    build=_build_paddleocr,
    tiny=dict(head_dim=32, n_ff=192, rope_base=500000.0, rope_sections=[4, 6, 6, 0]),
    sparse={
        # PaddlePaddle/PaddleOCR-VL's language model (ERNIE-4.5-0.3B): 18 layers of 1024, 16 query / 2 KV heads of
        # 128, intermediate 3072, M-RoPE sections 16/24/24, vocabulary 103424, tied embeddings
        "paddleocr-vl": dict(
            name="PaddleOCR-VL", n_layer=18, n_embd=1024, n_head=16, n_head_kv=2, head_dim=128, n_ff=3072,
            n_ctx_train=131072, rope_base=500000.0, rope_sections=[16, 24, 24, 0], n_vocab=103424,
            tied_embeddings=True, quant="f16", file_type=1),
    },
)
