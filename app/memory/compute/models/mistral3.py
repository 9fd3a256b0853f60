"""``src/models/mistral3.cpp`` (Ministral 3): the llama layer with an optional attention-temperature input
(``attention.temperature_scale``) that scales Q after rope, and softmax-routed experts with normalised weights."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    temp = c.meta.get(f"{c.arch}.attention.temperature_scale")
    attn_scale = b.inp("inp_attn_scale", "f32", (1, 1, b.nt)) if temp else None
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        freqs = b.w("rope_freqs.weight")
        q = rope(q, pos, freqs)
        k = rope(k, pos, freqs)
        if attn_scale is not None:
            q = binary("MUL", q, attn_scale)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            cur = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        else:
            cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="mistral3", build=build, exact=frozenset({"mistral3"}))
