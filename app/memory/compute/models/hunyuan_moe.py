"""``src/models/hunyuan-moe.cpp``: rope before the Q/K norms (K normed first), experts with normalised top-k
weights plus an ungated shared MLP on every layer."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        freqs = b.w("rope_freqs.weight")
        q = rope(q, pos, freqs)
        k = rope(k, pos, freqs)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        mlp = b._ffn_named(cur, il, "shexp")
        moe = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        inpL = binary("ADD", binary("ADD", moe, mlp), ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="hunyuan-moe", build=build, exact=frozenset({"hunyuan-moe"}))
