"""Mamba layers (``src/models/mamba-base.cpp``), shared by the hybrid architectures."""

from __future__ import annotations

from ..ggml import (
    binary,
    concat,
    cont,
    cpy,
    get_rows,
    glu_split,
    nelements,
    new,
    reshape,
    transpose,
    unary,
    view,
    view_tensor,
)


def rs_inputs(b):
    """``build_rs_inp``: the ``rs_s_copy`` input and its main/extra views, one pair shared by every layer."""
    c = b.c
    ns, n_rs = c.n_seqs, c.n_rs
    s_copy = b.inp("rs_s_copy", "i32", (n_rs,))
    if "rs_views" not in b.inputs:
        b.inputs["rs_views"] = (view(s_copy, (ns,), ()), view(s_copy, (n_rs - ns,), ()))
    return b.inputs["rs_views"]


def build_rs(b, state, size, fn=get_rows):
    """``llm_graph_context::build_rs``: clear one state (an in-place scale of a view), gather the sequences'
    states with ``fn`` (``get_rows`` unless the layer fuses it) and copy the untouched ones back."""
    g = b.g
    ns, n_rs = b.c.n_seqs, b.c.n_rs
    s_main, s_extra = rs_inputs(b)
    states = reshape(state, size, state.ne[1])
    zero = view(states, (size,), ())
    g.expand(view_tensor(zero, "SCALE", [zero]))
    out = fn(states, s_main)
    g.expand(out)
    extra = get_rows(states, s_extra)
    g.expand(cpy(extra, view(state, (size, n_rs - ns), (state.nb[1],))))
    return out


