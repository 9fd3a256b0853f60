"""``src/models/deepseek4.cpp`` (DeepSeek-V4): mHC hyper-connections around a sliding-window attention that, on
the compressed layers, also reads a compressed K cache (CSA: ratio 4 with the lightning indexer's top-k; HCA:
ratio 128, dense), the compressors that fill those caches from per-sequence states, the grouped output LoRA and
sqrt-softplus MoE with hash routing on the first ``hash_layer_count`` layers.

Memory (``llama_kv_cache_dsv4``, :func:`app.memory.kv.dsv4_bytes`): the raw K-only window cache, the CSA, HCA and
indexer (lid) compressed K caches and their compressor states, always one stream per sequence.

The graph inputs are ``build_inp_dsv4``'s (llama-graph.cpp) over the reserve plans
(``dsv4_build_reserve_comp_plan`` in llama-kv-cache-dsv4.cpp): the raw cache's k_idxs, mask and (quantized K)
Hadamard matrix, then per compressor (csa, hca, lid) ``state_pos`` (n_tokens), the persist source/destination rows
(``min(n_tokens, state_size * n_stream)``), ``state_read_idxs``
(``(overlap ? 2 : 1) * ratio * n_blocks``, ``n_blocks = n_tokens / ratio + n_seqs``), ``state_write_idxs``
(i64) and ``state_write_pos`` (``n_blocks``) and the compressed cache's mask (the cache's full size; f16 with
flash attention, the lid's always f16: ``fused_lid``), and the compressed caches' rotations (lid: always).

The hyper-connection pre/post steps are glm5-next's (:func:`~.glm5_next.hc_pre`, :func:`~.glm5_next.hc_post`):
glm5-next.cpp's ``build_hc_pre``/``build_hc_post``/``build_hc_sinkhorn`` are deepseek4.cpp's op for op (the same
fused ``DSV4_HC_*`` ops, probed by ``auto_fhc``). The head differs from both glm5-next (which averages the
streams) and hy_v4 (f32 casts, no Sinkhorn): :func:`hc_head` here.

With ``n_rs_seq`` > 0 (``--spec-type draft-mtp``) each compressor restores the rolled-back state plane and
writes the kept steps' planes (:func:`_restore`, :func:`_snapshot`); :func:`build_mtp` is ``graph_mtp`` over the
MTP block. Not modelled: ``embeddings_layer_inp`` (``build_hc_mean``), media input (``exp_probs_b_vl``).
"""

from __future__ import annotations

from ..ggml import (
    NONE,
    OUTPUT,
    binary,
    concat,
    cont,
    get_rows,
    mul_mat,
    ne4,
    new,
    permute,
    reshape,
    row_size,
    set_rows,
    sum_rows,
    unary,
    view,
    view_tensor,
)
from . import Family
from .deepseek32 import _nrot
from .glm5_next import hc_post, hc_pre

CSA, HCA = 4, 128  # DSV4_CSA_RATIO, DSV4_HCA_RATIO (deepseek4.cpp, llama-kv-cache-dsv4.cpp)


def _pad256(n):
    return (n + 255) // 256 * 256


def _w(b, name):
    t = b.w(name)
    if t is None:
        raise ValueError(f"deepseek4 graph: the model has no {name}")
    return t


