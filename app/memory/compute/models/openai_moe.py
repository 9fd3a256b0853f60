"""``src/models/openai-moe.cpp`` (arch ``gpt-oss``)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary
from . import Family


def build(b):
    """``src/models/openai-moe.cpp``: SWA every other layer, sinks, biases, out_ids after the last layer."""
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        hd = p.n_rot or p.head_dim_k
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(
            il,
            q,
            k,
            v,
            b.w(f"blk.{il}.attn_output.weight"),
            b.w(f"blk.{il}.attn_output.bias"),
            sinks=b.w(f"blk.{il}.attn_sinks.weight"),
            iswa_order=True,
        )
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.post_attention_norm.weight", il)
        cur = b.moe(cur, il, gating="softmax_weight", norm_w=False, w_scale=c.expert_weights_scale)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    inpL.flags = inpL.fl0 = OUTPUT  # t_h_nextn
    return b.output(inpL, out_ids, norm_first=False)


FAMILY = Family(name="openai-moe", build=build, exact=frozenset({"gpt-oss"}))
