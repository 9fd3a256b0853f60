"""``src/models/muse-glimmer.cpp`` (Muse Glimmer): a weightless RMS norm of the embeddings; SWA on 3 of every 4
layers (``load_swa_pattern(ml, 4)``), rope on the SWA layers only; Q/K norms, attention without its output
projection, an element-wise sigmoid gate from the attention's input, ``attn_output``; post-attention and post-FFN
norms as bare ``ggml_rms_norm`` + MUL (not ``build_norm``'s "norm", so not pinned to the layer's device); a logit
scale and an optional final soft-cap."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, unary
from . import Family


def _post_norm(b, x, name):
    return binary("MUL", unary("RMS_NORM", x), b.w(name))


def build(b):
    c, p = b.c, b.p
    hd = p.head_dim_v
    inpL = b.norm(b.inp_embd(), None, -1)
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        attn_inp = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        gate = b.mm_s(f"blk.{il}.attn_gate.weight", attn_inp)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if c.is_swa(il):
            q, k = rope(q, pos), rope(k, pos)
        cur = b.attn(il, q, k, v, None, None, iswa_order=c.has_swa)
        cur = binary("MUL", cur, unary("UNARY", gate))  # sigmoid
        cur = _post_norm(b, b.mm_s(f"blk.{il}.attn_output.weight", cur), f"blk.{il}.post_attention_norm.weight")
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il)
        inpL = binary("ADD", _post_norm(b, cur, f"blk.{il}.post_ffw_norm.weight"), ffn_inp)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = unary("SCALE", b.mm_s("output.weight", cur))
    if float(c.meta.get(f"{p.arch}.final_logit_softcapping", 0) or 0):
        logits = unary("SCALE", unary("UNARY", unary("SCALE", logits)))
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="muse-glimmer", build=build, exact=frozenset({"muse-glimmer"}))
