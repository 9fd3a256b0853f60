"""dots3-note (``dots3note``): ``load_arch_hparams`` / ``load_arch_tensors`` of ``src/models/dots3note.cpp`` with the
keys its converter writes (``conversion/dots3.py``).

DeepSeek-V3.2's absorbed MLA and DSA indexer on the full-attention layers, and on the sliding-window layers an MLA
of their own geometry (``attention.kv_lora_rank_swa``, ``key_length_mla_swa``, ``value_length_mla_swa``, the cache
rows ``key_length_swa`` = swa kv_lora_rank + rope) and head count (``attention.head_count`` is per layer) without
an indexer (``attention.indexer.types`` marks the full layers). Every layer has a head-wise sigmoid output gate
(``attn_gate``, n_embd x n_head) and an RMS norm on the shared rope key (``attn_k_norm``, rope wide). The MoE is
sigmoid-gated with a selection bias and shared experts, after ``leading_dense_block_count`` dense layers. The
NextN/MTP block (``nextn_predict_layers``) has the sliding-window geometry and a dense FFN; llama.cpp skips it
(no MTP graph yet). Required: the sliding window, its pattern array, ``rope.freq_base_swa``, the indexer keys
and types, ``expert_gating_func``, ``leading_dense_block_count``, ``expert_shared_count``."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def _is_swa(hp: dict[str, Any], il: int) -> bool:
    period = int(hp["swa_period"])  # (period - 1) sliding layers, then a full one; the NextN block slides
    return il >= int(hp["n_layer"]) or il % period < period - 1


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    n_main, n_nextn = int(hp["n_layer"]), int(hp.get("n_nextn") or 0)
    nl = n_main + n_nextn
    n_embd, q_lora, rope = int(hp["n_embd"]), int(hp["q_lora_rank"]), int(hp["qk_rope_dim"])
    geo = {
        False: (int(hp["n_head"]), int(hp["kv_lora_rank"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])),
        True: (int(hp["n_head_swa"]), int(hp["kv_lora_rank_swa"]), int(hp["qk_nope_dim_swa"]),
               int(hp["v_head_dim_swa"])),
    }
    n_ih, hs = int(hp["indexer_n_head"]), int(hp["indexer_head_size"])
    gf._common_kv(s, dict(hp, n_head=[geo[_is_swa(hp, il)][0] for il in range(nl)]), nl)
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", geo[False][1])
    s.set("{arch}.attention.key_length", geo[False][1] + rope)
    s.set("{arch}.attention.value_length", geo[False][1])
    s.set("{arch}.attention.key_length_mla", geo[False][2] + rope)
    s.set("{arch}.attention.value_length_mla", geo[False][3])
    s.set("{arch}.attention.kv_lora_rank_swa", geo[True][1])
    s.set("{arch}.attention.key_length_swa", geo[True][1] + rope)
    s.set("{arch}.attention.value_length_swa", geo[True][1])
    s.set("{arch}.attention.key_length_mla_swa", geo[True][2] + rope)
    s.set("{arch}.attention.value_length_mla_swa", geo[True][3])
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.rope.freq_base_swa", float(hp["rope_base_swa"]))
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attention.sliding_window_pattern", [_is_swa(hp, il) for il in range(n_main)])
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", True)
    s.set("{arch}.expert_gating_func", 2)  # sigmoid (noaux_tc)
    s.set("{arch}.attention.indexer.head_count", n_ih)
    s.set("{arch}.attention.indexer.key_length", hs)
    s.set("{arch}.attention.indexer.top_k", int(hp["indexer_top_k"]))
    s.set("{arch}.attention.indexer.types", [not _is_swa(hp, il) for il in range(n_main)])
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    gf._embeddings(s, hp)
    n_ff_shexp = int(hp["n_ff_exp"]) * int(hp["n_expert_shared"])
    for i in range(nl):
        p = f"blk.{i}."
        swa = _is_swa(hp, i)
        n_head, kv_lora, nope, v_dim = geo[swa]
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
        s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
        s.add(p + "attn_k_norm.weight", (rope,), "norm")
        s.add(p + "attn_q_a.weight", (n_embd, q_lora))
        s.add(p + "attn_q_b.weight", (q_lora, n_head * (nope + rope)))
        s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
        s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
        s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
        s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
        s.add(p + "attn_gate.weight", (n_embd, n_head))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < n_main and not swa:
            s.add(p + "indexer.k_norm.weight", (hs,), "norm")
            s.add(p + "indexer.k_norm.bias", (hs,), "bias")
            s.add(p + "indexer.proj.weight", (n_embd, n_ih))
            s.add(p + "indexer.attn_k.weight", (n_embd, hs))
            s.add(p + "indexer.attn_q_b.weight", (q_lora, n_ih * hs))
        if i >= n_main or i < int(hp["n_layer_dense_lead"]):
            gf._dense_ffn(s, i, n_embd, int(hp["n_ff"]))
        else:
            gf._experts(s, i, n_embd, int(hp["n_ff_exp"]), int(hp["n_expert"]))
            s.add(p + "exp_probs_b.bias", (int(hp["n_expert"]),), "zero")
            gf._shared_expert(s, i, n_embd, n_ff_shexp)
        if i >= n_main:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.embed_tokens.weight", (n_embd, gf._n_vocab(hp)))
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


gf.register(
    "dots3note",
    build=build,
    # 4 layers (3 sliding, then 1 full with the indexer) and a NextN block; the window and top-k smaller than the
    # cache, so both really select
    tiny=dict(
        n_layer=4, n_nextn=1, n_head=4, n_head_swa=2, n_head_kv=1, n_ff=256, n_expert=8, n_expert_used=2,
        n_ff_exp=64, n_expert_shared=1, n_layer_dense_lead=1, q_lora_rank=32, kv_lora_rank=64,
        kv_lora_rank_swa=32, qk_rope_dim=16, qk_nope_dim=32, qk_nope_dim_swa=48, v_head_dim=32,
        v_head_dim_swa=16, expert_weights_scale=2.5, rms_eps=1e-6, sliding_window=128, swa_period=4,
        rope_base_swa=10000.0, indexer_n_head=4, indexer_head_size=64, indexer_top_k=256,
    ),
    sparse={
        # rednote-hilab's dots3-note, 288B-A19B (llama.cpp's type for 46 layers; its configuration is not available
        # here): 46 layers of 5120 (3 sliding, then a full one with the DSA indexer; the first dense), 64 full /
        # 32 sliding heads, MLA 512 + 64 (full) and 256 + 64 (sliding, heads of 256), 256 experts of 1536, 8
        # used, 1 shared, window 4096, indexer 64 heads of 128, top 2048, one NextN block
        "dots3-note": dict(
            name="dots3-note", n_layer=46, n_nextn=1, n_embd=5120, n_head=64, n_head_swa=32, n_head_kv=1,
            n_ff=12288, n_expert=256, n_expert_used=8, n_ff_exp=1536, n_expert_shared=1, n_layer_dense_lead=1,
            q_lora_rank=1536, kv_lora_rank=512, kv_lora_rank_swa=256, qk_rope_dim=64, qk_nope_dim=128,
            qk_nope_dim_swa=192, v_head_dim=128, v_head_dim_swa=128, expert_weights_scale=2.5, rms_eps=1e-6,
            sliding_window=4096, swa_period=4, rope_base=1000000.0, rope_base_swa=10000.0, indexer_n_head=64,
            indexer_head_size=128, indexer_top_k=2048, n_ctx_train=131072, n_vocab=152064, quant="q4_k_m",
            file_type=15),
    },
)
