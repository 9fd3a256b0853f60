"""``src/models/ernie4-5.cpp`` / ``ernie4-5-moe.cpp``: the llama layer; in the MoE model, layers from
``leading_dense_block_count`` on whose index + 1 is a multiple of ``interleave_moe_layer_step`` route to experts
(softmax, normalised top-k weights, optional selection bias) plus an ungated shared expert."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    step = int(c.meta.get(f"{c.arch}.interleave_moe_layer_step", 0) or 0)
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if c.arch == "ernie4_5-moe" and il >= p.n_layer_dense_lead and step > 0 and (il + 1) % step == 0:
            moe_out = b.moe(
                cur,
                il,
                gating="softmax",
                norm_w=True,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
            if f"blk.{il}.ffn_up_shexp.weight" in c.names:
                cur = binary("ADD", moe_out, b._ffn_named(cur, il, "shexp"))
            else:
                cur = moe_out
        else:
            cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="ernie4_5", build=build, exact=frozenset({"ernie4_5-moe", "ernie4_5"}))
