"""``src/models/plm.cpp`` (PLM): DeepSeek-style compressed KV projections without MLA's cache: ``attn_q`` to
full heads, ``attn_kv_a_mqa`` to the compressed KV (normed) plus one shared rope part, ``attn_kv_b`` back to
per-head K (nope part) and V (made contiguous), rope over Q and the shared part, K the concat of the nope part
and the repeated rope part; a plain KV cache of the full heads; a squared-ReLU FFN without a gate; the head tied
to the embeddings."""

from __future__ import annotations

from ..builder import rope
from ..ggml import binary, concat, cont, get_rows, new, reshape, view
from . import Family


def compressed_kv(b, il, cur, pos, freqs=None):
    """K and V of ``plm.cpp`` / ``minicpm3.cpp``: ``attn_kv_a_mqa`` to the compressed KV (normed by
    ``attn_kv_a_norm``) and one shared rope part, ``attn_kv_b`` back to per-head K (nope part) and V (made
    contiguous); K is the nope part concatenated with the roped shared part repeated over the heads."""
    p, nt = b.p, b.nt
    n_head = p.n_head[0]
    hv, n_rope, kv_lora = p.head_dim_v, p.n_rot, p.kv_lora_rank
    n_nope = p.head_dim_k - n_rope
    kvpe = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
    kv_cmpr = view(kvpe, (kv_lora, nt), (kvpe.nb[1],))
    k_pe = view(kvpe, (n_rope, 1, nt), (kvpe.nb[1], kvpe.nb[1]))
    kv_cmpr = b.norm(kv_cmpr, f"blk.{il}.attn_kv_a_norm.weight", il)
    kv = b.mm(f"blk.{il}.attn_kv_b.weight", kv_cmpr)
    rs = kv.nb[0] * (n_nope + hv)
    k_nope = view(kv, (n_nope, n_head, nt), (rs, rs * n_head))
    v = cont(view(kv, (hv, n_head, nt), (rs, rs * n_head)))
    k_pe = rope(k_pe, pos, freqs)
    return concat(k_nope, new("f32", (n_rope, n_head, nt, 1), "REPEAT", (k_pe,)), 0), v


def build(b):
    p, nt = b.p, b.nt
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q = reshape(b.mm(f"blk.{il}.attn_q.weight", cur), p.head_dim_k, p.n_head[0], nt)
        k, v = compressed_kv(b, il, cur, pos)
        cur = b.attn(il, rope(q, pos), k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.ffn(b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il), "ffn", il, act="relu_sqr")
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(
    name="plm",
    build=build,
    exact=frozenset({"plm"}),
    # plm.cpp hands build_attn a 2-D V ([n_head * value_length, n_tokens]); the untransposed cache's cpy_v takes
    # its ne[0] as one head's width and ggml_set_rows asserts (ggml.c: GGML_ASSERT(a->ne[0] == b->ne[0])); the
    # transposed cache of -fa off copies it whole
    fa_aborts=(
        "llama.cpp aborts on PLM models with flash attention (GGML_ASSERT(a->ne[0] == b->ne[0]) in ggml_set_rows: "
        "plm.cpp hands the KV cache a 2-D V); -fa auto probes it and aborts too"
    ),
)
