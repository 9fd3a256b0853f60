"""``src/models/grovemoe.cpp``: Qwen3-MoE's layer with a second, "adjugate" expert set chained on the first.

Attention as in Qwen3-MoE (Q/K RMS norms per head before rope). The FFN computes the router logits once from the
FFN norm and passes them (``probs_in``) to two ``build_moe_ffn`` calls, each of which makes its own softmax of them
and, for this architecture only, selects on their sigmoid (``ffn_moe_probs_biased``). The first runs the routed
experts (``*_exps``: SwiGLU, normalised top-k weights). The second takes the *first one's output* as its input and
runs the chunk experts (``*_chexps``, ``n_expert / experts_per_group`` of ``expert_chunk_feed_forward_length``)
on the top-min(k, n_chunk) of all experts, the ids divided by ``experts_per_group`` (cast to f32, scaled, cast
back to i32) and the weights read from the full-width probabilities. Its output is scaled by
``expert_group_scale`` and added to the first one's, then the residual.
"""

from __future__ import annotations

from ..builder import qkv, rope, sum_experts
from ..ggml import argsort_top_k, binary, get_rows, glu_split, mul_mat_id, new, reshape, sum_rows, unary
from . import Family


def _moe(b, cur, il, logits, sfx, n_used, chunk):
    """``build_moe_ffn`` with ``probs_in`` = ``logits`` for ``LLM_ARCH_GROVEMOE`` (softmax gating, norm_w)."""
    c, g = b.c, b.g
    n_embd, nt = cur.ne[0], cur.ne[1]
    n_exp = c.n_expert  # hparams.n_expert: the width of the logits in both calls
    probs = unary("SOFT_MAX", logits)
    sel = unary("UNARY", logits)  # ggml_sigmoid: the selection probabilities
    selected = argsort_top_k(sel, n_used)
    if chunk:
        f_sel = new("f32", selected.ne, "CPY", (selected,))
        f_sel = unary("SCALE", f_sel)
        selected = new("i32", f_sel.ne, "CPY", (f_sel,))
    weights = get_rows(reshape(probs, 1, n_exp, nt), selected)
    weights = reshape(weights, n_used, nt)
    wsum = unary("CLAMP", sum_rows(weights))
    weights = reshape(binary("DIV", weights, wsum), 1, n_used, nt)
    if c.expert_weights_scale:
        weights = unary("SCALE", weights)
    g.expand(weights)
    cur = reshape(cur, n_embd, 1, nt)
    up = mul_mat_id(b.w(f"blk.{il}.ffn_up_{sfx}.weight"), cur, selected)
    gate = mul_mat_id(b.w(f"blk.{il}.ffn_gate_{sfx}.weight"), cur, selected)
    experts = mul_mat_id(b.w(f"blk.{il}.ffn_down_{sfx}.weight"), glu_split(gate, up), selected)
    experts = binary("MUL", experts, weights)
    return sum_experts(g, experts, n_used)


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    per_group = int(c.meta.get(f"{c.arch}.experts_per_group", 0) or 0)
    if per_group <= 0:
        raise ValueError("grovemoe: experts_per_group must be > 0 (llama.cpp asserts n_group_experts > 0)")
    n_chunk = c.n_expert // per_group
    k_chunk = min(c.n_expert_used, n_chunk)
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(b.norm(q, f"blk.{il}.attn_q_norm.weight", il), pos)
        k = rope(b.norm(k, f"blk.{il}.attn_k_norm.weight", il), pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        logits = b.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
        moe_out = _moe(b, cur, il, logits, "exps", c.n_expert_used, chunk=False)
        adj = _moe(b, moe_out, il, logits, "chexps", k_chunk, chunk=n_chunk != c.n_expert)
        cur = binary("ADD", moe_out, unary("SCALE", adj))
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="grovemoe", build=build, exact=frozenset({"grovemoe"}))
