"""``src/models/exaone4.cpp`` (EXAONE 4.0): no pre-norms; q/k norms; rope only on sliding-window layers (all
layers when nothing slides); post-attention and post-FFN norms (the latter not pinned)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    iswa = c.has_swa
    for il in b.layers:
        inpSA = inpL
        q, k, v = qkv(b, il, inpL, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if c.is_swa(il) or not iswa:
            freqs = b.w("rope_freqs.weight")
            q = rope(q, pos, freqs)
            k = rope(k, pos, freqs)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=iswa)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(ffn_inp, "ffn", il)
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="exaone4", build=build, exact=frozenset({"exaone4"}))
