"""``src/models/hy-v4.cpp`` (Tencent Hy4): DeepSeek-V3-style absorbed MLA and MoE inside independent
hyper-connections (iHC), with a gated MLA output, a learnable sink per head and, on the DSA checkpoints, the
lightning indexer.

The residual stream is ``hyper_connection.count`` (hc) copies of the embedding wide (``ggml_repeat_4d`` to
``[n_embd, hc, n_tokens]``). Around each attention and each FFN block, :func:`hc_pre` (``build_hc_pre``) RMS-norms
the flattened streams, mixes them to 2*hc coefficients (``hc_*_fn``), makes the pre and post gates (sigmoid of
coefficient * scale + base, + eps; post also times ``hyper_connection.magnitude``) and reduces the streams by the
pre gate (``hy_v4_hc_reduce``: an f32 cast, one MUL per stream added up, a cast back); :func:`hc_post`
(``build_hc_post``) casts the block output, the post gate and the residual to f32, adds the gated output to each
stream, concatenates the streams and casts back. After the last layer the output rows are picked from the flat
streams and :func:`hc_head` (``build_hc_head``) reduces them with the ``output_hc_*`` gate before the final norm.

Attention: ``q_a`` and its norm, then (``indexer.top_k`` > 0) :func:`~.deepseek32._indexer` on the layers marked
"full" in ``indexer.types`` (no Hadamard rotation: ``rope_set_offset`` ropes the last ``n_rot`` rows in place)
and the DSA attention of :func:`~.deepseek32.dsa_attn` over the previous full layer's top-k, or plain absorbed
MLA over ``llm_graph_input_attn_k`` without DSA; both with ``attn_sinks`` and no output projection inside
``build_attn``. Then ``attn_gate`` (sigmoid) times the attention and ``attn_output``. FFN: dense SwiGLU on the
``leading_dense_block_count`` first layers, else sigmoid-routed experts (selection bias, routed SwiGLU clamp:
one op) plus the shared expert. Every layer runs on all tokens (the rows are picked after the last layer).

The hc helpers are small functions named after their llama.cpp counterparts so that glm5-next's and
deepseek4's hyper-connections can share them later.
"""

from __future__ import annotations

from ..ggml import binary, concat, get_rows, mul_mat, new, reshape, unary, view
from ..projector_graphs import cast
from . import Family
from .deepseek32 import _indexer, dsa_attn, dsa_inputs, mla_qkv
from .rwkv7 import weight_reshape


def hc_reduce(x, w, hc):
    """``hy_v4_hc_reduce``: the hc streams of ``x`` ([n_embd, hc, nt]) weighted by ``w`` ([hc, nt]) and added, in
    f32 (a cast first, the cast back to ``x``'s type last)."""
    n_embd, nt = x.ne[0], x.ne[2]
    x32 = cast(x, "f32")
    out = None
    for _ in range(hc):
        xh = view(x32, (n_embd, nt), (x32.nb[2],))
        wh = view(w, (1, nt), (w.nb[1],))
        cur = binary("MUL", xh, wh)
        out = cur if out is None else binary("ADD", out, cur)
    return cast(out, x.ty)


def _gate(mixes, scale, base, hc, post):
    """One of ``build_hc_pre``'s gates: a view of ``mixes``, times a view of ``scale``, plus a view of ``base``,
    sigmoid, (times the magnitude for the post gate,) + eps (``ggml_scale_bias``)."""
    nt = mixes.ne[1]
    g = view(mixes, (hc, nt), (mixes.nb[1],))
    g = binary("MUL", g, weight_reshape(scale, 1))
    g = binary("ADD", g, weight_reshape(base, hc))
    g = unary("UNARY", g)  # sigmoid
    if post:
        g = unary("SCALE", g)  # hc_magnitude
    return unary("SCALE", g)  # + hc_eps


def hc_pre(b, x, il, which):
    """``llama_model_hy_v4::graph::build_hc_pre``: returns the reduced block input and the post gate."""
    hc = x.ne[1]
    fn = b.w(f"blk.{il}.hc_{which}_fn.weight")
    scale = b.w(f"blk.{il}.hc_{which}_scale.weight")
    base = b.w(f"blk.{il}.hc_{which}_base.weight")
    flat = reshape(x, hc * x.ne[0], x.ne[2])
    mixes = mul_mat(fn, unary("RMS_NORM", flat))  # [2*hc, nt]
    pre = _gate(mixes, scale, base, hc, post=False)
    post = _gate(mixes, scale, base, hc, post=True)
    return hc_reduce(x, pre, hc), post


