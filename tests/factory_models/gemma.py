"""Gemma (``gemma``, Gemma 2B/7B and CodeGemma): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/gemma.cpp``. Every layer: ``attn_norm``, Q/K/V/O without biases (head_dim x n_head wide, 256 on the
published models), ``ffn_norm``, a gated FFN; the head is always ``token_embd`` again (``TENSOR_DUPLICATED``);
``attention.layer_norm_rms_epsilon`` is required."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = gf._per_layer(hp["n_head_kv"], nl)
    gf._common_kv(s, hp, nl)
    gf._embeddings(s, dict(hp, tied_embeddings=True))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, hp["n_ff"])


gf.register(
    "gemma",
    build=build,
    tiny=dict(head_dim=32, n_ff=256, rms_eps=1e-6),
    sparse={
        # google/gemma-7b-it: 28 layers of 3072, 16 heads of 256 (no GQA), intermediate 24576, vocabulary 256000
        "gemma-7b": dict(
            name="gemma-7b-it", n_layer=28, n_embd=3072, n_head=16, n_head_kv=16, head_dim=256, n_ff=24576,
            n_ctx_train=8192, n_vocab=256000, quant="q4_k_m", file_type=15),
        # google/gemma-2b-it: 18 layers of 2048, 8 query heads of 256 and one KV head, intermediate 16384
        "gemma-2b": dict(
            name="gemma-2b-it", n_layer=18, n_embd=2048, n_head=8, n_head_kv=1, head_dim=256, n_ff=16384,
            n_ctx_train=8192, n_vocab=256000, quant="q4_k_m", file_type=15),
    },
)
