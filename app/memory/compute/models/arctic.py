"""``src/models/arctic.cpp`` (Snowflake Arctic): the llama attention, then a dense residual MLP (n_embd wide) and,
in parallel over the attention's input (``ffn_norm_exps``), softmax-routed experts with normalised top-k
weights; the experts' output added to the MLP's residual sum."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    hd = p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il)
        ffn_out = binary("ADD", cur, ffn_inp)
        cur = b.norm(inpSA, f"blk.{il}.ffn_norm_exps.weight", il)
        cur = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        inpL = binary("ADD", cur, ffn_out)
    return b.output(inpL, out_ids)


FAMILY = Family(name="arctic", build=build, exact=frozenset({"arctic"}))
