"""``src/models/deepseek32.cpp`` (DeepSeek-V3.2 with DSA): DeepSeek-V3's absorbed MLA layer and FFN, plus the
lightning indexer that picks, per token, the ``indexer.top_k`` cache cells the attention may see.

Per layer the indexer projects ``q_a``'s normed output to ``indexer.head_count`` query heads and the layer input to
one key head (LayerNorm with bias), ropes both (NeoX) and rotates both by the Hadamard matrix the indexer's cache
makes (``attn_inp_k_rot``, always built for DSA), stores the key in its own K-only cache
(``llama_kv_cache_dsa``: a second ``llama_kv_cache`` with one head of ``indexer.key_length``), scores every cell
with the fused ``GGML_OP_LIGHTNING_INDEXER`` (``cparams.fused_lid`` is on and never probed, so its mask is f16)
and keeps the top k (``GGML_OP_TOP_K``). ``build_attn`` for ``llm_graph_input_attn_k_dsa`` then fills a copy of
the MLA mask with -inf, writes zeros at the chosen cells (``SET_ROWS`` of a zero-filled leaf) and adds the
original mask before the usual MLA attention (``ggml_set_rows`` keeps its sources as (rows, indices, target), so
the indexer's chain runs before the mask is filled: the order sets the peak). The NextN block
(``nextn_predict_layers``) is skipped without MTP speculation (``TENSOR_SKIP``), as for deepseek2.

``src/models/glm-dsa.cpp`` (GLM-5) is the same graph; its "shared" indexer layers (GLM-5.2's
``indexer.types``) run no indexer, cache no indexer keys and reuse the previous full layer's top-k.

:func:`dsa_inputs`, :func:`mla_qkv`, :func:`dsa_attn` and :func:`_indexer` (``k_rot`` None: no rotation) are also
hy_v4's DSA layer (:mod:`.hy_v4`).

The graph is built uncut (``Family.uncut``): every layer's zero-filled top-k rows are a leaf of their own, which
the allocator places before any op, so the peak grows with the layer count (a 12-layer replay of DeepSeek-V3.2
at -c 4096 was 212 MiB short: 53 layers x 1 x 2048 x 512 f32). Checked to the printed MiB against
``llama-fit-params --fit-print`` on DeepSeek-V3.2 (8 cases: CPU, 1-3 RPC, -cmoe/-ncmoe, -ngl 30, -np 2/4, FA
on/off, q8_0, -nkvo, -ub 256/1024) and GLM-5 (5 cases), and against llama-server's log on tiny models (2 each,
the glm-dsa one with a shared layer).
"""

from __future__ import annotations

from ..builder import rope
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
    row_size,
    set_rows,
    unary,
    view,
    view_tensor,
)
from ..mtp import mtp_head, mtp_input
from . import Family


def _nrot(n):
    """``llama_kv_cache::build_input_k_rot``: the largest power of two >= 64 dividing ``n``."""
    r = 64
    while True:
        r *= 2
        if n % r:
            break
    return r // 2


def _cache_view(kc, ty, hk, n_head_kv, n_kv, kv_size, ns):
    n_embd = hk * n_head_kv
    return view(kc, (hk, n_head_kv, n_kv, ns), (row_size(ty, hk), row_size(ty, n_embd), row_size(ty, n_embd * kv_size)))


def _cpy_k(b, il, which, k, hk, k_idxs):
    """``llama_kv_cache::cpy_k`` into a K-only cache of one head of ``hk``; returns the cache tensor."""
    c, g = b.c, b.g
    ns, kv_size = c.n_stream, c.n_kv
    kc = b.cache(il, which, c.type_k, (hk, kv_size, ns))
    k2 = view(k, (hk, k.ne[2]), (k.nb[2],))
    dst = reshape(kc, hk, kv_size * ns) if ns > 1 else kc
    g.expand(set_rows(dst, k2, k_idxs))
    return kc


