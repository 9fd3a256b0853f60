"""SmallThinker (``smallthinker``): ``llama_model_smallthinker::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/smallthinker.cpp``.

Every layer: attention with Q/K/V and output (no biases, no q/k norms; ``create_tensor_qkv`` also takes one fused
``attn_qkv``), then routed experts only: ``ffn_gate_inp`` and the three ``*_exps`` of ``expert_feed_forward_length``
(the converter writes the same width as ``feed_forward_length``). ``expert_gating_func`` must be written (softmax
1 or sigmoid 2, from ``moe_primary_router_apply_softmax``): llama.cpp aborts in ``build_moe_ffn`` on the default.
A ``sliding_window`` key > 0 turns on SWA (window forced to 4096, dense-first period 4); ``output.weight`` is
optional (tied embeddings on the 4B).
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, _experts, _per_layer, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    if hp.get("rope_dim") and int(hp["rope_dim"]) != hd:
        raise ValueError("smallthinker: the graph asserts n_rot == head dim")
    if int(hp["n_ff"]) != int(hp["n_ff_exp"]):
        raise ValueError("smallthinker: the converter writes feed_forward_length = expert_feed_forward_length")
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    if hp.get("sliding_window"):
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])


register(
    "smallthinker",
    build=_build,
    # 4 layers (layer 0 full attention without rope, 1-3 sliding), 4 heads of 32, 2 KV heads, 8 experts of 64
    # (2 used, softmax, as the 21B)
    tiny=dict(head_dim=32, n_ff=64, n_expert=8, n_expert_used=2, n_ff_exp=64, expert_gating_func=1,
              sliding_window=4096, rms_eps=1e-6, rope_base=1500000.0),
    sparse={
        # SmallThinker-21BA3B-Instruct (PowerInfer, now Tiiny): 52 layers, hidden 2560, 28 query / 4 KV heads of
        # 128, 64 experts of 768 (6 used, softmax router, normalised), sliding window 4096 on 39 layers (3 of 4;
        # the 13 full layers are NoPE), vocabulary 151936, untied output, rope theta 1.5e6 (21.5B parameters)
        "smallthinker-21b-a3b": dict(
            name="SmallThinker-21BA3B-Instruct", n_layer=52, n_embd=2560, n_head=28, n_head_kv=4, head_dim=128,
            n_ff=768, n_ff_exp=768, n_expert=64, n_expert_used=6, expert_gating_func=1, sliding_window=4096,
            n_ctx_train=16384, rope_base=1500000.0, n_vocab=151936, quant="q4_k_m", file_type=15),
        # SmallThinker-4BA0.6B-Instruct (config.json): 32 layers, hidden 1536, 12 query / 2 KV heads of 128,
        # 32 experts of 768 (4 used, sigmoid router, normalised), no sliding window (all layers rope), tied
        # embeddings, vocabulary 151936, 32768 context, rope theta 1.5e6
        "smallthinker-4b-a0.6b": dict(
            name="SmallThinker-4BA0.6B-Instruct", n_layer=32, n_embd=1536, n_head=12, n_head_kv=2, head_dim=128,
            n_ff=768, n_ff_exp=768, n_expert=32, n_expert_used=4, expert_gating_func=2, sliding_window=0,
            n_ctx_train=32768, rope_base=1500000.0, n_vocab=151936, tied_embeddings=True, quant="q4_k_m",
            file_type=15),
    },
)
