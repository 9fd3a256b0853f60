"""``src/models/hunyuan-moe.cpp``: rope before the Q/K norms (K normed first), experts with normalised top-k
weights plus an ungated shared MLP on every layer. ``hunyuan-vl.cpp`` (Hunyuan dense 0.5B-7B, ``hunyuan-dense``,
and HunyuanOCR's text model, ``hunyuan_vl``): the same attention over a dense SwiGLU FFN; where the file has
``rope.dimension_sections`` the rope is ``ggml_rope_multi`` (LLAMA_ROPE_TYPE_MROPE, llama_model_rope_type),
which takes 4 positions per token (``n_pos_per_embd``)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows
from . import Family


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    sections = c.meta.get(f"{p.arch}.rope.dimension_sections")
    mrope = p.arch == "hunyuan_vl" and isinstance(sections, list) and len(sections) > 1 and all(sections[:2])
    pos = b.inp("inp_pos", "i32", (4 * b.nt,)) if mrope else b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        freqs = b.w("rope_freqs.weight")
        q = rope(q, pos, freqs)
        k = rope(k, pos, freqs)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" not in c.names:  # hunyuan-vl.cpp: the dense FFN
            inpL = binary("ADD", b.ffn(cur, "ffn", il), ffn_inp)
            continue
        mlp = b._ffn_named(cur, il, "shexp")
        moe = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
        inpL = binary("ADD", binary("ADD", moe, mlp), ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="hunyuan-moe", build=build, exact=frozenset({"hunyuan-moe", "hunyuan-dense", "hunyuan_vl"}))
