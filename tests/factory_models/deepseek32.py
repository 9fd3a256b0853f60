"""DeepSeek-V3.2 (``deepseek32``): DeepSeek-V3's tensors (``llama_model_deepseek32::load_arch_tensors`` is
deepseek2's MLA in the split ``attn_k_b``/``attn_v_b`` form) plus, on every layer, the DSA lightning indexer:
``indexer.k_norm`` (LayerNorm weight and bias, ``indexer.key_length``), ``indexer.proj`` (n_embd x
``indexer.head_count``), ``indexer.attn_k`` (n_embd x key_length) and ``indexer.attn_q_b`` (q_lora_rank x
head_count * key_length). ``load_arch_hparams`` requires ``expert_gating_func`` and the three indexer keys; the
indexer's key length must be a multiple of 64 (the Hadamard rotation its cache builds is at least 64 wide)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_nextn = int(hp["n_layer"]), int(hp.get("n_nextn") or 0)
    # NextN/MTP blocks (``n_nextn``) are whole MoE decoder layers (indexer included) after the trunk, counted in
    # block_count, plus their nextn.* tensors; llama.cpp skips all of them without MTP speculation
    gf._build_deepseek2(s, dict(hp, n_layer=nl + n_nextn, n_nextn=0))
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    n_embd, q_lora = int(hp["n_embd"]), int(hp["q_lora_rank"])
    n_ih, hs, top_k = int(hp["indexer_n_head"]), int(hp["indexer_head_size"]), int(hp["indexer_top_k"])
    s.set("{arch}.attention.indexer.head_count", n_ih)
    s.set("{arch}.attention.indexer.key_length", hs)
    s.set("{arch}.attention.indexer.top_k", top_k)
    out: list[gf.TensorSpec] = []
    for t in s.tensors:
        out.append(t)
        if t.name.startswith("blk.") and t.name.endswith(".ffn_norm.weight"):
            p = t.name[: -len("ffn_norm.weight")]
            out.append(gf.TensorSpec(p + "indexer.k_norm.weight", (hs,), gf.F16, "norm"))
            out.append(gf.TensorSpec(p + "indexer.k_norm.bias", (hs,), gf.F16, "bias"))
            out.append(gf.TensorSpec(p + "indexer.proj.weight", (n_embd, n_ih), gf.F16, "weight"))
            out.append(gf.TensorSpec(p + "indexer.attn_k.weight", (n_embd, hs), gf.F16, "weight"))
            out.append(gf.TensorSpec(p + "indexer.attn_q_b.weight", (q_lora, n_ih * hs), gf.F16, "weight"))
    for i in range(nl, nl + n_nextn):
        p = f"blk.{i}."
        out.append(gf.TensorSpec(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd), gf.F16, "weight"))
        out.append(gf.TensorSpec(p + "nextn.enorm.weight", (n_embd,), gf.F16, "norm"))
        out.append(gf.TensorSpec(p + "nextn.hnorm.weight", (n_embd,), gf.F16, "norm"))
        out.append(gf.TensorSpec(p + "nextn.shared_head_norm.weight", (n_embd,), gf.F16, "norm"))
    s.tensors[:] = out


# 4 indexer heads of 64 (the smallest key length the indexer's Hadamard rotation allows), top 256 cells: fewer than
# the cache holds, so the top-k mask really selects
TINY = dict(gf._TINY["deepseek2"], n_nextn=1, indexer_n_head=4, indexer_head_size=64, indexer_top_k=256)

gf.register(
    "deepseek32",
    build=build,
    tiny=TINY,
    sparse={
        # DeepSeek-V3.2 (-Exp and the release share the config): DeepSeek-V3's 671B MoE (61 layers, 3 dense, 256
        # experts of 2048, 8 used in 4 of 8 groups, sigmoid gating with selection bias, scale 2.5, MLA 512 + 64)
        # with the DSA indexer of config.json: index_n_heads 64, index_head_dim 128, index_topk 2048; 1 MTP block
        "deepseek-v3.2": dict(
            name="DeepSeek-V3.2", n_layer=61, n_embd=7168, n_head=128, n_head_kv=1, n_ff=18432,
            n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=3,
            q_lora_rank=1536, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128,
            n_expert_groups=8, n_group_used=4, expert_gating_func=2, expert_weights_scale=2.5,
            expert_weights_norm=True, exp_probs_b=True, n_ctx_train=163840, rope_base=10000.0, rms_eps=1e-6,
            rope_scaling=dict(type="yarn", factor=40.0, original_context_length=4096, yarn_log_multiplier=0.1),
            indexer_n_head=64, indexer_head_size=128, indexer_top_k=2048, n_nextn=1,
            n_vocab=129280, quant="q4_k_m", file_type=15),
        # DeepSeek-V3.2's first dense layer, one MoE layer and its MTP block at full size: the MTP context's buffers
        # as the real model's (they depend on the NextN layer only) in a file llama-server loads in seconds
        "deepseek-v3.2-slice": dict(
            name="DeepSeek-V3.2-slice", n_layer=2, n_embd=7168, n_head=128, n_head_kv=1, n_ff=18432,
            n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=1,
            q_lora_rank=1536, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128,
            n_expert_groups=8, n_group_used=4, expert_gating_func=2, expert_weights_scale=2.5,
            expert_weights_norm=True, exp_probs_b=True, n_ctx_train=163840, rope_base=10000.0, rms_eps=1e-6,
            rope_scaling=dict(type="yarn", factor=40.0, original_context_length=4096, yarn_log_multiplier=0.1),
            indexer_n_head=64, indexer_head_size=128, indexer_top_k=2048, n_nextn=1,
            n_vocab=129280, quant="q4_k_m", file_type=15),
    },
)
