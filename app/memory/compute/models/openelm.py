"""``src/models/openelm.cpp`` (Apple OpenELM): per-layer head and FFN widths; one fused ``attn_qkv`` reshaped to
heads and split by views, Q and K normed per head before rope; the residual is the first operand of both adds
(``ggml_add(residual, cur)``, which the allocator may overwrite in place), the head tied to the embeddings."""

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
        residual = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            residual, cur = get_rows(residual, out_ids), get_rows(cur, out_ids)
        ffn_inp = binary("ADD", residual, cur)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="openelm", build=build, exact=frozenset({"openelm"}))
