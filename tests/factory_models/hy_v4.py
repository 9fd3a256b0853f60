"""Tencent Hy4 (``hy_v4``, ``src/models/hy-v4.cpp``) as ``conversion/hy_v4.py`` writes it: DeepSeek-V2's MLA and
MoE keys (``head_count_kv`` 1, ``key_length``/``value_length`` of the latent, the ``*_mla`` lengths, split
``attn_k_b``/``attn_v_b``; the converter drops n_group/topk_group of 1 and writes sigmoid gating) plus, per layer,
``attn_sinks`` (n_head), ``attn_gate`` (n_embd x n_head * v_head_dim), the iHC tensors ``hc_attn_fn``/``hc_ffn_fn``
(hc * n_embd x 2 * hc, kept f32 by the converter), ``hc_*_base`` (2 * hc) and ``hc_*_scale`` (2), and the global
``output_hc_fn`` (hc * n_embd x hc), ``output_hc_base`` (hc) and ``output_hc_scale`` (1); the keys
``hyper_connection.count``/``epsilon``/``magnitude`` and ``swiglu_clamp_exp`` (per layer). A DSA checkpoint adds
``attention.indexer.head_count``/``key_length``/``top_k`` and ``attention.indexer.types`` (one bool per layer,
layer 0 full), and the indexer tensors on the full layers only (``indexer.attn_q_b``, ``indexer.attn_k``,
``indexer.k_norm`` weight and bias, ``indexer.proj``); the all-full-attention checkpoints have none of them.
The MTP layers are dropped by the converter."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_deepseek2(s, hp)
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    q_lora, v_dim, hc = int(hp["q_lora_rank"]), int(hp["v_head_dim"]), int(hp["hc_mult"])
    s.set("{arch}.hyper_connection.count", hc)
    s.set("{arch}.hyper_connection.epsilon", 1e-6)
    s.set("{arch}.hyper_connection.magnitude", 2.0)
    s.set("{arch}.swiglu_clamp_exp", [float(hp["swiglu_limit"])] * nl)
    top_k = int(hp["indexer_top_k"] or 0)
    full = [False] * nl
    if top_k:
        n_ih, hs = int(hp["indexer_n_head"]), int(hp["indexer_head_size"])
        full = [bool(t) for t in hp["indexer_types"]]
        if len(full) != nl or not full[0]:
            raise ValueError("indexer_types needs one entry per layer, the first full")
        s.set("{arch}.attention.indexer.head_count", n_ih)
        s.set("{arch}.attention.indexer.key_length", hs)
        s.set("{arch}.attention.indexer.top_k", top_k)
        s.set("{arch}.attention.indexer.types", full)
    out: list[gf.TensorSpec] = []
    for t in s.tensors:
        out.append(t)
        if t.name == "output_norm.weight":
            out.append(gf.TensorSpec("output_hc_fn.weight", (hc * n_embd, hc), gf.F16, "router"))
            out.append(gf.TensorSpec("output_hc_base.weight", (hc,), gf.F16, "bias"))
            out.append(gf.TensorSpec("output_hc_scale.weight", (1,), gf.F16, "bias"))
        if t.name.startswith("blk.") and t.name.endswith(".attn_output.weight"):
            il = gf._layer_of(t.name) or 0
            p = f"blk.{il}."
            out.append(gf.TensorSpec(p + "attn_sinks.weight", (n_head,), gf.F16, "zero"))
            out.append(gf.TensorSpec(p + "attn_gate.weight", (n_embd, n_head * v_dim), gf.F16, "weight"))
            for which in ("attn", "ffn"):
                out.append(gf.TensorSpec(p + f"hc_{which}_fn.weight", (hc * n_embd, 2 * hc), gf.F16, "router"))
                out.append(gf.TensorSpec(p + f"hc_{which}_base.weight", (2 * hc,), gf.F16, "bias"))
                out.append(gf.TensorSpec(p + f"hc_{which}_scale.weight", (2,), gf.F16, "bias"))
            if full[il]:
                out.append(gf.TensorSpec(p + "indexer.k_norm.weight", (hs,), gf.F16, "norm"))
                out.append(gf.TensorSpec(p + "indexer.k_norm.bias", (hs,), gf.F16, "bias"))
                out.append(gf.TensorSpec(p + "indexer.proj.weight", (n_embd, n_ih), gf.F16, "weight"))
                out.append(gf.TensorSpec(p + "indexer.attn_k.weight", (n_embd, hs), gf.F16, "weight"))
                out.append(gf.TensorSpec(p + "indexer.attn_q_b.weight", (q_lora, n_ih * hs), gf.F16, "weight"))
    s.tensors[:] = out


# 3 layers (the first dense), hc 4; DSA with 4 indexer heads of 64 and the top 256 cells (fewer than the cache
# holds, so the mask really selects), layer 1 sharing layer 0's top-k
TINY = dict(gf._TINY["deepseek2"], n_expert_groups=0, n_group_used=0, hc_mult=4, swiglu_limit=10.0,
            indexer_n_head=4, indexer_head_size=64, indexer_top_k=256, indexer_types=(True, False, True))

#: Hy4-preview as vLLM's HYV4Config describes it (its defaults, matching the recipe/PR text: 770B-A49B, 78 layers,
#: layer 0 dense, 256 experts top-8 + 1 shared, 1M context): hidden 6144, 64 heads, q_lora 2048, kv_lora 512, rope
#: 64, nope 192, v 256, dense FFN 18432, experts of 2048, routed scaling 2.827 (normalised, sigmoid), hc 4 (magnitude
#: 2, eps 1e-6), swiglu_limit 10, vocabulary 120832, rope theta 1e7, rms eps 1e-5; DSA indexer 32 heads of 128,
#: top 2048. Assumed: which layers own an indexer (IndexCache: "full" on every 4th layer from 0 here; the published
#: indexer_types list was not available) and the Q4_K_M mix.
HY4 = dict(
    name="Hy4-preview", n_layer=78, n_embd=6144, n_head=64, n_head_kv=1, n_ff=18432, n_expert=256, n_expert_used=8,
    n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=1, q_lora_rank=2048, kv_lora_rank=512, qk_rope_dim=64,
    qk_nope_dim=192, v_head_dim=256, n_expert_groups=0, n_group_used=0, expert_gating_func=2,
    expert_weights_scale=2.827, expert_weights_norm=True, exp_probs_b=True, n_ctx_train=1048576,
    rope_base=10000000.0, rms_eps=1e-5, hc_mult=4, swiglu_limit=10.0, indexer_n_head=32, indexer_head_size=128,
    indexer_top_k=2048, indexer_types=tuple(il % 4 == 0 for il in range(78)), n_vocab=120832, quant="q4_k_m",
    file_type=15)

gf.register(
    "hy_v4",
    build=build,
    tiny=TINY,
    sparse={
        "hy4-preview": HY4,
        # the same shape as an all-full-attention checkpoint (no DSA keys or indexer tensors: plain MLA cache)
        "hy4-preview-full-attn": dict(HY4, name="Hy4-preview (full attention)", indexer_top_k=0),
    },
)

# the tiny all-full-attention variant (indexer_top_k 0): a plain llama_kv_cache, llm_graph_input_attn_k
gf.register("hy_v4-full-attn", build=build, tiny=dict(TINY, indexer_top_k=0), gguf_arch="hy_v4")
