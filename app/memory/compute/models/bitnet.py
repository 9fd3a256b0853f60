"""``src/models/bitnet.cpp`` (BitNet b1.58): the llama attention without its output projection, then
``attn_sub_norm`` and ``attn_output``; a SwiGLU FFN without its down projection, then ``ffn_sub_norm`` and
``ffn_down``; every projection with its per-tensor scale where the file has one (``build_lora_mm``); the logits
from ``token_embd`` itself (the loader makes no output copy: the product runs where the embeddings are)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, glu_split
from . import Family


def build(b):
    p = b.p
    hd = p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, None, None)
        cur = b.norm(cur, f"blk.{il}.attn_sub_norm.weight", il)
        cur = b.add_b(b.mm_s(f"blk.{il}.attn_output.weight", cur), f"blk.{il}.attn_output.bias")
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        tmp = b.mm_s(f"blk.{il}.ffn_up.weight", cur)
        cur = glu_split(b.mm_s(f"blk.{il}.ffn_gate.weight", cur), tmp)
        cur = b.norm(cur, f"blk.{il}.ffn_sub_norm.weight", il)
        inpL = binary("ADD", b.mm_s(f"blk.{il}.ffn_down.weight", cur), ffn_inp)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = b.mm_s("token_embd.weight", cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="bitnet", build=build, exact=frozenset({"bitnet"}))
