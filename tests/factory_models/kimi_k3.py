"""Kimi K3 (``kimi-k3``, ``src/models/kimi-k3.cpp``): Kimi-Linear's hybrid of Kimi delta attention (KDA) layers
(``head_count_kv`` 0) and MLA layers (``head_count_kv`` 1), as conversion/kimi_k3.py writes it, plus: cross-layer
attention residuals (``attn_res.block_size``; per layer ``attn_res_score``/``ffn_res_score`` of ``n_embd``, and a
final ``output_res_score``), the situ activation (``activation.situ_beta``/``situ_linear_beta``), a full-rank KDA
output gate ``ssm_g`` (instead of ``ssm_g_a``/``ssm_g_b``), a 1-D ``ssm_a`` and ``kda.gate_lower_bound``, MLA with
a q LoRA and a sigmoid output gate ``attn_gate``, and a latent MoE (``expert_latent_length``: the routed experts
are that wide, between ``ffn_routed_down`` and ``ffn_routed_norm``/``ffn_routed_up``; the shared experts are
``n_ff_exp * expert_shared_count`` wide at ``n_embd``). Layer 0 is a dense situ FFN."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf
from tests.factory_models.kimi_linear import add_kda


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd, d_conv = int(hp["kda_head_dim"]), int(hp["ssm_d_conv"])
    kv_lora, q_lora = int(hp["kv_lora_rank"]), int(hp["q_lora_rank"])
    rope, nope, v_dim = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    latent = int(hp["n_embd_latent"])
    d_inner = n_head * hd
    full = [il in hp["mla_layers"] for il in range(nl)]
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.head_count_kv", [1 if f else 0 for f in full])
    s.set("{arch}.vocab_size", gf._n_vocab(hp))
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.kda.head_dim", hd)
    s.set("{arch}.kda.gate_lower_bound", float(hp["kda_gate_lower_bound"]))
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.attention.key_length", kv_lora + rope)
    s.set("{arch}.attention.value_length", kv_lora)
    s.set("{arch}.attention.key_length_mla", nope + rope)
    s.set("{arch}.attention.value_length_mla", v_dim)
    s.set("{arch}.expert_feed_forward_length", int(hp["n_ff_exp"]))
    s.set("{arch}.expert_latent_length", latent)
    s.set("{arch}.activation.situ_beta", float(hp["situ_beta"]))
    s.set("{arch}.activation.situ_linear_beta", float(hp["situ_linear_beta"]))
    s.set("{arch}.attn_res.block_size", int(hp["attn_res_block_size"]))
    gf._moe_keys(s, hp)
    gf._embeddings(s, hp, output_required=True)
    s.add("output_res_score.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_res_score.weight", (n_embd,), "norm")
        s.add(p + "ffn_res_score.weight", (n_embd,), "norm")
        if not full[i]:
            add_kda(s, p, n_embd, d_inner, hd, n_head, d_conv, a_shape=(n_head,), g=("ssm_g",))
        else:
            s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
            s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
            s.add(p + "attn_q_a.weight", (n_embd, q_lora))
            s.add(p + "attn_q_b.weight", (q_lora, n_head * (nope + rope)))
            s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
            s.add(p + "attn_k_b.weight", (nope, kv_lora, n_head))
            s.add(p + "attn_v_b.weight", (kv_lora, v_dim, n_head))
            s.add(p + "attn_gate.weight", (n_embd, n_head * v_dim))
            s.add(p + "attn_output.weight", (n_head * v_dim, n_embd))
        if i < hp["n_layer_dense_lead"]:
            gf._dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            s.add(p + "ffn_gate_inp.weight", (n_embd, hp["n_expert"]), "router")
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
            s.add(p + "ffn_gate_exps.weight", (latent, hp["n_ff_exp"], hp["n_expert"]))
            s.add(p + "ffn_down_exps.weight", (hp["n_ff_exp"], latent, hp["n_expert"]))
            s.add(p + "ffn_up_exps.weight", (latent, hp["n_ff_exp"], hp["n_expert"]))
            s.add(p + "ffn_routed_down.weight", (n_embd, latent))
            s.add(p + "ffn_routed_up.weight", (latent, n_embd))
            s.add(p + "ffn_routed_norm.weight", (latent,), "norm")
            gf._shared_expert(s, i, n_embd, hp["n_ff_exp"] * max(1, int(hp["n_expert_shared"])))


gf.register(
    "kimi-k3",
    build=build,
    tiny=dict(n_layer=5, n_embd=64, n_head=4, n_head_kv=0, kda_head_dim=16, ssm_d_conv=4, mla_layers=(2, 4),
              q_lora_rank=32, kv_lora_rank=32, qk_rope_dim=8, qk_nope_dim=16, v_head_dim=16, n_ff=128, n_expert=8,
              n_expert_used=2, n_ff_exp=32, n_embd_latent=32, n_expert_shared=2, n_layer_dense_lead=1,
              expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True, kda_gate_lower_bound=-5.0,
              situ_beta=4.0, situ_linear_beta=25.0, attn_res_block_size=2, rms_eps=1e-5, rope_base=10000.0),
    sparse={
        # Kimi K3 (moonshotai/Kimi-K3, published as MXFP4-expert GGUFs). Confirmed from the pinned llama.cpp:
        # 93 layers (llama_model_kimi_k3's type switch: 2.8T-A50B), the keys and tensor shapes
        # (conversion/kimi_k3.py, load_arch_tensors), up to 1024 experts (LLAMA_MAX_EXPERTS "Kimi K3"), the
        # gate lower bound and nope-only MLA (asserted at conversion). Taken from a public port's "real per-layer
        # dimensions" (not from Moonshot's config, which is not in the tree; assumed): hidden 7168, 96 heads,
        # q LoRA 1536, kv LoRA 512, rope 64 / nope 128 / v 128, KDA head 128 and short conv 4, 896 experts of
        # 3072 (16 used, 2 shared) in a 3584 latent, layer 0 dense 33792, situ beta 4 / linear beta 25,
        # attn_res block size 2, vocabulary 163840. Assumed: MLA on every 4th layer and the last (kimi-linear's
        # 3:1 pattern), routed scaling 2.5, 256K context, MXFP4 experts with Q8_0 elsewhere (as gpt-oss's).
        "kimi-k3": dict(
            name="Kimi-K3", n_layer=93, n_embd=7168, n_head=96, n_head_kv=0, kda_head_dim=128, ssm_d_conv=4,
            mla_layers=tuple(il for il in range(93) if il % 4 == 3 or il == 92), q_lora_rank=1536,
            kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128, n_ff=33792, n_expert=896,
            n_expert_used=16, n_ff_exp=3072, n_embd_latent=3584, n_expert_shared=2, n_layer_dense_lead=1,
            expert_gating_func=2, expert_weights_scale=2.5, expert_weights_norm=True, kda_gate_lower_bound=-5.0,
            situ_beta=4.0, situ_linear_beta=25.0, attn_res_block_size=2, n_ctx_train=262144, rope_base=10000.0,
            rms_eps=1e-5, n_vocab=163840, quant="gpt-oss", file_type=38),
    },
)
