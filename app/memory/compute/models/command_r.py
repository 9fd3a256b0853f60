"""``src/models/command-r.cpp`` (Command R / R+, ``command-r``) and ``src/models/cohere2.cpp`` (Command R7B,
Command A, ``cohere2``): a parallel block. One layer norm (``attn_norm``) feeds both the attention and the FFN;
Q/K/V (separate or fused); command-r layer-norms Q and K per head where the model has ``attn_q_norm`` /
``attn_k_norm`` (64 layers or more, R+) and ropes every layer over a plain KV cache; cohere2 ropes only its
sliding layers (the global ones take no position encoding) over the ``llm_graph_input_attn_kv_iswa`` input.
Attention scaled by 1/sqrt(head_dim). On the last layer the attention output, the layer input and the normed
input keep only the output rows; the SwiGLU FFN reads the normed input; the layer output is FFN + layer input +
attention output. Final layer norm, the head (tied embeddings, ``TENSOR_DUPLICATED``), the logits scaled by
``logit_scale``.
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    cohere2 = p.arch == "cohere2"
    b.norm_op = "NORM"  # every build_norm here is LLM_NORM
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        ffn_inp = cur
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if cohere2:
            if c.is_swa(il):
                q = rope(q, pos)
                k = rope(k, pos)
        else:
            if b.w(f"blk.{il}.attn_q_norm.weight") is not None:
                q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
            q = rope(q, pos)
            if b.w(f"blk.{il}.attn_k_norm.weight") is not None:
                k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
            k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, iswa_order=cohere2)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
            ffn_inp = get_rows(ffn_inp, out_ids)
        attn_out = cur
        cur = b.ffn(ffn_inp, "ffn", il)
        cur = binary("ADD", cur, inpL)
        inpL = binary("ADD", cur, attn_out)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (full-size Command R 35B, Command R+ 104B, Command R7B and
# Command A 111B on the CPU, 1-3 RPC devices and Vulkan0: -ngl partial, -ts, -np 2, flash attention on/off,
# q8_0 KV, --swa-full) and llama-server -lv 4 (tiny models): tests/memory/accuracy.py, test_accuracy_llama.py.
# Unlike cohere2moe it is exact with the layer compression (its last layer keeps only the output rows).
FAMILY = Family(name="command-r", build=build, exact=frozenset({"command-r", "cohere2"}))
