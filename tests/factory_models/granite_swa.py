"""Granite SWA (``granite_swa``, dense and MoE): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/granite-swa.cpp``: ``logit_scale``, ``attention.sliding_window`` and the per-layer
``attention.sliding_window_pattern`` array required (``residual_scale``, ``embedding_scale``, ``attention.scale``
optional); per layer the llama attention with ``attn_sinks`` (n_head, required), then a dense SwiGLU FFN, or
experts (``feed_forward_length`` wide) with a shared expert whose ``ffn_up_shexp`` is 2 x
``expert_shared_feed_forward_length`` wide (gate and up together); ``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.set("{arch}.residual_scale", 0.22)
    s.set("{arch}.embedding_scale", 12.0)
    s.set("{arch}.attention.scale", 0.0078125)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    period = int(hp["swa_period"])
    s.set("{arch}.attention.sliding_window_pattern", [il % period < period - 1 for il in range(nl)])
    if hp.get("n_ff_shexp"):
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_sinks.weight", (n_head,), "zero")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if hp.get("n_expert"):
            _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
            if hp.get("n_ff_shexp"):
                s.add(p + "ffn_up_shexp.weight", (n_embd, 2 * int(hp["n_ff_shexp"])))
                s.add(p + "ffn_down_shexp.weight", (int(hp["n_ff_shexp"]), n_embd))
        else:
            _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "granite_swa",
    build=_build,
    tiny=dict(n_ff=192, sliding_window=64, swa_period=4, logit_scale=8.0, n_expert=None, n_expert_used=None,
              n_ff_shexp=None),
    sparse={
        # a dense Granite SWA of 8B size (GraniteSWAForCausalLM; its configuration is not available here): 40
        # layers of 4096, 32 query / 8 KV heads of 128, intermediate 12800, a 4096-token window on 3 of every 4
        # layers, vocabulary 100352
        "granite-swa-8b": dict(
            name="granite-swa-8b", n_layer=40, n_embd=4096, n_head=32, n_head_kv=8, n_ff=12800, sliding_window=4096,
            swa_period=4, logit_scale=16.0, n_ctx_train=131072, n_vocab=100352, quant="q4_k_m", file_type=15),
        # a Granite MoE SWA (GraniteMoeSWAForCausalLM): 32 layers of 2048, 32 query / 8 KV heads of 64, 64
        # experts of 1024 (8 used) plus a shared expert of 1024, window 4096 on 3 of every 4 layers
        "granite-swa-moe": dict(
            name="granite-moe-swa", n_layer=32, n_embd=2048, n_head=32, n_head_kv=8, n_ff=1024, n_expert=64,
            n_expert_used=8, n_ff_shexp=1024, sliding_window=4096, swa_period=4, logit_scale=8.0,
            n_ctx_train=131072, n_vocab=100352, quant="q4_k_m", file_type=15),
    },
)
