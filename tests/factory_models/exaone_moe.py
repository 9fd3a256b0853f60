"""K-EXAONE (``exaone-moe``): ``llama_model_exaone_moe::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/exaone-moe.cpp``.

Every layer: ``attn_norm``, Q/K/V/O without biases (head_dim * n_head wide), Q/K RMS norms of head size,
``ffn_norm``; a dense SwiGLU FFN (``feed_forward_length``) on the ``leading_dense_block_count`` first layers, else
the router, an optional selection bias ``exp_probs_b.bias``, the three ``*_exps`` (``expert_feed_forward_length``)
and one gated shared expert (``expert_shared_feed_forward_length``). ``block_count`` counts the NextN/MTP blocks
(``nextn_predict_layers``, all ``TENSOR_SKIP``): a dense FFN plus ``nextn.eh_proj``/``enorm``/``hnorm``/
``shared_head_norm``. Required keys: ``attention.sliding_window`` and ``expert_gating_func``; the sliding pattern is
written as convert_hf_to_gguf writes it (one bool per main layer, from ``layer_types``), 3 sliding then 1 global.
``rope.dimension_count`` must equal the head size (the graph asserts it); ``output.weight`` is required.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (
    VT,
    ModelSpec,
    _attn_qkvo,
    _common_kv,
    _dense_ffn,
    _embeddings,
    _experts,
    _moe_keys,
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
    s.set("{arch}.rope.dimension_count", hd)
    _moe_keys(s, hp)
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_exp"]) * int(hp["n_expert_shared"]))
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    period = int(hp["swa_period"])
    s.set("{arch}.attention.sliding_window_pattern", [(i + 1) % period != 0 for i in range(nl)], VT.BOOL)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp, output_required=True)
    for i in range(nall):
        p = f"blk.{i}."
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"] or i >= nl:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if hp.get("exp_probs_b"):
                s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, hp["n_ff_exp"] * hp["n_expert_shared"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


register(
    "exaone-moe",
    build=_build,
    # 4 main layers (3 sliding over 128 tokens, 1 global) + 1 NextN block, 1 dense leading layer, 8 experts of 64
    # (2 used, sigmoid with selection bias) + 1 shared expert
    tiny=dict(n_nextn=1, head_dim=32, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=1,
              n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True,
              exp_probs_b=True, sliding_window=128, swa_period=4, rms_eps=1e-5, rope_base=1000000.0),
    sparse={
        # K-EXAONE-236B-A23B (LGAI-EXAONE/K-EXAONE-236B-A23B config.json): 48 layers + 1 MTP layer, hidden 6144,
        # 64 query / 8 KV heads of 128, first layer dense (intermediate 18432), 128 experts of 2048 (8 used,
        # sigmoid routing with e_score_correction_bias, normalised, scaled 2.5) + 1 shared expert, sliding window
        # 128 on 3 of every 4 layers (LLLG), vocabulary 153600, 262144 context, rope theta 1e6
        "k-exaone-236b-a23b": dict(
            name="K-EXAONE-236B-A23B", n_layer=48, n_nextn=1, n_embd=6144, n_head=64, n_head_kv=8, head_dim=128,
            n_ff=18432, n_ff_exp=2048, n_expert=128, n_expert_used=8, n_expert_shared=1, n_layer_dense_lead=1,
            n_ctx_train=262144, rope_base=1000000.0, n_vocab=153600, quant="q4_k_m", file_type=15),
    },
)
