"""``src/models/minimax-01.cpp`` (MiniMax-Text-01, MiniMax-M1): a hybrid of softmax attention (every 8th layer by
default) and lightning attention over a recurrent state, every layer's FFN routed experts, the residuals taken
from the normed input and scaled (DeepNorm's alpha, ``residual_scale``).

Lightning attention per layer: ``build_rs`` of the (empty) conv state and of the layer's state (one head x head
matrix per head), the fused QKV projection with SiLU split into Q/K/V views per head and per sequence, the decays
``exp(scale(input))`` of the four graph inputs (slopes, Q and K decay rows, the diagonal decay matrix of
n_seq_tokens x n_seq_tokens per head and sequence, which dominates the compute buffer), the intra-block product
``(K^T Q) * diag`` with V, the inter-block product with the old state, the new state written back, then the
output made contiguous per token, RMS-normed (``attn_norm_2``), gated by the sigmoid of ``attn_gate`` and
projected (``attn_output``)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, cont, cpy, get_rows, mul_mat, permute, reshape, unary, view
from . import Family
from .mamba import build_rs


def _la_inputs(b, n_head, nst, ns):
    """``llm_graph_input_la``: slopes [n_head], Q/K decay [1, n_head, nst, ns], diagonal decay [nst, nst, n_head,
    ns] (F32 inputs, one set for the graph)."""
    return (
        b.inp("la_slopes", "f32", (n_head,)),
        b.inp("la_q_decay", "f32", (1, n_head, nst, ns)),
        b.inp("la_k_decay", "f32", (1, n_head, nst, ns)),
        b.inp("la_diag_decay", "f32", (nst, nst, n_head, ns)),
    )


def _lightning(b, cur, il):
    c, p, g = b.c, b.p, b.g
    ns = c.n_seqs
    nst = b.nt // ns
    n_head, hd = p.n_head[il], p.head_dim_k
    slopes, q_decay_exp, k_decay_exp, diag_decay_exp = _la_inputs(b, n_head, nst, ns)
    r_all = b.cache(il, "r", "f32", (0, c.n_rs))  # n_embd_r() is 0: the conv state holds nothing
    g.expand(build_rs(b, r_all, 0))
    slope_rate = unary("SCALE", slopes)
    cur = reshape(cur, cur.ne[0], nst, 1, ns)
    x = unary("UNARY", b.mm(f"blk.{il}.attn_qkv.weight", cur))  # silu
    x = reshape(x, hd * 3, n_head, nst, ns)
    q, k, v = (view(x, (hd, n_head, nst, ns), x.nb[1:]) for _ in range(3))
    n_embd_s = hd * hd * n_head
    s_all = b.cache(il, "s", "f32", (n_embd_s, c.n_rs))
    kv_old = reshape(build_rs(b, s_all, n_embd_s), hd, hd, n_head, ns)
    q_decay = unary("UNARY", unary("SCALE", q_decay_exp))  # exp
    k_decay = unary("UNARY", unary("SCALE", k_decay_exp))
    diag_decay = unary("UNARY", unary("SCALE", diag_decay_exp))
    q_s = permute(binary("MUL", q, q_decay), 0, 2, 1, 3)
    none_diag = mul_mat(kv_old, q_s)
    qk = mul_mat(permute(k, 0, 2, 1, 3), permute(q, 0, 2, 1, 3))
    qk = binary("MUL", qk, diag_decay)
    v_trans = cont(permute(v, 1, 2, 0, 3))
    out = binary("ADD", none_diag, mul_mat(v_trans, qk))
    g.expand(out)
    block_decay = unary("UNARY", unary("SCALE", slope_rate))  # exp(-n_seq_tokens * slope_rate)
    kv_old_s = binary("MUL", kv_old, reshape(block_decay, 1, 1, n_head))
    k_after = cont(permute(binary("MUL", k, k_decay), 1, 2, 0, 3))
    kv_new = binary("ADD", kv_old_s, mul_mat(k_after, v_trans))
    g.expand(cpy(kv_new, view(s_all, (n_embd_s * ns,), ())))
    out = cont(permute(out, 0, 2, 1, 3))
    out = reshape(out, out.ne[0] * out.ne[1], out.ne[2], 1, out.ne[3])
    out = b.norm(out, f"blk.{il}.attn_norm_2.weight", il)
    gate = unary("UNARY", b.mm(f"blk.{il}.attn_gate.weight", cur))  # sigmoid
    out = b.mm(f"blk.{il}.attn_output.weight", binary("MUL", gate, out))
    return reshape(out, out.ne[0], nst * ns)


def build(b):
    c, p = b.c, b.p
    inp_l = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        cur = b.norm(inp_l, f"blk.{il}.attn_norm.weight", il)
        residual = cur
        if c.recurrent[il]:
            cur = _lightning(b, cur, il)
        else:
            q, k, v = qkv(b, il, cur, hd, hd, p.head_dim_v)
            q, k = rope(q, pos), rope(k, pos)
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, residual = get_rows(cur, out_ids), get_rows(residual, out_ids)
        ffn_inp = binary("ADD", cur, unary("SCALE", residual))
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        residual = cur
        cur = b.moe(cur, il, gating="softmax", norm_w=True)
        inp_l = binary("ADD", cur, unary("SCALE", residual))
    return b.output(inp_l)


FAMILY = Family(name="minimax-01", build=build, exact=frozenset({"minimax-01"}))
