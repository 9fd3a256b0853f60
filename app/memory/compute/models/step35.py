"""``src/models/step35.cpp`` (StepFun Step-3.5-Flash): per layer ``attn_norm``; the 2-D Q/K/V projections
(``build_qkv(..., reshape=false)``) reshaped to the layer's own head count (the sliding layers have more query
heads than the full ones); Q and K RMS-normed over the head; rope on every layer (the full layers rotate half the
head with the ``rope_freqs`` factors when the model has them, ``TENSOR_DUPLICATED`` so each layer reads the copy on
its own device; the sliding ones the whole head, without factors); attention over the
``llm_graph_input_attn_kv_iswa`` input with no output projection; then, from the same normed input, the head-wise
gate ``attn_gate`` (one value per head): ``attn * sigmoid(gate)`` broadcast over the head, then ``attn_output``;
residual; ``ffn_norm``; a dense SwiGLU FFN on the layers without a router (the leading dense blocks), else routed
experts (sigmoid unless the file says, selection bias ``exp_probs_b``, normalised and scaled top-k weights) plus
the ungated shared expert; residual. Without ``embeddings_nextn_masked`` (llama.cpp's default) the last layer runs
on every token; its output is ``t_h_nextn`` (a graph output) and the output rows are picked before the final norm.
The MTP blocks past ``block_count - nextn_predict_layers`` are ``TENSOR_SKIP`` and not in the graph.

The layer compression compares two layers either side (``hood=2``), as exaone_moe.py does for the same
1-full-3-sliding pattern (its -cmoe case on a middle device needed it) and hy_v3.py for scattered experts; the
step35 cases and 30 random scattered placements (tests/memory/test_step35_hy_v3.py) also pass with one.

The MTP blocks still load their ``TENSOR_NOT_REQUIRED`` tensors (q/k norms, gate, FFN; see
``app.model.index.NEXTN_SKIPPED_ONLY``): 257 MiB on the output device of the full-size model.
"""

from __future__ import annotations

from ..builder import layer_copy, qkv_2d, rope
from ..ggml import OUTPUT, binary, get_rows, mul_mat, reshape, unary
from ..mtp import mtp_input
from . import Family


def _block(b, inpL, il, pos, mtp=False):
    """One Step3p5 decoder layer (the trunk's and the MTP block's ``mtp_block``)."""
    c, p, nt = b.c, b.p, b.nt
    hd, hv = p.head_dim_k, p.head_dim_v
    inpSA = inpL
    n_head, n_head_kv = p.n_head[il], p.n_head_kv[il]
    cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
    q, k, v = qkv_2d(b, il, cur, hd)
    q = reshape(q, hd, n_head, nt)
    k = reshape(k, hd, n_head_kv, nt)
    v = reshape(v, hv, n_head_kv, nt)
    qn, kn = f"blk.{il}.attn_q_norm.weight", f"blk.{il}.attn_k_norm.weight"
    if not mtp or qn in c.names:  # graph_mtp norms only where the block has the weights
        q = b.norm(q, qn, il)
    if not mtp or kn in c.names:
        k = b.norm(k, kn, il)
    freqs = None if c.is_swa(il) else layer_copy(b, "rope_freqs.weight", il)
    q = rope(q, pos, freqs)
    k = rope(k, pos, freqs)
    attn = b.attn(il, q, k, v, None, None, iswa_order=True)
    gw = b.w(f"blk.{il}.attn_gate.weight")
    if gw is not None:
        gate = unary("UNARY", mul_mat(gw, cur))  # sigmoid, [n_head, n_tokens]
        attn3 = reshape(attn, hv, n_head, nt)
        attn3 = binary("MUL", attn3, reshape(gate, 1, n_head, nt))
        attn = reshape(attn3, hv * n_head, nt)
    cur = mul_mat(b.w(f"blk.{il}.attn_output.weight"), attn)
    ffn_inp = binary("ADD", cur, inpSA)
    cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
    cur = b.dense_lead_moe(cur, il, dense=b.w(f"blk.{il}.ffn_gate_inp.weight") is None)
    return binary("ADD", cur, ffn_inp)


def build_mtp(b):
    """``graph_mtp`` of step35.cpp: one MTP head, the one ``cparams.nextn_layer_offset`` selects (0 when the
    context reserves, so the first NextN block; the draft loop later chains the others through the same context):
    :func:`~app.memory.compute.mtp.mtp_input`, a full Step3p5 decoder layer on the MTP context's iswa cache, the
    output rows picked (``h_nextn``, pre-norm), then the head norm and the LM head on those rows only."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    cur = _block(b, cur, il, pos, mtp=True)
    cur = get_rows(cur, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # h_nextn
    head_norm = f"blk.{il}.nextn.shared_head_norm.weight"
    cur = b.norm(cur, head_norm if head_norm in b.c.names else "output_norm.weight", -1)
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight")
    logits = mul_mat(head, cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def build(b):
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpL = _block(b, inpL, il, pos)
    inpL.flags = inpL.fl0 = OUTPUT  # t_h_nextn
    return b.output(inpL, out_ids, norm_first=False)


# checked against llama-fit-params --fit-print (full-size Step-3.5-Flash, with and without rope factors: CPU and
# 1-3 RPC, -cmoe/-ncmoe, -ngl, -np 2/4, flash attention on/off, q8_0 KV, -ub 1024, --swa-full) and llama-server
# -lv 4 (tiny model): tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(
    name="step35",
    build=build,
    exact=frozenset({"step35"}),
    hood=2,
    build_mtp=build_mtp,
    mtp_exact=frozenset({"step35"}),
)
