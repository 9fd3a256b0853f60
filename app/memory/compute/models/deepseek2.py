"""``src/models/deepseek2.cpp``, also the graph of ``mistral4`` (Mistral Small 4: ``llama_model_mistral4`` reuses
DeepSeek-V2's hparams, tensors and graph; its experts come fused as ``ffn_gate_up_exps``, which the shared MoE
builder reads)."""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, concat, cont, get_rows, mul_mat, new, permute, reshape, view
from . import Family
from .deepseek32 import build_mtp


def _mla_attention(b, il, cur, pos):
    """deepseek2.cpp's attention: Q (direct or through ``attn_q_a``), the compressed KV with its rope part, absorbed
    into MLA's K-only cache when ``key_length_mla`` is set, else decompressed by ``attn_kv_b`` into a plain cache."""
    c, p, nt = b.c, b.p, b.nt
    n_head = p.n_head[0]
    hk_mla, hv_mla = c.hk_mla, c.hv_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
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
        return b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
    kv = b.mm(f"blk.{il}.attn_kv_b.weight", kv_cmpr)
    rs = kv.nb[0] * (n_nope + hv_mla)
    k_nope = view(kv, (n_nope, n_head, nt), (rs, rs * n_head))
    V = cont(view(kv, (hv_mla, n_head, nt), (rs, rs * n_head)))
    Q = rope(q, pos)
    rep = new("f32", (n_rope, n_head, nt, 1), "REPEAT", (k_pe,))
    K = concat(k_nope, rep, 0)
    return b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None)


def build(b):
    """``src/models/deepseek2.cpp``: MLA attention (absorbed when ``key_length_mla`` is set), or for DeepSeek-OCR's
    decoder (``deepseek2-ocr``) plain multi-head attention of n_embd / n_head, then the dense lead layers and the
    routed plus shared experts."""
    p = b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if p.arch == "deepseek2-ocr":
            hd = p.n_embd // p.n_head[0]
            q, k, v = qkv(b, il, cur, hd, hd, hd)
            cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
        else:
            cur = _mla_attention(b, il, cur, pos)
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
    exact=frozenset({"deepseek2", "mistral4", "deepseek2-ocr"}),
    build_mtp=build_mtp,  # deepseek2.cpp's graph_mtp is deepseek32.cpp's
    mtp_exact=frozenset({"deepseek2"}),
)
