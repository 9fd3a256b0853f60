"""``src/models/dots3note.cpp`` (dots3-note): DeepSeek-V3.2's layer (absorbed MLA, DSA lightning indexer, MoE with a
selection bias and shared experts after the dense lead) on the full-attention layers, and on the sliding-window
layers an absorbed MLA of their own geometry (``kv_lora_rank_swa``, ``key_length_mla_swa``,
``value_length_mla_swa``) and head count without an indexer, over the window-sized K-only cache of
``llama_kv_cache_dsa_iswa`` (its own k_idxs and mask, ``build_attn`` of ``llm_graph_input_attn_k``).

Every layer also norms the shared rope key before its rope (``attn_k_norm``) and gates the attention per head:
``attn_output(attn * sigmoid(attn_gate(x)))``, with ``attn_v_b`` inside the attention. The NextN block is not
built (llama.cpp has no MTP graph for it yet and skips its tensors).

The graph is built uncut, as DeepSeek-V3.2's (:mod:`.deepseek32`): each full layer's zero-filled top-k rows are a
leaf the allocator places before any op."""

from __future__ import annotations

from ..builder import gate_heads, rope
from ..ggml import binary, concat, get_rows, mul_mat, permute, reshape, unary, view
from . import Family
from .deepseek32 import _indexer, _nrot, dsa_attn, dsa_inputs


def _mla_qkv(b, il, qr, cur, pos, swa):
    """The absorbed MLA projections of layer ``il`` in its kind's geometry, with the rope key's norm; returns Q, K
    and V (the normed latent)."""
    c, p, nt = b.c, b.p, b.nt
    n_head, n_rope = p.n_head[il], p.n_rot
    if swa:
        kv_lora = int(c.meta[f"{p.arch}.attention.kv_lora_rank_swa"])
        hk_mla = int(c.meta[f"{p.arch}.attention.key_length_mla_swa"])
    else:
        kv_lora, hk_mla = p.kv_lora_rank, c.hk_mla
    n_nope = hk_mla - n_rope
    q = b.mm(f"blk.{il}.attn_q_b.weight", qr)
    es = q.nb[0]
    q_nope = view(q, (n_nope, n_head, nt), (es * hk_mla, es * hk_mla * n_head))
    q_pe = view(q, (n_rope, n_head, nt), (es * hk_mla, es * hk_mla * n_head))
    kvpe = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
    kv_cmpr = view(kvpe, (kv_lora, nt), (kvpe.nb[1],))
    k_pe = view(kvpe, (n_rope, 1, nt), (kvpe.nb[1], kvpe.nb[1]))
    k_pe = b.norm(k_pe, f"blk.{il}.attn_k_norm.weight", il)
    q_pe = rope(q_pe, pos)
    k_pe = rope(k_pe, pos)
    kv_cmpr = b.norm(kv_cmpr, f"blk.{il}.attn_kv_a_norm.weight", il)
    qa = permute(mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), permute(q_nope, 0, 2, 1, 3)), 0, 2, 1, 3)
    Q = concat(qa, q_pe, 0)
    kv_cmpr = reshape(kv_cmpr, kv_lora, 1, nt)
    return Q, concat(kv_cmpr, k_pe, 0), kv_cmpr


def build(b):
    c, p, nt = b.c, b.p, b.nt
    inpL = b.inp_embd()
    pos = b.inp_pos()
    k_idxs, mask, k_idxs_lid, mask_lid = dsa_inputs(b)
    nrot = _nrot(p.indexer_head_size)
    k_rot = b.inp("k_rot_lid", "f32", (nrot, nrot))
    out_ids = b.inp_out_ids()
    hv_swa = int(c.meta[f"{p.arch}.attention.value_length_mla_swa"])
    for il in b.layers:
        swa = c.is_swa(il)
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        attn_inp = cur
        qr = b.norm(b.mm(f"blk.{il}.attn_q_a.weight", cur), f"blk.{il}.attn_q_a_norm.weight", il)
        top_k = None if swa else _indexer(b, il, cur, qr, pos, k_rot, k_idxs_lid, mask_lid)
        Q, K, V = _mla_qkv(b, il, qr, cur, pos, swa)
        v_b = b.w(f"blk.{il}.attn_v_b.weight")
        if swa:
            cur = b.attn(il, Q, K, V, None, None, v_mla=v_b)
        else:
            cur = dsa_attn(b, il, Q, K, V, top_k, k_idxs, mask)
        gate = unary("UNARY", b.mm_s(f"blk.{il}.attn_gate.weight", attn_inp))  # sigmoid, one value per head
        hv = hv_swa if swa else p.value_length_mla
        cur = b.mm_s(f"blk.{il}.attn_output.weight", gate_heads(cur, gate, hv, p.n_head[il], nt))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = binary("ADD", b.dense_lead_moe(cur, il), ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


FAMILY = Family(name="dots3note", build=build, exact=frozenset({"dots3note"}), uncut=True)