def hc_post(x, residual, post):
    """``llama_model_hy_v4::graph::build_hc_post``: each stream plus the gated block output, in f32, concatenated
    back to [n_embd, hc, nt] and cast to the residual's type."""
    n_embd, hc, nt = residual.ne[0], residual.ne[1], residual.ne[2]
    x32 = cast(x, "f32")
    post32 = cast(post, "f32")
    res32 = cast(residual, "f32")
    out = None
    for _ in range(hc):
        res_i = view(res32, (n_embd, nt), (res32.nb[2],))
        post_i = view(post32, (1, nt), (post32.nb[1],))
        cur = binary("ADD", res_i, binary("MUL", x32, post_i))
        cur = reshape(cur, n_embd, 1, nt)
        out = cur if out is None else concat(out, cur, 1)
    return cast(out, residual.ty)


def hc_head(b, x):
    """``llama_model_hy_v4::graph::build_hc_head``: the ``output_hc_*`` gate (no post gate) and the reduction."""
    hc = x.ne[1]
    flat = reshape(x, hc * x.ne[0], x.ne[2])
    mixes = mul_mat(b.w("output_hc_fn.weight"), unary("RMS_NORM", flat))  # [hc, n_outputs]
    pre = binary("MUL", mixes, b.w("output_hc_scale.weight"))
    pre = binary("ADD", pre, b.w("output_hc_base.weight"))
    pre = unary("SCALE", unary("UNARY", pre))  # sigmoid, + hc_eps
    return hc_reduce(x, pre, hc)


def build(b):
    c, p = b.c, b.p
    nt = b.nt
    hc = int(c.meta.get(f"{c.arch}.hyper_connection.count", 0) or 0)
    dsa = p.indexer_top_k > 0
    inp = b.inp_embd()
    pos = b.inp_pos()
    if dsa:
        k_idxs, mask, k_idxs_lid, mask_lid = dsa_inputs(b)
    out_ids = b.inp_out_ids()
    prev_top_k = None
    inpL = new(inp.ty, (p.n_embd, hc, nt), "REPEAT", (reshape(inp, p.n_embd, 1, nt),))  # hc_init
    for il in b.layers:
        residual = inpL
        cur, post = hc_pre(b, inpL, il, "attn")
        cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
        qr = b.mm(f"blk.{il}.attn_q_a.weight", cur)
        qr = b.norm(qr, f"blk.{il}.attn_q_a_norm.weight", il)
        sinks = b.w(f"blk.{il}.attn_sinks.weight")
        if dsa:
            if p.indexer_full[il]:
                prev_top_k = _indexer(b, il, cur, qr, pos, None, k_idxs_lid, mask_lid)
            Q, K, V = mla_qkv(b, il, qr, cur, pos)
            attn = dsa_attn(b, il, Q, K, V, prev_top_k, k_idxs, mask, sinks)
        else:
            Q, K, V = mla_qkv(b, il, qr, cur, pos)
            attn = b.attn(il, Q, K, V, None, None, sinks=sinks, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
        gate = unary("UNARY", b.mm(f"blk.{il}.attn_gate.weight", cur))  # sigmoid
        attn = binary("MUL", attn, gate)
        cur = b.mm(f"blk.{il}.attn_output.weight", attn)
        inpL = hc_post(cur, residual, post)
        residual = inpL
        cur, post = hc_pre(b, inpL, il, "ffn")
        cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = hc_post(cur, residual, post)
    flat = get_rows(reshape(inpL, p.n_embd * hc, nt), out_ids)
    inpL = reshape(flat, p.n_embd, hc, c.n_outputs)
    return b.output(hc_head(b, inpL))


# checked against llama-fit-params --fit-print (full-size Hy4-preview shape, with and without DSA) and
# llama-server -lv 4 (tiny models): tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(name="hy_v4", build=build, exact=frozenset({"hy_v4"}), uncut=True)
