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
