"""``src/models/arwkv7.cpp`` for ``arwkv7`` (ARWKV-7: Qwen2.5 with its attention replaced by RWKV-7 time mixing).

Every layer is recurrent, without attention heads or LN0: RMS norm, one token shift (``token_shift_count`` 1)
loaded from the ``r`` state, ``build_rwkv7_time_mix`` (:func:`~app.memory.compute.models.rwkv7.time_mix`, the gate
and group norm optional), the new token shift stored, the residual; the last layer gathers its output rows, then
an RMS-normed SwiGLU FFN and the residual; an RMS output norm.
"""

from __future__ import annotations

from ..ggml import binary, concat, cpy, get_rows, reshape, view
from . import Family
from .mamba import build_rs
from .rwkv7 import time_mix


def build(b):
    return frame(b, time_mix)


def frame(b, mix):
    """The ARWKV-7 layer frame around ``mix(b, normed, x_prev, state, il) -> (out, state)`` (the time mix;
    ``state`` is what one layer's mix hands the next, RWKV-7's first-layer value; QRWKV6 uses the frame too)."""
    p, g, c = b.p, b.g, b.c
    ns = c.n_seqs
    nt = b.nt
    nst = nt // ns
    n_embd = p.n_embd
    n_embd_r = p.token_shift_count * n_embd  # arwkv7.cpp asserts n_embd == n_embd_r
    n_embd_s = n_embd * p.wkv_head_size
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    b.s_caches = {}
    first = None
    for il in b.layers:
        r_all = b.cache(il, "r", "f32", (n_embd_r, c.n_rs))
        b.s_caches[il] = b.cache(il, "s", "f32", (n_embd_s, c.n_rs))
        inpL = reshape(inpL, n_embd, nst, ns)
        shift = reshape(build_rs(b, r_all, n_embd_r), n_embd, p.token_shift_count, ns)
        att_norm = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        x_prev = concat(shift, view(att_norm, (n_embd, nst - 1, ns), (att_norm.nb[1], att_norm.nb[2])), 1)
        cur, first = mix(b, att_norm, x_prev, first, il)
        shift = view(att_norm, (n_embd, 1, ns), (att_norm.nb[1], att_norm.nb[2]))
        g.expand(cpy(view(shift, (n_embd * ns * p.token_shift_count,), ()), view(r_all, (n_embd_r * ns,), ())))
        ffn_inp = reshape(binary("ADD", cur, inpL), n_embd, nt)
        if il == b.last:
            ffn_inp = get_rows(ffn_inp, out_ids)  # (the get_rows of cur there is never used)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (ARWKV-7B-Preview-0.1 without the gate, ARWKV-R1-1B5 with it: CPU and
# 1-3 RPC, -ts, -ngl 16, -np 2-8, -ub 1024, -fa off) and llama-server -lv 4 (tiny model, 1-2 RPC, -np 2/4)
FAMILY = Family(name="arwkv7", build=build, exact=frozenset({"arwkv7"}))
