"""``src/models/qwen3vl.cpp`` and ``qwen3vlmoe.cpp``: the language model of Qwen3-VL (the projector, ``--mmproj``,
is a separate model).

The layer is Qwen3's (norm, Q/K/V, q/k RMS norms of head size, attention, residual, norm, SwiGLU FFN or softmax
top-k experts with normalised weights, residual) with IMRoPE: ``ggml_rope_multi`` takes 4 positions per token
(``n_pos_per_embd``), so ``inp_pos`` is ``4 * n_tokens`` long. Deepstack: ``n_embd_inp`` = ``n_embd * (1 +
n_deepstack_layers)`` (``llama_hparams::n_embd_inp``), so ``build_inp_embd`` makes the vector-embeddings input that
wide and pads the token rows to it (``ggml_pad``), selects the token path (the reserve's ubatch has tokens) and
views its first ``n_embd`` columns as the layer input; after each of the first ``n_deepstack_layers`` layers a
view of the next ``n_embd`` columns of the padded rows is added to the layer output, so the padded tensor stays
allocated until then.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, pad, view
from . import Family


def layer_kind(p, il):
    """A deepstack layer adds a view of the padded input rows, which its tensors do not show: the layer
    compression keeps every one of them (the padded rows stay allocated until the last)."""
    return il < p.n_deepstack_layers


def inp_embd_deepstack(b, n_ds):
    """``build_inp_embd`` for ``n_embd_inp`` > ``n_embd``: the layer input (``t_inp_embd``), a view of the first
    ``n_embd`` columns of the padded token rows."""
    p, nt, g = b.p, b.nt, b.g
    n_embd = p.n_embd
    n_embd_inp = n_embd * (1 + n_ds)
    tokens = b.inp("inp_tokens", "i32", (nt,))
    embd = b.inp("inp_embd", "f32", (n_embd_inp, nt))
    cur = get_rows(b.w("token_embd.weight"), tokens)
    cur = pad(cur, n_embd_inp - n_embd)
    g.expand(cur)  # ggml_build_forward_select: the token path (computed) ...
    g.expand(embd)  # ... and the vector path, a leaf that is never used
    cur = view(cur, (n_embd, nt), (cur.nb[1],))  # res->t_inp_embd
    g.expand(cur)
    return cur


def build(b):
    c, p = b.c, b.p
    nt = b.nt
    n_ds = p.n_deepstack_layers
    inpL = inp_embd_deepstack(b, n_ds) if n_ds > 0 else b.inp_embd()
    t_inp_embd = inpL
    pos = b.inp("inp_pos", "i32", (4 * nt,))  # IMRoPE: n_pos_per_embd = 4
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, p.head_dim_v)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        q = rope(q, pos)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            cur = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        else:
            cur = b.ffn(cur, "ffn", il)
        cur = binary("ADD", cur, ffn_inp)
        if il < n_ds:  # deepstack_out: the next n_embd columns of the input row
            ds = view(t_inp_embd, (p.n_embd, nt), (t_inp_embd.nb[1],))
            cur = binary("ADD", cur, ds)
        inpL = cur
    return b.output(inpL, out_ids)


FAMILY = Family(name="qwen3vl", build=build, exact=frozenset({"qwen3vl", "qwen3vlmoe"}), layer_kind=layer_kind)
