"""``src/models/olmo2.cpp`` (OLMo 2, Olmo 3): no pre-norms; Q/K/V projected 2-D, Q and K RMS-normed over the whole
projection, reshaped to heads, roped, attention scaled by 1/sqrt(head_dim) (over a sliding window on Olmo 3's
sliding layers), post-attention norm, residual, SwiGLU FFN on the residual stream itself, post-FFN norm, residual.
"""

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
        q, k, v = qkv_2d(b, il, inpL, hd)
        q = reshape(b.norm(q, f"blk.{il}.attn_q_norm.weight", il), hd, p.n_head[il], nt)
        k = reshape(b.norm(k, f"blk.{il}.attn_k_norm.weight", il), hd, p.n_head_kv[il], nt)
        v = reshape(v, hd, p.n_head_kv[il], nt)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=c.has_swa)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(ffn_inp, "ffn", il)
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="olmo2", build=build, exact=frozenset({"olmo2"}))
