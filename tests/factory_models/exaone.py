"""EXAONE 3.5 (``exaone``, ``src/models/exaone.cpp``): the llama tensors and layer, with llama3-style rope scaling
written as a ``rope_freqs`` tensor (head_dim / 2 floats, created with layer 0 and duplicated for the others);
tied embeddings on the 2.4B."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_llama_like(s, hp)
    if hp["rope_freqs"]:
        hd = int(hp["head_dim"] or hp["n_embd"] // int(hp["n_head"]))
        s.add("rope_freqs.weight", (hd // 2,), "ones")


gf.register(
    "exaone",
    build=build,
    tiny=dict(n_ff=192, rope_base=1000000.0, rope_freqs=True),
    sparse={
        # LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct: 32 layers of 4096, 32/8 heads, llama3 rope scaling (factor 8)
        "exaone-3.5-7.8b": dict(
            name="EXAONE-3.5-7.8B-Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336,
            n_ctx_train=32768, rope_base=1000000.0, rope_freqs=True, n_vocab=102400, quant="q4_k_m", file_type=15),
        # LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct: 30 layers of 2560, 32/8 heads of 80, tied embeddings
        "exaone-3.5-2.4b": dict(
            name="EXAONE-3.5-2.4B-Instruct", n_layer=30, n_embd=2560, n_head=32, n_head_kv=8, n_ff=7168,
            n_ctx_train=32768, rope_base=1000000.0, rope_freqs=True, tied_embeddings=True, n_vocab=102400,
            quant="q4_k_m", file_type=15),
    },
)
