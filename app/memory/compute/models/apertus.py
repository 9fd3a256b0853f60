"""``src/models/apertus.cpp`` (Apertus-8B / 70B).

Norm, Q/K/V reshaped to heads, Q and K RMS-normed per head (their optional norm biases are loaded but not used
by the graph), rope with the layer's frequency factors (``get_rope_factors``: ``rope_freqs`` when the model has
it, the llama3 factors of the published files; otherwise LongRoPE's long/short pair by the per-sequence
context), attention (optional output bias), residual, norm, an ungated FFN ``ffn_up`` -> xIELU (a unary op of
the input's shape) -> ``ffn_down``, residual. The factor tensors are created by every layer with
``TENSOR_DUPLICATED``: each layer's rope reads the copy on its own device (:func:`..builder.layer_copy`).
"""

from __future__ import annotations

from ..builder import layer_copy, qkv, rope
from ..ggml import binary, get_rows, mul_mat, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    if "rope_freqs.weight" in c.names:
        factors = "rope_freqs.weight"
    else:
        n_ctx_orig = int(c.meta.get(f"{c.arch}.rope.scaling.original_context_length", 0) or 0) or p.n_ctx_train
        factors = "rope_factors_long.weight" if c.n_kv > n_ctx_orig else "rope_factors_short.weight"
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        f = layer_copy(b, factors, il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = rope(q, pos, f)
        k = rope(k, pos, f)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        up = mul_mat(b.w(f"blk.{il}.ffn_up.weight"), cur)
        act = unary("UNARY", up)  # ggml_xielu
        cur = mul_mat(b.w(f"blk.{il}.ffn_down.weight"), act)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="apertus", build=build, exact=frozenset({"apertus"}))
