"""``src/models/mamba.cpp`` for ``mamba2``: norm, a Mamba2 block (``build_mamba2_layer``), residual; no FFN."""

from __future__ import annotations

from ..ggml import binary, get_rows
from . import Family
from .mamba import mamba2_layer


def build(b):
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        cur = mamba2_layer(b, cur, il)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        inpL = binary("ADD", cur, inpL)
    return b.output(inpL, out_ids)


# Not exact yet: on the last of 2+ pipelined devices with -np 4 or 8, llama.cpp's compute buffer is 0.23-1.23 MiB
# larger (tests/memory/accuracy.py MAMBA2_NP); every other compared placement matches to the MiB.
FAMILY = Family(name="mamba2", build=build, exact=frozenset(), also=frozenset({"mamba2"}))
