"""``src/models/cohere2moe.cpp`` (Cohere2 MoE, North Mini Code): a parallel block. One pre-norm (``attn_norm``,
RMS or plain layer norm) feeds both the attention and the FFN. Q/K/V (separate or fused), roped on the sliding
layers and on the ``leading_dense_block_count`` first layers (the other global layers take no position
encoding), attention over the ``llm_graph_input_attn_kv_iswa`` input scaled by 1/sqrt(head_dim); a dense SwiGLU
FFN on the leading layers, else routed experts (``expert_gating_func``, sigmoid when unset, optionally normalised
and scaled top-k weights) plus, where there is one, the ungated shared expert averaged in (add, scale 0.5). The
layer output is FFN + layer input + attention output. The last layer keeps every token (no ``out_ids`` rows
there, ``embeddings_nextn_masked`` is off): the final norm runs on all tokens (``t_h_nextn``, a graph output),
then the output rows are picked, the head applied and the logits scaled by ``logit_scale``. The NextN/MTP block
past ``block_count - nextn_predict_layers`` is ``TENSOR_SKIP`` and not in the graph.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, unary
from ..mtp import mtp_input
from . import Family


def _block(b, inpL, il, pos, gating, mtp=False):
    """One parallel block; in ``graph_mtp`` (``mtp``) every projection is roped and the FFN is the experts."""
    c, p = b.c, b.p
    hd = p.head_dim_k
    cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
    ffn_inp = cur
    q, k, v = qkv(b, il, cur, hd, hd, hd)
    if mtp or c.is_swa(il) or il < p.n_layer_dense_lead:
        q = rope(q, pos)
        k = rope(k, pos)
    attn_out = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=True)
    if not mtp and b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
        cur = b.ffn(ffn_inp, "ffn", il)
    else:
        cur = b.moe(
            ffn_inp,
            il,
            gating=gating,
            norm_w=c.expert_weights_norm,
            w_scale=c.expert_weights_scale,
        )
        if b.w(f"blk.{il}.ffn_up_shexp.weight") is not None:
            sh = b._ffn_named(ffn_inp, il, "shexp")
            cur = unary("SCALE", binary("ADD", cur, sh))
    cur = binary("ADD", cur, inpL)
    return binary("ADD", cur, attn_out)


def _norm_op(b):
    """cohere2moe_norm_type: LLM_NORM_RMS when the model has an RMS epsilon, else LLM_NORM (a layer norm)."""
    return "RMS_NORM" if b.c.meta.get(f"{b.p.arch}.attention.layer_norm_rms_epsilon") else "NORM"


def build_mtp(b):
    """``graph_mtp`` of cohere2moe.cpp (one NextN block only, the graph asserts it):
    :func:`~app.memory.compute.mtp.mtp_input`, a parallel block (rope on Q/K, the routed experts and the averaged
    shared expert) on the MTP context's iswa cache, then the head norm on every token (``h_nextn``), the output
    rows, the LM head and the logit scale."""
    c = b.c
    b.norm_op = _norm_op(b)
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    cur = _block(b, cur, il, pos, c.gating, mtp=True)
    head_norm = f"blk.{il}.nextn.shared_head_norm.weight"
    h = b.norm(cur, head_norm if head_norm in c.names else "output_norm.weight", -1)
    h.flags = h.fl0 = OUTPUT  # h_nextn
    cur = get_rows(h, out_ids)
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight") or b.w("token_embd.weight@output")
    logits = mul_mat(head, cur)
    if c.logit_scale:
        logits = unary("SCALE", logits)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def build(b):
    c = b.c
    b.norm_op = _norm_op(b)
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    gating = c.gating
    for il in b.layers:
        inpL = _block(b, inpL, il, pos, gating)
    h = b.norm(inpL, "output_norm.weight", -1)
    h.flags = h.fl0 = OUTPUT  # t_h_nextn
    cur = get_rows(h, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    if c.logit_scale:
        logits = unary("SCALE", logits)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


# checked against llama-fit-params --fit-print (full-size North Mini Code: CPU and 1-3 RPC devices, -ngl partial,
# -ts, -cmoe/-ncmoe, -np 2/4, flash attention on/off, q8_0 KV, -ub 1024, --swa-full) and llama-server -lv 4 (tiny
# model with a shared expert and a NextN block): tests/memory/accuracy.py, test_accuracy_llama.py.
# Built uncut: the residual stream of the parallel block alternates between two buffers from layer to layer, and
# dropping an odd number of repeated layers (compress.py's neighbourhood pass) put the output 4 MiB lower on a
# device holding the last layers and the output (North Mini Code CPU -c 8192: 532.5 MiB vs llama.cpp's 536).
FAMILY = Family(
    name="cohere2moe",
    build=build,
    exact=frozenset({"cohere2moe"}),
    uncut=True,
    build_mtp=build_mtp,
    mtp_exact=frozenset({"cohere2moe"}),
)
