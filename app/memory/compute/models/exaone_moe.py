"""``src/models/exaone-moe.cpp`` (K-EXAONE): pre-norm (``attn_norm``), Q/K/V, Q and K RMS-normed over the head,
rope only on the sliding-window layers (the global ones take no position encoding), attention over the
``llm_graph_input_attn_kv_iswa`` input (always the iswa cache, whatever the pattern) scaled by 1/sqrt(head_dim);
residual, ``ffn_norm``, a dense SwiGLU FFN on the ``leading_dense_block_count`` first layers, else routed experts
(``expert_gating_func``, optional selection bias ``exp_probs_b``, normalised and scaled top-k weights) plus the
shared expert (gated); residual. The NextN/MTP blocks past ``block_count - nextn_predict_layers`` are
``TENSOR_SKIP`` and not in the graph.

The layer compression compares two layers either side (``hood=2``): with one, a middle pipelined device under
``-cmoe`` whose kept layers never showed three sliding layers before a global one lost 84 MiB of its peak
(K-EXAONE, ``-ts 1,2,1 -cmoe``: 149 MiB vs llama.cpp's 233 MiB; the uncut graph and ``hood=2`` give 233).
"""

from __future__ import annotations

from ..builder import layer_copy, qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if c.is_swa(il):
            freqs = layer_copy(b, "rope_freqs.weight", il)  # layer 0's, TENSOR_DUPLICATED for the others
            q = rope(q, pos, freqs)
            k = rope(k, pos, freqs)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=True)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="exaone_moe", build=build, exact=frozenset({"exaone-moe"}), hood=2)
