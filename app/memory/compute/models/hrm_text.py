"""``src/models/hrm-text.cpp`` (HRM-Text): a low and a high stack of parameterless-norm decoder layers, run in
loops over the same tokens. Each high cycle runs the low stack ``l_cycles`` times, then the high stack once, and
every pass is a cache slot of its own (``n_layer`` = layers_per_stack x h_cycles x (l_cycles + 1)): slot ``s``
has its own KV cache on layer ``s``'s device, but reads the weights of its physical block (``blk.<bid>``, the
low stack's blocks 0..lps-1 or the high stack's lps..2 lps-1), which llama.cpp places by that block's number.
So a slot's ops follow its block's weights while its cache may sit on another device, and the scheduler copies
across: the replay builds every slot, the graph is not cut.

Per layer: RMS norm (no weight), a sigmoid gate projection of the normed input, Q/K/V, rope, attention without
an output projection, the gate applied, ``attn_output``, residual, RMS norm, SwiGLU FFN, residual; each stack
pass ends with a parameterless RMS norm. The low stack's input is ``zH + zL`` (``zL`` starts as the learned
``hrm.z_l_init``), the high stack's ``zH + zL``; the logits come from the last high pass with no output norm."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from . import Family


def slot_blocks(p) -> list[int]:
    """The physical block each cache slot reads (``load_arch_tensors``' aliasing): per high cycle, ``l_cycles``
    low passes over blocks 0..lps-1, then one high pass over lps..2 lps-1."""
    lps, h_cycles, l_cycles = p.hrm_stack
    out: list[int] = []
    for _h in range(h_cycles):
        for low in range(l_cycles + 1):
            base = lps if low == l_cycles else 0
            out.extend(base + il for il in range(lps))
    return out


def _stack(b, cur, pos, slot_base, bid_of):
    p = b.p
    lps = p.hrm_stack[0]
    hd = p.head_dim_k
    for il in range(lps):
        s = slot_base + il
        bid = bid_of[s]
        inp_sa = cur
        cur = b.norm(cur, None, s)
        gate = b.mm_s(f"blk.{bid}.attn_gate.weight", cur)
        q, k, v = qkv(b, bid, cur, hd, hd, p.head_dim_v)
        q, k = rope(q, pos), rope(k, pos)
        cur = b.attn(s, q, k, v, None, None)
        cur = binary("MUL", cur, unary("UNARY", gate))  # ggml_sigmoid
        cur = b.mm_s(f"blk.{bid}.attn_output.weight", cur)
        cur = binary("ADD", cur, inp_sa)
        inp_sa = cur
        cur = b.norm(cur, None, s)
        cur = b.ffn(cur, "ffn", bid)
        cur = binary("ADD", cur, inp_sa)
    return b.norm(cur, None, slot_base)


def build(b):
    p = b.p
    lps, h_cycles, l_cycles = p.hrm_stack
    bid_of = slot_blocks(p)
    z_h = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    z_l = b.w("hrm.z_l_init")
    for h in range(h_cycles):
        for low in range(l_cycles):
            z_l = _stack(b, binary("ADD", z_h, z_l), pos, (h * (l_cycles + 1) + low) * lps, bid_of)
        z_h = _stack(b, binary("ADD", z_h, z_l), pos, (h * (l_cycles + 1) + l_cycles) * lps, bid_of)
    cur = get_rows(z_h, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    out = b.w("output.weight") or b.w("token_embd.weight@output")
    logits = mul_mat(out, cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


FAMILY = Family(name="hrm_text", build=build, exact=frozenset({"hrm_text"}), uncut=True)
