"""``src/models/hy-v3.cpp`` (Tencent Hy3): per layer ``attn_norm``; Q/K/V reshaped to heads; Q and K RMS-normed
over the head, then rope over the whole head (no frequency factors: the loader creates none); attention over
the plain ``llm_graph_input_attn_kv`` input (no sliding window) with ``attn_output``; residual; ``ffn_norm``; a
dense SwiGLU FFN on the layers without a router (the first layer of the published model), else routed experts
(the file's gating, sigmoid by default, selection bias ``exp_probs_b``, normalised and scaled top-k weights) plus
the ungated shared expert; residual. Without ``embeddings_nextn_masked`` (llama.cpp's default) the final norm runs
on every token (``t_h_nextn``, a graph output) and the output rows are picked after it. The MTP block past
``block_count - nextn_predict_layers`` is not in the graph; its FFN/expert tensors are only ``TENSOR_NOT_REQUIRED``
and are loaded all the same (``app.model.index.NEXTN_SKIPPED_ONLY``).

The layer compression compares two layers either side (``hood=2``): with one, Hy3-preview on 3 RPC devices with
every few layers' experts on another device or the CPU put RPC2's compute 8 MiB too high (268 vs llama-fit-params'
260 MiB; the uncut graph and ``hood=2`` give 260): tests/memory/test_step35_hy_v3.py.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary
from ..mtp import mtp_head, mtp_input
from . import Family
from .qwen35 import output_after_norm


def build_mtp(b):
    """``graph_mtp`` of hy-v3.cpp: :func:`~app.memory.compute.mtp.mtp_input`, a full hy_v3 decoder layer (the
    NextN block ``cparams.nextn_layer_offset`` selects, 0 when the context reserves) on the MTP context's plain
    KV cache, then :func:`~app.memory.compute.mtp.mtp_head` (the head norm on every token, ``h_nextn``, then the
    output rows and the LM head)."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    cur = _layers(b, cur, pos, [il])
    return mtp_head(b, cur, il, out_ids)


def build(b):
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    return output_after_norm(b, _layers(b, inpL, pos, b.layers), out_ids)


def _layers(b, inpL, pos, layers):
    p = b.p
    hd = p.head_dim_k
    for il in layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = rope(q, pos)  # get_rope_factors: the loader creates no rope_freqs / long / short tensors
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il, dense=b.w(f"blk.{il}.ffn_gate_inp.weight") is None, probs_b="exp_probs_b")
        inpL = binary("ADD", cur, ffn_inp)
    return inpL


# checked against llama-fit-params --fit-print (full-size Hy3-preview: CPU and 1-3 RPC, -cmoe/-ncmoe, -ngl, -np 4,
# flash attention on/off, q8_0 KV, -ub 1024) and llama-server -lv 4 (tiny model): tests/memory/accuracy.py,
# test_accuracy_llama.py
FAMILY = Family(
    name="hy_v3",
    build=build,
    exact=frozenset({"hy_v3"}),
    hood=2,
    build_mtp=build_mtp,
    mtp_exact=frozenset({"hy_v3"}),
)