def _comp_inputs(b, name, ratio, overlap, state_size, n_kv, mask_ty):
    """``dsv4_build_comp_inputs`` (llama-graph.cpp:958) over ``dsv4_build_reserve_comp_plan``
    (llama-kv-cache-dsv4.cpp:842, the plan every reserve uses: ``reserve_plans``): the inputs of one compressor (a size-0
    vector is no tensor: ``dsv4_build_input_1d``)."""
    c, nt = b.c, b.nt
    ns_state = max(1, c.n_seqs)  # llama_dsv4_comp_state: n_stream = n_seq_max (unified_compressed is false)
    n_blocks = nt // ratio + max(1, c.n_seqs)
    n_persist = min(nt, state_size * ns_state)
    # n_rs_seq > 0 (draft-mtp): one restore row per state row, a snapshot row per state row and kept draft step
    n_restore = state_size * ns_state if c.n_rs_seq else 0
    n_snapshot = c.n_rs_seq * state_size * ns_state
    sizes = (
        ("state_pos", "i32", nt),
        ("state_persist_src_idxs", "i32", n_persist),
        ("state_persist_dst_idxs", "i32", n_persist),
        ("state_restore_src_idxs", "i32", n_restore),
        ("state_restore_dst_idxs", "i32", n_restore),
        ("state_snapshot_src_idxs", "i32", n_snapshot),
        ("state_snapshot_dst_idxs", "i32", n_snapshot),
        ("state_read_idxs", "i32", (2 if overlap else 1) * ratio * n_blocks),
        ("state_write_idxs", "i64", n_blocks),
        ("state_write_pos", "i32", n_blocks),
    )
    out = {k: (b.inp(f"dsv4_{name}_{k}", ty, (n,)) if n else None) for k, ty, n in sizes}
    ns = b.dsv4_ns
    out["kq_mask"] = b.inp(f"dsv4_{name}_kq_mask", mask_ty, (n_kv, nt // ns, 1, ns))
    out["n_kv"] = n_kv
    out["state_size"] = state_size
    return out


def dsv4_inputs(b):
    """``build_inp_dsv4`` (llama-graph.cpp:3485): the raw cache's inputs, the three compressors', then their
    rotations."""
    c, p, nt = b.c, b.p, b.nt
    # dsv4_comp_graph_n_stream: the reserve ubatch has n_seqs_unq = n_seqs and no coupled sequences
    b.dsv4_ns = max(1, c.n_seqs)
    ns = b.dsv4_ns
    mty = "f16" if c.fa else "f32"
    hd, ihd = p.head_dim_k, p.indexer_head_size
    n_kv = c.n_kv  # the reserve's full cache: n_ctx_seq cells per sequence
    # llama_kv_cache constructor: attn_rot_k for a quantized K (head % 64 == 0), and on deepseek4 always where the
    # cache's n_embd_head_k_full equals indexer_head_size: the lid cache, and every cache when head_dim is that too
    rot = _nrot(hd) if hd == ihd else c.rot_k
    raw = dict(
        k_idxs=b.inp("dsv4_raw_k_idxs", "i64", (nt,)),
        # dsv4_build_raw_kq_mask: the raw window cache's size (n_swa + n_ubatch padded to 256: kv.dsv4_bytes)
        mask=b.inp("attn_inp_kq_mask", mty, (c.size_swa, nt // ns, 1, ns)),
        k_rot=b.inp("dsv4_raw_k_rot", "f32", (rot, rot)) if rot else None,
    )
    csa = _comp_inputs(b, "csa", CSA, True, 2 * CSA, _pad256(-(-n_kv // CSA)), mty)
    hca = _comp_inputs(b, "hca", HCA, False, HCA, _pad256(-(-n_kv // HCA)), mty)
    lid = _comp_inputs(b, "lid", CSA, True, 2 * CSA, _pad256(-(-n_kv // CSA)), "f16")  # fused_lid: f16 mask
    csa["k_rot"] = b.inp("dsv4_csa_k_rot", "f32", (rot, rot)) if rot else None
    hca["k_rot"] = b.inp("dsv4_hca_k_rot", "f32", (rot, rot)) if rot else None
    nrot = _nrot(ihd)
    lid["k_rot"] = b.inp("dsv4_lid_k_rot", "f32", (nrot, nrot))
    csa["hd"], hca["hd"], lid["hd"] = hd, hd, ihd
    return raw, csa, hca, lid


def _cache_k(b, il, which, hd, size):
    """A compressed (or raw) K-only ``llama_kv_cache`` of one head of ``hd`` and ``size`` cells per stream."""
    c = b.c
    ns = max(1, c.n_seqs)  # unified false: one stream per sequence
    return b.cache(il, which, c.type_k, (hd, size, ns))


def _get_k(kc, ty, hd, n_kv, size):
    """``llama_kv_cache::get_k`` over every stream: [hd, 1, n_kv, n_stream]."""
    return view(kc, (hd, 1, n_kv, kc.ne[2]), (row_size(ty, hd), row_size(ty, hd), row_size(ty, hd * size)))


def _comp_k(kc, ty, hd, n_kv, size):
    """A compressed cache's K as the attention and the indexer read it: ``get_k`` of the whole cache, then a
    ``ggml_view_4d`` of its first ``n_kv`` rows (deepseek4.cpp:631, 745, 801): two view nodes, as ggml's graph holds
    them (the Vulkan backend's reordering counts views)."""
    k = _get_k(kc, ty, hd, size, size)
    return view(k, (hd, 1, n_kv, k.ne[3]), k.nb[1:])


def _cpy_k(kc, k_cur, idxs):
    """``llama_kv_cache::cpy_k``: the rows written by index (the streams flattened when there are several)."""
    hd = kc.ne[0]
    k2 = view(k_cur, (hd, k_cur.ne[2]), (k_cur.nb[2],))
    dst = reshape(kc, hd, kc.ne[1] * kc.ne[2]) if kc.ne[2] > 1 else kc
    return set_rows(dst, k2, idxs)


def _state(b, il, which, n_embd_state, state_size):
    """``llama_dsv4_comp_state``'s kv and score planes of layer ``il`` (a fresh ``get_kv_all`` view each call, as
    each ``cpy_kv`` takes one) and ``get_n_rows``."""
    c = b.c
    ns = max(1, c.n_seqs)
    planes = ns * (1 + c.n_rs_seq)
    kv = b.cache(il, f"{which}_state_kv", "f32", (n_embd_state, state_size, planes))
    sc = b.cache(il, f"{which}_state_score", "f32", (n_embd_state, state_size, planes))
    rows = state_size * ns * (1 + c.n_rs_seq)
    return (
        lambda: view(kv, (n_embd_state, rows), (kv.nb[1],)),
        lambda: view(sc, (n_embd_state, rows), (sc.nb[1],)),
        state_size * ns,
    )


def _cpy_state(all_view, rows, idxs):
    """``llama_dsv4_comp_state::cpy_kv``/``cpy_score``: ``ggml_set_rows`` into a fresh ``get_kv_all`` view, its
    sources in ggml's slots (rows, indices, destination), so the graph reaches the view after the rows as
    ggml_visit_parents does (the Vulkan reordering sees the nodes in that order)."""
    dst = all_view()
    return view_tensor(dst, "SET_ROWS", [rows, idxs, dst])


def _persist(b, inp, kv_all, sc_all, state_kv, state_score):
    """The persist step of ``build_attention_impl``: the ubatch's last rows written into the state (both row
    gathers first, as deepseek4.cpp writes them)."""
    kv_rows = get_rows(state_kv, inp["state_persist_src_idxs"])
    sc_rows = get_rows(state_score, inp["state_persist_src_idxs"])
    b.g.expand(_cpy_state(kv_all, kv_rows, inp["state_persist_dst_idxs"]))
    b.g.expand(_cpy_state(sc_all, sc_rows, inp["state_persist_dst_idxs"]))


def _restore(inp, kv_all, sc_all):
    """``dsv4_build_state_restore`` (deepseek4.cpp:222): the rolled-back plane's rows copied onto the live plane
    (``n_rs_seq`` > 0), else the state as it is."""
    kv, sc = kv_all(), sc_all()
    src, dst = inp["state_restore_src_idxs"], inp["state_restore_dst_idxs"]
    if src is None or dst is None:
        return kv, sc
    kv = _cpy_state(kv_all, get_rows(kv, src), dst)
    sc = _cpy_state(sc_all, get_rows(sc, src), dst)
    return kv, sc


def _snapshot(b, inp, kv_all, sc_all, src_kv, src_sc):
    """``dsv4_build_state_snapshot`` (deepseek4.cpp:245): each kept draft step's plane written from the restored
    state extended by the ubatch's rows (``n_rs_seq`` > 0)."""
    src, dst = inp["state_snapshot_src_idxs"], inp["state_snapshot_dst_idxs"]
    if src is None or dst is None:
        return
    kv = _cpy_state(kv_all, get_rows(src_kv, src), dst)
    sc = _cpy_state(sc_all, get_rows(src_sc, src), dst)
    b.g.expand(kv)
    b.g.expand(sc)


def _rope(x, pos):
    return new(x.ty, x.ne, "ROPE", (x, pos))


def _compress(b, il, kv_state, score_state, inp, norm, ratio, hd, overlap):
    """``build_overlap_compressed_kv_from_state`` (CSA, lid) / ``build_hca_compressed_kv_from_state`` (HCA)."""
    n_blocks = inp["state_write_pos"].ne[0]
    read = inp["state_read_idxs"]
    if overlap:
        # dsv4_append_zero_row: a row of the state scaled to 0 (score: to -inf, scale_bias) concatenated below
        zkv = reshape(unary("SCALE", view(kv_state, (kv_state.ne[0],), ())), kv_state.ne[0], 1)
        kv_state = concat(kv_state, zkv, 1)
        zsc = reshape(unary("SCALE", view(score_state, (score_state.ne[0],), ())), score_state.ne[0], 1)
        score_state = concat(score_state, zsc, 1)
        n_read = ratio * n_blocks
        kv_rows = get_rows(kv_state, read)
        sc_rows = get_rows(score_state, read)
        parts = []
        for rows in (kv_rows, sc_rows, kv_rows, sc_rows):  # kv_prev, score_prev, kv_cur, score_cur
            parts.append(reshape(cont(view(rows, (hd, n_read), (rows.nb[1],))), hd, ratio, n_blocks))
        values = concat(parts[0], parts[2], 1)
        scores = concat(parts[1], parts[3], 1)
    else:
        values = reshape(get_rows(kv_state, read), hd, ratio, n_blocks)
        scores = reshape(get_rows(score_state, read), hd, ratio, n_blocks)
    values = cont(permute(values, 1, 0, 2, 3))
    scores = cont(permute(scores, 1, 0, 2, 3))
    comp = binary("MUL", values, unary("SOFT_MAX", scores))
    comp = cont(permute(sum_rows(comp), 1, 0, 2, 3))  # [hd, 1, n_blocks]
    comp = b.norm(comp, _w(b, norm), il)
    return _rope(comp, inp["state_write_pos"])


def _compressor(b, il, cur, inp, pfx, which, ratio, overlap):
    """One compressor of ``build_attention_impl``: its kv/score projections (+ the ``ape`` rows), the state
    extended by the ubatch, the blocks compressed into the compressed cache and the persisted state rows (each a
    cache write the graph expands). Returns the compressed cache, which the attention reads."""
    g = b.g
    hd = inp["hd"]
    coff = 2 if overlap else 1
    state_kv = b.mm(_w(b, f"blk.{il}.{pfx}_kv.weight"), cur)
    state_score = b.mm(_w(b, f"blk.{il}.{pfx}_gate.weight"), cur)
    state_score = binary("ADD", state_score, get_rows(_w(b, f"blk.{il}.{pfx}_ape.weight"), inp["state_pos"]))
    kv_all, sc_all, n_rows = _state(b, il, which, coff * hd, inp["state_size"])
    r_kv, r_sc = _restore(inp, kv_all, sc_all)
    base_kv = view(r_kv, (r_kv.ne[0], n_rows), (r_kv.nb[1],))  # dsv4_view_2d: the live plane's rows
    base_sc = view(r_sc, (r_sc.ne[0], n_rows), (r_sc.nb[1],))
    src_kv = concat(base_kv, state_kv, 1)
    src_sc = concat(base_sc, state_score, 1)
    comp = _compress(b, il, src_kv, src_sc, inp, f"blk.{il}.{pfx}_norm.weight", ratio, hd, overlap)
    if inp["k_rot"] is not None:
        comp = b.hadamard(comp, inp["k_rot"])
    kc = _cache_k(b, il, f"k_{which}", hd, inp["n_kv"])
    g.expand(_cpy_k(kc, comp, inp["state_write_idxs"]))
    if inp["state_snapshot_src_idxs"] is not None:  # the snapshot's source: every plane, then the ubatch's rows
        _snapshot(b, inp, kv_all, sc_all, concat(r_kv, state_kv, 1), concat(r_sc, state_score, 1))
    _persist(b, inp, kv_all, sc_all, state_kv, state_score)
    return kc


def _lid_top_k(b, il, qr, cur, kc_lid, lid):
    """``build_lid_top_k``: the indexer query (roped, rotated), its head weights and the fused
    ``LIGHTNING_INDEXER`` over the lid cache, then ``GGML_OP_TOP_K``."""
    p, nt = b.p, b.nt
    ihd, n_ih = p.indexer_head_size, p.indexer_head_count
    iq = reshape(b.mm(_w(b, f"blk.{il}.indexer.attn_q_b.weight"), qr), ihd, n_ih, nt)
    iq = _rope(iq, b.inputs["inp_pos"])
    iq = b.hadamard(iq, lid["k_rot"])
    iw = unary("SCALE", b.mm(_w(b, f"blk.{il}.indexer.proj.weight"), cur))
    ik = _comp_k(kc_lid, b.c.type_k, ihd, lid["n_kv"], kc_lid.ne[1])
    ns = ik.ne[3]
    iq = view(iq, (iq.ne[0], iq.ne[1], iq.ne[2] // ns, ns), (iq.nb[1], iq.nb[2], iq.nb[3] // ns))
    iw = view(iw, (iw.ne[0], iw.ne[1] // ns, iw.ne[2], ns), (iw.nb[1], iw.nb[2] // ns, iw.nb[3] // ns))
    score = new("f32", (ik.ne[2], iq.ne[2], 1, iq.ne[3]), "LIGHTNING_INDEXER", (iq, ik, iw, lid["kq_mask"]))
    n_top_k = min(score.ne[0], p.indexer_top_k)
    return cont(new("i32", (n_top_k, score.ne[1], score.ne[2], score.ne[3]), "TOP_K", (score,)))


def _top_k_mask(b, il, kq_mask, top_k):
    """``build_top_k_mask``: a -inf copy of the compressed mask, zeros (a filled leaf) written at the chosen
    blocks, plus the mask."""
    m_all = unary("FILL", kq_mask)
    m_all = view(m_all, (1, m_all.ne[0], m_all.ne[1], m_all.ne[3]), (m_all.nb[0], m_all.nb[1], m_all.nb[2]))
    tk3 = view(top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1), (top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]))
    zeros = new("f16" if b.c.fa else "f32", (1, tk3.ne[0], tk3.ne[1], tk3.ne[2]), NONE)
    zeros.name = f"dsv4_zeros_l{il}"
    zeros = unary("FILL", zeros)
    m_top = view_tensor(m_all, "SET_ROWS", [zeros, tk3, m_all])  # ggml_set_rows keeps (b, c, a)
    m_top = view(m_top, (m_top.ne[1], m_top.ne[2], 1, m_top.ne[3]), (m_top.nb[2], m_top.nb[3], m_top.nb[3]))
    return binary("ADD", m_top, kq_mask)


def attention(b, il, cur, inputs):
    """``build_attention_impl`` (deepseek4.cpp:878) for the main graph (``inp_dsv4``): q LoRA, the K row, the
    compressors (HCA, or CSA then lid), the indexer's top-k, then ``build_csa_lid_attention`` (:707),
    ``build_hca_attention`` (:769) or ``build_raw_attention`` (:824), the RoPE taken back out and the grouped output
    LoRA (``wo_a`` per group, ``wo_b``)."""
    c, p, nt = b.c, b.p, b.nt
    pos = b.inputs["inp_pos"]
    hd = p.head_dim_k
    n_head = p.n_head[il]
    n_groups = int(c.meta[f"{c.arch}.attention.output_group_count"])
    o_lora = int(c.meta[f"{c.arch}.attention.output_lora_rank"])
    ratio = p.compress_ratios[il]
    qr = b.norm(b.mm(_w(b, f"blk.{il}.attn_q_a.weight"), cur), f"blk.{il}.attn_q_a_norm.weight", il)
    q = reshape(b.mm(_w(b, f"blk.{il}.attn_q_b.weight"), qr), hd, n_head, nt)
    q = _rope(unary("RMS_NORM", q), pos)
    kv = b.norm(b.mm(_w(b, f"blk.{il}.attn_kv.weight"), cur), f"blk.{il}.attn_kv_a_norm.weight", il)
    kv = _rope(reshape(kv, hd, 1, nt), pos)
    if inputs is None:  # graph_mtp (build_attn_inp_k_iswa): a ratio-0 layer, no compressors
        out = _mtp_attention(b, il, q, kv, _w(b, f"blk.{il}.attn_sinks.weight"))
    else:
        out = _dsv4_attention(b, il, q, kv, qr, cur, inputs, ratio)
    out = reshape(out, hd, n_head, nt)
    out = new(out.ty, out.ne, "ROPE_BACK", (out, pos))  # ggml_rope_ext_back: the RoPE taken out again
    out = permute(reshape(out, n_head // n_groups * hd, n_groups, nt), 0, 2, 1, 3)
    wo_a = _w(b, f"blk.{il}.attn_output_a.weight")
    # TENSOR_ALLOW_RESHAPE: the loader makes the weight itself 3-D, so the graph holds no RESHAPE node for it (one
    # there shifted ggml_vk_graph_optimize's 20-node window: deepseek4 on Vulkan at -np 2, 25.0 MiB against 18.76)
    wo_a.ne = ne4((n_head // n_groups * hd, o_lora, n_groups))
    oa = permute(mul_mat(wo_a, out), 0, 2, 1, 3)
    oa = cont(oa, o_lora * n_groups, nt)
    return b.mm(_w(b, f"blk.{il}.attn_output_b.weight"), oa)


def _mtp_attention(b, il, q, kv, sinks):
    """``build_attn`` over ``llm_graph_input_attn_k_iswa`` (llama-graph.cpp:3210): the MTP context's cache of the
    NextN layer (a plain iswa cache that also holds a V it never writes) with the cached K read as V."""
    c, g, nt = b.c, b.g, b.nt
    swa = c.is_swa(il)
    sfx = "_swa" if swa else ""
    n_kv = c.size_swa if swa else c.n_kv
    ns = c.n_stream
    hd = kv.ne[0]
    k_idxs = b.inp("k_idxs" + sfx, "i64", (nt,))
    mask = b.inp("kq_mask" + sfx, "f16" if c.fa else "f32", (n_kv, nt // ns, 1, ns))
    rot = b.inp("k_rot" + sfx, "f32", (c.rot_k, c.rot_k)) if c.rot_k else None
    if rot is not None:
        q = b.hadamard(q, rot)
        kv = b.hadamard(kv, rot)
    g.expand(q)
    g.expand(kv)
    kc = b.cache(il, "k", c.type_k, (hd, n_kv, ns))
    g.expand(_cpy_k(kc, kv, k_idxs))
    k = _get_k(kc, c.type_k, hd, n_kv, n_kv)
    v = view(k, k.ne, k.nb[1:])  # ggml_view_4d(k, v_cur->ne[0], ...): the same rows
    out = b.mha(q, k, v, mask, sinks, None, il)
    if rot is not None:
        out = b.hadamard(out, rot)
    return out


def _dsv4_attention(b, il, q, kv, qr, cur, inputs, ratio):
    """The main graph's attention (``inp_dsv4``): the compressors, the indexer's top-k and the raw window cache
    with the compressed rows concatenated (``build_csa_lid_attention``, ``build_hca_attention``,
    ``build_raw_attention``)."""
    c, p, g = b.c, b.p, b.g
    hd = p.head_dim_k
    raw, csa, hca, lid = inputs
    kc_csa = kc_hca = kc_lid = None
    if ratio == HCA:
        kc_hca = _compressor(b, il, cur, hca, "attn_compressor", "hca", HCA, False)
    if ratio == CSA:
        kc_csa = _compressor(b, il, cur, csa, "attn_compressor", "csa", CSA, True)
        kc_lid = _compressor(b, il, cur, lid, "indexer_compressor", "lid", CSA, True)
    top_k = _lid_top_k(b, il, qr, cur, kc_lid, lid) if ratio == CSA else None
    if raw["k_rot"] is not None:
        q = b.hadamard(q, raw["k_rot"])
        kv = b.hadamard(kv, raw["k_rot"])
    g.expand(q)
    g.expand(kv)
    kc_raw = _cache_k(b, il, "k", hd, c.size_swa)
    g.expand(_cpy_k(kc_raw, kv, raw["k_idxs"]))
    raw_k = _get_k(kc_raw, c.type_k, hd, c.size_swa, c.size_swa)
    mask = raw["mask"]
    k_all = raw_k
    if ratio == CSA:
        k_all = concat(raw_k, _comp_k(kc_csa, c.type_k, hd, csa["n_kv"], kc_csa.ne[1]), 2)
        mask = concat(mask, _top_k_mask(b, il, csa["kq_mask"], top_k), 0)
    elif ratio == HCA:
        k_all = concat(raw_k, _comp_k(kc_hca, c.type_k, hd, hca["n_kv"], kc_hca.ne[1]), 2)
        mask = concat(mask, hca["kq_mask"], 0)
    out = b.mha(q, k_all, k_all, mask, _w(b, f"blk.{il}.attn_sinks.weight"), None, il)
    if raw["k_rot"] is not None:
        out = b.hadamard(out, raw["k_rot"])
    return out


def hc_head(b, x):
    """``llama_model_deepseek4::graph::build_hc_head``: the ``output_hc_*`` gate and ``build_hc_pre(x, pre, -1)``,
    which never fuses (``fused_dsv4_hc_pre && il >= 0``): one MUL per stream added up."""
    n_embd, hc, nt = x.ne[0], x.ne[1], x.ne[2]
    mixes = mul_mat(_w(b, "output_hc_fn.weight"), unary("RMS_NORM", reshape(x, hc * n_embd, nt)))
    pre = binary("MUL", mixes, _w(b, "output_hc_scale.weight"))
    pre = binary("ADD", pre, _w(b, "output_hc_base.weight"))
    pre = unary("SCALE", unary("UNARY", pre))  # sigmoid, + hc_eps (scale_bias)
    out = None
    for _ in range(hc):
        cur = binary("MUL", view(x, (n_embd, nt), (x.nb[2],)), view(pre, (1, nt), (pre.nb[1],)))
        out = cur if out is None else binary("ADD", out, cur)
    return out


def _block(b, il, inpL, inputs, n_hash):
    """One decoder block: hyper-connected attention, then the hyper-connected MoE and shared expert."""
    c, g = b.c, b.g
    residual = inpL
    cur, post, comb = hc_pre(b, inpL, il, "attn")
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    cur = attention(b, il, cur, inputs)
    inpL = hc_post(b, cur, residual, post, comb, il)
    residual = inpL
    cur, post, comb = hc_pre(b, inpL, il, "ffn")
    if inputs is not None:
        g.expand(residual)
        g.expand(post)
        g.expand(comb)
    cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
    hashed = il < n_hash
    selected = get_rows(_w(b, f"blk.{il}.ffn_gate_tid2eid.weight"), b.inputs["inp_tokens"]) if hashed else None
    moe_out = b.moe(
        cur,
        il,
        gating="sqrt_softplus",  # expert_gating_func 4, the only one the loader accepts
        norm_w=c.expert_weights_norm,
        w_scale=c.expert_weights_scale,
        probs_b=None if hashed else _w(b, f"blk.{il}.exp_probs_b.bias"),
        selected_in=selected,
    )
    cur = binary("ADD", moe_out, b._ffn_named(cur, il, "shexp"))
    return hc_post(b, cur, residual, post, comb, il)


def build_mtp(b):
    """``llama_model_deepseek4::graph_mtp`` (deepseek4.cpp:1362): the draft token's embedding normed (``enorm``)
    and repeated over the hc streams, next to the target's hidden streams (``mtp_h_input``, ``n_embd_out``
    wide) normed (``hnorm``), ``eh_proj``, one ratio-0 block on the MTP context's iswa cache, the streams' rows
    of the outputs (``h_nextn``), the hc head, the shared head norm and the LM head."""
    p, nt = b.p, b.nt
    il = b.layers[0]
    hc, n_embd = p.hc_mult, p.n_embd
    tokens = b.inp("inp_tokens", "i32", (nt,))
    h = b.inp("mtp_h_input", "f32", (hc * n_embd, nt))
    emb = b.w(f"blk.{il}.nextn.embed_tokens.weight") or _w(b, "token_embd.weight")
    tok = get_rows(emb, tokens)
    h_state = reshape(h, n_embd, hc, nt)
    b.inp_pos()
    out_ids = b.inp_out_ids()
    h_norm = b.norm(h_state, f"blk.{il}.nextn.hnorm.weight", il)
    e_norm = reshape(b.norm(tok, f"blk.{il}.nextn.enorm.weight", il), n_embd, 1, nt)
    e_norm = new(e_norm.ty, (n_embd, hc, nt), "REPEAT", (e_norm,))
    inpL = b.mm(f"blk.{il}.nextn.eh_proj.weight", concat(e_norm, h_norm, 0))
    inpL = _block(b, il, inpL, None, int(b.c.meta[f"{b.c.arch}.hash_layer_count"]))
    h_nextn = get_rows(reshape(inpL, n_embd * hc, nt), out_ids)
    h_nextn.flags = h_nextn.fl0 = OUTPUT
    cur = hc_head(b, reshape(h_nextn, n_embd, hc, b.c.n_outputs))
    head_norm = f"blk.{il}.nextn.shared_head_norm.weight"
    cur = b.norm(cur, head_norm if head_norm in b.c.names else "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight")
    logits = mul_mat(head, cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def build(b):
    c, p, g = b.c, b.p, b.g
    nt = b.nt
    hc = p.hc_mult
    inp = b.inp_embd()
    b.inp_pos()
    out_ids = b.inp_out_ids()
    inputs = dsv4_inputs(b)
    g.expand(inputs[0]["mask"])  # ggml_build_forward_expand(gf, inp_attn->self_kq_mask)
    n_hash = int(c.meta[f"{c.arch}.hash_layer_count"])
    inpL = new(inp.ty, (p.n_embd, hc, nt), "REPEAT", (reshape(inp, p.n_embd, 1, nt),))  # hc_init
    for il in b.layers:
        if il in c.layer_inp_out:  # a DFlash head's extracted layer input: the streams' mean, an output
            _hc_mean_out(b, inpL)
        inpL = _block(b, il, inpL, inputs, n_hash)
        # cb(inpL, "l_last", il) (deepseek4.cpp:1325): graph_get_cb (llama-context.cpp:2646) pins it to the layer's
        # device when it pins the norms; resolve_fused_ops' probe always does (core.py: pin_probe), which keeps
        # DSV4_HC_POST fused on the last layer before a device boundary
        b.force_norm(inpL, il)
    if p.n_layer in c.layer_inp_out:  # the last layer's output (t_layer_inp[n_layer])
        _hc_mean_out(b, inpL)
    flat = get_rows(reshape(inpL, p.n_embd * hc, nt), out_ids)
    inpL = reshape(flat, p.n_embd, hc, c.n_outputs)
    return b.output(hc_head(b, inpL))


def _hc_mean_out(b, x):
    """``build_hc_mean`` (deepseek4.cpp:269) as ``t_layer_inp``: the hc streams added up and scaled, set as an
    output (``llama_set_embeddings_layer_inp``) and expanded into the graph there."""
    n_embd, hc, nt = x.ne[0], x.ne[1], x.ne[2]
    acc = view(x, (n_embd, nt), (x.nb[2],))
    for _ in range(1, hc):
        acc = binary("ADD", acc, view(x, (n_embd, nt), (x.nb[2],)))
    acc = unary("SCALE", acc)
    acc.flags = acc.fl0 = OUTPUT
    b.g.expand(acc)


FAMILY = Family(
    name="deepseek4",
    build=build,
    exact=frozenset({"deepseek4"}),
    uncut=True,  # per-layer leafs (the top-k zeros): the allocator places them before any op
    fused=("DSV4_HC_PRE", "DSV4_HC_COMB", "DSV4_HC_POST"),
    build_mtp=build_mtp,
    mtp_exact=frozenset({"deepseek4"}),
    rs_seq=True,  # the compressor states' restore/snapshot rows of n_rs_seq > 0
)
