"""AI21 Jamba (``jamba``): Mamba (v1) layers with one attention layer in every ``attn_period``, and a softmax-routed
MoE FFN on every ``expert_period``-th layer (a dense SwiGLU FFN on the others).

``llama_model_jamba::load_arch_tensors`` (``src/models/jamba.cpp``) reads, per layer: ``attn_norm``; on a layer
with ``head_count_kv[il] == 0`` (recurrent, ``is_recr_impl``) the Mamba block ``ssm_in`` (2 d_inner),
``ssm_conv1d`` (+ bias), ``ssm_x`` (dt_rank + 2 d_state), ``ssm_dt_norm``, ``ssm_dt`` (+ bias), ``ssm_b_norm``,
``ssm_c_norm``, ``ssm_a`` (d_state x d_inner), ``ssm_d``, ``ssm_out``; otherwise Q/K/V/O (no rope, head_dim
n_embd / n_head); then ``ffn_norm`` and either ``ffn_gate_inp`` + gate/up/down experts or a dense gated FFN.
d_inner must be 2 n_embd. The converter (``conversion/jamba.py``) writes ``head_count_kv`` per layer (non-zero on
the attention layers only) and the four ``ssm.*`` keys (no group count, no rope keys).
"""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def _layout(hp: dict[str, Any]) -> tuple[list[bool], list[bool]]:
    nl = int(hp["n_layer"])
    ao, ap, eo, ep = (int(hp[k]) for k in ("attn_offset", "attn_period", "expert_offset", "expert_period"))
    attn = [il >= ao and (il - ao) % ap == 0 for il in range(nl)]
    moe = [il >= eo and (il - eo) % ep == 0 for il in range(nl)]
    return attn, moe


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    d_inner, d_conv, d_state = int(hp["ssm_d_inner"]), int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    dt_rank, n_ff = int(hp["ssm_dt_rank"]), int(hp["n_ff"])
    if d_inner != 2 * n_embd:
        raise ValueError(f"jamba: llama.cpp supports d_inner = 2 n_embd only ({d_inner} != 2 x {n_embd})")
    attn, moe = _layout(hp)
    kv = [int(hp["n_head_kv"]) if a else 0 for a in attn]
    hd = n_embd // n_head
    gf._common_kv(s, dict(hp, n_head_kv=kv, head_dim=None), nl)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", dt_rank)
    gf._embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if attn[i]:
            gf._attn_qkvo(s, i, n_embd, n_embd, hd * kv[i], hd * kv[i])
        else:
            s.add(p + "ssm_in.weight", (n_embd, 2 * d_inner))
            s.add(p + "ssm_conv1d.weight", (d_conv, d_inner), "ones")  # f32 in every policy
            s.add(p + "ssm_conv1d.bias", (d_inner,), "bias")
            s.add(p + "ssm_x.weight", (d_inner, dt_rank + 2 * d_state))
            s.add(p + "ssm_dt_norm.weight", (dt_rank,), "norm")
            s.add(p + "ssm_dt.weight", (dt_rank, d_inner))
            s.add(p + "ssm_dt.bias", (d_inner,), "bias")
            s.add(p + "ssm_b_norm.weight", (d_state,), "norm")
            s.add(p + "ssm_c_norm.weight", (d_state,), "norm")
            s.add(p + "ssm_a", (d_state, d_inner), "ssm_a")
            s.add(p + "ssm_d", (d_inner,), "ones")
            s.add(p + "ssm_out.weight", (d_inner, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if moe[i]:
            gf._experts(s, i, n_embd, n_ff, int(hp["n_expert"]))
        else:
            gf._dense_ffn(s, i, n_embd, n_ff)


gf.register(
    "jamba",
    build=build,
    # tiny: layers M, M+MoE, attention, M+MoE (attention at offset 2, experts on odd layers)
    tiny=dict(n_layer=4, n_ff=128, n_expert=4, n_expert_used=2, attn_offset=2, attn_period=4, expert_offset=1,
              expert_period=2, ssm_d_conv=4, ssm_d_inner=128, ssm_d_state=16, ssm_dt_rank=4),
    sparse={
        # AI21-Jamba-Mini-1.7 (config.json; the Jamba-v0.1 / 1.5-Mini shape): 32 layers, hidden 4096, 32 query / 8
        # KV heads (attention on layers 4, 12, 20, 28: offset 4, period 8), MLP 14336, 16 experts (2 used) on the
        # odd layers (offset 1, period 2), Mamba d_inner 8192 (expand 2), state 16, conv 4, dt_rank 256,
        # vocabulary 65536, 262144 positions, untied output
        "jamba-mini-1.7": dict(name="AI21-Jamba-Mini-1.7", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8,
                               n_ff=14336, n_expert=16, n_expert_used=2, attn_offset=4, attn_period=8,
                               expert_offset=1, expert_period=2, ssm_d_conv=4, ssm_d_inner=8192, ssm_d_state=16,
                               ssm_dt_rank=256, n_ctx_train=262144, rms_eps=1e-6, n_vocab=65536, quant="q4_k_m",
                               file_type=15),
    },
)
