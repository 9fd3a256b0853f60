"""``src/models/glm5-next.cpp`` for ``glm5-next`` (GLM-5.3-Flash): Kimi delta attention layers and nope-only MLA
layers with a k-pool DSA indexer, inside mHC hyper-connections, with DeepSeek-style MoE.

Memory (``llama_memory_hybrid_idx``): the KDA layers' recurrent state, a K-only MLA cache of ``kv_lora_rank`` per
cell on the other trunk layers, and an indexer cache of key | gate | pooled key (``3 * indexer.key_length``) on
the full-indexer layers (:mod:`app.memory.kv`); the NextN block gets none and is skipped without MTP.

The residual stream is ``hyper_connection.count`` (4) copies of the embedding (``ggml_repeat_4d``). Around each
block, :func:`hc_pre` RMS-norms the flat streams, mixes them (``hc_*_fn``) into the pre gate, the post gate and the
Sinkhorn-normalised combination (fused ``DSV4_HC_COMB``) and reduces the streams (fused ``DSV4_HC_PRE``);
:func:`hc_post` (fused ``DSV4_HC_POST``) writes the block output back into the streams. llama.cpp probes the
three fused ops (``auto_fhc``) and keeps them where the layer's device runs them: the CPU, RPC and Vulkan
backends do. After the last layer the output rows are picked from the flat streams and :func:`hc_mean` averages
them before the final norm.

A KDA layer is Kimi-Linear's (:func:`~.bailingmoe3.kda_convs`, the softplus gate or, with
``kda.gate_lower_bound``, the sigmoid one, :func:`~.bailingmoe3.kda_delta`, the ``ssm_g_a``/``ssm_g_b`` output
gate). An MLA layer: q LoRA, ``attn_kv_a_mqa`` to the latent (no RoPE), the absorbed ``attn_k_b``, then on a full
indexer layer :func:`kpool_select` (``build_kpool_select``): the indexer key | gate row stored with a zero pooled
part, the pools completed by the ubatch (at reserve every pool the cache can hold: ``n_ctx_seq / kpool`` per
sequence) pooled by a softmax over the gate plus ``indexer_compressor_ape`` and written back, all pools gathered
and scored by the fused ``LIGHTNING_INDEXER`` (``fused_lid``, never probed: an f16 pool mask), the top pools
ordered by score, expanded to their cells plus the incomplete tail, and, for a prompt ubatch, scattered into a
-inf mask of ``n_kv + n_sel`` rows (each dead slot to its own dump row) added to the causal mask; a ubatch of at
most 16 tokens with ``n_kv > n_sel`` gathers the selected latents instead (:func:`gather_attn`). Shared indexer
layers reuse the previous full layer's selection. Attention is ``build_attn_mha`` over the latent cache with
``attn_v_b``, then ``attn_output``.

With ``n_rs_seq`` > 0 the KDA layers copy K = n_rs_seq + 1 states (as kimi-k3's). Not modelled: the NextN/MTP
graph (``--spec-type draft-mtp``: llama.cpp's pinned graph_mtp throws, so the estimate refuses it), a backend
without the fused hc ops (the unfused chain), ``embeddings_nextn`` unmasked.
"""

from __future__ import annotations

from ..ggml import (
    NONE,
    binary,
    concat,
    cont,
    get_rows,
    mul_mat,
    new,
    permute,
    reshape,
    sum_rows,
    transpose,
    unary,
    view,
    view_tensor,
)
from ..projector_graphs import cast
from . import Family
from .bailingmoe3 import kda_convs, kda_delta
from .deepseek32 import _cache_view, _cpy_k
from .rwkv7 import weight_reshape

#: ``build_inp_kpool``: ubatches of at most this many tokens gather the selected latents (when n_kv > n_sel)
GATHER_MAX_UB = 16


def _fused(b, op, t, il):
    b.__dict__.setdefault("fused_nodes", []).append((op, t, b.pos[il]))  # the kept-layer position, as pins
    return t


def _on(b, op):
    return op not in getattr(b, "unfused", ())


def hc_pre_reduce(b, x, pre, il):
    """``build_hc_pre(x, weights)``: fused ``DSV4_HC_PRE``, else one MUL per stream added up."""
    n_embd, hc, nt = x.ne[0], x.ne[1], x.ne[2]
    if _on(b, "DSV4_HC_PRE"):
        return _fused(b, "DSV4_HC_PRE", new("f32", (n_embd, nt), "DSV4_HC_PRE", (x, pre)), il)
    out = None
    for _ in range(hc):
        cur = binary("MUL", view(x, (n_embd, nt), (x.nb[2],)), view(pre, (1, nt), (pre.nb[1],)))
        out = cur if out is None else binary("ADD", out, cur)
    return out


