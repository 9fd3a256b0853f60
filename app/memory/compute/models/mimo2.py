"""``src/models/mimo2.cpp`` (Xiaomi MiMo-V2-Flash): pre-norm (``attn_norm``), Q/K/V (separate, or one fused
``attn_qkv`` split by views) with K heads of ``key_length`` and V heads of ``value_length``, KV heads per layer,
Q and K roped (partial rope, the sliding layers with their own base), attention over the
``llm_graph_input_attn_kv_iswa`` input with the layer's sinks where it has them, scaled by 1/sqrt(key head); the
attention output scaled by ``attention.value_scale`` where that is set (and not 1); out_ids rows in the last
layer; residual, ``ffn_norm``, a dense SwiGLU FFN where the layer has no router, else routed experts (sigmoid,
selection bias ``exp_probs_b``, normalised top-k weights; no shared expert); residual. The NextN/MTP blocks past
``block_count - nextn_predict_layers`` are ``TENSOR_SKIP`` and not in the graph (``embeddings_nextn`` is off, so
no ``t_h_nextn``).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hk, hv = p.head_dim_k, p.head_dim_v
    vs = c.meta.get(f"{c.arch}.attention.value_scale")
    v_scale = vs is not None and float(vs) not in (0.0, 1.0)
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hk, hk, hv)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(
            il,
            q,
            k,
            v,
            b.w(f"blk.{il}.attn_output.weight"),
            None,
            sinks=b.w(f"blk.{il}.attn_sinks.weight"),
            iswa_order=True,
        )
        if v_scale:
            cur = unary("SCALE", cur)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
            cur = b.ffn(cur, "ffn", il)
        else:
            cur = b.moe(
                cur, il, gating="sigmoid", norm_w=True, w_scale=False, probs_b=b.w(f"blk.{il}.exp_probs_b.bias")
            )
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


# checked against llama-fit-params --fit-print (full-size MiMo-V2-Flash: CPU and 1-3 RPC devices, -ngl 20, -ts,
# -cmoe/-ncmoe, -np 2/4, flash attention on/off, q8_0 KV, -ub 1024, --swa-full) and llama-server -lv 4 (tiny
# model with sinks, a value scale, K/V heads of different widths and a NextN block): tests/memory/accuracy.py,
# test_accuracy_llama.py
FAMILY = Family(name="mimo2", build=build, exact=frozenset({"mimo2"}))
