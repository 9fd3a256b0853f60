"""Kimi-Linear (``kimi-linear``, ``src/models/kimi-linear.cpp``): a hybrid of Kimi delta attention (KDA) layers
and MLA full-attention layers, as conversion/kimi_linear.py writes it: ``head_count_kv`` 0 on the KDA layers and
1 on the MLA ones (it sets num_key_value_heads to 1); a KDA layer has separate ``attn_q/k/v`` of ``head_count * kda.head_dim``, their own
``ssm_conv1d_q/k/v`` short convs (``ssm.conv_kernel``), the gate ``ssm_f_a`` (to ``kda.head_dim``) then ``ssm_f_b``
+ ``ssm_dt.bias`` (softplus, times ``ssm_a``), ``ssm_beta``, the output gate ``ssm_g_a`` then ``ssm_g_b`` and
``ssm_norm``; an MLA layer ``attn_q`` (no q LoRA, no RoPE), ``attn_kv_a_mqa``, the split ``attn_k_b``/``attn_v_b``
and ``attn_output``. Every layer ends in a dense SwiGLU FFN (the ``leading_dense_block_count`` first) or
sigmoid-routed experts with ``exp_probs_b`` plus the shared expert."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd, d_conv = int(hp["kda_head_dim"]), int(hp["ssm_d_conv"])
    kv_lora = int(hp["kv_lora_rank"])
    rope, nope, v_dim = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    d_inner = n_head * hd
    full = [il in hp["mla_layers"] for il in range(nl)]
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.head_count_kv", [1 if f else 0 for f in full])
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.kda.head_dim", hd)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.attention.key_length", kv_lora + rope)
    s.set("{arch}.attention.value_length", kv_lora)
    s.set("{arch}.attention.key_length_mla", nope + rope)
    s.set("{arch}.attention.value_length_mla", v_dim)
    s.set("{arch}.expert_feed_forward_length", int(hp["n_ff_exp"]))
    gf._moe_keys(s, hp)
    gf._embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if not full[i]:
            add_kda(s, p, n_embd, d_inner, hd, n_head, d_conv, a_shape=(1, n_head))
        else:
            s.add(p + "attn_q.weight", (n_embd, n_head * (nope + rope)))
            s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
            s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
            s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
            s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
            s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            gf._experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            gf._shared_expert(s, i, n_embd, hp["n_ff_exp"] * max(1, int(hp["n_expert_shared"])))


gf.register(
    "kimi-linear",
    build=build,
    tiny=dict(n_layer=4, n_embd=64, n_head=4, n_head_kv=0, kda_head_dim=16, ssm_d_conv=4, mla_layers=(1, 3),
              kv_lora_rank=32, qk_rope_dim=8, qk_nope_dim=16, v_head_dim=16, n_ff=128, n_expert=8, n_expert_used=2,
              n_ff_exp=32, n_expert_shared=1, n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=2.446,
              expert_weights_norm=True, rms_eps=1e-5, rope_base=10000.0),
    sparse={
        # moonshotai/Kimi-Linear-48B-A3B-Instruct's config: 27 layers of 2304, 32 heads, MLA kv_lora 512 / rope 64 /
        # nope 128 / v 128 without q LoRA, 256 experts of 1024 (8 used, 1 shared), layer 0 dense 9216, KDA head 128
        # and short conv 4, MLA on layers 3,7,11,15,19,23,26, vocabulary 163840, 1M context. Unconfirmed (assumed):
        # the routed scaling 2.446 and sigmoid gating (they do not change memory), the Q4_K_M mix.
        "kimi-linear-48b-a3b": dict(
            name="Kimi-Linear-48B-A3B-Instruct", n_layer=27, n_embd=2304, n_head=32, n_head_kv=0, kda_head_dim=128,
            ssm_d_conv=4, mla_layers=(3, 7, 11, 15, 19, 23, 26), kv_lora_rank=512, qk_rope_dim=64,
            qk_nope_dim=128, v_head_dim=128, n_ff=9216, n_expert=256, n_expert_used=8, n_ff_exp=1024,
            n_expert_shared=1, n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=2.446,
            expert_weights_norm=True, n_ctx_train=1048576, rope_base=10000.0, rms_eps=1e-5, n_vocab=163840,
            quant="q4_k_m", file_type=15),
    },
)


def add_kda(s, p, n_embd, d_inner, hd, n_head, d_conv, *, a_shape, f=("ssm_f_a", "ssm_f_b"),
            g=("ssm_g_a", "ssm_g_b")):
    """A KDA (Kimi delta attention) layer's tensors in llama-model.cpp's order: the q/k/v short convolutions and
    projections, the decay ``f`` and the output gate ``g`` (two names: low rank through ``hd``; one: a single
    full-width matrix), beta, A (``a_shape``: (n_head,) or (1, n_head)), the dt bias, the head norm and the
    output. Kimi-Linear, Kimi-K3, GLM-5-Next and Ling 3.0 write it with their own f/g/A forms."""
    for x in "qkv":
        s.add(p + f"ssm_conv1d_{x}.weight", (d_conv, 1, d_inner, 1), "bias")
    for x in "qkv":
        s.add(p + f"attn_{x}.weight", (n_embd, d_inner))

    def gate(names):
        if len(names) == 2:
            s.add(p + f"{names[0]}.weight", (n_embd, hd))
            s.add(p + f"{names[1]}.weight", (hd, d_inner))
        else:
            s.add(p + f"{names[0]}.weight", (n_embd, d_inner))

    gate(f)
    s.add(p + "ssm_beta.weight", (n_embd, n_head))
    s.add(p + "ssm_a", a_shape, "ssm_a")
    s.add(p + "ssm_dt.bias", (d_inner,), "bias")
    gate(g)
    s.add(p + "ssm_norm.weight", (hd,), "norm")
    s.add(p + "attn_output.weight", (d_inner, n_embd))
