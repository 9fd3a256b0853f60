"""Arcee Trinity (``afmoe``): ``llama_model_afmoe::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/afmoe.cpp``.

Every layer: ``attn_norm`` and ``post_attention_norm``, Q/K/V/O without biases (head_dim * n_head wide), Q/K RMS
norms of head size, the attention gate ``attn_gate`` {n_embd, head_dim * n_head}, ``ffn_norm`` and
``post_ffw_norm``; a dense SwiGLU FFN on the ``leading_dense_block_count`` first layers, else the router, a
required selection bias ``exp_probs_b.bias``, the three ``*_exps`` and, when ``expert_shared_count`` > 0, a gated
shared expert of ``expert_feed_forward_length * expert_shared_count``. Keys as convert_hf_to_gguf writes them:
``expert_shared_count`` (required), ``leading_dense_block_count``, ``expert_weights_norm``/``_scale`` and
``attention.sliding_window`` (SWA on 3 of every 4 layers, llama.cpp's default pattern, when it is > 0); no
``expert_gating_func`` (llama.cpp then uses sigmoid). ``output.weight`` is optional (tied embeddings).
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (
    ModelSpec,
    _attn_qkvo,
    _common_kv,
    _dense_ffn,
    _embeddings,
    _experts,
    _per_layer,
    _shared_expert,
    register,
)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    if hp.get("sliding_window"):
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_gate.weight", (n_embd, hd * n_head))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            if hp["n_expert_shared"]:
                _shared_expert(s, i, n_embd, hp["n_ff_exp"] * hp["n_expert_shared"])


register(
    "afmoe",
    build=_build,
    # 4 layers (3 sliding over 128 tokens, 1 global without rope), 1 dense leading layer, 8 experts of 64 (2 used,
    # sigmoid with selection bias, normalised, scaled) + 1 shared expert
    tiny=dict(head_dim=32, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=1,
              n_layer_dense_lead=1, expert_weights_scale=2.826, expert_weights_norm=True, sliding_window=128,
              rope_base=10000.0),
    sparse={
        # Trinity Mini (arcee-ai/Trinity-Mini config.json): 32 layers, hidden 2048, 32 query / 4 KV heads of 128,
        # 2 dense layers (intermediate 6144), 128 experts of 1024 (8 used, sigmoid routing with expert bias,
        # route_norm, route_scale 2.826) + 1 shared expert, sliding window 2048 on 3 of every 4 layers,
        # vocabulary 200192, 131072 context
        "trinity-mini": dict(
            name="Trinity-Mini", n_layer=32, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=6144,
            n_ff_exp=1024, n_expert=128, n_expert_used=8, n_expert_shared=1, n_layer_dense_lead=2,
            sliding_window=2048, n_ctx_train=131072, rope_base=10000.0, n_vocab=200192, quant="q4_k_m",
            file_type=15),
    },
)
