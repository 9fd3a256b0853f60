"""``src/models/plamo.cpp`` (PLaMo 1): a parallel block: one RMS norm feeds both the attention and the SwiGLU FFN;
the layer's output is FFN + attention + residual (in that order); the last layer keeps its selected rows of the
attention output, the normed input and the residual."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    p = b.p
    hd = p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        sa_inp = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, sa_inp, inpL = get_rows(cur, out_ids), get_rows(sa_inp, out_ids), get_rows(inpL, out_ids)
        cur = binary("ADD", b.ffn(sa_inp, "ffn", il), cur)
        inpL = binary("ADD", cur, inpL)
    return b.output(inpL, out_ids)


FAMILY = Family(name="plamo", build=build, exact=frozenset({"plamo"}))
