"""``src/models/jamba.cpp`` for ``jamba`` (AI21 Jamba, Jamba 1.5/1.7 Mini): Mamba (v1) layers and, where
``head_count_kv[il]`` is not 0, attention layers without rope; after either, ``ffn_norm`` and a dense SwiGLU FFN or
softmax-routed experts (no weight normalisation, no scale).

The Mamba block is ``build_mamba_layer`` (``src/models/mamba-base.cpp``): ``ssm_in`` split into x and z, the
recurrent conv state gathered by ``build_rs`` and concatenated with x, ``ssm_conv`` + bias + SiLU, ``ssm_x`` split
into dt, B and C (each RMS-normed with ``ssm_dt_norm``/``ssm_b_norm``/``ssm_c_norm`` when the model has them, as
Jamba does; else dt is made contiguous), ``ssm_dt`` + bias, the selective scan over the gathered states (one head
per channel, ``A`` of d_state x d_inner), the D skip, the SwiGLU gate with z and ``ssm_out``.
"""

from __future__ import annotations

from ..builder import qkv
from ..ggml import binary, concat, cont, cpy, get_rows, glu_split, nelements, new, reshape, transpose, unary, view
from . import Family
from .mamba import build_rs


def mamba_layer(b, cur, il):
    """``build_mamba_layer`` with the recurrent-state input of ``build_rs``."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    d_conv, d_inner, d_state, dt_rank = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state, p.ssm_dt_rank
    n_seq_tokens = nt // ns
    n_rs = c.n_rs
    n_embd_r = (d_conv - 1) * d_inner
    n_embd_s = d_state * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))
    conv = build_rs(b, r_all, n_embd_r)
    conv = reshape(conv, d_conv - 1, d_inner, ns)
    cur = reshape(cur, cur.ne[0], n_seq_tokens, ns)
    xz = b.mm(f"blk.{il}.ssm_in.weight", cur)
    x = view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]))
    z = view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]))
    conv_x = concat(conv, transpose(x), 0)
    last = view(conv_x, (d_conv - 1, d_inner, ns), (conv_x.nb[1], conv_x.nb[2]))
    g.expand(cpy(last, view(r_all, ((d_conv - 1) * d_inner * ns,), ())))
    x = new("f32", (d_inner, n_seq_tokens, ns), "SSM_CONV", (conv_x, b.w(f"blk.{il}.ssm_conv1d.weight")))
    x = b.add_b(x, f"blk.{il}.ssm_conv1d.bias")
    x = unary("UNARY", x)  # silu
    x_db = b.mm(f"blk.{il}.ssm_x.weight", x)
    dt = view(x_db, (dt_rank, n_seq_tokens, ns), (x_db.nb[1], x_db.nb[2]))
    B = view(x_db, (d_state, 1, n_seq_tokens, ns), (d_state * 4, x_db.nb[1], x_db.nb[2]))
    C = view(x_db, (d_state, 1, n_seq_tokens, ns), (d_state * 4, x_db.nb[1], x_db.nb[2]))
    dt_norm = b.w(f"blk.{il}.ssm_dt_norm.weight")
    b_norm = b.w(f"blk.{il}.ssm_b_norm.weight")
    c_norm = b.w(f"blk.{il}.ssm_c_norm.weight")
    if dt_norm is not None and b_norm is not None and c_norm is not None:
        dt = b.norm(dt, dt_norm, il)
        B = b.norm(B, b_norm, il)
        C = b.norm(C, c_norm, il)
    else:
        dt = cont(dt)
    dt = b.mm(f"blk.{il}.ssm_dt.weight", dt)
    dt = b.add_b(dt, f"blk.{il}.ssm_dt.bias")
    skip = x
    x = reshape(x, 1, d_inner, n_seq_tokens, ns)
    A = b.w(f"blk.{il}.ssm_a")

    def scan(states, ids):
        ssm = reshape(states, d_state, 1, d_inner, states.ne[1])
        return new("f32", (nelements(x) + n_embd_s * ids.ne[0],), "SSM_SCAN", (ssm, x, dt, A, B, C, ids))

    y_ssm = build_rs(b, s_all, n_embd_s, scan)
    g.expand(cpy(view(y_ssm, (n_embd_s * ns,), ()), view(s_all, (n_embd_s * ns,), ())))
    y = view(y_ssm, (d_inner, n_seq_tokens, ns), (x.nb[2], x.nb[3]))
    y = binary("ADD", y, binary("MUL", skip, b.w(f"blk.{il}.ssm_d")))
    y = glu_split(cont(z), y)
    cur = b.mm(f"blk.{il}.ssm_out.weight", y)
    return reshape(cur, cur.ne[0], n_seq_tokens * ns)


def build(b):
    p = b.p
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_v
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if p.n_head_kv[il] == 0:
            cur = mamba_layer(b, cur, il)
        else:
            q, k, v = qkv(b, il, cur, hd, hd, hd)  # no rope
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        ffn_inp = binary("ADD", inpL, cur)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
            cur = b.ffn(cur, "ffn", il)
        else:
            cur = b.moe(cur, il, gating="softmax")
        inpL = binary("ADD", ffn_inp, cur)
    return b.output(inpL, out_ids)


# checked against llama-fit-params --fit-print (full-size Jamba-Mini-1.7: CPU and 1-3 RPC, -cmoe/-ncmoe, -ngl
# partial, -np 2-4, flash attention on/off, q8_0 KV, -ub 1024) and llama-server -lv 4 (tiny model):
# tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(name="jamba", build=build, exact=frozenset({"jamba"}))
