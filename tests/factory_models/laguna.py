"""Laguna (``laguna``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/laguna.cpp``:
``leading_dense_block_count`` required, ``attention.sliding_window`` optional (then every 4th layer from the
first is global); per layer the llama attention with per-head Q/K norms and ``attn_gate`` (n_embd x n_head: one
softplus gate per head, or n_embd x n_head*head for one per element), then a dense SwiGLU FFN on the leading
layers, else experts with ``exp_probs_b`` and a gated shared expert; ``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts,
                                _shared_expert, register)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    lead = int(hp["n_layer_dense_lead"])
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.leading_dense_block_count", lead)
    s.set("{arch}.expert_shared_count", 1)
    s.set("{arch}.expert_weights_norm", True)
    if hp["sliding_window"]:
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_gate.weight", (n_embd, n_head if hp["gate_per_head"] else n_head * hd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < lead:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "bias")
            _shared_expert(s, i, n_embd, hp["n_ff_exp"])


register(
    "laguna",
    build=_build,
    tiny=dict(head_dim=32, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, n_layer_dense_lead=1,
              sliding_window=64, gate_per_head=True),
    sparse={
        # a Laguna MoE (its configuration is not available here): 48 layers of 2048 (the first dense, 8192 wide),
        # 32 query / 4 KV heads of 128, 128 sigmoid experts of 768 (8 used) plus a shared one, a 4096-token window
        # on 3 of every 4 layers, a gate per head, vocabulary 100352
        "laguna-moe": dict(
            name="Laguna-MoE", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=8192,
            n_expert=128, n_expert_used=8, n_ff_exp=768, n_layer_dense_lead=1, sliding_window=4096,
            gate_per_head=True, n_ctx_train=131072, n_vocab=100352, quant="q4_k_m", file_type=15),
        # the same with one gate per element and no window
        "laguna-moe-elem": dict(
            name="Laguna-MoE-elem", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=8192,
            n_expert=128, n_expert_used=8, n_ff_exp=768, n_layer_dense_lead=1, sliding_window=0,
            gate_per_head=False, n_ctx_train=131072, n_vocab=100352, quant="q4_k_m", file_type=15),
    },
)
