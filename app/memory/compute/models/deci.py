"""``src/models/deci.cpp`` (Llama-3.1/3.3-Nemotron Super 49B and Ultra 253B, Nemotron-51B: NAS-pruned Llamas):
the llama layer with per-layer shapes (``head_count``, ``head_count_kv`` and ``feed_forward_length`` arrays).

- ``head_count`` 0: no attention, the layer input goes on as it is (no norm either).
- ``head_count`` > 0 and ``head_count_kv`` 0 ("linear" attention): the normed input through ``attn_output``
  alone, no cache.
- otherwise Q/K/V, rope (with ``rope_freqs``), attention scaled by ``attention.scale`` or 1/sqrt(head_dim).
- on the last layer the attention output and the layer input keep only the output rows.
- ``feed_forward_length`` 0: the layer ends here without updating the residual stream (deci.cpp's ``continue``:
  the attention's result is dropped; its Q/K/V and cache writes stay in the graph, expanded by build_attn).
- the FFN input is attention + layer input, or the layer input itself when the layer has no attention; RMS norm,
  SwiGLU (optional biases), residual.
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
        n_head, n_head_kv, n_ff = p.n_head[il], p.n_head_kv[il], p.n_ff[il]
        cur = inpL if n_head == 0 else b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if n_head > 0 and n_head_kv == 0:
            cur = mul_mat(b.w(f"blk.{il}.attn_output.weight"), cur)
        elif n_head > 0:
            q, k, v = qkv(b, il, cur, hd, hd, hd)
            freqs = b.w("rope_freqs.weight")
            q = rope(q, pos, freqs)
            k = rope(k, pos, freqs)
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        if n_ff == 0:
            continue
        ffn_inp = binary("ADD", cur, inpSA) if n_head > 0 else cur
        if f"blk.{il}.ffn_gate_inp.weight" not in c.names:
            cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
            cur = b.ffn(cur, "ffn", il)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (full-size Llama-3.3-Nemotron-Super-49B shapes on the CPU, 1-3 RPC
# devices and Vulkan0) and llama-server -lv 4 (tiny model with every kind of layer): tests/memory/accuracy.py,
# test_accuracy_llama.py. Built uncut: the layer shapes vary from layer to layer.
FAMILY = Family(name="deci", build=build, exact=frozenset({"deci"}), uncut=True)
