"""``src/models/plamo3.cpp`` (PLaMo 3): sliding-window layers (7 of every 8 where the file has a window), one fused
``attn_qkv`` split by views, Q/K norms before rope, post-attention and post-FFN norms (named without ``.weight``
by the loader), and an FFN whose ``ffn_up`` holds gate and up together (``LLM_FFN_SWIGLU``: ``ggml_swiglu``, half
the width)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, new
from . import Family


def build(b):
    c, p = b.c, b.p
    hk, hv = p.head_dim_k, p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        residual = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hk, hk, hv)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=c.has_swa)
        if il == b.last:
            cur, residual = get_rows(cur, out_ids), get_rows(residual, out_ids)
        cur = binary("ADD", b.norm(cur, f"blk.{il}.post_attention_norm", il), residual)
        residual = cur
        up = b.mm_s(f"blk.{il}.ffn_up.weight", b.norm(cur, f"blk.{il}.ffn_norm.weight", il))
        act = new(up.ty, (up.ne[0] // 2, up.ne[1], up.ne[2], up.ne[3]), "GLU", (up,))  # ggml_swiglu(up)
        cur = b.norm(b.mm_s(f"blk.{il}.ffn_down.weight", act), f"blk.{il}.post_ffw_norm", il)
        inpL = binary("ADD", cur, residual)
    return b.output(inpL, out_ids)


FAMILY = Family(name="plamo3", build=build, exact=frozenset({"plamo3"}))
