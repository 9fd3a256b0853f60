"""``src/models/rwkv6.cpp`` over ``src/models/rwkv6-base.cpp`` for ``rwkv6`` (RWKV-6 "Finch").

The RWKV-7 layer's frame (LN0 pinned to layer 0, two token shifts from the ``r`` state, layer-normed time and
channel mixes, the output rows gathered before the last channel mix; see :mod:`.rwkv7`) around RWKV-6's mixes:
the data-dependent lerp (``time_mix_lerp_x``, a 5-way LoRA ``time_mix_w1``/``w2`` and the fused lerp), the decay
LoRA, ``RWKV_WKV6`` with ``time_mix_first`` over the ``s`` state, a group norm and a SiLU gate; the channel mix
has a sigmoid receptance. Every ``rescale_every_n_layers`` layers the output is halved (a SCALE).

``src/models/rwkv6qwen2.cpp`` for ``rwkv6qwen2`` (QRWKV6: Qwen2.5 with its attention replaced by RWKV-6 time
mixing) keeps ARWKV-7's frame (:mod:`.arwkv7`: RMS norms, one token shift, Qwen2's SwiGLU FFN, no LN0) around
the same time mix in its "QRWKV" form (no ``time_mix_first``): optional ``r``/``k``/``v`` biases, a sigmoid
gate, ``k`` and ``v`` repeated over the heads when ``head_count_kv`` (GQA) is fewer than ``n_embd /
head_size``, ``k * (1 - w)``, ``GATED_LINEAR_ATTN`` instead of ``RWKV_WKV6`` and no group norm.
"""

from __future__ import annotations

from ..ggml import OUTPUT, binary, concat, cont, cpy, dup, get_rows, mul_mat, new, permute, reshape, unary, view
from . import Family
from .arwkv7 import frame
from .mamba import build_rs
from .rwkv7 import layer_norm, weight_reshape


