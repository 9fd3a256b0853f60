"""``src/models/llama4.cpp``."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, unary
from . import Family


def build(b):
    """``src/models/llama4.cpp``: temperature-scaled NoPE layers, L2-normed Q/K, MoE every n-th layer + shared."""
    c, p = b.c, b.p
    # hparams.n_no_rope_layer_step: 4, or n_layer when the GGUF says sliding_window = 0 (then only the last
    # layer skips rope, a quirk kept as is)
    no_rope_step = p.n_layer if c.meta.get("llama4.attention.sliding_window") == 0 else 4
    use_kq_norm = c.n_expert != 128  # LLM_TYPE_17B_128E has no Q/K L2 norm
    inpL = b.inp_embd()
    pos = b.inp_pos()
    attn_scale = b.inp("inp_attn_scale", "f32", (1, 1, b.nt))
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        use_rope = (il + 1) % no_rope_step != 0
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        if use_rope:
            freqs = b.w("rope_freqs.weight")
            q = rope(q, pos, freqs)
            k = rope(k, pos, freqs)
        else:
            q = binary("MUL", q, attn_scale)
        if use_rope and use_kq_norm:
            q = unary("RMS_NORM", q)
            k = unary("RMS_NORM", k)
        cur = b.attn(
            il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"), iswa_order=c.has_swa
        )
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            moe_out = b.moe(cur, il, gating="sigmoid", norm_w=False, w_scale=c.expert_weights_scale, before=True)
            sh = b._ffn_named(cur, il, "shexp")
            cur = binary("ADD", moe_out, sh)
        else:
            cur = b.ffn(cur, "ffn", il)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


FAMILY = Family(name="llama4", build=build, exact=frozenset({"llama4"}))
