"""Ling 3.0 (``bailingmoe3``, ``src/models/bailingmoe3.cpp``): a hybrid of Kimi delta attention (KDA) layers and
MLA full-attention layers, as conversion/bailingmoe3.py writes it: ``head_count_kv`` 1 on the full-attention
layers (every ``layer_group_size``-th, and every layer past the last whole group) and 0 on the KDA ones; a KDA
layer has separate ``attn_q/k/v`` of ``head_count * kda.head_dim``, their own ``ssm_conv1d_q/k/v`` short convs
(``ssm.conv_kernel``), the gate ``ssm_f_a`` + ``ssm_dt.bias`` times ``ssm_a``, ``ssm_beta``, the output gate
``ssm_g_a`` and ``ssm_norm``; an MLA layer ``attn_q`` (or the ``q_a``/``q_b`` LoRA), ``attn_kv_a_mqa``, the split
``attn_k_b``/``attn_v_b`` and a per-head ``attn_gate``. Every layer ends in a dense SwiGLU FFN (the
``leading_dense_block_count`` first) or sigmoid-routed experts with ``exp_probs_b`` plus shared experts. No NextN
block here (the converter's ``--no-mtp`` output; llama.cpp's KV cache would hold one for an MTP layer)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf
from tests.factory_models.kimi_linear import add_kda


def full_attention(il: int, n_layer: int, group: int) -> bool:
    """conversion/bailingmoe3.py ``is_full_attention``."""
    return (il + 1) % group == 0 or il >= n_layer // group * group


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd, d_conv, group = int(hp["kda_head_dim"]), int(hp["ssm_d_conv"]), int(hp["layer_group_size"])
    q_lora, kv_lora = int(hp["q_lora_rank"]), int(hp["kv_lora_rank"])
    rope, nope, v_dim = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    d_inner = n_head * hd
    n_nextn = int(hp["n_nextn"])
    nall = nl + n_nextn
    full = [il >= nl or full_attention(il, nl, group) for il in range(nall)]
    gf._common_kv(s, hp, nall)
    s.set("{arch}.attention.head_count_kv", [1 if f else 0 for f in full])
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.kda.head_dim", hd)
    s.set("{arch}.kda.safe_gate", True)
    s.set("{arch}.kda.gate_lower_bound", float(hp["kda_lower_bound"]))
    if q_lora:
        s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.attention.key_length", kv_lora + rope)
    s.set("{arch}.attention.key_length_mla", nope + rope)
    s.set("{arch}.attention.value_length_mla", v_dim)
    s.set("{arch}.expert_feed_forward_length", int(hp["n_ff_exp"]))
    s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
    gf._moe_keys(s, hp)
    gf._embeddings(s, hp)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if not full[i]:
            add_kda(s, p, n_embd, d_inner, hd, n_head, d_conv, a_shape=(1, n_head), f=("ssm_f_a",), g=("ssm_g_a",))
        else:
            if q_lora:
                s.add(p + "attn_q_a.weight", (n_embd, q_lora))
                s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
                s.add(p + "attn_q_b.weight", (q_lora, n_head * (nope + rope)))
            else:
                s.add(p + "attn_q.weight", (n_embd, n_head * (nope + rope)))
            s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
            s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
            s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
            s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
            s.add(p + "attn_gate.weight", (n_embd, n_head))
            s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i < hp["n_layer_dense_lead"]:
            gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            gf._experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            gf._shared_expert(s, i, n_embd, hp["n_ff_shexp"])
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
            s.add(p + "layer_output_norm.weight", (n_embd,), "norm")


def _ling3(name: str, n_layer: int, n_embd: int, n_expert: int, **kw: Any) -> dict[str, Any]:
    """Ling 3.0 as llama.cpp's size table knows it (block count, width, expert count: LLM_TYPE_7_9B_A1_3B and
    LLM_TYPE_124B_A5_1B); the other figures are unconfirmed (assumed from the converter's keys and Ling 2.0):
    heads of 128 (KDA and MLA), conv kernel 4, MLA kv_lora 512 / rope 64 / nope 128 / v 128 without q LoRA, a full
    attention layer every 4, one dense leading block, 8 experts used + 1 shared, the 157184-token vocabulary."""
    hp = dict(
        name=name, n_layer=n_layer, n_embd=n_embd, n_head=n_embd // 128, n_head_kv=0, kda_head_dim=128, ssm_d_conv=4,
        kda_lower_bound=-5.0, layer_group_size=4, q_lora_rank=0, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128,
        v_head_dim=128, n_expert=n_expert, n_expert_used=8, n_expert_shared=1, n_layer_dense_lead=1,
        expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True, n_ctx_train=131072,
        rope_base=600000.0, rms_eps=1e-6, n_vocab=157184, quant="q4_k_m", file_type=15)
    hp.update(kw)
    return hp


gf.register(
    "bailingmoe3",
    build=build,
    tiny=dict(n_layer=4, n_embd=64, n_head=4, n_head_kv=0, kda_head_dim=16, ssm_d_conv=4, kda_lower_bound=-5.0,
              layer_group_size=2, q_lora_rank=0, kv_lora_rank=32, qk_rope_dim=8, qk_nope_dim=16, v_head_dim=16,
              n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=32, n_ff_shexp=32, n_expert_shared=1,
              n_layer_dense_lead=1, expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True,
              rms_eps=1e-6, rope_base=600000.0, n_nextn=0),
    sparse={
        # inclusionAI/Ling-3.0-tiny (7.9B-A1.3B): 24 layers of 1536, 128 experts (the rest unconfirmed, see _ling3:
        # FFN 4096 dense / 512 per expert assumed)
        "ling-3.0-tiny": _ling3("Ling-3.0-tiny", 24, 1536, 128, n_ff=4096, n_ff_exp=512, n_ff_shexp=512),
        # the same with the converter's NextN/MTP block (num_nextn_predict_layers 1)
        "ling-3.0-tiny-mtp": _ling3("Ling-3.0-tiny", 24, 1536, 128, n_ff=4096, n_ff_exp=512, n_ff_shexp=512,
                                    n_nextn=1),
        # inclusionAI/Ling-3.0-flash (124B-A5.1B): 42 layers of 2560, 512 experts (the rest unconfirmed: q LoRA 768,
        # a full layer every 6, FFN 9216 dense / 512 per expert assumed)
        "ling-3.0-flash": _ling3("Ling-3.0-flash", 42, 2560, 512, n_ff=9216, n_ff_exp=512, n_ff_shexp=512,
                                 q_lora_rank=768, layer_group_size=6),
    },
)