def hc_sinkhorn(b, comb, iters):
    """``build_hc_sinkhorn``: row softmax, + eps (a filled one-element leaf), one column normalisation, then
    ``sinkhorn_iterations - 1`` row and column normalisations."""
    eps = new("f32", (1,), NONE)
    eps = unary("FILL", eps)
    comb = binary("ADD", unary("SOFT_MAX", comb), eps)

    def norm_cols(comb):
        col = sum_rows(cont(permute(comb, 1, 0, 2, 3)))
        col = permute(binary("ADD", col, eps), 1, 0, 2, 3)
        return binary("DIV", comb, col)

    comb = norm_cols(comb)
    for _ in range(1, iters):
        comb = binary("DIV", comb, binary("ADD", sum_rows(comb), eps))
        comb = norm_cols(comb)
    return comb


def hc_pre(b, x, il, which):
    """``llama_model_glm5_next::graph::build_hc_pre``: returns the reduced block input ([n_embd, nt]), the post gate
    ([hc, nt]) and the combination ([hc, hc, nt]); ``DSV4_HC_COMB``/``DSV4_HC_PRE`` fused unless turned off."""
    n_embd, hc, nt = x.ne[0], x.ne[1], x.ne[2]
    fn = b.w(f"blk.{il}.hc_{which}_fn.weight")
    scale = b.w(f"blk.{il}.hc_{which}_scale.weight")
    base = b.w(f"blk.{il}.hc_{which}_base.weight")
    flat = reshape(x, hc * n_embd, nt)
    mixes = mul_mat(fn, unary("RMS_NORM", flat))  # [(2 + hc) * hc, nt]
    gates = []
    for _ in range(2):
        g = view(mixes, (hc, nt), (mixes.nb[1],))
        g = binary("MUL", g, weight_reshape(scale, 1))  # dsv4_hc_affine
        g = binary("ADD", g, weight_reshape(base, hc))
        g = unary("UNARY", g)  # sigmoid
        gates.append(unary("SCALE", g))  # pre: + hc_eps (scale_bias); post: times 2
    if _on(b, "DSV4_HC_COMB"):
        comb = _fused(b, "DSV4_HC_COMB", new("f32", (hc, hc, nt), "DSV4_HC_COMB", (mixes, scale, base)), il)
    else:
        comb = view(mixes, (hc * hc, nt), (mixes.nb[1],))
        comb = binary("MUL", comb, weight_reshape(scale, 1))
        comb = binary("ADD", comb, weight_reshape(base, hc * hc))
        comb = hc_sinkhorn(b, reshape(comb, hc, hc, nt), b.p.hc_sinkhorn_iters)
    return hc_pre_reduce(b, x, gates[0], il), gates[1], comb


def hc_post(b, x, residual, post, comb, il):
    """``llama_model_glm5_next::graph::build_hc_post``: fused ``DSV4_HC_POST`` ([n_embd, hc, nt]), else per
    destination stream the gated output plus every source stream times its combination weight, concatenated."""
    if _on(b, "DSV4_HC_POST"):
        return _fused(b, "DSV4_HC_POST", new("f32", residual.ne, "DSV4_HC_POST", (x, residual, post, comb)), il)
    n_embd, hc, nt = residual.ne[0], residual.ne[1], residual.ne[2]
    out = None
    for _ in range(hc):
        cur = binary("MUL", x, view(post, (1, nt), (post.nb[1],)))
        for _ in range(hc):
            res_src = view(residual, (n_embd, nt), (residual.nb[2],))
            cur = binary("ADD", cur, binary("MUL", res_src, view(comb, (1, nt), (comb.nb[2],))))
        cur = reshape(cur, n_embd, 1, nt)
        out = cur if out is None else concat(out, cur, 1)
    return out


def hc_mean(x):
    """``llama_model_glm5_next::graph::build_hc_mean``: the hc streams added through views, scaled by 1/hc."""
    n_embd, hc, nt = x.ne[0], x.ne[1], x.ne[2]
    acc = view(x, (n_embd, nt), (x.nb[2],))
    for _ in range(1, hc):
        acc = binary("ADD", acc, view(x, (n_embd, nt), (x.nb[2],)))
    return unary("SCALE", acc)


