"""NVIDIA Nemotron-H hybrids: ``nemotron_h`` (Nemotron Nano 2: 9B/12B) and ``nemotron_h_moe`` (Nemotron 3 Nano).

``llama_model_nemotron_h`` (``src/models/nemotron-h.cpp``; ``nemotron_h_moe`` reuses its loader and graph) builds
three kinds of layer from the converter's ``hybrid_override_pattern`` (``M`` Mamba2, ``*`` attention, ``-`` a dense
squared-ReLU MLP, ``E`` an MoE): a layer is recurrent iff ``head_count_kv[il]`` and ``feed_forward_length[il]`` are
both 0, attention iff only ``feed_forward_length[il]`` is 0, an FFN-only layer otherwise (``conversion/nemotron.py``
writes ``head_count_kv`` per layer, non-zero on ``*`` layers only, and ``feed_forward_length`` per layer, non-zero on
``-``/``E`` layers only). Every layer has ``attn_norm``; Mamba2 layers ``ssm_in`` (2 d_inner + 2 n_group d_state +
n_head), ``ssm_conv1d`` (+ bias), ``ssm_dt.bias``, ``ssm_a``, ``ssm_d``, a grouped ``ssm_norm`` and ``ssm_out``;
attention layers Q/K/V/O without rope; MLP layers ``ffn_up``/``ffn_down`` (no gate); MoE layers a router with a
selection bias (``exp_probs_b``), up/down experts (no gate) and an ungated shared expert. The loader requires
``attention.layer_norm_epsilon`` (the MTP head's norm) and reads the RMS epsilon when present.

``ssm_conv1d`` is kept f32 (llama-quant never quantizes it); so are the norms, biases, ``ssm_a``/``ssm_d``.
"""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def _layer_kinds(hp: dict[str, Any]) -> str:
    pattern = str(hp["pattern"])
    if len(pattern) != int(hp["n_layer"]):
        raise ValueError(f"pattern {pattern!r} has {len(pattern)} layers, n_layer is {hp['n_layer']}")
    bad = set(pattern) - set("M*-E")
    if bad:
        raise ValueError(f"pattern {pattern!r}: unknown layer kinds {sorted(bad)} (M, *, - or E)")
    return pattern


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    pattern = _layer_kinds(hp)
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    moe = bool(hp.get("n_expert"))
    if moe and "-" in pattern or not moe and "E" in pattern:
        raise ValueError(f"pattern {pattern!r}: '-' layers are for nemotron_h, 'E' layers for nemotron_h_moe")
    n_ff_layer = int(hp["n_ff_exp"] if moe else hp["n_ff"])
    # n_nextn MTP blocks (nemotron_h_moe) after the trunk: attention + MoE in one block, not recurrent
    n_nextn = int(hp.get("n_nextn") or 0)
    if n_nextn and not moe:
        raise ValueError("NextN/MTP blocks are for nemotron_h_moe")
    kv = [int(hp["n_head_kv"]) if k == "*" else 0 for k in pattern] + [int(hp["n_head_kv"])] * n_nextn
    ff = [n_ff_layer if k in "-E" else 0 for k in pattern] + [n_ff_layer] * n_nextn
    d_inner = int(hp["ssm_n_head"]) * int(hp["ssm_head_dim"])
    d_conv, d_state = int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    n_group, n_ssm_head = int(hp["ssm_n_group"]), int(hp["ssm_n_head"])
    conv_dim = d_inner + 2 * n_group * d_state
    d_in_proj = 2 * d_inner + 2 * n_group * d_state + n_ssm_head
    gf._common_kv(s, dict(hp, n_head_kv=kv, n_ff=ff, head_dim=hd), nl + n_nextn)  # key/value_length: always written
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", n_ssm_head)
    s.set("{arch}.ssm.group_count", n_group)
    if moe:
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_shexp"]))
        s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
        s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
        s.set("{arch}.expert_weights_scale", float(hp["expert_weights_scale"]))
        s.set("{arch}.expert_group_count", int(hp["n_expert_groups"]))
    gf._embeddings(s, hp)
    for i, kind in enumerate(pattern):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if kind == "M":
            s.add(p + "ssm_in.weight", (n_embd, d_in_proj))
            s.add(p + "ssm_conv1d.weight", (d_conv, conv_dim), "ones")  # f32 in every policy
            s.add(p + "ssm_conv1d.bias", (conv_dim,), "bias")
            s.add(p + "ssm_dt.bias", (n_ssm_head,), "bias")
            s.add(p + "ssm_a", (1, n_ssm_head), "ssm_a")
            s.add(p + "ssm_d", (1, n_ssm_head), "ones")
            s.add(p + "ssm_norm.weight", (d_inner // n_group, n_group), "norm")
            s.add(p + "ssm_out.weight", (d_inner, n_embd))
        elif kind == "*":
            gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        elif kind == "-":
            s.add(p + "ffn_down.weight", (ff[i], n_embd))
            s.add(p + "ffn_up.weight", (n_embd, ff[i]))
        else:
            n_expert, n_sh = int(hp["n_expert"]), int(hp["n_ff_shexp"])
            s.add(p + "ffn_gate_inp.weight", (n_embd, n_expert), "router")
            s.add(p + "exp_probs_b.bias", (n_expert,), "zero")
            s.add(p + "ffn_down_exps.weight", (ff[i], n_embd, n_expert))
            s.add(p + "ffn_up_exps.weight", (n_embd, ff[i], n_expert))
            s.add(p + "ffn_down_shexp.weight", (n_sh, n_embd))
            s.add(p + "ffn_up_shexp.weight", (n_embd, n_sh))
    for i in range(nl, nl + n_nextn):  # load_arch_tensors' NextN block (loaded only with --spec-type draft-mtp)
        p = f"blk.{i}."
        n_expert, n_sh = int(hp["n_expert"]), int(hp["n_ff_shexp"])
        s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
        s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")
        s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
        s.add(p + "nextn.shared_head_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_gate_inp.weight", (n_embd, n_expert), "router")
        s.add(p + "exp_probs_b.bias", (n_expert,), "zero")
        s.add(p + "ffn_down_exps.weight", (ff[i], n_embd, n_expert))
        s.add(p + "ffn_up_exps.weight", (n_embd, ff[i], n_expert))
        s.add(p + "ffn_down_shexp.weight", (n_sh, n_embd))
        s.add(p + "ffn_up_shexp.weight", (n_embd, n_sh))


_SSM_TINY = dict(ssm_d_conv=4, ssm_d_state=16, ssm_n_group=2, ssm_n_head=8, ssm_head_dim=16)

# tiny: one layer of each kind and a second Mamba2 layer, the attention layer in the middle (as in the real ones)
TINY_DENSE = dict(_SSM_TINY, n_layer=6, pattern="M-M*-M", n_ff=128, rms_eps=1e-5)
TINY_MOE = dict(_SSM_TINY, n_layer=6, pattern="ME*EME", n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64,
                n_ff_shexp=128, n_expert_shared=1, n_expert_groups=1, expert_weights_norm=True,
                expert_weights_scale=2.5, rms_eps=1e-5, n_nextn=0)

_NANO2 = dict(head_dim=128, n_head=40, n_head_kv=8, ssm_d_conv=4, ssm_d_state=128, ssm_n_group=8, ssm_n_head=128,
              ssm_head_dim=80, n_ctx_train=131072, rms_eps=1e-5, n_vocab=131072, quant="q4_k_m", file_type=15)

gf.register(
    "nemotron_h",
    build=build,
    tiny=TINY_DENSE,
    sparse={
        # NVIDIA-Nemotron-Nano-9B-v2 (config.json): 56 layers (27 Mamba2, 4 attention, 25 MLP), hidden 4480, 40
        # query / 8 KV heads of 128, MLP 15680, Mamba2 128 heads of 80 (d_inner 10240), 8 groups, state 128, conv 4,
        # vocabulary 131072, 131072 positions
        "nemotron-nano-9b-v2": dict(_NANO2, name="NVIDIA-Nemotron-Nano-9B-v2", n_layer=56, n_embd=4480,
                                    n_ff=15680,
                                    pattern="M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"),
        # NVIDIA-Nemotron-Nano-12B-v2: 62 layers (28 Mamba2, 6 attention, 28 MLP), hidden 5120, MLP 20480
        "nemotron-nano-12b-v2": dict(_NANO2, name="NVIDIA-Nemotron-Nano-12B-v2", n_layer=62, n_embd=5120,
                                     n_ff=20480,
                                     pattern="M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-"),
    },
)

_NANO3 = dict(
    name="NVIDIA-Nemotron-3-Nano-30B-A3B", n_layer=52, n_embd=2688, n_head=32, n_head_kv=2, head_dim=128,
    pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", n_expert=128, n_expert_used=6,
    n_ff_exp=1856, n_ff_shexp=3712, n_expert_shared=1, n_expert_groups=1, expert_weights_norm=True,
    expert_weights_scale=2.5, ssm_d_conv=4, ssm_d_state=128, ssm_n_group=8, ssm_n_head=64,
    ssm_head_dim=64, n_ctx_train=262144, rms_eps=1e-5, n_vocab=131072, quant="q4_k_m", file_type=15)

gf.register(
    "nemotron_h_moe",
    build=build,
    tiny=TINY_MOE,
    sparse={
        # NVIDIA-Nemotron-3-Nano-30B-A3B (config.json): 52 layers (23 Mamba2, 6 attention, 23 MoE), hidden 2688,
        # 32 query / 2 KV heads of 128, Mamba2 64 heads of 64 (d_inner 4096), 8 groups, state 128, conv 4,
        # 128 experts of 1856 (6 used, sigmoid + selection bias, normalised, x2.5) + 1 shared of 3712, n_group 1,
        # vocabulary 131072, 262144 positions; no MTP head
        "nemotron-3-nano-30b-a3b": _NANO3,
        # the same with one NextN/MTP block (attention + MoE, as Nemotron 3 Super's): for --spec-type draft-mtp
        "nemotron-3-nano-30b-a3b-mtp": dict(_NANO3, n_nextn=1),
    },
)