def _indexer(b, il, cur, qr, pos, k_rot, k_idxs_lid, mask_lid):
    """The lightning indexer of layer ``il``: stores its key, returns the top-k cell indices per token."""
    c, p = b.c, b.p
    nt, ns, n_kv = b.nt, c.n_stream, c.n_kv
    n_idx_head, hs_idx = p.indexer_head_count, p.indexer_head_size
    iq = b.mm(f"blk.{il}.indexer.attn_q_b.weight", qr)
    iq = reshape(iq, hs_idx, n_idx_head, nt)
    iq = rope(iq, pos)
    ik = b.mm(f"blk.{il}.indexer.attn_k.weight", cur)
    ik = unary("NORM", ik)  # build_norm(LLM_NORM) with weight and bias
    b.force_norm(ik, il)
    ik = binary("MUL", ik, b.w(f"blk.{il}.indexer.k_norm.weight"))
    ik = b.add_b(ik, f"blk.{il}.indexer.k_norm.bias")
    ik = reshape(ik, hs_idx, 1, nt)
    ik = rope(ik, pos)
    if k_rot is not None:  # hy_v4 skips the Hadamard rotation (it leaves q.k unchanged)
        iq = mul_mat(k_rot, iq)
        ik = mul_mat(k_rot, ik)
    kc_lid = _cpy_k(b, il, "k_lid", ik, hs_idx, k_idxs_lid)
    iw = b.mm(f"blk.{il}.indexer.proj.weight", cur)
    ik = _cache_view(kc_lid, c.type_k, hs_idx, 1, n_kv, n_kv, ns)
    iq = view(iq, (iq.ne[0], iq.ne[1], iq.ne[2] // ns, ns), (iq.nb[1], iq.nb[2], iq.nb[3] // ns))
    iw = view(iw, (iw.ne[0], iw.ne[1] // ns, iw.ne[2], ns), (iw.nb[1], iw.nb[2] // ns, iw.nb[3] // ns))
    iw = unary("SCALE", iw)
    score = new("f32", (ik.ne[2], iq.ne[2], 1, iq.ne[3]), "LIGHTNING_INDEXER", (iq, ik, iw, mask_lid))
    n_top_k = min(score.ne[0], p.indexer_top_k)
    return cont(new("i32", (n_top_k, score.ne[1], score.ne[2], score.ne[3]), "TOP_K", (score,)))


def dsa_inputs(b):
    """``build_attn_inp_k_dsa``: the MLA cache's k_idxs and mask, then the indexer cache's (its mask f16:
    ``fused_lid``)."""
    c, nt = b.c, b.nt
    ns, n_kv = c.n_stream, c.n_kv
    k_idxs = b.inp("k_idxs", "i64", (nt,))
    mask = b.inp("kq_mask", "f16" if c.fa else "f32", (n_kv, nt // ns, 1, ns))
    k_idxs_lid = b.inp("k_idxs_lid", "i64", (nt,))
    mask_lid = b.inp("kq_mask_lid", "f16", (n_kv, nt // ns, 1, ns))
    return k_idxs, mask, k_idxs_lid, mask_lid


def mla_qkv(b, il, qr, cur, pos, geometry=None, k_pe_norm=False):
    """The absorbed MLA projections after ``q_a``'s norm ``qr``: ``attn_q_b``, ``attn_kv_a_mqa``, both ropes, the
    ``kv_a`` norm and ``attn_k_b``; returns Q, K and V (the normed latent). ``geometry``: (heads, kv_lora_rank, MLA
    key length) of a layer whose own differ from the model's (dots3-note's sliding layers); ``k_pe_norm``: an RMS
    norm (``attn_k_norm``) on the shared rope key before its rope (dots3-note)."""
    c, p = b.c, b.p
    nt = b.nt
    n_head, kv_lora, hk_mla = geometry or (p.n_head[0], p.kv_lora_rank, c.hk_mla)
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    q = b.mm(f"blk.{il}.attn_q_b.weight", qr)
    es = q.nb[0]
    q_nope = view(q, (n_nope, n_head, nt), (es * hk_mla, es * hk_mla * n_head))
    q_pe = view(q, (n_rope, n_head, nt), (es * hk_mla, es * hk_mla * n_head))
    kvpe = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
    kv_cmpr = view(kvpe, (kv_lora, nt), (kvpe.nb[1],))
    k_pe = view(kvpe, (n_rope, 1, nt), (kvpe.nb[1], kvpe.nb[1]))
    if k_pe_norm:
        k_pe = b.norm(k_pe, f"blk.{il}.attn_k_norm.weight", il)
    q_pe = rope(q_pe, pos)
    k_pe = rope(k_pe, pos)
    kv_cmpr = b.norm(kv_cmpr, f"blk.{il}.attn_kv_a_norm.weight", il)
    q_nope = permute(q_nope, 0, 2, 1, 3)
    qa = mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), q_nope)
    qa = permute(qa, 0, 2, 1, 3)
    Q = concat(qa, q_pe, 0)
    kv_cmpr = reshape(kv_cmpr, kv_lora, 1, nt)
    K = concat(kv_cmpr, k_pe, 0)
    return Q, K, kv_cmpr


def dsa_attn(b, il, Q, K, V, top_k, k_idxs, mask, sinks=None):
    """``build_attn(llm_graph_input_attn_k_dsa, ...)`` without the output projection."""
    c, p, g = b.c, b.p, b.g
    ns, n_kv = c.n_stream, c.n_kv
    hk_cache = p.head_dim_k  # kv_lora_rank + n_rot
    g.expand(Q)
    g.expand(V)
    g.expand(K)
    kc = _cpy_k(b, il, "k", K, hk_cache, k_idxs)
    m_all = unary("FILL", mask)
    m_all = view(m_all, (1, m_all.ne[0], m_all.ne[1], m_all.ne[3]), (m_all.nb[0], m_all.nb[1], m_all.nb[2]))
    tk3 = view(top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1), (top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]))
    zeros = new("f32", (1, tk3.ne[0], tk3.ne[1], tk3.ne[2]), NONE)
    zeros.name = f"dsa_zeros_l{il}"
    zeros = unary("FILL", zeros)
    # ggml_set_rows keeps its sources as (b, c, a): the top-k chain is visited before the filled mask
    m_top = view_tensor(m_all, "SET_ROWS", [zeros, tk3, m_all])
    m_top = view(m_top, (m_top.ne[1], m_top.ne[2], 1, m_top.ne[3]), (m_top.nb[2], m_top.nb[3], m_top.nb[3]))
    m_top = binary("ADD", m_top, mask)
    kview = _cache_view(kc, c.type_k, hk_cache, 1, n_kv, n_kv, ns)
    vview = view(kview, (V.ne[0], kview.ne[1], kview.ne[2], kview.ne[3]), kview.nb[1:])
    return b.mha(Q, kview, vview, m_top, sinks, b.w(f"blk.{il}.attn_v_b.weight"), il)


def build_mtp(b):
    """``graph_mtp`` of deepseek32.cpp and glm-dsa.cpp (the same graph), also deepseek2.cpp's (DeepSeek-V3/R1,
    Kimi K2): :mod:`app.memory.compute.mtp`'s input and head around one dense MLA block on the MTP context's plain
    K-only cache (``build_attn_inp_k``: no DSA indexer, no Hadamard rotation), ``q_a`` and its norm, the absorbed
    MLA of :func:`mla_qkv`, the output projection after ``attn_v_b``, then ``ffn_norm``, the routed experts and the
    shared expert."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    qr = b.mm(f"blk.{il}.attn_q_a.weight", cur)
    qr = b.norm(qr, f"blk.{il}.attn_q_a_norm.weight", il)
    Q, K, V = mla_qkv(b, il, qr, cur, pos)
    cur = b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
    ffn_inp = binary("ADD", cur, inpSA)
    cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
    cur = binary("ADD", b.dense_lead_moe(cur, il), ffn_inp)
    return mtp_head(b, cur, il, out_ids)


def build(b):
    p = b.p
    hs_idx = p.indexer_head_size
    inpL = b.inp_embd()
    pos = b.inp_pos()
    k_idxs, mask, k_idxs_lid, mask_lid = dsa_inputs(b)
    nrot = _nrot(hs_idx)
    k_rot = b.inp("k_rot_lid", "f32", (nrot, nrot))
    out_ids = b.inp_out_ids()
    prev_top_k = None
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        qr = b.mm(f"blk.{il}.attn_q_a.weight", cur)
        qr = b.norm(qr, f"blk.{il}.attn_q_a_norm.weight", il)
        if p.indexer_full[il]:
            top_k = prev_top_k = _indexer(b, il, cur, qr, pos, k_rot, k_idxs_lid, mask_lid)
        else:  # glm-dsa's shared indexer layers reuse the previous full layer's top-k
            top_k = prev_top_k
        Q, K, V = mla_qkv(b, il, qr, cur, pos)
        cur = dsa_attn(b, il, Q, K, V, top_k, k_idxs, mask)
        cur = mul_mat(b.w(f"blk.{il}.attn_output.weight"), cur)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


FAMILY = Family(
    name="deepseek32",
    build=build,
    exact=frozenset({"deepseek32", "glm-dsa"}),
    uncut=True,
    build_mtp=build_mtp,
    mtp_exact=frozenset({"deepseek32", "glm-dsa"}),
)
