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
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from ..mtp import mtp_input
from . import Family


def _v_scale(c):
    vs = c.meta.get(f"{c.arch}.attention.value_scale")
    return vs is not None and float(vs) not in (0.0, 1.0)


def build_mtp(b):
    """``graph_mtp`` of mimo2.cpp: the NextN block ``cparams.nextn_layer_offset`` selects (0 when the context
    reserves: the first; the draft loop chains the others through the same context), after
    :func:`~app.memory.compute.mtp.mtp_input`: the fused ``attn_qkv`` (the graph requires it) split by views,
    rope, attention with the block's sinks on the MTP context's iswa cache and ``attn_output``, the value scale,
    residual, ``ffn_norm``, the dense FFN, residual; the output rows (``h_nextn``, pre-norm), then the head norm
    (``nextn.shared_head_norm``, ``layer_output_norm`` or ``output_norm``) and the LM head on those rows."""
    c, p = b.c, b.p
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
    q = rope(q, pos)
    k = rope(k, pos)
    wo = b.w(f"blk.{il}.attn_output.weight")
    cur = b.attn(il, q, k, v, wo, None, sinks=b.w(f"blk.{il}.attn_sinks.weight"), iswa_order=True)
    if _v_scale(c):
        cur = unary("SCALE", cur)
    ffn_inp = binary("ADD", cur, inpSA)
    cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
    cur = binary("ADD", b.ffn(cur, "ffn", il), ffn_inp)
    cur = get_rows(cur, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # h_nextn
    norm = next(
        (n for n in (f"blk.{il}.nextn.shared_head_norm.weight", f"blk.{il}.layer_output_norm.weight") if n in c.names),
        "output_norm.weight",
    )
    cur = b.norm(cur, norm, -1)
    logits = mul_mat(b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight"), cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hk, hv = p.head_dim_k, p.head_dim_v
    v_scale = _v_scale(c)
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
FAMILY = Family(
    name="mimo2", build=build, exact=frozenset({"mimo2"}), build_mtp=build_mtp, mtp_exact=frozenset({"mimo2"})
)
