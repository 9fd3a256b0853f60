"""``src/models/phi3.cpp``: Phi-3/Phi-4 (``phi3``) and the graph ``llama_model_phimoe`` uses (``models.h``:
``graph = phi3::graph``).

RMS norms with biases (attention, FFN and output norm), Q/K/V with biases, rope with the LongRoPE factors of
layer 0 (``get_rope_factors``: ``rope_factors_long`` when the per-sequence context exceeds the original one,
else ``rope_factors_short``; either is a weight of layer 0 that every layer reads), Q scaled by
1/sqrt(head_dim) before attention (whose own scale is 1), residual, norm, experts (softmax routing,
normalised top-k weights, no shared expert) or, in Phi-3/4's dense layers, one fused ``ffn_up`` halved by a
single-tensor SwiGLU, residual; the logits get the output bias where there is one. Phi-3's sliding window is read
and then disabled by llama.cpp (``load_arch_hparams``), so every layer has a full cache.
"""

from __future__ import annotations

from ..builder import layer_copy, qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, new, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    n_ctx_orig = int(c.meta.get(f"{c.arch}.rope.scaling.original_context_length", 0) or 0) or p.n_ctx_train
    factors = "rope_factors_long.weight" if c.n_kv > n_ctx_orig else "rope_factors_short.weight"
    for il in b.layers:
        residual = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        f = layer_copy(b, factors, il)
        q = rope(q, pos, f)
        k = rope(k, pos, f)
        q = unary("SCALE", q)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            residual = get_rows(residual, out_ids)
        cur = binary("ADD", cur, residual)
        residual = cur
        cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
            # Phi-3/4 dense: one fused up projection (2 x n_ff) halved by a single-tensor SwiGLU
            up = mul_mat(b.w(f"blk.{il}.ffn_up.weight"), cur)
            act = new(up.ty, (up.ne[0] // 2, up.ne[1], up.ne[2], up.ne[3]), "GLU", (up,))
            cur = mul_mat(b.w(f"blk.{il}.ffn_down.weight"), act)
        else:
            cur = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        inpL = binary("ADD", residual, cur)
    cur = b.norm(inpL, "output_norm.weight", -1, mb=b.w("output_norm.bias"))
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    bias = b.w("output.bias")
    if bias is not None:
        logits = binary("ADD", logits, bias)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="phimoe", build=build, exact=frozenset({"phimoe", "phi3"}))
