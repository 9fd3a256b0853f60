"""``src/models/lfm2.cpp`` (``lfm2moe`` builds the same graph): short-conv layers where ``head_count_kv[il]`` is
0, attention layers elsewhere, each followed by a dense SwiGLU FFN or (from ``leading_dense_block_count`` on, in
LFM2-MoE) routed experts with a selection bias and normalised weights.

A short-conv layer (``build_shortconv_block``, causal): ``in_proj`` to 3 x n_embd split by views into b, c and
x; ``bx = transpose(b * x)``; the conv state read with ``build_rs`` (``(l_cache - 1) x n_embd`` per sequence)
and prepended to ``bx``; its last ``l_cache - 1`` columns copied back into the state (with ``n_rs_seq`` > 0,
rollback drafts, ``min(n_seq_tokens, n_rs_seq + 1)`` copies, one per snapshot slot); ``SSM_CONV`` with the
kernel, ``c * conv`` and ``out_proj``. An attention layer:
Q/K/V, Q and K RMS-normed, rope, attention without output bias. The residual adds the layer input first
(``prev + cur``). The output norm is the tensor llama.cpp calls ``token_embd_norm``.

Not modelled: the sliding-window variant (``attention.sliding_window`` set: the ISWA hybrid memory), and the
non-causal (bidirectional embedding) path.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, concat, cpy, get_rows, mul_mat, new, reshape, transpose, view
from . import Family
from .mamba import build_rs


def shortconv_layer(b, cur, il):
    c, p, g = b.c, b.p, b.g
    ns = c.n_seqs
    nst = b.nt // ns
    n_embd = p.n_embd
    d_conv = p.shortconv_l_cache - 1
    n_embd_r = d_conv * n_embd
    r_all = b.cache(il, "r", "f32", (n_embd_r, c.n_rs))
    cur = reshape(cur, cur.ne[0], nst, ns)
    bcx = b.mm(f"blk.{il}.shortconv.in_proj.weight", cur)
    chunk = bcx.ne[0] // 3
    nb = (bcx.nb[1], bcx.nb[2])
    bv = view(bcx, (chunk, bcx.ne[1], bcx.ne[2]), nb)
    cv = view(bcx, (chunk, bcx.ne[1], bcx.ne[2]), nb)
    xv = view(bcx, (chunk, bcx.ne[1], bcx.ne[2]), nb)
    bx = transpose(binary("MUL", bv, xv))
    conv = reshape(build_rs(b, r_all, n_embd_r), d_conv, n_embd, ns)
    bx = concat(conv, bx, 0)
    # slot 0 the final state, slot s the state s tokens back: min(n_seq_tokens, K) copies, K = n_rs_seq + 1
    for _ in range(min(nst, c.n_rs_seq + 1)):
        snap = view(bx, (d_conv, bx.ne[1], bx.ne[2]), (bx.nb[1], bx.nb[2]))
        g.expand(cpy(snap, view(r_all, (n_embd_r, ns), (r_all.nb[1],))))
    conv_out = new("f32", (n_embd, nst, ns), "SSM_CONV", (bx, b.w(f"blk.{il}.shortconv.conv.weight")))
    y = binary("MUL", cv, conv_out)
    y = b.mm(f"blk.{il}.shortconv.out_proj.weight", y)
    return reshape(y, y.ne[0], nst * ns)


def build(b):
    c, p = b.c, b.p
    cur = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        prev = cur
        cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
        if c.recurrent[il]:
            cur = shortconv_layer(b, cur, il)
        else:
            q, k, v = qkv(b, il, cur, hd, hd, hd)
            q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
            k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
            q = rope(q, pos)
            k = rope(k, pos)
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            prev = get_rows(prev, out_ids)
        cur = binary("ADD", prev, cur)
        normed = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            ffn_out = b.moe(
                normed,
                il,
                gating=c.gating,
                norm_w=True,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
        else:
            ffn_out = b.ffn(normed, "ffn", il)
        cur = binary("ADD", cur, ffn_out)
    cur = b.norm(cur, "token_embd_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="lfm2", build=build, exact=frozenset({"lfm2", "lfm2moe"}), rs_seq=True)
