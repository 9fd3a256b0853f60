"""``src/models/bailingmoe3.cpp`` for ``bailingmoe3`` (Ling 3.0: Kimi delta attention hybrid with MLA layers).

A hybrid whose recurrent layers (``head_count_kv`` 0) are Kimi delta attention (KDA): separate q/k/v projections
of ``n_head * kda.head_dim``, each through its own short causal conv (``bailingmoe3_causal_conv1d``: a view of
the layer's conv state, ``build_rs`` of r shared by the three, concat with the new tokens, the last ``d_conv - 1``
columns copied back, ``SSM_CONV`` + SiLU), a per-channel gate (``ssm_f_a`` + ``ssm_dt`` bias, times ``ssm_a``,
sigmoid, scaled by the negative lower bound), beta (sigmoid of ``ssm_beta``), q/k l2-normed, the delta rule as
one fused ``GATED_DELTA_NET`` (K = ``n_rs_seq`` + 1 states, as in :mod:`.qwen35`) whose output is made contiguous, an RMS norm
(``ssm_norm``) times sigmoid(``ssm_g_a``) and ``attn_output``. The other layers are DeepSeek-style absorbed MLA
(``attn_q`` or the ``q_a``/``q_b`` LoRA, ``attn_kv_a_mqa``, ``attn_k_b``/``attn_v_b``) over a K-only cache,
without the output projection in ``build_attn``, then a per-head sigmoid gate (``attn_gate`` on the layer's
normed input) and ``attn_output``. Every layer: ``ffn_norm``, a dense SwiGLU FFN on the
``leading_dense_block_count`` first layers, else sigmoid-routed experts with a selection bias (normalised,
scaled) plus the shared experts. Without ``embeddings_nextn_masked`` (the default) the last layer keeps every
token and the output rows are taken after the final norm (``t_h_nextn`` is a graph output).

With ``--spec-type draft-mtp`` the main context keeps ``n_rs_seq`` state snapshots per sequence (one conv-window
copy per rollback group, ``K = n_rs_seq + 1`` states out of the fused op) and the MTP draft context runs
:func:`build_mtp` over the NextN block. Not modelled: M-RoPE (VL files with ``rope.dimension_sections``).
"""

from __future__ import annotations

from ..builder import rope
from ..ggml import binary, concat, cont, cpy, mul_mat, new, permute, reshape, transpose, unary, view
from ..mtp import mtp_head, mtp_input
from . import Family
from .mamba import build_rs
from .qwen35 import output_after_norm
from .rwkv7 import weight_reshape


def kda_convs(b, cur, il, hd):
    """The q, k and v short convs of a KDA layer (``bailingmoe3_causal_conv1d`` / kimi-linear's
    ``causal_conv1d``): ``build_rs`` of the layer's conv state, then per projection a view of its columns, the
    concat with the new tokens, the last ``d_conv - 1`` columns copied back, ``SSM_CONV`` + SiLU."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head, d_conv = p.n_head[il], p.ssm_d_conv
    d_inner = n_head * hd
    n_embd_r = 3 * (d_conv - 1) * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, c.n_rs))
    conv_all = build_rs(b, r_all, n_embd_r)
    # one conv-window copy per rollback group: K = n_rs_seq + 1 (kimi-k3/glm5-next), min(n_seq_tokens, K) in
    # bailingmoe3_causal_conv1d
    snaps = c.n_rs_seq + 1
    n_snaps = min(nst, snaps) if c.arch == "bailingmoe3" else snaps
    qkv = []
    for x in "qkv":
        state = view(conv_all, (d_conv - 1, d_inner, ns), (4 * (d_conv - 1), 4 * n_embd_r))
        xp = reshape(b.mm(f"blk.{il}.attn_{x}.weight", cur), d_inner, nst, ns)
        conv_x = concat(state, transpose(xp), 0)
        for _ in range(n_snaps):
            snap = view(conv_x, (d_conv - 1, d_inner, ns), (conv_x.nb[1], conv_x.nb[2]))
            g.expand(cpy(snap, view(r_all, (d_conv - 1, d_inner, ns), (4 * (d_conv - 1), 4 * n_embd_r))))
        w = weight_reshape(b.w(f"blk.{il}.ssm_conv1d_{x}.weight"), d_conv, d_inner)
        out = new("f32", (d_inner, nst, ns), "SSM_CONV", (conv_x, w))
        out = unary("UNARY", reshape(out, d_inner, nt))  # silu
        qkv.append(reshape(out, hd, n_head, nst, ns))
    return qkv


def kda_delta(b, q, k, v, gate, beta, il, hd):
    """q/k l2-normed, the layer's state through ``build_rs``, the delta rule as one fused ``GATED_DELTA_NET``
    (the outputs, then K = n_rs_seq + 1 states copied into their rollback groups) and its output made contiguous."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head = p.n_head[il]
    n_embd_s = hd * hd * n_head
    s_all = b.cache(il, "s", "f32", (n_embd_s, c.n_rs))
    q = unary("SCALE", unary("RMS_NORM", q))  # build_gdn_l2_norm
    k = unary("SCALE", unary("RMS_NORM", k))
    state = reshape(build_rs(b, s_all, n_embd_s), hd, hd, n_head, ns)
    # build_recurrent_attn: the outputs, then K = n_rs_seq + 1 states (one per rollback group)
    snaps = c.n_rs_seq + 1
    gdn = new("f32", (hd * n_head, nst * ns + snaps * hd * ns), "GATED_DELTA_NET", (q, k, v, gate, beta, state))
    out = view(gdn, (hd, n_head, nst, ns), (4 * hd, 4 * hd * n_head, 4 * hd * n_head * nst))
    if snaps == 1:
        new_state = view(gdn, (hd, hd, n_head, ns), (4 * hd, 4 * hd * hd, 4 * hd * hd * n_head))
        g.expand(cpy(new_state, view(s_all, (n_embd_s, ns), (s_all.nb[1],))))
    else:  # the last min(n_seq_tokens, K) snapshots into their rollback groups
        written = min(nst, snaps)
        src = view(gdn, (n_embd_s, ns, written), (4 * n_embd_s, 4 * n_embd_s * ns))
        g.expand(cpy(src, view(s_all, (n_embd_s, ns, written), (s_all.nb[1], s_all.nb[1] * ns))))
    return cont(out)


