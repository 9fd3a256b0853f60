"""GLM5-Next (``glm5-next``, ``src/models/glm5-next.cpp``, GLM-5.3-Flash): a hybrid of Kimi delta attention (KDA)
layers and nope-only MLA layers with a k-pool DSA indexer, every trunk layer wrapped in hyper-connections (mHC,
``hyper_connection.count`` 4 residual streams), DeepSeek-style MoE, as ``conversion/glm.py`` writes it:
``head_count_kv`` 0 on the KDA ("linear_attention") layers and 1 elsewhere (padded to ``block_count`` with the NextN
block); ``head_count`` is one number (the KDA and MLA layers share it).

A KDA layer: ``ssm_conv1d_q/k/v`` (``ssm.conv_kernel``), separate ``attn_q/k/v`` of ``head_count * kda.head_dim``,
the gate ``ssm_f_a`` (to ``kda.head_dim``) then ``ssm_f_b`` + ``ssm_dt.bias``, ``ssm_a`` (no ``.weight``),
``ssm_beta``, the output gate ``ssm_g_a``/``ssm_g_b``, ``ssm_norm`` and ``attn_output``. An MLA layer: q LoRA
(``attn_q_a``, ``attn_q_a_norm``, ``attn_q_b`` to ``head_count * key_length_mla``), ``attn_kv_a_mqa`` of
``kv_lora_rank`` (no RoPE part), ``attn_kv_a_norm``, the split ``attn_k_b``/``attn_v_b``, ``attn_output``, and, on
its "full" indexer layers (``attention.indexer.types``, default all), the indexer (``indexer.k_norm`` weight and
bias, ``indexer.proj``, ``indexer.attn_k``, ``indexer.attn_q_b``) with the k-pool ``indexer_compressor_gate`` and
``indexer_compressor_ape`` (``indexer.key_length`` x ``indexer.kpool``). Every trunk layer has ``hc_attn_fn/base/
scale`` and ``hc_ffn_fn/base/scale`` (fn: ``hc * n_embd`` x ``(2 + hc) * hc``). The NextN block (one MLA layer with a
full indexer, no hc tensors, plus ``nextn.*``) is loaded only for MTP (``TENSOR_SKIP`` otherwise)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf
from tests.factory_models.kimi_linear import add_kda


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_nextn = int(hp["n_layer"]), int(hp.get("n_nextn") or 0)
    nla = nl + n_nextn
    n_embd, n_head = int(hp["n_embd"]), int(hp["n_head"])
    hd, d_conv = int(hp["kda_head_dim"]), int(hp["ssm_d_conv"])
    q_lora, kv_lora = int(hp["q_lora_rank"]), int(hp["kv_lora_rank"])
    nope, v_dim = int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    n_ih, hs, kpool = int(hp["indexer_n_head"]), int(hp["indexer_head_size"]), int(hp["indexer_kpool"])
    hc = 4
    hc_mix = (2 + hc) * hc
    d_inner = n_head * hd
    mla = [il in hp["mla_layers"] or il >= nl for il in range(nla)]
    types = hp.get("indexer_types")
    full = [True] * nl if types is None else [bool(t) for t in types]
    gf._common_kv(s, dict(hp, n_head_kv=0), nla)
    s.set("{arch}.attention.head_count_kv", [1 if m else 0 for m in mla])
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.attention.layer_norm_epsilon", 1e-6)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.kda.head_dim", hd)
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    s.set("{arch}.rope.dimension_count", 0)
    s.set("{arch}.attention.key_length", kv_lora)
    s.set("{arch}.attention.value_length", kv_lora)
    s.set("{arch}.attention.key_length_mla", nope)
    s.set("{arch}.attention.value_length_mla", v_dim)
    s.set("{arch}.attention.indexer.head_count", n_ih)
    s.set("{arch}.attention.indexer.key_length", hs)
    s.set("{arch}.attention.indexer.top_k", int(hp["indexer_top_k"]))
    s.set("{arch}.attention.indexer.kpool", kpool)
    s.set("{arch}.attention.indexer.kpool_select_tail", bool(hp.get("kpool_select_tail", True)))
    if types is not None:
        s.set("{arch}.attention.indexer.types", full)
    s.set("{arch}.hyper_connection.count", hc)
    s.set("{arch}.hyper_connection.sinkhorn_iterations", int(hp["hc_sinkhorn_iters"]))
    s.set("{arch}.hyper_connection.epsilon", 1e-6)
    s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
    s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", True)
    s.set("{arch}.expert_gating_func", 2)
    gf._embeddings(s, hp, output_required=True)
    for i in range(nla):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if i < nl:
            for x in ("attn", "ffn"):
                s.add(p + f"hc_{x}_fn.weight", (hc * n_embd, hc_mix))
                s.add(p + f"hc_{x}_base.weight", (hc_mix,), "bias")
                s.add(p + f"hc_{x}_scale.weight", (3,), "ones")
        if not mla[i]:
            add_kda(s, p, n_embd, d_inner, hd, n_head, d_conv, a_shape=(n_head,))
        else:
            s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
            s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
            s.add(p + "attn_q_a.weight", (n_embd, q_lora))
            s.add(p + "attn_q_b.weight", (q_lora, n_head * nope))
            s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora))
            s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
            s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
            s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
            if i >= nl or full[i]:
                s.add(p + "indexer.k_norm.weight", (hs,), "norm")
                s.add(p + "indexer.k_norm.bias", (hs,), "bias")
                s.add(p + "indexer.proj.weight", (n_embd, n_ih))
                s.add(p + "indexer.attn_k.weight", (n_embd, hs))
                s.add(p + "indexer.attn_q_b.weight", (q_lora, n_ih * hs))
                s.add(p + "indexer_compressor_gate.weight", (n_embd, hs))
                s.add(p + "indexer_compressor_ape.weight", (hs, kpool), "bias")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            gf._experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            gf._shared_expert(s, i, n_embd, hp["n_ff_exp"] * max(1, int(hp["n_expert_shared"])))
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")


gf.register(
    "glm5-next",
    build=build,
    # layers 1 and 3 MLA (3 shares 1's indexer), 0 and 2 KDA, one NextN block; kpool 4 with top 64 cells (16 pools)
    tiny=dict(n_layer=4, n_embd=64, n_head=4, n_head_kv=0, kda_head_dim=16, ssm_d_conv=4, mla_layers=(1, 3),
              q_lora_rank=32, kv_lora_rank=32, qk_nope_dim=16, v_head_dim=16, indexer_n_head=2,
              indexer_head_size=32, indexer_top_k=64, indexer_kpool=4, indexer_types=[True, True, True, False],
              hc_sinkhorn_iters=2, n_nextn=1, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=32,
              n_expert_shared=1, n_layer_dense_lead=1, expert_weights_scale=2.5, rms_eps=1e-5, rope_base=10000.0),
    sparse={
        # GLM-5.3-Flash (zai-org/GLM-5.3-Flash; llama.cpp types 45 trunk layers as 320B-A18B). Its config.json was
        # not available here: confirmed by llama.cpp are the 45 layers, hc_mult 4, nope-only MLA (key_length =
        # kv_lora_rank, rope 0), the kpool indexer and one NextN block. Assumed (GLM-5's where it has them): 5120
        # wide, 64 heads, KDA head 128 and short conv 4 on 3 of every 4 layers (MLA on layers 3, 7, ..., 43 and the
        # last), q_lora 2048, kv_lora 512, nope 192, v 256, indexer 32 heads of 128 with top 2048 and kpool 4 on
        # every MLA layer, sinkhorn 20, 1 dense lead layer of 12288, 256 experts of 1536 (8 used, 1 shared), scale
        # 2.5, vocabulary 154880, 202752 context, Q4_K_M.
        "glm-5.3-flash": dict(
            name="GLM-5.3-Flash", n_layer=45, n_embd=5120, n_head=64, n_head_kv=0, kda_head_dim=128, ssm_d_conv=4,
            mla_layers=(3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 44), q_lora_rank=2048, kv_lora_rank=512,
            qk_nope_dim=192, v_head_dim=256, indexer_n_head=32, indexer_head_size=128, indexer_top_k=2048,
            indexer_kpool=4, indexer_types=None, hc_sinkhorn_iters=20, n_nextn=1, n_ff=12288, n_expert=256,
            n_expert_used=8, n_ff_exp=1536, n_expert_shared=1, n_layer_dense_lead=1, expert_weights_scale=2.5,
            n_ctx_train=202752, rope_base=1000000.0, rms_eps=1e-5, n_vocab=154880, quant="q4_k_m", file_type=15),
    },
)
