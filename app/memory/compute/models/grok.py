"""``src/models/grok.cpp`` (Grok-1, Grok-2): scaled embeddings (78.38 unless the file says otherwise), the llama
attention soft-capped without flash attention (build_attn_mha's grok branch: scale, tanh, scale), a norm of the
attention's output (``attn_output_norm``) before the residual, softmax experts (GELU) and, where the file has the
dense FFN (Grok-2), that FFN added to the experts and scaled by 1/sqrt(2); a post-FFN norm (``layer_output_norm``
or ``post_ffw_norm``); scaled logits, soft-capped where ``final_logit_softcapping`` is set."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, unary
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
        cur = b.attn(
            il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias")
        )
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        cur = b.norm(cur, f"blk.{il}.attn_output_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        moe_out = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        if f"blk.{il}.ffn_up.weight" in c.names:
            cur = unary("SCALE", binary("ADD", b.ffn(cur, "ffn", il), moe_out))
        else:
            cur = moe_out
        post = f"blk.{il}.layer_output_norm.weight"
        cur = b.norm(cur, post if post in c.names else f"blk.{il}.post_ffw_norm.weight", il)
        inpL = binary("ADD", cur, ffn_inp)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = unary("SCALE", b.mm_s(b.w("output.weight") or b.w("token_embd.weight@output"), cur))
    if float(c.meta.get(f"{p.arch}.final_logit_softcapping", 0) or 0):
        logits = unary("SCALE", unary("UNARY", unary("SCALE", logits)))
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="grok", build=build, exact=frozenset({"grok"}))
