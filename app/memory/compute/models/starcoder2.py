"""``src/models/starcoder2.cpp`` (StarCoder2 3B/7B/15B): a pre-norm decoder with layer norms (``LLM_NORM`` with
biases: ggml's NORM, never in place), Q/K/V with biases, NeoX rope, attention over a plain KV cache (the model's
sliding window is not read by llama.cpp) scaled by 1/sqrt(head_dim), the output projection's bias; on the last
layer the attention output and the residual keep only the output rows; the FFN is GELU over ``ffn_up`` (no gate,
``LLM_FFN_SEQ``) with biases; final layer norm with its bias, then the head (``output.weight``, else the token
embedding duplicated).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    p = b.p
    b.norm_op = "NORM"  # every build_norm here is LLM_NORM
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        cur = b.ffn(cur, "ffn", il, act="gelu", par=False)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (full-size StarCoder2 3B (tied head) and 15B on the CPU, 1-3 RPC
# devices and Vulkan0: -ngl partial, -ts, -np 2, flash attention on/off, q8_0 KV, -ub 1024) and llama-server
# -lv 4 (tiny model): tests/memory/accuracy.py, test_accuracy_llama.py.
FAMILY = Family(name="starcoder2", build=build, exact=frozenset({"starcoder2"}))
