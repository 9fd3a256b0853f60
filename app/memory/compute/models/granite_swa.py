"""``src/models/granite-swa.cpp`` (Granite SWA, dense and MoE): sliding-window and global layers from the file's
pattern array (``build_attn_inp_kv_iswa``), per-layer head counts, rope only where ``attention.rope_pattern``
says (default: every layer), attention sinks, the muP residual and logit scales; a dense SwiGLU FFN, or softmax
experts (normalised top-k; gate and up possibly fused) plus a shared expert whose ``ffn_up_shexp`` holds gate and
up together (``LLM_FFN_SWIGLU`` over one tensor: ``ggml_swiglu``, half the width). (The deepstack embeddings of
the vision variants are not built: text files have no ``deepstack_mapping``.)"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, new, unary
from . import Family


def build(b):
    c, p = b.c, b.p
    hd = p.head_dim_v
    pattern = c.meta.get(f"{p.arch}.attention.rope_pattern")
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    freqs = b.w("rope_freqs.weight")
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if not isinstance(pattern, list) or il >= len(pattern) or pattern[il]:  # llama_hparams::has_rope
            q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        cur = b.attn(
            il,
            q,
            k,
            v,
            b.w(f"blk.{il}.attn_output.weight"),
            b.w(f"blk.{il}.attn_output.bias"),
            sinks=b.w(f"blk.{il}.attn_sinks.weight"),
            iswa_order=c.has_swa,
        )
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" not in c.names:
            cur = b.ffn(cur, "ffn", il)
        else:
            moe_out = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=c.expert_weights_scale)
            up = b.w(f"blk.{il}.ffn_up_shexp.weight")
            if up is not None:
                up = b.mm_s(up, cur)
                act = new(up.ty, (up.ne[0] // 2, up.ne[1], up.ne[2], up.ne[3]), "GLU", (up,))  # ggml_swiglu(up)
                cur = binary("ADD", moe_out, b.mm_s(f"blk.{il}.ffn_down_shexp.weight", act))
            else:
                cur = moe_out
        if c.residual_scale:
            cur = unary("SCALE", cur)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="granite_swa", build=build, exact=frozenset({"granite_swa"}))
