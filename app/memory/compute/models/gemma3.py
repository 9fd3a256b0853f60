"""``src/models/gemma3.cpp``: scaled embeddings, q/k norm, scaled Q, post-attention and post-FFN norms."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    inpL = unary("SCALE", inpL)  # sqrt(n_embd) for token input
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    iswa = c.has_swa
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        hd = p.head_dim_k_swa if c.is_swa(il) else p.head_dim_k
        hv = p.head_dim_v_swa if c.is_swa(il) else p.head_dim_v
        q, k, v = qkv(b, il, cur, hd, hd, hv)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        q = rope(q, pos)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        k = rope(k, pos)
        q = unary("SCALE", q)  # f_attention_scale
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=iswa)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        sa_out = binary("ADD", cur, inpL)
        cur = b.norm(sa_out, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il, act="gelu")
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        inpL = binary("ADD", cur, sa_out)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    if c.meta.get(f"{c.arch}.final_logit_softcapping"):
        logits = unary("SCALE", logits)
        logits = unary("UNARY", logits)
        logits = unary("SCALE", logits)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="gemma3", build=build, exact=frozenset({"gemma3"}))
