"""``src/models/minimax-m2.cpp`` (MiniMax-M2 / M2.1 / M2.5).

Attention: Q/K/V projected 2-D (``build_qkv(..., reshape=false)``, separate or one fused ``attn_qkv``), Q and K
RMS-normed over the whole projection (``attn_q_norm`` of head_dim * n_head, ``attn_k_norm`` of head_dim *
n_head_kv), then reshaped to heads and roped (on ``rope.dimension_count`` of the head, 64 of 128: the rope's output
has the input's shape either way), attention scaled by 1/sqrt(head_dim); residual; norm; routed experts on every layer (``expert_gating_func``,
sigmoid in the published files, with the selection bias ``exp_probs_b``, top-k weights always normalised,
``expert_weights_scale`` when set), no shared expert; residual.
"""

from __future__ import annotations

from ..builder import qkv_2d, rope
from ..ggml import binary, get_rows, reshape
from . import Family


def build(b):
    c, p = b.c, b.p
    nt = b.nt
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv_2d(b, il, cur, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = reshape(q, hd, p.n_head[il], nt)
        k = reshape(k, hd, p.n_head_kv[il], nt)
        v = reshape(v, hd, p.n_head_kv[il], nt)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.moe(
            cur,
            il,
            gating=c.gating,
            norm_w=True,
            w_scale=c.expert_weights_scale,
            probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
        )
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="minimax-m2", build=build, exact=frozenset({"minimax-m2"}))
