"""``src/models/minimax-m3.cpp`` (MiniMax-M3): MiniMax-M2-style GQA with DeepSeek-V3's leading dense layers and
routed + shared experts (swigluoai, a GLU like the others), and MiniMax Sparse Attention (MSA) on the layers after
``leading_dense_block_count``.

Attention: separate Q/K/V reshaped to heads, a per-head QK RMS norm (one ``head_dim`` weight), partial NeoX rope.
The dense layers (and every layer when MSA is off) go through ``build_attn`` of the MSA cache's base
``llama_kv_cache``. MSA needs flash attention and one stream per sequence (``-fa on`` and ``-np 1`` or a
non-unified cache); else the whole model runs dense. A sparse layer projects the indexer's
``indexer.head_count`` query heads (one per KV head) and one key head of ``indexer.key_length``, RMS-norms and
ropes them, stores the key in the indexer's own cache (``llama_kv_cache_msa``'s second ``llama_kv_cache``, see
:func:`app.memory.kv.kv_bytes_per_layer`) and, per stream, scores every cache position (``GET_ROWS`` of the
indexer keys through the position -> cell map, ``MUL_MAT``, the position mask added in place), max-pools them to
``indexer.block_size`` blocks, adds the local-block bias, keeps the ``indexer.top_k`` blocks (``TOP_K``), turns
them into a block mask (a -inf filled f16 tensor, ``SET_ROWS`` of zeros), expands it to the cells through the
cell -> block map and adds the causal mask (an f32 copy made once per graph). One ``FLASH_ATTN_EXT`` per stream
then runs with the KV heads on the sequence dimension. The reserve's cache is empty, so the position axis is
256 (``llama_kv_cache_msa_context::get_n_pos``) padded to whole blocks.

Only the prompt (batch) path is built: llama-fit-params prints the first reserve, the one of ``n_ubatch`` tokens
(the decode path, one token per stream, gathers instead and is smaller).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import (
    binary,
    concat,
    cont,
    flash_attn_ext,
    get_rows,
    is_contiguous,
    mul_mat,
    new,
    permute,
    reshape,
    row_size,
    set_rows,
    transpose,
    unary,
    view,
    view_tensor,
)
from . import Family


def _store(b, cache, x, idxs):
    """``llama_kv_cache::cpy_k`` / ``cpy_v`` (FA: V not transposed) of ``x`` [h, n_head, n_tokens]."""
    ns = b.c.n_stream
    n_embd = x.ne[0] * x.ne[1]
    x2 = view(x, (n_embd, x.ne[2]), (x.nb[2],))
    dst = reshape(cache, n_embd, cache.ne[1] * ns) if ns > 1 else cache
    b.g.expand(set_rows(dst, x2, idxs))


def _get(cache, ty, h, n_head, n_kv):
    """``llama_kv_cache::get_k`` / ``get_v`` (not transposed): [h, n_head, n_kv, n_stream]."""
    n_embd = h * n_head
    kv_size = cache.ne[1]
    return view(
        cache, (h, n_head, n_kv, cache.ne[2]), (row_size(ty, h), row_size(ty, n_embd), row_size(ty, n_embd * kv_size))
    )


def _msa_fa(q, k, v, mask, gp):
    """``build_attn_msa_fa``: the query heads [D, HQ, T] regrouped to [D, T, Gp, HKV], one FA, back to [D*HQ, T]."""
    d, hq, t = q.ne[0], q.ne[1], q.ne[2]
    c = k.ne[3]
    q = permute(reshape(q, d, gp, c, hq * t // (gp * c)), 0, 2, 3, 1)
    o = flash_attn_ext(q, k, v, mask, None)
    o = permute(o, 0, 1, 3, 2)
    if not is_contiguous(o):
        o = cont(o)
    return reshape(o, d * hq, t)


def sparse_attn(b, il, cur, q, k, v, pos, msa):
    """The sparse branch of one layer (batch path): the indexer, its cache, the block mask, the grouped FA."""
    c, p, g = b.c, b.p, b.g
    nt, ns, n_kv = b.nt, c.n_stream, c.n_kv
    n_tps = nt // ns
    hd, n_head, hkv = q.ne[0], q.ne[1], k.ne[1]
    n_idx, hd_idx = p.indexer_head_size, p.indexer_head_count
    n_ps, nblk, top_k = msa["n_ps"], msa["nblk"], msa["top_k"]
    iq = b.mm(f"blk.{il}.indexer.q_proj.weight", cur)
    ik = b.mm(f"blk.{il}.indexer.k_proj.weight", cur)
    iq = reshape(iq, n_idx, hd_idx, nt)
    ik = reshape(ik, n_idx, 1, nt)
    iq = b.norm(iq, f"blk.{il}.indexer.q_norm.weight", il)
    ik = b.norm(ik, f"blk.{il}.indexer.k_norm.weight", il)
    iq = rope(iq, pos)
    ik = rope(ik, pos)
    kc_idx = b.cache(il, "k_idx", c.type_k, (n_idx, n_kv, ns))
    _store(b, kc_idx, ik, msa["k_idxs_idx"])
    ik_kv = _get(kc_idx, c.type_k, n_idx, 1, n_kv)
    if msa["k_rot"] is not None:
        q = b.hadamard(q, msa["k_rot"])
        k = b.hadamard(k, msa["k_rot"])
    if msa["v_rot"] is not None:
        v = b.hadamard(v, msa["v_rot"])
    g.expand(q)
    g.expand(k)
    g.expand(v)
    kc = b.cache(il, "k", c.type_k, (hd * hkv, n_kv, ns))
    vc = b.cache(il, "v", c.type_v, (hd * hkv, n_kv, ns))
    _store(b, kc, k, msa["k_idxs"])
    _store(b, vc, v, msa["v_idxs"])
    kv = _get(kc, c.type_k, hd, hkv, n_kv)
    vv = _get(vc, c.type_v, hd, hkv, n_kv)
    bias, pos_mask, pos_slot, cell_blk, mf = msa["bias"], msa["pos_mask"], msa["pos_slot_i"], msa["cell_blk"], msa["mf"]
    outs = []
    for _ in range(ns):
        iq_s = view(iq, (n_idx, hd_idx, n_tps), (iq.nb[1], iq.nb[2]))
        ik_s = view(ik_kv, (n_idx, n_kv), (ik_kv.nb[2],))
        psl_s = view(pos_slot, (n_ps,), ())
        pm_s = view(pos_mask, (n_ps, 1, n_tps), (pos_mask.nb[1], pos_mask.nb[1]))
        cb_s = view(cell_blk, (n_kv,), ())
        mf_s = view(mf, (n_kv, n_tps, 1), (mf.nb[1], mf.nb[3]))
        bias_s = view(bias, (nblk, 1, n_tps), (bias.nb[1], bias.nb[1]))
        q_s = view(q, (hd, n_head, n_tps), (q.nb[1], q.nb[2]))
        k_s = view(kv, (hd, hkv, n_kv, 1), kv.nb[1:])
        v_s = view(vv, (hd, hkv, n_kv, 1), vv.nb[1:])
        ikp = get_rows(ik_s, psl_s)
        sc = mul_mat(ikp, reshape(iq_s, n_idx, hd_idx * n_tps))
        sc = reshape(sc, n_ps, hd_idx, n_tps)
        sc = view_tensor(sc, "ADD", [sc, pm_s])  # ggml_add_inplace
        bs = new("f32", (nblk, hd_idx, n_tps), "POOL_2D", (sc,))
        bsf = binary("ADD", bs, bias_s)
        idx = new("i32", (top_k, hd_idx, n_tps), "TOP_K", (bsf,))
        ninf = new("f16", bias_s.ne, "CPY", (unary("SCALE", bias_s),))  # ggml_scale_bias, cast to f16
        ninf = new("f16", (nblk, hd_idx, n_tps), "REPEAT", (ninf,))
        zero = unary("SCALE", new("f32", idx.ne, "CPY", (idx,)))
        ninf3 = reshape(ninf, 1, nblk, hd_idx * n_tps)
        # ggml_set_rows keeps its sources as (b, c, a)
        bm = view_tensor(
            ninf3, "SET_ROWS", [reshape(zero, 1, top_k, hd_idx * n_tps), reshape(idx, top_k, hd_idx * n_tps), ninf3]
        )
        bm = cont(permute(reshape(bm, nblk, hd_idx, n_tps), 0, 2, 1, 3))
        bm2 = cont(transpose(reshape(bm, nblk, n_tps * hd_idx)))
        bmc = get_rows(bm2, cb_s)
        bmx = reshape(cont(transpose(bmc)), n_kv, n_tps, hd_idx)
        mask4 = view_tensor(bmx, "ADD", [bmx, mf_s])  # ggml_add_inplace
        mask4 = new("f16", (n_kv, n_tps, 1, hd_idx), "CPY", (reshape(mask4, n_kv, n_tps, 1, hd_idx),))
        kfa = permute(k_s, 0, 3, 1, 2)
        vfa = permute(v_s, 0, 3, 1, 2)
        outs.append(_msa_fa(q_s, kfa, vfa, mask4, n_head // hkv))
    out = outs[0]
    for o in outs[1:]:
        out = concat(out, o, 1)
    if msa["v_rot"] is not None:
        out = b.hadamard(out, msa["v_rot"])
    return mul_mat(b.w(f"blk.{il}.attn_output.weight"), out)


def _msa_inputs(b):
    """``build_attn_inp_kv_msa(true)`` and the hoisted MSA inputs of the batch path (with the f32 mask copy)."""
    c, p = b.c, b.p
    nt, ns, n_kv = b.nt, c.n_stream, c.n_kv
    k_idxs, v_idxs, mask, k_rot, v_rot, _ = b.attn_inputs(False)
    msa = dict(k_idxs=k_idxs, v_idxs=v_idxs, mask=mask, k_rot=k_rot, v_rot=v_rot)
    msa["k_idxs_idx"] = b.inp("k_idxs_idx", "i64", (nt,))
    blk = int(c.meta.get(f"{c.arch}.attention.indexer.block_size", 0) or 0)
    n_ps = (256 + blk - 1) // blk * blk  # get_n_pos() of the empty cache: 256
    nblk = n_ps // blk
    msa.update(blk=blk, n_ps=n_ps, nblk=nblk, top_k=min(p.indexer_top_k, nblk))
    msa["bias"] = b.inp("msa_bias", "f32", (nblk, nt))
    msa["pos_mask"] = b.inp("msa_pos_mask", "f32", (n_ps, nt))
    msa["pos_slot_i"] = b.inp("msa_pos_slot_i", "i32", (n_ps, ns))
    msa["cell_blk"] = b.inp("msa_cell_blk", "i32", (n_kv, ns))
    msa["mf"] = new("f32", mask.ne, "CPY", (mask,))  # ggml_cast(kq_mask, F32)
    return msa


def build(b):
    c, p = b.c, b.p
    hd = p.head_dim_k
    inpL = b.inp_embd()
    pos = b.inp_pos()
    msa_on = c.fa and (c.n_seqs == 1 or c.n_stream > 1)
    msa = _msa_inputs(b) if msa_on else None
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = rope(q, pos)
        k = rope(k, pos)
        if msa is not None and il >= p.n_layer_dense_lead:
            cur = sparse_attn(b, il, cur, q, k, v, pos, msa)
        else:
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


# built uncut (as deepseek32): a cut graph's peak on a middle device lost 230-390 MiB against the uncut graph and
# llama-fit-params (-ts 2,1,1 -np 2 -ncmoe 10: RPC1 313.92 vs 705.54 MiB), the peak grows with the layers replayed
FAMILY = Family(name="minimax-m3", build=build, exact=frozenset({"minimax-m3"}), uncut=True)
