"""``src/models/afmoe.cpp`` (Arcee Trinity Nano/Mini/Large): the embeddings scaled by sqrt(n_embd) (MuP), then per
layer: ``attn_norm``; Q/K/V and, from the same normed input, the gate projection ``attn_gate``; Q and K RMS-normed
over the head; rope on every layer but each 4th (``n_no_rope_layer_step``, 4 unless an architecture sets it; the
global layers of the published 3:1 pattern); attention over the ``llm_graph_input_attn_kv_iswa`` input with no
output projection; ``attn * sigmoid(gate)``, then ``attn_output``; ``post_attention_norm``; residual;
``ffn_norm``; a dense SwiGLU FFN on the ``leading_dense_block_count`` first layers, else routed experts (sigmoid
unless the file says, selection bias ``exp_probs_b``, normalised and scaled top-k weights) plus the gated shared
expert when ``expert_shared_count`` > 0; ``post_ffw_norm``; residual.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, mul_mat, unary
from . import Family


def build(b):
    p = b.p
    inpL = unary("SCALE", b.inp_embd())
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        gate = mul_mat(b.w(f"blk.{il}.attn_gate.weight"), cur)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if (il + 1) % 4 != 0:
            q = rope(q, pos)
            k = rope(k, pos)
        cur = b.attn(il, q, k, v, None, None, iswa_order=True)
        cur = binary("MUL", cur, unary("UNARY", gate))  # sigmoid
        cur = mul_mat(b.w(f"blk.{il}.attn_output.weight"), cur)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="afmoe", build=build, exact=frozenset({"afmoe"}))
