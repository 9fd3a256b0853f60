"""Tencent Hy3 (``hy_v3``): ``llama_model_hy_v3::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/hy-v3.cpp``.

Every layer: ``attn_norm``, Q/K/V/O without biases (head_dim * n_head wide), Q/K RMS norms of head size and
``ffn_norm``; a dense SwiGLU FFN (``feed_forward_length``) where the layer has no router (the first layer of the
published model), else the router, the selection bias ``exp_probs_b`` (read without a ``.bias`` suffix:
``tn(LLM_TENSOR_FFN_EXP_PROBS_B, i)``), the three ``*_exps``
(``expert_feed_forward_length``) and one ungated shared expert (``expert_shared_feed_forward_length``).
``block_count`` counts the MTP blocks (``nextn_predict_layers``): a full decoder block (MoE in the published
model) plus ``nextn.eh_proj``/``enorm``/``hnorm`` and ``nextn.shared_head_norm`` (the block's final layernorm).
Keys as ``conversion/hunyuan.py`` (HYV3Model) writes them: ``expert_weights_norm`` (route_norm),
``expert_weights_scale`` (router_scaling_factor), ``expert_gating_func`` = sigmoid; no sliding window, rope over the
whole head (the graph asserts it). ``output.weight`` is optional (tied embeddings).
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
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nall)
    _common_kv(s, hp, nall)
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_gating_func", 2)  # LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b", (hp["n_expert"],), "zero")  # tn(LLM_TENSOR_FFN_EXP_PROBS_B, i): no suffix
            _shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


register(
    "hy_v3",
    build=_build,
    # 4 main layers + 1 MoE MTP block, the first layer dense, 8 experts of 64 (2 used, sigmoid with selection bias,
    # normalised, scaled 2.5) + a shared expert
    tiny=dict(n_nextn=1, head_dim=16, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=64,
              n_layer_dense=1, expert_weights_norm=True, expert_weights_scale=2.5, rope_base=11158840.0),
    sparse={
        # Hy3-preview (tencent/Hy3-preview model card and config.json as quoted by NeMo AutoModel's hy_v3 module):
        # 80 layers + 1 MTP layer (3.8B parameters: a MoE block), hidden 4096, 64 query / 8 KV heads of 128,
        # layer 0 dense (intermediate 13312), then 192 experts of 1536 (top-8, sigmoid with
        # e_score_correction_bias, normalised) + 1 shared expert, vocabulary 120832, 262144 context, rope theta
        # 11158840. The expert width is not on the card: 1536 is what the 295B total and the 3.8B MTP layer give.
        # router_scaling_factor: the converter's default 1.0 (not on the card).
        "hy3-preview": dict(
            name="Hy3-preview", n_layer=80, n_nextn=1, n_embd=4096, n_head=64, n_head_kv=8, head_dim=128,
            n_ff=13312, n_ff_exp=1536, n_ff_shexp=1536, n_expert=192, n_expert_used=8, n_layer_dense=1,
            expert_weights_scale=1.0, n_ctx_train=262144, rope_base=11158840.0, n_vocab=120832, quant="q4_k_m",
            file_type=15),
    },
)
