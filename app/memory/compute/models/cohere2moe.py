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
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    gf = int(c.meta.get(f"{c.arch}.expert_gating_func", 0) or 0)
    gating = c.gating if gf else "sigmoid"  # LLAMA_EXPERT_GATING_FUNC_TYPE_NONE -> SIGMOID (load_arch_hparams)
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        ffn_inp = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if c.is_swa(il) or il < p.n_layer_dense_lead:
            q = rope(q, pos)
            k = rope(k, pos)
        attn_out = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=True)
        if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
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
        inpL = binary("ADD", cur, attn_out)
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
FAMILY = Family(name="cohere2moe", build=build, exact=frozenset({"cohere2moe"}), uncut=True)
