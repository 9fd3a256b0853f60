"""``src/models/spark2-5.cpp`` (Spark 2.5): sliding-window and global layers (``build_attn_inp_kv_iswa``, the
pattern an array in the file), per-layer head counts, rope on Q and K, attention without its output projection,
then a per-head sigmoid gate (``attn_gate`` over the attention's input: one value per head, broadcast over the
head), ``attn_output``, and a GELU-gated FFN."""

from __future__ import annotations

from ..builder import gate_heads, qkv, rope
from ..ggml import binary, get_rows, mul_mat, unary
from . import Family


def build(b):
    c, p, nt = b.c, b.p, b.nt
    hd = p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        n_head = p.n_head[il]
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        attn_inp = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        attn = b.attn(il, rope(q, pos), rope(k, pos), v, None, None, iswa_order=c.has_swa)
        gate = unary("UNARY", mul_mat(b.w(f"blk.{il}.attn_gate.weight"), attn_inp))  # sigmoid, [n_head, n_tokens]
        attn = gate_heads(attn, gate, hd, n_head, nt)
        cur = mul_mat(b.w(f"blk.{il}.attn_output.weight"), attn)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="spark2_5", build=build, exact=frozenset({"spark2_5"}))
