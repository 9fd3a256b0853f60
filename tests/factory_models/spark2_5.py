"""Spark 2.5 (``spark2_5``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/spark2-5.cpp``:
``attention.sliding_window`` and the per-layer ``attention.sliding_window_pattern`` array are required; per
layer the llama tensors plus ``attn_gate`` (n_embd x n_head, a sigmoid gate per head); ``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    period = int(hp["swa_period"])  # 1 global layer in every `period`, the last of each group
    s.set("{arch}.attention.sliding_window_pattern", [il % period < period - 1 for il in range(nl)])
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_gate.weight", (n_embd, n_head))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "spark2_5",
    build=_build,
    tiny=dict(n_ff=192, sliding_window=64, swa_period=2),
    sparse={
        # a Spark 2.5 of 8B size (its configuration is not available here): 32 layers of 4096, 32 query / 8 KV heads
        # of 128, intermediate 14336, a 4096-token window on 3 of every 4 layers, vocabulary 130048
        "spark2.5-8b": dict(
            name="Spark2.5-8B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336, sliding_window=4096,
            swa_period=4, n_ctx_train=131072, n_vocab=130048, quant="q4_k_m", file_type=15),
    },
)
