"""``src/models/falcon-h1.cpp`` for ``falcon-h1`` (Falcon-H1 0.5B-34B): attention and a Mamba2 block side by side in
every layer.

Each layer norms its input twice with the same ``attn_norm`` (two RMS norms, one for each branch), runs Q/K/V with
(NeoX) rope and the KV cache's attention on the one and ``build_mamba2_layer`` on the other, adds the two outputs and
the residual, then a SwiGLU FFN behind ``ffn_norm`` and its residual. On the last layer llama.cpp picks the output
rows of the layer output and of the residual, but only the residual's pick feeds what follows (the other is
overwritten before use, so it is not in the graph). Every layer is recurrent and has a KV cache (the hybrid memory's
two layer filters both accept every layer).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family
from .mamba import mamba2_layer


def build(b):
    p = b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_v
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(q, pos)
        k = rope(k, pos)
        attn_out = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        ssm_out = mamba2_layer(b, cur, il)
        cur = binary("ADD", attn_out, ssm_out)
        inpSA = binary("ADD", cur, inpSA)
        if il == b.last:
            inpSA = get_rows(inpSA, out_ids)
        cur = b.norm(inpSA, f"blk.{il}.ffn_norm", il)  # named without ".weight" by the loader
        cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, inpSA)
    return b.output(inpL, out_ids)


# checked against llama-fit-params --fit-print (full-size Falcon-H1-7B and -1.5B: CPU and 1-3 RPC, -ngl partial, -np
# 2-4, flash attention on/off, q8_0 KV, -ub 256/1024) and llama-server -lv 4 (tiny model): tests/memory/accuracy.py,
# test_accuracy_llama.py
FAMILY = Family(name="falcon_h1", build=build, exact=frozenset({"falcon-h1"}))