def kda_layer(b, cur, il):
    """``build_kda_layer``: Kimi-Linear's KDA layer (the sigmoid gate when ``kda.gate_lower_bound`` is set)."""
    c, p = b.c, b.p
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head, hd = p.n_head[il], p.kda_head_dim
    d_inner = n_head * hd
    q, k, v = kda_convs(b, cur, il, hd)
    g1 = b.mm(f"blk.{il}.ssm_f_b.weight", b.mm(f"blk.{il}.ssm_f_a.weight", cur))
    g1 = binary("ADD", g1, b.w(f"blk.{il}.ssm_dt.bias"))
    a = weight_reshape(b.w(f"blk.{il}.ssm_a"), 1, n_head, 1)
    if c.meta.get(f"{c.arch}.kda.gate_lower_bound") is not None:
        g1 = binary("MUL", reshape(g1, hd, n_head, nt), a)
        g1 = unary("SCALE", unary("UNARY", unary("SCALE", g1)))  # sigmoid(-x) times the lower bound
    else:
        g1 = binary("MUL", reshape(unary("UNARY", g1), hd, n_head, nt), a)  # softplus
    g1 = reshape(g1, hd, n_head, nst, ns)
    beta = unary("UNARY", reshape(b.mm(f"blk.{il}.ssm_beta.weight", cur), 1, n_head, nst, ns))  # sigmoid
    out = kda_delta(b, q, k, v, g1, beta, il, hd)
    g2 = b.mm(f"blk.{il}.ssm_g_b.weight", b.mm(f"blk.{il}.ssm_g_a.weight", cur))
    g2 = reshape(g2, hd, n_head, nt)
    out = b.norm(reshape(out, hd, n_head, nt), f"blk.{il}.ssm_norm.weight", il)
    out = binary("MUL", out, unary("UNARY", g2))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", cont(out, d_inner, nt))


