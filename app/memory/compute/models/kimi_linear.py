"""``src/models/kimi-linear.cpp`` for ``kimi-linear`` (Kimi-Linear: Kimi delta attention hybrid with MLA layers).

The KDA layers (``head_count_kv`` 0) share :mod:`.bailingmoe3`'s short convs and fused delta rule
(:func:`~.bailingmoe3.kda_convs`, :func:`~.bailingmoe3.kda_delta`); they differ in the gate (``ssm_f_a`` to
``kda.head_dim`` then ``ssm_f_b``, + ``ssm_dt`` bias, softplus, times ``ssm_a``) and the output gate (``ssm_g_a``
then ``ssm_g_b``, sigmoid, times the RMS-normed output). The other layers are absorbed MLA without RoPE or a q
LoRA (``attn_q``, ``attn_kv_a_mqa``, ``attn_k_b``/``attn_v_b``) over a K-only cache, the output projection inside
``build_attn``. Dense SwiGLU on the ``leading_dense_block_count`` first layers, else sigmoid-routed experts
(always normalised, scaled) plus the shared expert; the last layer keeps only the output rows.

``llama_context::sched_reserve`` reserves kimi-linear's prompt graph a second time for one sequence
(``[TAG_RESERVE_DIAG_DECAY]``, after the tg graph); llama-fit-params (``no_alloc``) prints the first reserve's
sizes only, with ``-np`` sequences, which is the graph built here. llama-server's buffers are the largest of the
three reserves: the one-sequence graph was not larger in the cases compared (``-np`` 2 and 4).

Not modelled: the legacy files whose MLA layers keep ``attn_kv_b`` (MHA cache), a fused ``attn_qkv``.
"""

from __future__ import annotations

from ..ggml import binary, concat, cont, get_rows, mul_mat, permute, reshape, unary, view
from . import Family
from .bailingmoe3 import kda_convs, kda_delta
from .rwkv7 import weight_reshape


def kda_layer(b, cur, il):
    """The KDA branch: shared short convs, the softplus gate times ``ssm_a``, the fused delta rule, the gated norm."""
    c, p = b.c, b.p
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head, hd = p.n_head[il], p.kda_head_dim
    d_inner = n_head * hd
    q, k, v = kda_convs(b, cur, il, hd)
    g1 = b.mm(f"blk.{il}.ssm_f_b.weight", b.mm(f"blk.{il}.ssm_f_a.weight", cur))
    g1 = unary("UNARY", binary("ADD", g1, b.w(f"blk.{il}.ssm_dt.bias")))  # softplus
    g1 = reshape(g1, hd, n_head, nt)
    a = weight_reshape(b.w(f"blk.{il}.ssm_a"), 1, n_head, 1)
    g1 = reshape(binary("MUL", g1, a), hd, n_head, nst, ns)
    beta = unary("UNARY", reshape(b.mm(f"blk.{il}.ssm_beta.weight", cur), 1, n_head, nst, ns))  # sigmoid
    out = kda_delta(b, q, k, v, g1, beta, il, hd)
    # g_a reads cur_2d, a reshape of cur's 3-D reshape: two view nodes in front of it, which
    # ggml_vk_graph_optimize's first pass waits for (the MUL_MAT comes after the GATED_DELTA_NET there)
    cur_2d = reshape(reshape(cur, cur.ne[0], nst, ns), cur.ne[0], nt)
    g2 = b.mm(f"blk.{il}.ssm_g_b.weight", b.mm(f"blk.{il}.ssm_g_a.weight", cur_2d))
    g2 = reshape(g2, hd, n_head, nt)
    out = reshape(out, hd, n_head, nt)
    out = b.norm(out, f"blk.{il}.ssm_norm.weight", il)
    out = binary("MUL", out, unary("UNARY", g2))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", cont(out, d_inner, nt))


def mla_layer(b, cur, il):
    """The MLA branch: absorbed latent attention without RoPE, ``attn_output`` inside ``build_attn``."""
    c, p = b.c, b.p
    nt = b.nt
    n_head = p.n_head[il]
    hk_mla = c.hk_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
    q = b.mm(f"blk.{il}.attn_q.weight", cur)
    kv_all = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
    kv = view(kv_all, (kv_lora, nt), (kv_all.nb[1],))
    k_pe = view(kv_all, (n_rope, 1, nt), (kv_all.nb[1], kv_all.nb[1]))
    kv = b.norm(kv, f"blk.{il}.attn_kv_a_norm.weight", il)
    rs = 4 * hk_mla
    q_nope = view(q, (n_nope, n_head, nt), (rs, rs * n_head))
    q_pe = view(q, (n_rope, n_head, nt), (rs, rs * n_head))
    q_nope = permute(q_nope, 0, 2, 1, 3)
    q_nope = mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), q_nope)
    q_nope = permute(q_nope, 0, 2, 1, 3)
    Q = concat(q_nope, q_pe, 0)
    kv = reshape(kv, kv_lora, 1, nt)
    K = concat(kv, k_pe, 0)
    return b.attn(il, Q, K, kv, b.w(f"blk.{il}.attn_output.weight"), None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))


def build(b):
    c = b.c
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        b.g.expand(cur)
        if c.recurrent[il]:
            cur = kda_layer(b, cur, il)
        else:
            cur = mla_layer(b, cur, il)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if il < b.p.n_layer_dense_lead:
            cur = b.ffn(cur, "ffn", il)
        else:
            moe = b.moe(
                cur,
                il,
                gating=c.gating,
                norm_w=True,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
            cur = binary("ADD", moe, b._ffn_named(cur, il, "shexp"))
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(name="kimi-linear", build=build, exact=frozenset({"kimi-linear"}))
