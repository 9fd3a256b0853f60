"""``src/models/qwen2vl.cpp``: the language model of Qwen2-VL / Qwen2.5-VL (the projector, ``--mmproj``, is a
separate model). The llama layer (Q/K/V with biases, attention scaled by 1/sqrt(head_dim), SwiGLU FFN) with
M-RoPE: ``ggml_rope_multi`` takes 4 positions per token (``n_pos_per_embd``), so ``inp_pos`` is ``4 * n_tokens``
long. (An ``output.bias``, which the loader accepts but no published file has, is not built.) Also the graph of
PaddleOCR-VL's text model (``src/models/paddleocr.cpp``: "same with qwen2vl.cpp, but bias tensors are optional",
on ERNIE 4.5's tensors)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    p = b.p
    inpL = b.inp_embd()
    pos = b.inp("inp_pos", "i32", (4 * b.nt,))  # M-RoPE: n_pos_per_embd = 4
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, p.head_dim_v)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="qwen2vl", build=build, exact=frozenset({"qwen2vl", "paddleocr"}))
