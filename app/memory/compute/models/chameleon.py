"""``src/models/chameleon.cpp`` (Chameleon): the llama layer with per-head layer norms of Q and K (``LLM_NORM``,
weights over head x heads, optional biases), or with ``swin_norm`` the norms after attention and FFN instead of
before; the logits then get the image tokens' range overwritten by ``ggml_set_1d`` with a clamped leaf of 8192
values, which makes a second, logits-sized tensor (SET is not done in place). With ``swin_norm`` chameleon.cpp
feeds the FFN the normed attention output rather than the residual sum, and so does this replay."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import NONE, OUTPUT, binary, dup, get_rows, new, unary
from . import Family

#: chameleon.cpp's image-token range: img_token_end_idx 8196 - img_token_start_idx 4
N_IMG_TOKENS = 8196 - 4


def _ln(b, x, name, il):
    """``build_norm(x, <name>.weight, <name>.bias, LLM_NORM)``: NORM never runs in place."""
    cur = unary("NORM", x)
    b.force_norm(cur, il)
    cur = binary("MUL", cur, b.w(f"{name}.weight"))
    bias = b.w(f"{name}.bias")
    return binary("ADD", cur, bias) if bias is not None else cur


def build(b):
    c, p = b.c, b.p
    hd = p.head_dim_v
    swin = bool(c.meta.get(f"{p.arch}.swin_norm"))
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = inpL if swin else b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if f"blk.{il}.attn_q_norm.weight" in c.names:
            q = _ln(b, q, f"blk.{il}.attn_q_norm", il)
        if f"blk.{il}.attn_k_norm.weight" in c.names:
            k = _ln(b, k, f"blk.{il}.attn_k_norm", il)
        cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        if swin:
            cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpSA)
        if not swin:
            cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il)  # with swin_norm: over the normed attention output, not ffn_inp (as written)
        if swin:
            cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
        inpL = binary("ADD", cur, ffn_inp)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = b.mm_s(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    img = new("f32", (N_IMG_TOKENS,), NONE)
    img.name = "chameleon_img_logits"
    img = unary("CLAMP", img)
    logits = dup(logits, "SET", (logits, img))
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="chameleon", build=build, exact=frozenset({"chameleon"}))
