"""``src/models/rwkv7.cpp`` over ``src/models/rwkv7-base.cpp`` for ``rwkv7`` (RWKV-7 "Goose", the G1 models).

Every layer is recurrent and has no attention heads: LN0 (``token_embd_norm``, a layer norm pinned to layer 0)
after the embeddings, then per layer the two token shifts loaded from the ``r`` state (``token_shift_count *
n_embd`` per sequence, ``build_rwkv_token_shift_load``), a layer-normed time mix (a 6-way fused lerp over the
token shift, the decay / in-context-learning-rate / value-residual / gate LoRAs, ``RWKV_WKV7`` over the ``s``
state of ``n_embd * head_size`` per sequence, a group norm over the heads) and a layer-normed channel mix
(squared-ReLU FFN over its own token shift). The last layer gathers the output rows before its channel mix;
the output norm is a layer norm with bias.
"""

from __future__ import annotations

from ..ggml import (
    OUTPUT,
    T,
    binary,
    concat,
    cpy,
    dup,
    get_rows,
    mul_mat,
    ne4,
    new,
    reshape,
    sum_rows,
    unary,
    view,
)
from . import Family
from .mamba import build_rs


def layer_norm(b, x, wname, bname, il):
    """``build_norm(..., LLM_NORM, il)``: ``ggml_norm`` (not in place), the "norm" callback, weight and bias."""
    cur = dup(x, "NORM", (x,))
    b.force_norm(cur, il)
    cur = binary("MUL", cur, b.w(wname))
    return binary("ADD", cur, b.w(bname))


def weight_reshape(w, *ne):
    """``ggml_reshape`` of a weight: a view of it (weights carry no compute type, so the strides are its own)."""
    return T(w.ty, ne4(ne), w.nb, "RESHAPE", [w], w.vs if w.vs is not None else w)