def time_mix(b, cur, x_prev, il):
    """``build_rwkv6_time_mix``: RWKV-6 proper with ``time_mix_first``, the QRWKV form (rwkv6qwen2) without."""
    p, g, ns, nt = b.p, b.g, b.c.n_seqs, b.nt
    nst = nt // ns
    n_embd, hs = p.n_embd, p.wkv_head_size
    heads = n_embd // hs
    n_embd_s = n_embd * hs
    pre = f"blk.{il}."
    w_ = b.w
    sx = reshape(binary("SUB", x_prev, cur), n_embd, nt)
    cur = reshape(cur, n_embd, nt)
    xxx = binary("ADD", binary("MUL", sx, w_(pre + "time_mix_lerp_x.weight")), cur)
    w1 = w_(pre + "time_mix_w1.weight")
    xxx = reshape(unary("UNARY", mul_mat(w1, xxx)), w1.ne[1] // 5, 1, 5, nt)
    xxx = cont(permute(xxx, 0, 1, 3, 2))
    w2 = w_(pre + "time_mix_w2.weight")
    xxx = mul_mat(weight_reshape(w2, w2.ne[0], w2.ne[1], 1, 5), xxx)
    fused = w_(pre + "time_mix_lerp_fused.weight")
    if fused is not None:
        sx = reshape(sx, n_embd, 1, nt)
        cur = reshape(cur, n_embd, 1, nt)
        xxx = binary("ADD", binary("MUL", binary("ADD", xxx, fused), sx), cur)
        xw, xk, xv, xr, xg = (view(xxx, (n_embd, nt), (xxx.nb[1],)) for _ in range(5))
    else:  # the separate lerps of old conversions
        parts = []
        for x in "wkvrg":
            t = view(xxx, (n_embd, nt), (xxx.nb[1],))
            parts.append(binary("ADD", binary("MUL", binary("ADD", t, w_(pre + f"time_mix_lerp_{x}.weight")), sx), cur))
        xw, xk, xv, xr, xg = parts
    qrwkv = w_(pre + "time_mix_first.weight") is None
    r = b.mm(pre + "time_mix_receptance.weight", xr)
    k = b.mm(pre + "time_mix_key.weight", xk)
    v = b.mm(pre + "time_mix_value.weight", xv)
    r = b.add_b(r, pre + "time_mix_receptance.bias")
    k = b.add_b(k, pre + "time_mix_key.bias")
    v = b.add_b(v, pre + "time_mix_value.bias")
    gate = unary("UNARY", b.mm(pre + "time_mix_gate.weight", xg))  # sigmoid (QRWKV) or SiLU
    n_head_kv = p.n_head_kv[il] if p.n_head_kv else 0
    if n_head_kv and n_head_kv != heads:  # GQA: k, v repeated to the heads (ggml_repeat onto a shape-only tensor)
        k = new("f32", (hs, heads // n_head_kv, n_head_kv, nt), "REPEAT", (reshape(k, hs, 1, n_head_kv, nt),))
        v = new("f32", (hs, heads // n_head_kv, n_head_kv, nt), "REPEAT", (reshape(v, hs, 1, n_head_kv, nt),))
    k, v, r = (reshape(t, hs, heads, nt) for t in (k, v, r))
    w = b.mm(pre + "time_mix_decay_w2.weight", unary("UNARY", b.mm(pre + "time_mix_decay_w1.weight", xw)))
    w = binary("ADD", w, w_(pre + "time_mix_decay.weight"))
    w = unary("UNARY", unary("UNARY", unary("UNARY", w)))
    w = reshape(w, hs, heads, nt)
    if qrwkv:
        k = binary("SUB", k, binary("MUL", k, w))
    s_all = b.s_caches[il]
    state = build_rs(b, s_all, n_embd_s)
    if qrwkv:
        out = new("f32", (hs * heads, nt + hs * ns), "GATED_LINEAR_ATTN", (k, v, r, w, state))
    else:
        out = new(
            "f32", (hs * heads, nt + hs * ns), "RWKV_WKV6", (k, v, r, w_(pre + "time_mix_first.weight"), w, state)
        )
    cur = view(out, (n_embd * nt,), ())
    g.expand(cpy(view(out, (n_embd * hs * ns,), ()), view(s_all, (n_embd_s * ns,), ())))
    if not qrwkv:
        cur = reshape(cur, n_embd // heads, heads, nt)
        cur = dup(cur, "NORM", (cur,))
        cur = reshape(cur, n_embd, nt)
        cur = binary("ADD", binary("MUL", cur, w_(pre + "time_mix_ln.weight")), w_(pre + "time_mix_ln.bias"))
    else:
        cur = reshape(cur, n_embd, nt)
    cur = binary("MUL", cur, gate)
    cur = b.mm(pre + "time_mix_output.weight", cur)
    return reshape(cur, n_embd, nst, ns)


def channel_mix(b, cur, x_prev, il):
    """``build_rwkv6_channel_mix``: two lerps, a sigmoid receptance times the squared-ReLU FFN."""
    pre = f"blk.{il}."
    sx = binary("SUB", x_prev, cur)
    xk = binary("ADD", binary("MUL", sx, b.w(pre + "channel_mix_lerp_k.weight")), cur)
    xr = binary("ADD", binary("MUL", sx, b.w(pre + "channel_mix_lerp_r.weight")), cur)
    r = unary("UNARY", b.mm(pre + "channel_mix_receptance.weight", xr))
    k = unary("SQR", unary("UNARY", b.mm(pre + "channel_mix_key.weight", xk)))
    return binary("MUL", r, b.mm(pre + "channel_mix_value.weight", k))


def build_qwen2(b):
    """``llama_model_rwkv6qwen2::graph``: :func:`.arwkv7.frame` around :func:`time_mix`."""
    return frame(b, lambda b, cur, x_prev, state, il: (time_mix(b, cur, x_prev, il), state))


def build(b):
    if b.p.arch == "rwkv6qwen2":
        return build_qwen2(b)
    p, g, c = b.p, b.g, b.c
    ns, nt = c.n_seqs, b.nt
    nst = nt // ns
    n_embd = p.n_embd
    n_shift = p.token_shift_count
    n_embd_r = n_shift * n_embd
    n_embd_s = n_embd * p.wkv_head_size
    rescale = int(c.meta.get(f"{p.arch}.rescale_every_n_layers", 0) or 0)
    inpL = layer_norm(b, b.inp_embd(), "token_embd_norm.weight", "token_embd_norm.bias", 0)
    out_ids = b.inp_out_ids()
    b.s_caches = {}
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
        cur = time_mix(b, att_norm, x_prev, il)
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
        cur = binary("ADD", channel_mix(b, ffn_norm, x_prev, il), ffn_inp)
        if rescale and (il + 1) % rescale == 0:
            cur = unary("SCALE", cur)
        inpL = cur
    cur = layer_norm(b, inpL, "output_norm.weight", "output_norm.bias", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight"), cur)
    logits.flags = logits.fl0 = OUTPUT
    g.expand(logits)
    return logits


# checked against llama-fit-params --fit-print (v6-Finch-3B and 7B: CPU and 1-3 RPC, -ts, -ngl 20, -np 1-4, -ub 1024,
# -fa off) and llama-server -lv 4 (tiny model, 1-2 RPC, -np 2/4)
FAMILY = Family(name="rwkv6", build=build, exact=frozenset({"rwkv6", "rwkv6qwen2"}))
