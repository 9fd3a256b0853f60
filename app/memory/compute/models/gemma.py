"""``src/models/gemma.cpp`` (Gemma 2B/7B, CodeGemma): embeddings scaled by sqrt(n_embd), RMS pre-norms, Q/K roped
then Q scaled by 1/sqrt(head_dim) (the attention itself scales by 1), a plain KV cache; on the last layer the
attention output and the residual keep only the output rows; gated GELU FFN; final RMS norm and the head, always
the token embedding duplicated (``TENSOR_DUPLICATED``), without soft-capping (gemma2's graph adds it, and post
norms).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, unary
from . import Family


def build(b):
    p = b.p
    inpL = unary("SCALE", b.inp_embd())  # sqrt(n_embd)
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = unary("SCALE", rope(q, pos))
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        sa_out = binary("ADD", cur, inpL)
        cur = b.norm(sa_out, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il, act="gelu")
        inpL = binary("ADD", cur, sa_out)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (full-size Gemma 2B (one KV head) and 7B on the CPU, 1-3 RPC
# devices and Vulkan0: -ngl partial, -ts, -np 2, flash attention on/off, q8_0 KV, -ub 1024) and llama-server
# -lv 4 (tiny model): tests/memory/accuracy.py, test_accuracy_llama.py.
FAMILY = Family(name="gemma", build=build, exact=frozenset({"gemma"}))