def time_mix(b, cur, x_prev, first, il):
    """``build_rwkv7_time_mix``: returns the layer's output and the first layer's value (the value residual)."""
    p, g, ns = b.p, b.g, b.c.n_seqs
    nt = b.nt
    nst = nt // ns
    n_embd, hs = p.n_embd, p.wkv_head_size
    heads = n_embd // hs
    n_embd_s = n_embd * hs
    pre = f"blk.{il}."
    w_ = b.w
    gating = w_(pre + "time_mix_g1.weight") is not None and w_(pre + "time_mix_g2.weight") is not None

    sx = binary("SUB", x_prev, cur)
    sx = new("f32", (n_embd, nst, ns, 6 if gating else 5), "REPEAT", (sx,))
    xxx = binary("ADD", binary("MUL", sx, w_(pre + "time_mix_lerp_fused.weight")), cur)
    xr, xw, xk, xv, xa = (view(xxx, (n_embd, nt), (xxx.nb[1],)) for _ in range(5))
    xg = view(xxx, (n_embd, nt), (xxx.nb[1],)) if gating else None

    r = b.mm(pre + "time_mix_receptance.weight", xr)
    w = binary(
        "ADD",
        b.mm(pre + "time_mix_w2.weight", unary("UNARY", b.mm(pre + "time_mix_w1.weight", xw))),
        w_(pre + "time_mix_w0.weight"),
    )
    w = unary("UNARY", unary("SCALE", unary("UNARY", w)))
    k = b.mm(pre + "time_mix_key.weight", xk)
    v = b.mm(pre + "time_mix_value.weight", xv)
    if first is None:
        first = v
    else:
        mix = binary(
            "ADD",
            b.mm(pre + "time_mix_v2.weight", b.mm(pre + "time_mix_v1.weight", xv)),
            w_(pre + "time_mix_v0.weight"),
        )
        v = binary("ADD", v, binary("MUL", binary("SUB", first, v), unary("UNARY", mix)))
    gate = None
    if gating:
        gate = b.mm(pre + "time_mix_g2.weight", unary("UNARY", b.mm(pre + "time_mix_g1.weight", xg)))
    a = b.mm(pre + "time_mix_a2.weight", b.mm(pre + "time_mix_a1.weight", xa))
    a = unary("UNARY", binary("ADD", a, w_(pre + "time_mix_a0.weight")))

    kk = reshape(binary("MUL", k, w_(pre + "time_mix_k_k.weight")), hs, heads, nt)
    kk = dup(kk, "L2_NORM", (kk,))
    ka = binary("MUL", k, w_(pre + "time_mix_k_a.weight"))
    k = binary("ADD", k, binary("SUB", binary("MUL", a, ka), ka))

    r, w, k, v, a = (reshape(t, hs, heads, nt) for t in (r, w, k, v, a))

    s_all = b.s_caches[il]
    state = build_rs(b, s_all, n_embd_s)
    neg_kk = unary("UNARY", kk)
    kk_a = binary("MUL", kk, a)
    out = new("f32", (hs * heads, nt + hs * ns), "RWKV_WKV7", (r, w, k, v, neg_kk, kk_a, state))
    cur = view(out, (n_embd * nt,), ())
    new_state = view(out, (n_embd * hs * ns,), ())
    g.expand(cpy(new_state, view(s_all, (n_embd_s * ns,), ())))

    if w_(pre + "time_mix_ln.weight") is not None and w_(pre + "time_mix_ln.bias") is not None:
        cur = reshape(cur, n_embd // heads, heads, nt)
        cur = dup(cur, "NORM", (cur,))
        cur = reshape(cur, n_embd, nt)
        cur = binary("ADD", binary("MUL", cur, w_(pre + "time_mix_ln.weight")), w_(pre + "time_mix_ln.bias"))
    else:
        cur = reshape(cur, n_embd, nt)
    rk = binary("MUL", binary("MUL", k, r), weight_reshape(w_(pre + "time_mix_r_k.weight"), hs, heads))
    rk = sum_rows(rk)
    cur = binary("ADD", cur, reshape(binary("MUL", v, rk), n_embd, nt))
    if gating:
        cur = binary("MUL", cur, gate)
    cur = b.mm(pre + "time_mix_output.weight", cur)
    return reshape(cur, n_embd, nst, ns), first


def channel_mix(b, cur, x_prev, il):
    """``build_rwkv7_channel_mix``: lerp with the token shift, squared ReLU, value projection."""
    pre = f"blk.{il}."
    sx = binary("SUB", x_prev, cur)
    xk = binary("ADD", binary("MUL", sx, b.w(pre + "channel_mix_lerp_k.weight")), cur)
    k = unary("SQR", unary("UNARY", b.mm(pre + "channel_mix_key.weight", xk)))
    return b.mm(pre + "channel_mix_value.weight", k)


def build(b):
    p, g, c = b.p, b.g, b.c
    ns = c.n_seqs
    nt = b.nt
    nst = nt // ns
    n_embd = p.n_embd
    n_shift = p.token_shift_count
    n_embd_r = n_shift * n_embd
    n_embd_s = n_embd * p.wkv_head_size
    inpL = b.inp_embd()
    inpL = layer_norm(b, inpL, "token_embd_norm.weight", "token_embd_norm.bias", 0)
    out_ids = b.inp_out_ids()
    b.s_caches = {}
    first = None
    for il in b.layers:
        pre = f"blk.{il}."
        r_all = b.cache(il, "r", "f32", (n_embd_r, c.n_rs))
        b.s_caches[il] = b.cache(il, "s", "f32", (n_embd_s, c.n_rs))
        inpL = reshape(inpL, n_embd, nst, ns)
        shift = reshape(build_rs(b, r_all, n_embd_r), n_embd, n_shift, ns)
        att_shift = view(shift, (n_embd, 1, ns), (shift.nb[1], shift.nb[2]))
        ffn_shift = view(shift, (n_embd, 1, ns), (shift.nb[1], shift.nb[2]))
        att_norm = layer_norm(b, inpL, pre + "attn_norm.weight", pre + "attn_norm.bias", il)
        x_prev = concat(att_shift, view(att_norm, (n_embd, nst - 1, ns), (att_norm.nb[1], att_norm.nb[2])), 1)
        cur, first = time_mix(b, att_norm, x_prev, first, il)
        ffn_inp = binary("ADD", cur, inpL)
        ffn_norm = layer_norm(b, ffn_inp, pre + "attn_norm_2.weight", pre + "attn_norm_2.bias", il)
        x_prev = concat(ffn_shift, view(ffn_norm, (n_embd, nst - 1, ns), (ffn_norm.nb[1], ffn_norm.nb[2])), 1)
        shift = concat(
            view(att_norm, (n_embd, 1, ns), (att_norm.nb[1], att_norm.nb[2])),
            view(ffn_norm, (n_embd, 1, ns), (ffn_norm.nb[1], ffn_norm.nb[2])),
            1,
        )
        g.expand(cpy(view(shift, (n_embd * ns * n_shift,), ()), view(r_all, (n_embd_r * ns,), ())))
        ffn_inp = reshape(ffn_inp, n_embd, nt)
        ffn_norm = reshape(ffn_norm, n_embd, nt)
        x_prev = reshape(x_prev, n_embd, nt)
        if il == b.last:
            ffn_inp = get_rows(ffn_inp, out_ids)
            ffn_norm = get_rows(ffn_norm, out_ids)
            x_prev = get_rows(x_prev, out_ids)
        cur = channel_mix(b, ffn_norm, x_prev, il)
        inpL = binary("ADD", cur, ffn_inp)
    cur = layer_norm(b, inpL, "output_norm.weight", "output_norm.bias", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight"), cur)
    logits.flags = logits.fl0 = OUTPUT
    g.expand(logits)
    return logits


# checked against llama-fit-params --fit-print (rwkv7-1.5B-world, rwkv7-g1 2.9B and 7.2B: CPU and 1-3 RPC, -ts, -ngl 12/20,
# -np 1-8, -ub 256/1024, -fa off) and llama-server -lv 4 (tiny model, 1-2 RPC, -np 2/4)
FAMILY = Family(name="rwkv7", build=build, exact=frozenset({"rwkv7"}))
