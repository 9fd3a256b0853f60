"""``src/models/mamba.cpp``: norm, a Mamba2 block (``build_mamba2_layer``) for ``mamba2``, a Mamba 1 block
(``build_mamba_layer``) for ``mamba`` (Mamba 1, Falcon Mamba), residual; no FFN."""

from __future__ import annotations

from ..ggml import binary, get_rows
from . import Family
from .mamba import mamba2_layer, mamba_layer


def build(b):
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        cur = mamba2_layer(b, cur, il) if b.p.arch == "mamba2" else mamba_layer(b, cur, il)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        inpL = binary("ADD", cur, inpL)
    return b.output(inpL, out_ids)


# checked against llama-fit-params --fit-print (mamba2-2.7b, Mamba-Codestral-7B: CPU and 1-3 RPC, -np 1-8, -ngl 40)
# and llama-server -lv 4; the -np 4/8 difference once seen on the last pipelined device came from the layer
# compression, which recurrent graphs no longer get (app/memory/compute/core.py, "uncut")
FAMILY = Family(name="mamba2", build=build, exact=frozenset({"mamba2", "mamba"}))
