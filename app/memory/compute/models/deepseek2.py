"""``src/models/deepseek2.cpp``, also the graph of ``mistral4`` (Mistral Small 4: ``llama_model_mistral4`` reuses
DeepSeek-V2's hparams, tensors and graph; its experts come fused as ``ffn_gate_up_exps``, which the shared MoE
builder reads)."""

from __future__ import annotations

from ..builder import rope
from ..ggml import binary, concat, cont, get_rows, mul_mat, new, permute, reshape, view
from . import Family
from .deepseek32 import build_mtp


def build(b):
    """``src/models/deepseek2.cpp``: MLA attention (absorbed when ``key_length_mla`` is set)."""
    c, p = b.c, b.p
    nt = b.nt
    n_head = p.n_head[0]
    hk_mla, hv_mla = c.hk_mla, c.hv_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if b.w(f"blk.{il}.attn_q.weight") is None:
            q = b.mm(f"blk.{il}.attn_q_a.weight", cur)
            q = b.norm(q, f"blk.{il}.attn_q_a_norm.weight", il)
            q = b.mm(f"blk.{il}.attn_q_b.weight", q)
        else:
            q = b.mm(f"blk.{il}.attn_q.weight", cur)
        q = reshape(q, hk_mla, n_head, nt)
        kvpe = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
        kv_cmpr = view(kvpe, (kv_lora, nt), (kvpe.nb[1],))
        k_pe = view(kvpe, (n_rope, 1, nt), (kvpe.nb[1], kvpe.nb[1]))
        k_pe = rope(k_pe, pos)
        kv_cmpr = b.norm(kv_cmpr, f"blk.{il}.attn_kv_a_norm.weight", il)
        if c.mla:
            q_nope = view(q, (n_nope, n_head, nt), (q.nb[1], q.nb[2]))
            q_pe = view(q, (n_rope, n_head, nt), (q.nb[1], q.nb[2]))
            q_pe = rope(q_pe, pos)
            q_nope = permute(q_nope, 0, 2, 1, 3)
            qa = mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), q_nope)
            qa = permute(qa, 0, 2, 1, 3)
            Q = concat(qa, q_pe, 0)
            kv_cmpr = reshape(kv_cmpr, kv_lora, 1, nt)
            K = concat(kv_cmpr, k_pe, 0)
            V = kv_cmpr
            cur = b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
        else:
            kv = b.mm(f"blk.{il}.attn_kv_b.weight", kv_cmpr)
            rs = kv.nb[0] * (n_nope + hv_mla)
            k_nope = view(kv, (n_nope, n_head, nt), (rs, rs * n_head))
            V = cont(view(kv, (hv_mla, n_head, nt), (rs, rs * n_head)))
            Q = rope(q, pos)
            rep = new("f32", (n_rope, n_head, nt, 1), "REPEAT", (k_pe,))
            K = concat(k_nope, rep, 0)
            cur = b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


FAMILY = Family(
    name="deepseek2",
    build=build,
    exact=frozenset({"deepseek2", "mistral4"}),
    build_mtp=build_mtp,  # deepseek2.cpp's graph_mtp is deepseek32.cpp's
    mtp_exact=frozenset({"deepseek2"}),
)
