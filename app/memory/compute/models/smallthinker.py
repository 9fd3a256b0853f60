"""``src/models/smallthinker.cpp``: the router reads the layer input, not the FFN input.

Each layer first computes the router logits from ``inpL`` (``ffn_gate_inp``, before the attention norm; on the
last layer they are cut to the output rows with the residual), then RMS norm, Q/K/V (no biases, no q/k norms),
rope, attention, residual, FFN norm and routed experts only: ReGLU (``LLM_FFN_RELU`` with a gate), top-k weights
always normalised, the file's gating (softmax for the 21B, sigmoid for the 4B), no shared expert. With a sliding
window (the 21B: ``sliding_window`` > 0, width forced to 4096, 3 of every 4 layers with layer 0 full) the full
layers skip rope (``n_no_rope_layer_step`` = 4: layers 0, 4, 8, ... are NoPE); without one every layer ropes.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, mul_mat
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        use_rope = not c.has_swa or il % 4 != 0
        probs = mul_mat(b.w(f"blk.{il}.ffn_gate_inp.weight"), inpL)
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if use_rope:
            q = rope(q, pos)
            k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
            probs = get_rows(probs, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.moe(cur, il, gating=c.gating, norm_w=True, w_scale=c.expert_weights_scale, probs_in=probs)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="smallthinker", build=build, exact=frozenset({"smallthinker"}))
