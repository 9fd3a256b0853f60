"""DeepSeek-V4 (``deepseek4``, ``src/models/deepseek4.cpp``) as ``conversion/deepseek.py`` (DeepseekV4Model) writes
it: one KV head of ``key_length`` (the K-only raw cache of a sliding window), the q LoRA (``attn_q_a``, its norm,
``attn_q_b``), ``attn_kv`` and its norm, ``attn_sinks``, the grouped output LoRA ``attn_output_a`` (stored
``n_head * head_dim / o_groups`` x ``o_lora_rank * o_groups``) and ``attn_output_b``; per layer the mHC tensors
``hc_attn_fn``/``hc_ffn_fn`` (``hc * n_embd`` x ``(2 + hc) * hc``), ``hc_*_base`` (``(2 + hc) * hc``) and
``hc_*_scale`` (3), and the global ``output_hc_fn``/``base``/``scale``. ``attention.compress_ratios`` (one per layer:
0, 4 or 128) adds the compressor (``attn_compressor_kv``/``gate`` of ``coff * head_dim``, coff 2 for ratio 4,
``attn_compressor_ape`` and norm) and, on ratio-4 layers, the lightning indexer (``indexer.proj``,
``indexer.attn_q_b``, ``indexer_compressor_*``). Every layer is MoE (sqrt-softplus gating, ``expert_gating_func``
4) with one shared expert; the first ``hash_layer_count`` layers route by token (``ffn_gate_tid2eid``, i32
``n_expert_used`` x ``n_vocab``) instead of ``exp_probs_b``. The converter drops the MTP layers by default;
``n_nextn`` 1 keeps one (``nextn_predict_layers``, counted in ``block_count``): a whole layer after the trunk
with a compress ratio of 0 (graph_mtp asserts it: the MTP context's cache is a plain K-only iswa) and past
the hash layers, plus its ``nextn.eh_proj``/``enorm``/``hnorm``/``shared_head_norm``."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def hc_head(s: gf.ModelSpec, n_embd: int, hc: int) -> None:
    """The global hyper-connection head (``output_hc_fn``/``base``/``scale``)."""
    s.add("output_hc_fn.weight", (hc * n_embd, hc), "router")
    s.add("output_hc_base.weight", (hc,), "bias")
    s.add("output_hc_scale.weight", (1,), "bias")


def attention_and_hc(
    s: gf.ModelSpec, i: int, n_embd: int, n_head: int, hd: int, q_lora: int, o_groups: int, o_lora: int, hc: int
) -> None:
    """A layer's attention (q LoRA, the K row, sinks, the grouped output LoRA) and its two mHC stages, as
    DeepSeek-V4 and its DSpark heads (``dflash`` with ``hyper_connection.count``) have them."""
    p = f"blk.{i}."
    s.add(p + "attn_norm.weight", (n_embd,), "norm")
    s.add(p + "attn_sinks.weight", (n_head,), "zero")
    s.add(p + "attn_q_a.weight", (n_embd, q_lora))
    s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
    s.add(p + "attn_q_b.weight", (q_lora, n_head * hd))
    s.add(p + "attn_kv.weight", (n_embd, hd))
    s.add(p + "attn_kv_a_norm.weight", (hd,), "norm")
    s.add(p + "attn_output_a.weight", (n_head * hd // o_groups, o_lora * o_groups))
    s.add(p + "attn_output_b.weight", (o_groups * o_lora, n_embd))
    mix = (2 + hc) * hc
    for which in ("attn", "ffn"):
        s.add(p + f"hc_{which}_fn.weight", (hc * n_embd, mix), "router")
        s.add(p + f"hc_{which}_base.weight", (mix,), "bias")
        s.add(p + f"hc_{which}_scale.weight", (3,), "bias")


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    n_nextn = int(hp.get("n_nextn") or 0)  # the sparse specs leave it out: no MTP layer
    nl, n_embd, n_head, hd = int(hp["n_layer"]) + n_nextn, int(hp["n_embd"]), int(hp["n_head"]), int(hp["head_dim"])
    q_lora, o_groups, o_lora = int(hp["q_lora_rank"]), int(hp["o_groups"]), int(hp["o_lora_rank"])
    hc, n_ih, ihd = int(hp["hc_mult"]), int(hp["indexer_n_head"]), int(hp["indexer_head_size"])
    ratios = [int(r) for r in hp["compress_ratios"]] + [0] * n_nextn
    if len(ratios) != nl:
        raise ValueError("compress_ratios needs one entry per layer")
    n_expert, n_used, n_ff_exp = int(hp["n_expert"]), int(hp["n_expert_used"]), int(hp["n_ff_exp"])
    n_hash = int(hp["n_hash_layers"])
    gf._common_kv(s, hp, nl)
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"]))
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.sliding_window", int(hp["n_swa"]))
    s.set("{arch}.expert_count", n_expert)
    s.set("{arch}.expert_used_count", n_used)
    s.set("{arch}.expert_feed_forward_length", n_ff_exp)
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", True)
    s.set("{arch}.expert_gating_func", 4)  # sqrtsoftplus, the only scoring the loader accepts
    s.set("{arch}.swiglu_clamp_exp", [float(hp["swiglu_limit"])] * nl)
    s.set("{arch}.swiglu_clamp_shexp", [float(hp["swiglu_limit"])] * nl)
    s.set("{arch}.attention.indexer.head_count", n_ih)
    s.set("{arch}.attention.indexer.key_length", ihd)
    s.set("{arch}.attention.indexer.top_k", int(hp["indexer_top_k"]))
    s.set("{arch}.attention.output_group_count", o_groups)
    s.set("{arch}.attention.output_lora_rank", o_lora)
    s.set("{arch}.attention.compress_ratios", ratios)
    s.set("{arch}.attention.compress_rope_freq_base", float(hp["compress_rope_base"]))
    s.set("{arch}.hyper_connection.count", hc)
    s.set("{arch}.hyper_connection.sinkhorn_iterations", int(hp["hc_sinkhorn_iters"]))
    s.set("{arch}.hyper_connection.epsilon", 1e-6)
    s.set("{arch}.hash_layer_count", n_hash)
    s.set("{arch}.embedding_length_out", hc * n_embd)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    gf._embeddings(s, hp, output_required=True)
    hc_head(s, n_embd, hc)
    for i in range(nl):
        p = f"blk.{i}."
        attention_and_hc(s, i, n_embd, n_head, hd, q_lora, o_groups, o_lora, hc)
        ratio = ratios[i]
        if ratio:
            coff = 2 if ratio == 4 else 1
            s.add(p + "attn_compressor_kv.weight", (n_embd, coff * hd))
            s.add(p + "attn_compressor_gate.weight", (n_embd, coff * hd))
            s.add(p + "attn_compressor_ape.weight", (coff * hd, ratio), "router")
            s.add(p + "attn_compressor_norm.weight", (hd,), "norm")
        if ratio == 4:
            s.add(p + "indexer.proj.weight", (n_embd, n_ih))
            s.add(p + "indexer.attn_q_b.weight", (q_lora, n_ih * ihd))
            s.add(p + "indexer_compressor_kv.weight", (n_embd, 2 * ihd))
            s.add(p + "indexer_compressor_gate.weight", (n_embd, 2 * ihd))
            s.add(p + "indexer_compressor_ape.weight", (2 * ihd, ratio), "router")
            s.add(p + "indexer_compressor_norm.weight", (ihd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._experts(s, i, n_embd, n_ff_exp, n_expert)
        if i < n_hash:
            s.add(p + "ffn_gate_tid2eid.weight", (n_used, gf._n_vocab(hp)), "ids")
        else:
            s.add(p + "exp_probs_b.bias", (n_expert,), "zero")
        gf._shared_expert(s, i, n_embd, n_ff_exp * int(hp["n_expert_shared"]))
        if i >= nl - n_nextn:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


gf.register(
    "deepseek4",
    build=build,
    # 4 layers (ratios 0, 4, 128, 4: the raw window only, CSA + indexer, HCA), hc 4, the first a hash layer
    tiny=dict(n_layer=4, n_embd=64, n_head=4, n_head_kv=1, head_dim=64, rope_dim=16, n_ff=None, q_lora_rank=32,
              o_groups=2, o_lora_rank=16, hc_mult=4, hc_sinkhorn_iters=20, indexer_n_head=4, indexer_head_size=64,
              indexer_top_k=16, compress_ratios=(0, 4, 128, 4), compress_rope_base=160000.0, n_swa=64,
              n_expert=8, n_expert_used=2, n_ff_exp=32, n_expert_shared=1, expert_weights_scale=1.5,
              swiglu_limit=10.0, n_hash_layers=1, rms_eps=1e-6, n_nextn=0),
    sparse={
        # deepseek-ai/DeepSeek-V4-Flash's config as published (confirmed: 43 layers of 4096, 64 heads, one KV head
        # of 512 with 64 RoPE dims, q LoRA 1024, 8 output groups of LoRA 1024, 256 experts of 2048 top-6 + 1
        # shared, hc 4 with 20 Sinkhorn iterations, indexer 64 heads of 128 top-512, window 128, 3 hash layers,
        # vocabulary 129280, 1M context). Assumed: the compress_ratios pattern (0, 0, then 4 and 128 alternating:
        # its exact list was not at hand; it moves the compressed caches and the compute between the two kinds),
        # the routed scaling 1.5 and swiglu limit 10 (no memory effect), the Q4_K_M mix.
        "deepseek-v4-flash": dict(
            name="DeepSeek-V4-Flash", n_layer=43, n_embd=4096, n_head=64, n_head_kv=1, head_dim=512, rope_dim=64,
            q_lora_rank=1024, o_groups=8, o_lora_rank=1024, hc_mult=4, hc_sinkhorn_iters=20, indexer_n_head=64,
            indexer_head_size=128, indexer_top_k=512, compress_ratios=(0, 0) + tuple(4 if i % 2 == 0 else 128
                                                                                     for i in range(41)),
            compress_rope_base=160000.0, n_swa=128, n_expert=256, n_expert_used=6, n_ff_exp=2048,
            n_expert_shared=1, expert_weights_scale=1.5, swiglu_limit=10.0, n_hash_layers=3, n_ctx_train=1048576,
            rope_base=10000.0, rms_eps=1e-6, n_vocab=129280, quant="q4_k_m", file_type=15),
    },
)
