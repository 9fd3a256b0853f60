"""StepFun Step-3.5-Flash (``step35``): ``llama_model_step35::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/step35.cpp``.

Every layer: ``attn_norm``, Q/K/V/O without biases (head_dim * n_head[il] wide: the sliding layers have more
query heads than the full ones), Q/K RMS norms of head size, the head-wise attention gate ``attn_gate``
{n_embd, n_head[il]} and ``ffn_norm``; a dense SwiGLU FFN (``feed_forward_length``) where the layer has no router
(the ``leading_dense_block_count`` first layers), else the router, the selection bias ``exp_probs_b.bias``, the
three ``*_exps`` (``expert_feed_forward_length``) and one ungated shared expert
(``expert_shared_feed_forward_length``). ``block_count`` counts the MTP blocks (``nextn_predict_layers``, all
``TENSOR_SKIP`` unless MTP is asked for): a full decoder layer (dense here, as the published MoE layer list
stops at the last trunk layer) plus ``nextn.eh_proj``/``enorm``/``hnorm``/``shared_head_norm``.

Keys as ``conversion/step3.py`` writes them: per-layer ``attention.head_count``/``head_count_kv`` arrays and a
``attention.sliding_window_pattern`` bool per block (MTP blocks included, from ``layer_types``: one full layer,
then three sliding), ``attention.sliding_window`` (required), ``rope.freq_base_swa``, ``expert_weights_scale``
(``moe_router_scaling_factor``) and ``expert_weights_norm``; no ``expert_gating_func`` (llama.cpp then uses
sigmoid) and no ``rope.dimension_count`` (the full layers rotate half the head, the sliding ones all of it).
``rope_freqs.weight`` (llama3 rope factors, n_rot_max / 2 wide, shared by the full layers through
``TENSOR_DUPLICATED``) is optional. ``output.weight`` is required.
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
    _shared_expert,
    register,
)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd = hp["n_layer"], hp["n_embd"]
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hd = int(hp["head_dim"])
    period = int(hp["swa_period"])
    swa = [il % period != 0 for il in range(nall)]  # layer_types: full, then period-1 sliding
    heads = [int(hp["n_head_swa"] if w else hp["n_head"]) for w in swa]
    kv = [int(hp["n_head_kv"])] * nall
    _common_kv(s, hp, nall)
    s.set("{arch}.attention.head_count", heads)
    s.set("{arch}.attention.head_count_kv", kv)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attention.sliding_window_pattern", swa, VT.BOOL)
    s.set("{arch}.rope.freq_base_swa", float(hp["rope_base_swa"]))
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp, output_required=True)
    if hp.get("rope_freqs"):
        s.add("rope_freqs.weight", (hd // 2,), "norm")  # n_rot_max / 2 (the sliding layers rotate the whole head)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * heads[i], hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_gate.weight", (n_embd, heads[i]))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"] or i >= nl:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            _shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


register(
    "step35",
    build=_build,
    # 4 main layers (1 full with 4 query heads, then 3 sliding over 128 tokens with 6) + 1 MTP block, 1 dense
    # leading layer, 8 experts of 64 (2 used, sigmoid with selection bias, normalised, scaled 3) + a shared expert
    tiny=dict(n_nextn=1, head_dim=16, n_head=4, n_head_swa=6, n_head_kv=2, n_ff=128, n_expert=8, n_expert_used=2,
              n_ff_exp=64, n_ff_shexp=64, n_layer_dense_lead=1, expert_weights_scale=3.0, expert_weights_norm=True,
              sliding_window=128, swa_period=4, rope_base=5000000.0, rope_base_swa=10000.0, rope_freqs=False),
    sparse={
        # Step-3.5-Flash (stepfun-ai/Step-3.5-Flash README "Architecture Details" and config.json): 45 layers + 3
        # MTP layers (sliding attention + dense FFN), hidden 4096, head_dim 128, full-attention layers (every 4th
        # from layer 0: the per-layer rope_theta list 5e6/1e4/1e4/1e4) 64 query / 8 KV heads rotating half the
        # head, sliding layers 96 query / 8 KV heads (attention_other_setting), head-wise attention gate, layers
        # 0-2 dense (intermediate 11264; moe_layers_enum starts at 3), then 288 experts of 1280 (top-8, sigmoid
        # with router bias, normalised) + 1 shared expert of 1280, vocabulary 128896, 262144 context. The window
        # (512), the 96 sliding heads, moe_layers_enum and moe_router_scaling_factor (3.0) are config.json values
        # as remembered, not re-read here (one cookbook says a 128-token window)
        "step-3.5-flash": dict(
            name="Step-3.5-Flash", n_layer=45, n_nextn=3, n_embd=4096, n_head=64, n_head_swa=96, n_head_kv=8,
            head_dim=128, n_ff=11264, n_ff_exp=1280, n_ff_shexp=1280, n_expert=288, n_expert_used=8,
            n_layer_dense_lead=3, sliding_window=512, n_ctx_train=262144, n_vocab=128896, quant="q4_k_m",
            file_type=15),
        # the same with llama3 rope factors (rope_freqs.weight, as conversion/step3.py writes them for a
        # rope_scaling of type llama3): one copy per device holding a full-attention layer
        "step-3.5-flash-rf": dict(
            name="Step-3.5-Flash", n_layer=45, n_nextn=3, n_embd=4096, n_head=64, n_head_swa=96, n_head_kv=8,
            head_dim=128, n_ff=11264, n_ff_exp=1280, n_ff_shexp=1280, n_expert=288, n_expert_used=8,
            n_layer_dense_lead=3, sliding_window=512, n_ctx_train=262144, n_vocab=128896, quant="q4_k_m",
            file_type=15, rope_freqs=True),
    },
)
