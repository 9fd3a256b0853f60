"""``src/models/olmoe.cpp``: Q/K RMS-normed over the whole projection before the reshape to heads; MoE with
softmax routing and unnormalised top-k weights."""

from __future__ import annotations

from ..builder import qkv_2d, rope
from ..ggml import binary, get_rows, reshape
from . import Family


def build(b):
    c, p = b.c, b.p
    nt = b.nt
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        # build_qkv(..., reshape=false): the 2-D projections, normed, then reshaped
        q, k, v = qkv_2d(b, il, cur, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = reshape(q, hd, p.n_head[il], nt)
        k = reshape(k, hd, p.n_head_kv[il], nt)
        v = reshape(v, hd, p.n_head_kv[il], nt)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.moe(cur, il, gating="softmax", norm_w=False, w_scale=c.expert_weights_scale)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="olmoe", build=build, exact=frozenset({"olmoe"}))
