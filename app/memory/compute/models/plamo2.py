"""``src/models/plamo2.cpp`` (PLaMo 2): a hybrid of attention layers and Mamba layers of PLaMo 2's own kind (a
layer is recurrent where ``head_count_kv`` is 0). The Mamba layer: ``ssm_in`` permuted and made contiguous as
heads of (z, x) pairs, x made contiguous, the conv state concatenated before x (last columns copied back),
``ggml_ssm_conv`` and SiLU (no conv bias), ``ssm_x`` to B / C / dt (RMS-normed with their weights), ``ssm_dt`` and
its bias, the selective scan over n_heads heads of d_inner / n_heads, D skip, the SwiGLU gate with z, ``ssm_out``.
The attention layer: a fused ``attn_qkv`` split by views, Q and K normed (per head) and roped. Every layer then
has the post-mixer norm, the FFN norm, a fused SwiGLU FFN (``ffn_up`` 2 x wide: ``ggml_swiglu``) and the post-FFN
norm; the post norms are named without ``.weight`` by the loader."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import (
    binary,
    concat,
    cont,
    cpy,
    get_rows,
    glu_split,
    nelements,
    new,
    permute,
    reshape,
    transpose,
    unary,
    view,
)
from . import Family
from .mamba import build_rs
from .rwkv7 import weight_reshape


def _mamba(b, cur, il):
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    d_conv, d_inner, d_state, n_heads = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state, p.ssm_dt_rank
    head_dim = d_inner // n_heads
    n_seq_tokens = nt // ns
    n_rs = c.n_rs
    n_embd_r = (d_conv - 1) * d_inner
    n_embd_s = d_state * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))
    conv = reshape(build_rs(b, r_all, n_embd_r), d_conv - 1, d_inner, ns)
    cur = reshape(cur, cur.ne[0], n_seq_tokens, ns)
    zx = b.mm_s(f"blk.{il}.ssm_in.weight", cur)
    zx = cont(permute(zx, 0, 2, 1, 3), head_dim * 2, n_heads, n_seq_tokens, ns)
    x = view(zx, (head_dim, n_heads, n_seq_tokens, ns), (zx.nb[1], zx.nb[2], zx.nb[3]))
    x = cont(x, head_dim * n_heads, n_seq_tokens, ns)
    z = view(zx, (head_dim, n_heads, n_seq_tokens, ns), (zx.nb[1], zx.nb[2], zx.nb[3]))
    conv_x = concat(conv, transpose(x), 0)
    last = view(conv_x, (d_conv - 1, d_inner, ns), (conv_x.nb[1], conv_x.nb[2]))
    g.expand(cpy(last, view(r_all, (n_embd_r * ns,), ())))
    x = new("f32", (d_inner, n_seq_tokens, ns), "SSM_CONV", (conv_x, b.w(f"blk.{il}.ssm_conv1d.weight")))
    x = unary("UNARY", x)  # silu
    x_bcdt = b.mm_s(f"blk.{il}.ssm_x.weight", x)
    dt_dim = max(64, p.n_embd // 16)
    B = view(x_bcdt, (d_state, n_seq_tokens, ns), (x_bcdt.nb[1], x_bcdt.nb[2]))
    C = view(x_bcdt, (d_state, n_seq_tokens, ns), (x_bcdt.nb[1], x_bcdt.nb[2]))
    dt = view(x_bcdt, (dt_dim, n_seq_tokens, ns), (x_bcdt.nb[1], x_bcdt.nb[2]))
    B = b.norm(B, f"blk.{il}.ssm_b_norm", il)
    C = b.norm(C, f"blk.{il}.ssm_c_norm", il)
    dt = b.norm(dt, f"blk.{il}.ssm_dt_norm", il)
    dt = b.add_b(b.mm_s(f"blk.{il}.ssm_dt.weight", dt), f"blk.{il}.ssm_dt.bias")
    A = weight_reshape(b.w(f"blk.{il}.ssm_a"), 1, n_heads)  # a RESHAPE node: it counts in Vulkan's reordering
    x = view(
        x,
        (head_dim, n_heads, n_seq_tokens, ns),
        (head_dim * 4, head_dim * n_heads * 4, head_dim * n_heads * n_seq_tokens * 4),
    )
    B = view(B, (d_state, 1, n_seq_tokens, ns), (d_state * B.nb[0], B.nb[1], B.nb[2]))
    C = view(C, (d_state, 1, n_seq_tokens, ns), (d_state * C.nb[0], C.nb[1], C.nb[2]))

    def scan(states, ids):
        ssm = reshape(states, d_state, head_dim, n_heads, states.ne[1])
        return new("f32", (nelements(x) + n_embd_s * ids.ne[0],), "SSM_SCAN", (ssm, x, dt, A, B, C, ids))

    y_ssm = build_rs(b, s_all, n_embd_s, scan)
    g.expand(cpy(view(y_ssm, (n_embd_s * ns,), ()), view(s_all, (n_embd_s * ns,), ())))
    y = view(y_ssm, (head_dim, n_heads, n_seq_tokens, ns), (x.nb[1], x.nb[2], x.nb[3]))
    y = binary("ADD", y, binary("MUL", x, weight_reshape(b.w(f"blk.{il}.ssm_d"), 1, n_heads)))
    y = glu_split(cont(z), y)
    y = view(y, (head_dim * n_heads, n_seq_tokens, ns), (y.nb[2], y.nb[3]))
    cur = b.mm_s(f"blk.{il}.ssm_out.weight", y)
    return reshape(cur, cur.ne[0], n_seq_tokens * ns)


def build(b):
    c, p = b.c, b.p
    hk, hv = p.head_dim_k, p.head_dim_v
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        residual = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if c.recurrent[il]:
            cur = _mamba(b, cur, il)
        else:
            q, k, v = qkv(b, il, cur, hk, hk, hv)
            q = rope(b.norm(q, f"blk.{il}.attn_q_norm.weight", il), pos)
            k = rope(b.norm(k, f"blk.{il}.attn_k_norm.weight", il), pos)
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, residual = get_rows(cur, out_ids), get_rows(residual, out_ids)
        cur = binary("ADD", b.norm(cur, f"blk.{il}.post_attention_norm", il), residual)
        residual = cur
        up = b.mm_s(f"blk.{il}.ffn_up.weight", b.norm(cur, f"blk.{il}.ffn_norm.weight", il))
        act = new(up.ty, (up.ne[0] // 2, up.ne[1], up.ne[2], up.ne[3]), "GLU", (up,))  # ggml_swiglu(up)
        cur = b.norm(b.mm_s(f"blk.{il}.ffn_down.weight", act), f"blk.{il}.post_ffw_norm", il)
        inpL = binary("ADD", cur, residual)
    return b.output(inpL, out_ids)


FAMILY = Family(name="plamo2", build=build, exact=frozenset({"plamo2"}))