def kda_layer(b, cur, il):
    """The KDA branch of ``llama_model_bailingmoe3::graph`` (the conv windows and fused GDN of the snapshots)."""
    c, p = b.c, b.p
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head, hd = p.n_head[il], p.kda_head_dim
    d_inner = n_head * hd
    q, k, v = kda_convs(b, cur, il, hd)
    gate = binary("ADD", b.mm(f"blk.{il}.ssm_f_a.weight", cur), b.w(f"blk.{il}.ssm_dt.bias"))
    gate = reshape(gate, hd, n_head, nt)
    a = weight_reshape(b.w(f"blk.{il}.ssm_a"), 1, n_head, 1)
    gate = unary("SCALE", unary("UNARY", binary("MUL", gate, a)))  # sigmoid, times kda_gate_lower_bound
    gate = reshape(gate, hd, n_head, nst, ns)
    beta = unary("UNARY", reshape(b.mm(f"blk.{il}.ssm_beta.weight", cur), 1, n_head, nst, ns))  # sigmoid
    out = kda_delta(b, q, k, v, gate, beta, il, hd)
    out_gate = reshape(b.mm(f"blk.{il}.ssm_g_a.weight", cur), hd, n_head, nt)
    out = reshape(out, hd, n_head, nt)
    out = b.norm(out, f"blk.{il}.ssm_norm.weight", il)
    out = binary("MUL", out, unary("UNARY", out_gate))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", cont(out, d_inner, nt))


def mla_layer(b, cur, pos, il):
    """The MLA branch: absorbed multi-head latent attention, then the per-head sigmoid gate and output."""
    c, p = b.c, b.p
    nt = b.nt
    n_head = p.n_head[il]
    hk_mla, hv_mla = c.hk_mla, c.hv_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
    attn_input = cur
    if b.w(f"blk.{il}.attn_q_a.weight") is not None:
        q = b.mm(f"blk.{il}.attn_q_a.weight", cur)
        q = b.norm(q, f"blk.{il}.attn_q_a_norm.weight", il)
        q = b.mm(f"blk.{il}.attn_q_b.weight", q)
    else:
        q = b.mm(f"blk.{il}.attn_q.weight", cur)
    rs = 4 * hk_mla
    q_nope = view(q, (n_nope, n_head, nt), (rs, rs * n_head))
    q_pe = view(q, (n_rope, n_head, nt), (rs, rs * n_head))
    kv_all = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
    kv = view(kv_all, (kv_lora, nt), (kv_all.nb[1],))
    k_pe = view(kv_all, (n_rope, 1, nt), (kv_all.nb[1], kv_all.nb[1]))
    q_pe = rope(q_pe, pos)
    k_pe = rope(k_pe, pos)
    kv = b.norm(kv, f"blk.{il}.attn_kv_a_norm.weight", il)
    q_nope = permute(q_nope, 0, 2, 1, 3)
    q_nope = mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), q_nope)
    q_nope = permute(q_nope, 0, 2, 1, 3)
    Q = concat(q_nope, q_pe, 0)
    kv = reshape(kv, kv_lora, 1, nt)
    K = concat(kv, k_pe, 0)
    cur = b.attn(il, Q, K, kv, None, None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
    gate = b.mm(f"blk.{il}.attn_gate.weight", attn_input)
    gate = unary("UNARY", reshape(gate, 1, n_head, nt))  # sigmoid
    cur = reshape(cur, hv_mla, n_head, nt)
    cur = binary("MUL", cur, gate)
    return b.mm(f"blk.{il}.attn_output.weight", cont(cur, hv_mla * n_head, nt))


def build_mtp(b):
    """``graph_mtp``: the MTP draft context's graph over the one NextN block (:mod:`app.memory.compute.mtp`'s
    input and head around an MLA decoder block on the MTP context's own K-only cache, the experts plus the shared
    experts, the NextN block's ``shared_head_norm`` on every token, then the output rows and the model's head)."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    cur = mla_layer(b, cur, pos, il)
    ffn_inp = binary("ADD", cur, inpSA)
    cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
    cur = binary("ADD", b.dense_lead_moe(cur, il), ffn_inp)
    return mtp_head(b, cur, il, out_ids)


def build(b):
    c = b.c
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if c.recurrent[il]:
            cur = kda_layer(b, cur, il)
        else:
            cur = mla_layer(b, cur, pos, il)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.dense_lead_moe(cur, il)
        inpL = binary("ADD", cur, ffn_inp)
    return output_after_norm(b, inpL, out_ids)


FAMILY = Family(
    name="bailingmoe3",
    build=build,
    exact=frozenset({"bailingmoe3"}),
    build_mtp=build_mtp,
    mtp_exact=frozenset({"bailingmoe3"}),
    rs_seq=True,
)
