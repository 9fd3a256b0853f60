"""``src/models/minicpm3.cpp`` (MiniCPM3): DeepSeek-style low-rank projections into a plain KV cache (as
``plm.cpp``, :func:`.plm.compressed_kv`): Q through ``attn_q_a`` / its norm / ``attn_q_b``, the compressed KV (normed) and one shared rope
part from ``attn_kv_a_mqa``, K's nope part and V (made contiguous) from ``attn_kv_b``, rope with the LongRoPE
factors each layer reads on its own device (``get_rope_factors``: long past the original context, else short);
the muP scales: embeddings x12, each residual branch x1.4/sqrt(n_layer), the normed output x256/n_embd before the
head."""

from __future__ import annotations

from ..builder import layer_copy, rope
from ..ggml import OUTPUT, binary, get_rows, reshape, unary
from . import Family
from .plm import compressed_kv


def build(b):
    c, p, nt = b.c, b.p, b.nt
    inpL = unary("SCALE", b.inp_embd())
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    if "rope_freqs.weight" in c.names:
        factors = "rope_freqs.weight"
    else:
        n_ctx_orig = int(c.meta.get(f"{c.arch}.rope.scaling.original_context_length", 0) or 0) or p.n_ctx_train
        factors = "rope_factors_long.weight" if c.n_kv > n_ctx_orig else "rope_factors_short.weight"
    for il in b.layers:
        inpSA = inpL
        f = layer_copy(b, factors, il)
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q = b.mm(f"blk.{il}.attn_q_a.weight", cur)
        q = b.norm(q, f"blk.{il}.attn_q_a_norm.weight", il)
        q = reshape(b.mm(f"blk.{il}.attn_q_b.weight", q), p.head_dim_k, p.n_head[0], nt)
        k, v = compressed_kv(b, il, cur, pos, f)
        cur = b.attn(il, rope(q, pos, f), k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", unary("SCALE", cur), inpSA)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il)
        inpL = binary("ADD", unary("SCALE", cur), ffn_inp)
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd, before the head's scale
    logits = b.mm_s(b.w("output.weight") or b.w("token_embd.weight@output"), unary("SCALE", cur))
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="minicpm3", build=build, exact=frozenset({"minicpm3"}))
