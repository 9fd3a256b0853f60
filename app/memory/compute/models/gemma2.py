"""``src/models/gemma2.cpp``: scaled embeddings, Q scaled (``f_attention_scale``), attention with logit
soft-capping (three ops on KQ without flash attention, a parameter of the fused op with it), post-attention and
post-FFN norms, GELU FFN, and the final logits always soft-capped (scale, tanh, scale)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = unary("SCALE", b.inp_embd())  # sqrt(n_embd)
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = unary("SCALE", rope(q, pos))
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=c.has_swa)
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
    logits = mul_mat(b.w("token_embd.weight@output") or b.w("output.weight"), cur)
    logits = unary("SCALE", unary("UNARY", unary("SCALE", logits)))
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="gemma2", build=build, exact=frozenset({"gemma2"}))
