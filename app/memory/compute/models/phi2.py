"""``src/models/phi2.cpp`` (Phi-2) and ``src/models/stablelm.cpp`` (StableLM 2, Stable Code): decoders with layer
norms with biases (``LLM_NORM``: ggml's NORM, never in place) and a partial rope (``rope.dimension_count`` below
the head: the op's result is still the whole head).

- phi2: a parallel block. One norm feeds Q/K/V (fused ``attn_qkv`` with its bias, or separate) and the FFN; Q
  roped then scaled by 1/sqrt(head_dim) (the attention scales by 1); on the last layer the attention output, the
  layer input and the normed input keep only the output rows; a GELU FFN over ``ffn_up`` with biases (no gate);
  layer output = attention + FFN + layer input; final norm with its bias, the head and its bias.
- stablelm: Q/K/V, per-head Q and K layer norms where the model has them (StableLM 2 12B), rope, attention scaled
  by 1/sqrt(head_dim); ``ffn_inp`` = attention + layer input; the SwiGLU FFN reads ``ffn_norm(ffn_inp)``, or, with
  no ``ffn_norm`` (a parallel residual, 12B), the attention's own normed input; on the last layer the attention
  output, the layer input and the normed input keep only the output rows; final norm with its bias, the head.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from . import Family


def _phi2(b, inpL, pos, out_ids):
    p = b.p
    hd = p.head_dim_k
    for il in b.layers:
        normed = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        q, k, v = qkv(b, il, normed, hd, hd, hd)
        q = unary("SCALE", rope(q, pos))
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
            normed = get_rows(normed, out_ids)
        ffn_out = b.ffn(normed, "ffn", il, act="gelu", par=False)
        cur = binary("ADD", cur, ffn_out)
        inpL = binary("ADD", cur, inpL)
    cur = b.norm(inpL, "output_norm.weight", -1, mb=b.w("output_norm.bias"))
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = b.add_b(mul_mat(b.w("output.weight"), cur), "output.bias")
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def _stablelm(b, inpL, pos, out_ids):
    p = b.p
    hd = p.head_dim_k
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        inpSA = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if b.w(f"blk.{il}.attn_q_norm.weight") is not None:
            q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        if b.w(f"blk.{il}.attn_k_norm.weight") is not None:
            k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpL)
        if b.w(f"blk.{il}.ffn_norm.weight") is not None:
            cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        else:
            cur = inpSA
        cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL)


def build(b):
    b.norm_op = "NORM"  # every build_norm in both graphs is LLM_NORM
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    return (_phi2 if b.p.arch == "phi2" else _stablelm)(b, inpL, pos, out_ids)


# checked against llama-fit-params --fit-print (full-size Phi-2, StableLM 2 1.6B and 12B on the CPU, 1-3 RPC
# devices and Vulkan0) and llama-server -lv 4 (tiny models): tests/memory/accuracy.py, test_accuracy_llama.py.
FAMILY = Family(name="phi2", build=build, exact=frozenset({"phi2", "stablelm"}))
