"""``src/models/talkie.cpp`` (Talkie): RMS norms without weights (the embeddings, each layer's two, the output),
rope then a per-head Q gain (``attn_q_norm`` of 1 x n_head) and a bare K norm, the attention output and FFN down
projections with per-tensor scales (``attn_output.scale``, ``ffn_down.scale``: ``build_lora_mm``'s MUL, which the
builder adds where the file has them), and a
skip from the normed embeddings into every layer's output, scaled by ``layer_output_scale``; a logit scale."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    p = b.p
    inpL = b.norm(b.inp_embd(), None, -1)
    embd_skip = inpL
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA, skip = inpL, embd_skip
        cur = b.norm(inpL, None, il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q, k = rope(q, pos), rope(k, pos)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, None, il)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)  # with attn_output.scale
        if il == b.last:
            cur, inpSA, skip = get_rows(cur, out_ids), get_rows(inpSA, out_ids), get_rows(skip, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, None, il)
        cur = binary("ADD", b.ffn(cur, "ffn", il), ffn_inp)  # with ffn_down.scale
        inpL = binary("ADD", cur, binary("MUL", skip, b.w(f"blk.{il}.layer_output_scale.weight")))
    return b.output(inpL, out_ids)


FAMILY = Family(name="talkie", build=build, exact=frozenset({"talkie"}))
