"""MiniMax-M2 (``minimax-m2``): ``llama_model_minimax_m2::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/minimax-m2.cpp``.

Every layer: attention with Q/K/V (no biases) whose Q and K RMS norms span the whole projection
(``attn_q_norm`` {head_dim * n_head}, ``attn_k_norm`` {head_dim * n_head_kv}), rope on part of the head
(``rope.dimension_count`` 64 of 128), then routed experts only: ``ffn_gate_inp``, the three ``*_exps`` (of width
``feed_forward_length``: ``n_ff`` is what ``create_tensor`` sizes them with) and a required selection bias
``exp_probs_b.bias``; no shared expert, no dense layer. ``expert_gating_func`` must be written (sigmoid, 2):
llama.cpp aborts in ``build_moe_ffn`` on the default (none). ``output.weight`` is required.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, _experts, _per_layer, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    if len(set(kv)) != 1:
        raise ValueError("minimax-m2: attn_k_norm is sized n_embd_k_gqa, so head_count_kv must be uniform")
    if int(hp["n_ff_exp"]) != int(hp["n_ff"]):
        raise ValueError("minimax-m2: the experts are created with feed_forward_length (n_ff_exp must equal n_ff)")
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"] or hd))
    s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    _embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        if hp.get("fused_qkv"):  # create_tensor_qkv's fused layout (no published file uses it)
            s.add(p + "attn_qkv.weight", (n_embd, hd * (n_head + 2 * kv[i])))
            s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        else:
            _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd * n_head,), "norm")
        s.add(p + "attn_k_norm.weight", (hd * kv[i],), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
        s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")


register(
    "minimax-m2",
    build=_build,
    # 4 heads of 32 (n_head * head_dim = 128 != n_embd), 2 KV heads, rope on 16 of 32, 8 experts of 64 (2 used)
    tiny=dict(head_dim=32, rope_dim=16, n_ff=64, n_expert=8, n_expert_used=2, n_ff_exp=64, expert_gating_func=2,
              fused_qkv=False, rms_eps=1e-6, rope_base=5000000.0),
    sparse={
        # MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json; M2.1 and M2.5 share it): 62 layers, hidden 3072, 48 query /
        # 8 KV heads of 128 (rotary_dim 64), 256 experts of 1536 (8 used, sigmoid scoring with routing bias,
        # normalised), vocabulary 200064, 196608 context, rope theta 5e6
        "minimax-m2": dict(
            name="MiniMax-M2", n_layer=62, n_embd=3072, n_head=48, n_head_kv=8, head_dim=128, rope_dim=64,
            n_ff=1536, n_ff_exp=1536, n_expert=256, n_expert_used=8, n_ctx_train=196608, rope_base=5000000.0,
            n_vocab=200064, quant="q4_k_m", file_type=15),
        # the same model with one fused attn_qkv per layer (create_tensor_qkv's other layout, which llama.cpp
        # loads for this architecture; the published files keep Q, K and V apart)
        "minimax-m2-fused-qkv": dict(
            name="MiniMax-M2 (fused qkv)", n_layer=62, n_embd=3072, n_head=48, n_head_kv=8, head_dim=128,
            rope_dim=64, n_ff=1536, n_ff_exp=1536, n_expert=256, n_expert_used=8, n_ctx_train=196608,
            rope_base=5000000.0, n_vocab=200064, fused_qkv=True, quant="q4_k_m", file_type=15),
    },
)