def kpool_inputs(b):
    """``build_inp_kpool`` at reserve (the full cache: every pool new, the layout cache-safe); the pool, tail and
    slot inputs are expanded at once, the rest when used."""
    c, p, g = b.c, b.p, b.g
    nt, kpool = b.nt, p.indexer_kpool
    n_kv = c.n_kv
    n_pool_real = (n_kv // kpool) * c.n_seqs  # llama_memory_hybrid_idx_context(mem): n_ctx_seq / kpool * n_seq_max
    n_pool = max(64, (n_pool_real + 1 + 63) // 64 * 64)  # kpool_pad
    n_new = max(n_pool_real, 1)
    n_top_pool = min(n_pool, p.indexer_top_k // kpool)
    n_sel = kpool * n_top_pool + (kpool - 1 if p.indexer_kpool_select_tail else 0)
    k = dict(
        k_idxs=b.inp("k_idxs_idx", "i64", (nt,)),
        pool_cells=b.inp("kpool_cells", "i32", (n_pool,)),
        pool_idxs=b.inp("kpool_idxs", "i32", (kpool, n_pool)),
        pool_mask=b.inp("kpool_mask", "f16", (n_pool, nt)),
        tail_idxs=b.inp("kpool_tail", "i32", (kpool - 1, nt)),
    )
    for name in ("pool_cells", "pool_idxs", "pool_mask", "tail_idxs"):
        g.expand(k[name])
    k["gather_mask"] = b.inp("kpool_gather_mask", "f32", (n_sel, 1, 1, nt))
    g.expand(k["gather_mask"])
    k["new_idxs"] = b.inp("kpool_new_idxs", "i32", (kpool, n_new))
    k["new_rep"] = b.inp("kpool_new_rep", "i64", (n_new,))
    k.update(
        n_pool=n_pool, n_new=n_new, n_top_pool=n_top_pool, n_sel=n_sel, gather=nt <= GATHER_MAX_UB and n_kv > n_sel
    )
    return k


def kpool_select(b, il, cur, qr, mask, kp):
    """``build_kpool_select``: the selected cells per token, as a scatter mask (prompt ubatches) or as indices
    (the gather path)."""
    c, p, g = b.c, b.p, b.g
    nt, n_kv, ns = b.nt, c.n_kv, c.n_stream
    ie, kpool = p.indexer_head_size, p.indexer_kpool
    n_pool, n_new, n_top = kp["n_pool"], kp["n_new"], kp["n_top_pool"]
    iq = reshape(b.mm(f"blk.{il}.indexer.attn_q_b.weight", qr), ie, p.indexer_head_count, nt)
    ik = unary("NORM", b.mm(f"blk.{il}.indexer.attn_k.weight", cur))  # build_norm(LLM_NORM) with weight and bias
    b.force_norm(ik, il)
    ik = b.add_b(binary("MUL", ik, b.w(f"blk.{il}.indexer.k_norm.weight")), f"blk.{il}.indexer.k_norm.bias")
    ig = b.mm(f"blk.{il}.indexer_compressor_gate.weight", cur)
    pzero = new("f32", (ie, nt), NONE)
    pzero.name = f"kpool_zero_l{il}"
    packed = concat(concat(ik, ig, 0), unary("FILL", pzero), 0)
    kc = _cpy_k(b, il, "k_idx", reshape(packed, 3 * ie, 1, nt), 3 * ie, kp["k_idxs"])
    n_cells = kc.ne[1] * kc.ne[2]
    key_gate = view(kc, (2 * ie, n_cells), (kc.nb[1],))
    pooled_all = view(kc, (ie, n_cells), (kc.nb[1],))
    rows = get_rows(key_gate, reshape(kp["new_idxs"], kpool * n_new))
    rows = reshape(rows, 2 * ie, kpool, n_new)
    pk = view(rows, (ie, kpool, n_new), (rows.nb[1], rows.nb[2]))
    pg = view(rows, (ie, kpool, n_new), (rows.nb[1], rows.nb[2]))
    logits = binary("ADD", pg, b.w(f"blk.{il}.indexer_compressor_ape.weight"))
    logits = cont(permute(logits, 1, 0, 2, 3))
    probs = reshape(unary("SOFT_MAX", reshape(logits, kpool, ie * n_new)), kpool, ie, n_new)
    pk = cont(permute(pk, 1, 0, 2, 3))
    pooled_new = reshape(sum_rows(binary("MUL", probs, pk)), ie, n_new)
    g.expand(view_tensor(pooled_all, "SET_ROWS", [pooled_new, kp["new_rep"], pooled_all]))  # scatter_pooled
    pooled = reshape(get_rows(pooled_all, kp["pool_cells"]), ie, 1, n_pool)
    weights = unary("SCALE", b.mm(f"blk.{il}.indexer.proj.weight", cur))
    score = new("f32", (n_pool, nt, 1, 1), "LIGHTNING_INDEXER", (iq, pooled, weights, kp["pool_mask"]))
    top_k = new("i32", (n_top, nt), "TOP_K", (score,))
    sel_score = get_rows(reshape(score, 1, n_pool, nt), top_k)
    sel_order = new("i32", (n_top, nt), "ARGSORT", (reshape(sel_score, n_top, nt),))
    top_k = get_rows(reshape(cast(top_k, "f32"), 1, n_top, nt), sel_order)
    top_k = cast(cont(reshape(top_k, n_top, nt)), "i32")
    sel_idx = get_rows(kp["pool_idxs"], reshape(top_k, n_top * nt))
    sel_idx = reshape(sel_idx, kpool * n_top, nt)
    if p.indexer_kpool_select_tail:
        sel_idx = concat(sel_idx, kp["tail_idxs"], 0)
    n_sel = sel_idx.ne[0]
    if kp["gather"]:
        return sel_idx
    seed = cast(view(sel_idx, (1,), ()), "f32")
    mask_seed = seed if mask.ty == "f32" else cast(seed, mask.ty)
    mask_seed = unary("FILL", mask_seed)
    mask_all = new(mask_seed.ty, (1, n_kv + n_sel, nt, 1), "REPEAT", (mask_seed,))
    mask_all = reshape(mask_all, 1, n_kv + n_sel, nt)
    zeros = new("f32", (1, n_sel, nt, 1), "REPEAT", (unary("FILL", seed),))
    zeros = reshape(zeros, 1, n_sel, nt)
    live = unary("UNARY", reshape(kp["gather_mask"], n_sel, nt))  # exp
    dump = new("f32", (n_sel,), "ARANGE", ())
    idx_f = cast(sel_idx, "f32")
    idx_f = binary("ADD", binary("MUL", binary("SUB", idx_f, dump), live), dump)
    sel_i = reshape(cast(idx_f, "i32"), n_sel, nt, 1)
    sel = view_tensor(mask_all, "SET_ROWS", [zeros, sel_i, mask_all])  # ggml_set_rows keeps (b, c, a)
    sel = view(sel, (n_kv, nt), (sel.nb[2],))
    assert ns * mask.ne[1] == nt
    return binary("ADD", sel, reshape(mask, n_kv, nt))


def gather_attn(b, il, qa, kc, sel_idx, kp):
    """The gather path of ``build_dsa_layer``: the selected latents per token, attended with the slot mask."""
    p = b.p
    nt, kv_lora = b.nt, p.kv_lora_rank
    n_sel = sel_idx.ne[0]
    rows = view(kc, (kv_lora, kc.ne[1] * kc.ne[2]), (kc.nb[1],))
    k_g = reshape(get_rows(rows, reshape(sel_idx, n_sel * nt)), kv_lora, n_sel, 1, nt)
    q_g = permute(qa, 0, 2, 3, 1)
    kq = mul_mat(k_g, q_g)
    kq = new("f32", kq.ne, "SOFT_MAX", (kq, kp["gather_mask"]))
    kqv = mul_mat(cont(transpose(k_g)), kq)
    kqv = mul_mat(b.w(f"blk.{il}.attn_v_b.weight"), kqv)
    out = cont(permute(kqv, 0, 2, 1, 3))
    return reshape(out, kqv.ne[0] * p.n_head[il], nt)


def dsa_layer(b, cur, il, kp, prev):
    """``build_dsa_layer``: nope-only absorbed MLA over the indexer's selection; returns (output, selection)."""
    c, p, g = b.c, b.p, b.g
    nt, ns, n_kv = b.nt, c.n_stream, c.n_kv
    kv_lora, n_head = p.kv_lora_rank, p.n_head[il]
    qr = b.norm(b.mm(f"blk.{il}.attn_q_a.weight", cur), f"blk.{il}.attn_q_a_norm.weight", il)
    q = reshape(b.mm(f"blk.{il}.attn_q_b.weight", qr), c.hk_mla, n_head, nt)
    kv = b.norm(b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur), f"blk.{il}.attn_kv_a_norm.weight", il)
    kv = reshape(kv, kv_lora, 1, nt)
    qa = permute(mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), permute(q, 0, 2, 1, 3)), 0, 2, 1, 3)
    mask = b.inp("kq_mask", "f16" if c.fa else "f32", (n_kv, nt // ns, 1, ns))
    k_idxs = b.inp("k_idxs", "i64", (nt,))
    if p.indexer_full[il]:
        prev = kpool_select(b, il, cur, qr, mask, kp)
    sel = prev
    g.expand(qa)
    g.expand(kv)
    kc = _cpy_k(b, il, "k", kv, kv_lora, k_idxs)
    if kp["gather"]:
        g.expand(mask)
        out = gather_attn(b, il, qa, kc, sel, kp)
    else:
        kview = _cache_view(kc, c.type_k, kv_lora, 1, n_kv, n_kv, ns)
        vview = view(kview, (kv_lora, kview.ne[1], kview.ne[2], kview.ne[3]), kview.nb[1:])
        out = b.mha(qa, kview, vview, reshape(sel, *mask.ne), None, b.w(f"blk.{il}.attn_v_b.weight"), il)
    return b.mm(f"blk.{il}.attn_output.weight", out), prev


def build(b):
    c, p = b.c, b.p
    nt, hc = b.nt, p.hc_mult
    inp = b.inp_embd()
    kp = kpool_inputs(b)
    out_ids = b.inp_out_ids()
    inpL = new("f32", (p.n_embd, hc, nt), "REPEAT", (reshape(inp, p.n_embd, 1, nt),))  # hc_init
    prev = None
    for il in b.layers:
        residual = inpL
        cur, post, comb = hc_pre(b, inpL, il, "attn")
        cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
        b.g.expand(cur)
        if c.recurrent[il]:
            cur = kda_layer(b, cur, il)
        else:
            cur, prev = dsa_layer(b, cur, il, kp, prev)
        inpL = hc_post(b, cur, residual, post, comb, il)
        residual = inpL
        cur, post, comb = hc_pre(b, inpL, il, "ffn")
        cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = hc_post(b, cur, residual, post, comb, il)
    flat = get_rows(reshape(inpL, p.n_embd * hc, nt), out_ids)  # narrow_early
    inpL = reshape(flat, p.n_embd, hc, c.n_outputs)
    return b.output(hc_mean(inpL))


FAMILY = Family(
    name="glm5-next",
    build=build,
    exact=frozenset({"glm5-next"}),
    fused=("DSV4_HC_PRE", "DSV4_HC_COMB", "DSV4_HC_POST"),
    rs_seq=True,
)