def mamba2_layer(b, cur, il):
    """``build_mamba2_layer`` (``src/models/mamba-base.cpp``) with the recurrent-state input of ``build_rs``."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    d_conv, d_inner, d_state = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state
    n_head = p.ssm_dt_rank or 1
    head_dim = d_inner // n_head
    n_group = p.ssm_n_group or 1
    n_seq_tokens = nt // ns
    n_rs = c.n_rs
    conv_dim = d_inner + 2 * n_group * d_state
    n_embd_r = (d_conv - 1) * conv_dim
    n_embd_s = d_state * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))

    def rs(state, size, fn):
        return build_rs(b, state, size, fn)

    conv = rs(r_all, n_embd_r, get_rows)
    conv = reshape(conv, d_conv - 1, conv_dim, ns)
    zx = b.mm(f"blk.{il}.ssm_in.weight", cur)
    zx = reshape(zx, zx.ne[0], n_seq_tokens, ns)
    z = view(zx, (head_dim, n_head, n_seq_tokens, ns), (head_dim * 4, zx.nb[1], zx.nb[2]))
    xBC = view(zx, (conv_dim, n_seq_tokens, ns), (zx.nb[1], zx.nb[2]))
    dt = view(zx, (n_head, n_seq_tokens, ns), (zx.nb[1], zx.nb[2]))
    conv_x = concat(conv, transpose(xBC), 0)
    # with n_rs_seq > 0 (rollback drafts) K = n_rs_seq + 1 snapshots: the last min(n_seq_tokens, K) conv states
    snaps = c.n_rs_seq + 1
    written = min(n_seq_tokens, snaps)
    for _ in range(written):
        last = view(conv_x, (d_conv - 1, conv_dim, ns), (conv_x.nb[1], conv_x.nb[2]))
        g.expand(cpy(last, view(r_all, (n_embd_r, ns), (r_all.nb[1],))))
    xBC = new("f32", (conv_dim, n_seq_tokens, ns), "SSM_CONV", (conv_x, b.w(f"blk.{il}.ssm_conv1d.weight")))
    xBC = b.add_b(xBC, f"blk.{il}.ssm_conv1d.bias")
    xBC = unary("UNARY", xBC)
    x = view(xBC, (head_dim, n_head, n_seq_tokens, ns), (head_dim * 4, xBC.nb[1], xBC.nb[2]))
    B = view(xBC, (d_state, n_group, n_seq_tokens, ns), (d_state * 4, xBC.nb[1], xBC.nb[2]))
    C = view(xBC, (d_state, n_group, n_seq_tokens, ns), (d_state * 4, xBC.nb[1], xBC.nb[2]))
    dt = binary("ADD", cont(dt), b.w(f"blk.{il}.ssm_dt.bias"))
    A = b.w(f"blk.{il}.ssm_a")

    def scan(states, ids):
        ssm = reshape(states, d_state, head_dim, n_head, states.ne[1])
        # ggml_ssm_scan(..., K): the outputs, then K states per sequence (the final one and the rollback snapshots)
        return new("f32", (nelements(x) + snaps * n_embd_s * ids.ne[0],), "SSM_SCAN", (ssm, x, dt, A, B, C, ids))

    y_ssm = rs(s_all, n_embd_s, scan)
    g.expand(
        cpy(
            view(y_ssm, (n_embd_s, ns, written), (n_embd_s * 4, n_embd_s * 4 * ns)),
            view(s_all, (n_embd_s, ns, written), (s_all.nb[1], s_all.nb[1] * n_rs)),
        )
    )
    y = view(y_ssm, (head_dim, n_head, n_seq_tokens, ns), (x.nb[1], n_head * x.nb[1], n_seq_tokens * n_head * x.nb[1]))
    y = binary("ADD", y, binary("MUL", x, b.w(f"blk.{il}.ssm_d")))
    y = glu_split(cont(z), y)
    if b.w(f"blk.{il}.ssm_norm.weight") is not None:
        y = reshape(y, d_inner // n_group, n_group, n_seq_tokens, ns)
        y = b.norm(y, f"blk.{il}.ssm_norm.weight", il)
    y = reshape(y, d_inner, n_seq_tokens * ns)
    return b.mm(f"blk.{il}.ssm_out.weight", y)


def mamba_layer(b, cur, il):
    """``build_mamba_layer`` (Mamba 1, ``src/models/mamba-base.cpp``): ``ssm_in`` to x and z, the conv state
    concatenated before x (its last d_conv - 1 columns copied back), ``ggml_ssm_conv`` with its bias and SiLU,
    ``ssm_x`` to dt / B / C (RMS-normed where ``ssm.dt_b_c_rms`` says, else dt made contiguous), ``ssm_dt`` with its
    bias, the selective scan over the gathered states (one state per sequence copied back), D skip, the SwiGLU gate
    with z and ``ssm_out``. One head per channel (n_head = d_inner, head_dim 1)."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    d_conv, d_inner, d_state, dt_rank = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state, p.ssm_dt_rank
    n_seq_tokens = nt // ns
    n_rs = c.n_rs
    n_embd_r = (d_conv - 1) * d_inner
    n_embd_s = d_state * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))
    conv = reshape(build_rs(b, r_all, n_embd_r), d_conv - 1, d_inner, ns)
    cur = reshape(cur, cur.ne[0], n_seq_tokens, ns)
    xz = b.mm_s(f"blk.{il}.ssm_in.weight", cur)
    x = view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]))
    z = view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]))
    conv_x = concat(conv, transpose(x), 0)
    last = view(conv_x, (d_conv - 1, d_inner, ns), (conv_x.nb[1], conv_x.nb[2]))
    g.expand(cpy(last, view(r_all, (n_embd_r * ns,), ())))
    x = new("f32", (d_inner, n_seq_tokens, ns), "SSM_CONV", (conv_x, b.w(f"blk.{il}.ssm_conv1d.weight")))
    x = unary("UNARY", b.add_b(x, f"blk.{il}.ssm_conv1d.bias"))  # silu
    x_db = b.mm_s(f"blk.{il}.ssm_x.weight", x)
    dt = view(x_db, (dt_rank, n_seq_tokens, ns), (x_db.nb[1], x_db.nb[2]))
    B = view(x_db, (d_state, 1, n_seq_tokens, ns), (d_state * x_db.nb[0], x_db.nb[1], x_db.nb[2]))
    C = view(x_db, (d_state, 1, n_seq_tokens, ns), (d_state * x_db.nb[0], x_db.nb[1], x_db.nb[2]))
    norms = [b.w(f"blk.{il}.ssm_{n}_norm.weight") for n in ("dt", "b", "c")]
    if c.meta.get(f"{p.arch}.ssm.dt_b_c_rms") or all(w is not None for w in norms):  # falcon-mamba
        dt, B, C = (b.norm(t, w, il) for t, w in zip((dt, B, C), norms))
    else:
        dt = cont(dt)
    dt = b.add_b(b.mm_s(f"blk.{il}.ssm_dt.weight", dt), f"blk.{il}.ssm_dt.bias")
    skip = x
    x = reshape(x, 1, d_inner, n_seq_tokens, ns)
    A = b.w(f"blk.{il}.ssm_a")

    def scan(states, ids):
        ssm = reshape(states, d_state, 1, d_inner, states.ne[1])
        # ggml_ssm_scan(..., K = 1): the outputs, then one state per sequence
        return new("f32", (nelements(x) + n_embd_s * ids.ne[0],), "SSM_SCAN", (ssm, x, dt, A, B, C, ids))

    y_ssm = build_rs(b, s_all, n_embd_s, scan)
    g.expand(cpy(view(y_ssm, (n_embd_s * ns,), ()), view(s_all, (n_embd_s * ns,), ())))
    y = view(y_ssm, (d_inner, n_seq_tokens, ns), (x.nb[2], x.nb[3]))
    y = binary("ADD", y, binary("MUL", skip, b.w(f"blk.{il}.ssm_d")))
    y = glu_split(cont(z), y)
    cur = b.mm_s(f"blk.{il}.ssm_out.weight", y)
    return reshape(cur, cur.ne[0], n_seq_tokens * ns)
