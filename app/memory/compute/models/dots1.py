"""``src/models/dots1.cpp`` and ``bailingmoe2.cpp`` (Ling 2.0), one graph: Q/K/V (separate, or bailingmoe2's
fused ``attn_qkv`` split by views), Q RMS-normed then roped, K likewise (rope over ``rope.dimension_count``, half
the head in Ling 2.0), attention scaled by 1/sqrt(head_dim); residual, norm, a dense SwiGLU FFN on the
``leading_dense_block_count`` first layers, else routed experts (``expert_gating_func``, optional selection
bias ``exp_probs_b``, expert groups where ``expert_group_count`` is set, normalised and scaled top-k weights)
plus the ungated shared experts; residual. bailingmoe2's NextN block (``nextn_predict_layers``) is skipped, as
llama.cpp does without MTP speculation (``TENSOR_SKIP``).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    p = b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(b.norm(q, f"blk.{il}.attn_q_norm.weight", il), pos)
        k = rope(b.norm(k, f"blk.{il}.attn_k_norm.weight", il), pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="dots1", build=build, exact=frozenset({"dots1", "bailingmoe2"}))
