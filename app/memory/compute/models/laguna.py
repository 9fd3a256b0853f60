"""``src/models/laguna.cpp`` (Poolside Laguna): sliding-window layers except every 4th from the first
(``load_swa_pattern(ml, 4, dense_first)``) where the file has a window, per-layer head counts, Q/K norms before
rope, attention without its output projection, then a softplus gate from the attention's input (one value per head,
broadcast over the head, or one per element), ``attn_output``; ``leading_dense_block_count`` dense layers, then
sigmoid experts with selection bias (unless the file says otherwise) plus the shared expert."""

from __future__ import annotations

from ..builder import gate_heads, qkv, rope
from ..ggml import binary, get_rows, unary
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
        gw = b.w(f"blk.{il}.attn_gate.weight")
        gate = b.mm_s(gw, attn_inp)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        attn = b.attn(il, rope(q, pos), rope(k, pos), v, None, None, iswa_order=c.has_swa)
        gate = unary("UNARY", gate)  # softplus
        if gw.ne[1] == n_head:  # one gate per head
            attn = gate_heads(attn, gate, hd, n_head, nt)
        else:
            attn = binary("MUL", attn, gate)
        cur = b.mm_s(f"blk.{il}.attn_output.weight", attn)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.dense_lead_moe(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="laguna", build=build, exact=frozenset({"laguna"}))
