"""``src/models/jamba.cpp`` for ``jamba`` (AI21 Jamba, Jamba 1.5/1.7 Mini): Mamba (v1) layers and, where
``head_count_kv[il]`` is not 0, attention layers without rope; after either, ``ffn_norm`` and a dense SwiGLU FFN or
softmax-routed experts (no weight normalisation, no scale).

The Mamba block is ``build_mamba_layer`` (``src/models/mamba-base.cpp``, :func:`.mamba.mamba_layer`): ``ssm_in`` split into x and z, the
recurrent conv state gathered by ``build_rs`` and concatenated with x, ``ssm_conv`` + bias + SiLU, ``ssm_x`` split
into dt, B and C (each RMS-normed with ``ssm_dt_norm``/``ssm_b_norm``/``ssm_c_norm`` when the model has them, as
Jamba does; else dt is made contiguous), ``ssm_dt`` + bias, the selective scan over the gathered states (one head
per channel, ``A`` of d_state x d_inner), the D skip, the SwiGLU gate with z and ``ssm_out``.
"""

from __future__ import annotations

from ..builder import qkv
from ..ggml import binary, get_rows
from . import Family
from .mamba import mamba_layer


def build(b):
    p = b.p
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_v
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if p.n_head_kv[il] == 0:
            cur = mamba_layer(b, cur, il)
        else:
            q, k, v = qkv(b, il, cur, hd, hd, hd)  # no rope
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        ffn_inp = binary("ADD", inpL, cur)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
            cur = b.ffn(cur, "ffn", il)
        else:
            cur = b.moe(cur, il, gating="softmax")
        inpL = binary("ADD", ffn_inp, cur)
    return b.output(inpL, out_ids)


# checked against llama-fit-params --fit-print (full-size Jamba-Mini-1.7: CPU and 1-3 RPC, -cmoe/-ncmoe, -ngl
# partial, -np 2-4, flash attention on/off, q8_0 KV, -ub 1024) and llama-server -lv 4 (tiny model):
# tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(name="jamba", build=build, exact=frozenset({"jamba"}))
