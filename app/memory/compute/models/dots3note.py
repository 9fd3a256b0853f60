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

from ..builder import gate_heads
from ..ggml import binary, get_rows, unary
from . import Family
from .deepseek32 import _indexer, _nrot, dsa_attn, dsa_inputs, mla_qkv


def _geometry(b, il, swa):
    """(heads, kv_lora_rank, MLA key length) of layer ``il``'s kind."""
    c, p = b.c, b.p
    if not swa:
        return p.n_head[il], p.kv_lora_rank, c.hk_mla
    kv_lora = int(c.meta[f"{p.arch}.attention.kv_lora_rank_swa"])
    return p.n_head[il], kv_lora, int(c.meta[f"{p.arch}.attention.key_length_mla_swa"])


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
        Q, K, V = mla_qkv(b, il, qr, cur, pos, _geometry(b, il, swa), k_pe_norm=True)
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
