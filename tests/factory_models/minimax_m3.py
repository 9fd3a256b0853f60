"""MiniMax-M3 (``minimax-m3``): ``llama_model_minimax_m3::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/minimax-m3.cpp``, with the keys ``conversion/minimax.py`` (``MiniMaxM3Model``) writes.

Every layer: Q/K/V (no biases) and ``attn_output``, a per-head ``attn_q_norm``/``attn_k_norm`` of ``head_dim``,
rope on ``rope.dimension_count`` of the head. The ``leading_dense_block_count`` first layers have a dense FFN;
the others routed experts (``ffn_gate_inp``, ``exp_probs_b``, the three ``*_exps`` of
``expert_feed_forward_length``), a shared expert of ``n_ff_exp * expert_shared_count`` and the MSA indexer:
``indexer.q_proj`` (n_embd x ``indexer.head_count * indexer.key_length``), ``indexer.k_proj`` (n_embd x key_length)
and ``indexer.q_norm``/``k_norm`` (key_length). ``load_arch_hparams`` requires ``expert_shared_count``,
``expert_gating_func`` and the five ``attention.indexer.*`` keys; the graph asserts one indexer head per KV head.
"""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"])
    n_ih, hs = int(hp["indexer_n_head"]), int(hp["indexer_head_size"])
    if n_ih != n_kv:
        raise ValueError("minimax-m3: MSA needs one indexer head per KV head")
    gf._common_kv(s, hp, nl)
    gf._moe_keys(s, hp)
    s.set("{arch}.attention.indexer.head_count", n_ih)
    s.set("{arch}.attention.indexer.key_length", hs)
    s.set("{arch}.attention.indexer.top_k", int(hp["indexer_top_k"]))
    s.set("{arch}.attention.indexer.block_size", int(hp["indexer_block_size"]))
    s.set("{arch}.attention.indexer.local_blocks", int(hp["indexer_local_blocks"]))
    gf._embeddings(s, hp, output_required=True)
    n_ff_exp, n_exp = int(hp["n_ff_exp"]), int(hp["n_expert"])
    for i in range(nl):
        p = f"blk.{i}."
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < int(hp["n_layer_dense_lead"]):
            gf._dense_ffn(s, i, n_embd, int(hp["n_ff"]))
            continue
        gf._experts(s, i, n_embd, n_ff_exp, n_exp)
        s.add(p + "exp_probs_b.bias", (n_exp,), "zero")
        gf._shared_expert(s, i, n_embd, n_ff_exp * int(hp["n_expert_shared"]))
        s.add(p + "indexer.q_proj.weight", (n_embd, n_ih * hs))
        s.add(p + "indexer.k_proj.weight", (n_embd, hs))
        s.add(p + "indexer.q_norm.weight", (hs,), "norm")
        s.add(p + "indexer.k_norm.weight", (hs,), "norm")


gf.register(
    "minimax-m3",
    build=build,
    # 4 layers (1 dense), 8 heads of 32 over 2 KV heads (= indexer heads), rope 16, indexer keys of 32, blocks of
    # 64 tokens (4 blocks over the reserve's 256 positions), top 2 blocks: the block mask really selects
    tiny=dict(
        n_layer=4,
        n_embd=64,
        n_head=8,
        n_head_kv=2,
        head_dim=32,
        rope_dim=16,
        n_ff=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        n_expert_shared=1,
        n_layer_dense_lead=1,
        expert_gating_func=2,
        expert_weights_scale=2.0,
        expert_weights_norm=True,
        indexer_n_head=2,
        indexer_head_size=32,
        indexer_top_k=2,
        indexer_block_size=64,
        indexer_local_blocks=1,
        rms_eps=1e-6,
        rope_base=5000000.0,
    ),
    sparse={
        # MiniMax-M3 (MiniMaxAI/MiniMax-M3): the pinned tree confirms 60 layers (LLM_TYPE_428B_A23B), MiniMax-M2's
        # attention layout (GQA, per-head QK norm, partial rope), the leading dense layers, routed + shared experts
        # with sigmoid gating and routed scaling, and the sparse_attention_config keys (index heads = KV heads).
        # Assumed (no config in the tree): hidden 6144, 64 query / 4 KV heads of 128 (rotary 64), 3 dense layers of
        # 16384, 192 experts of 2048 (8 used, 1 shared), 4 index heads of 128, blocks of 64, top 16 blocks, 1 local
        # block, vocabulary 200064, 196608 context, the Q4_K_M mix (the converter keeps the indexer in F32).
        "minimax-m3": dict(
            name="MiniMax-M3",
            n_layer=60,
            n_embd=6144,
            n_head=64,
            n_head_kv=4,
            head_dim=128,
            rope_dim=64,
            n_ff=16384,
            n_expert=192,
            n_expert_used=8,
            n_ff_exp=2048,
            n_expert_shared=1,
            n_layer_dense_lead=3,
            expert_gating_func=2,
            expert_weights_scale=2.5,
            expert_weights_norm=True,
            indexer_n_head=4,
            indexer_head_size=128,
            indexer_top_k=16,
            indexer_block_size=64,
            indexer_local_blocks=1,
            n_ctx_train=196608,
            rope_base=5000000.0,
            n_vocab=200064,
            quant="q4_k_m",
            file_type=15,
        ),
    },
)
