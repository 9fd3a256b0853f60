"""``src/models/glm4.cpp`` (GLM-4-0414): post-attention and post-MLP norms, a fused up projection of width
``2 * n_ff`` halved by a single-tensor SwiGLU (``LLM_FFN_SWIGLU``, ``LLM_FFN_SEQ``, no gate weight).
``src/models/chatglm.cpp`` (ChatGLM3, GLM-4-9B/GLM-4-9B-chat, CodeGeeX4): the same layer without the post norms."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, mul_mat, new
from . import Family


def build(b):
    p = b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        if b.w(f"blk.{il}.post_attention_norm.weight") is not None:  # glm4; chatglm has no post norms
            cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        up = mul_mat(b.w(f"blk.{il}.ffn_up.weight"), cur)
        act = new(up.ty, (up.ne[0] // 2, up.ne[1], up.ne[2], up.ne[3]), "GLU", (up,))  # ggml_swiglu(up)
        cur = mul_mat(b.w(f"blk.{il}.ffn_down.weight"), act)
        if b.w(f"blk.{il}.post_ffw_norm.weight") is not None:
            cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="glm4", build=build, exact=frozenset({"glm4", "chatglm"}))
