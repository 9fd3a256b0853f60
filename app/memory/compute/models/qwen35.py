"""``src/models/qwen35.cpp`` and ``qwen35moe.cpp``: gated delta-net layers with a gated full-attention layer every
``full_attention_interval`` layers (``src/models/delta-net-base.cpp`` for the linear attention).

A linear-attention layer: fused ``attn_qkv`` and ``attn_gate`` (z) projections, beta (sigmoid) and alpha
(softplus of alpha + dt, times A) per value head, the conv state (``build_conv_state``: ``build_rs`` of r, concat
with the new tokens, the last ``d_conv - 1`` columns copied back), ``SSM_CONV`` + SiLU, q/k l2-normed
(``build_gdn_l2_norm``: RMS_NORM then SCALE), and the delta rule as one ``GATED_DELTA_NET`` op: llama.cpp sets
``fused_gdn_ar``/``fused_gdn_ch`` unconditionally (``llama_context`` constructor), so the chunked and
autoregressive ggml graphs are never built, and the fused op broadcasts key heads over value heads (no repeat).
Its result holds the outputs and then the new state, which is copied into s. Then the gated RMS norm
(``ssm_norm`` times SiLU(z)) and ``ssm_out``. A full-attention layer projects Q twice as wide (query and a
per-head output gate), q/k norms, IMRoPE (4 positions per token), attention without output projection, then
``sigmoid(gate) * attn`` and ``attn_output``. Every layer ends with post_attention_norm and a dense SwiGLU FFN or
(qwen35moe) softmax top-k experts with normalised weights plus a sigmoid-gated shared expert. Without
``embeddings_nextn_masked`` (llama.cpp's default) the last layer runs on every token and the output rows are
picked after the final norm, whose full result (``h_nextn``) is itself a graph output.

With ``--spec-type draft-mtp`` the main context keeps ``n_rs_seq`` state snapshots per sequence: one conv-state
copy and one GATED_DELTA_NET state per slot (``K = n_rs_seq + 1``), and the MTP draft context runs
:func:`build_mtp` over the NextN block (qwen3next, which keeps no snapshots: :func:`build_mtp_qwen3next`).
"""

from __future__ import annotations

from ..builder import rope
from ..ggml import OUTPUT, binary, concat, cont, cpy, get_rows, mul_mat, new, reshape, transpose, unary, view
from ..mtp import mtp_head, mtp_input
from . import Family
from .mamba import build_rs


def _qkvz(b, cur, il, nst, ns):
    """``build_qkvz``: the fused attn_qkv + attn_gate projections, or qwen3next's legacy ``ssm_in``."""
    p = b.p
    hk, n_k, n_v = p.ssm_d_state, p.ssm_n_group, p.ssm_dt_rank
    hv = p.ssm_d_inner // n_v
    if b.w(f"blk.{il}.attn_qkv.weight") is not None:
        qkv = b.mm(f"blk.{il}.attn_qkv.weight", cur)
        qkv = reshape(qkv, qkv.ne[0], nst, ns)
        return qkv, b.mm(f"blk.{il}.attn_gate.weight", cur)
    mixed = b.mm(f"blk.{il}.ssm_in.weight", cur)
    r = n_v // n_k
    mixed = reshape(mixed, 2 * hk + 2 * hv * r, n_k, nst, ns)
    nb = mixed.nb[1:]
    q = view(mixed, (hk, n_k, nst, ns), nb)
    k = view(mixed, (hk, n_k, nst, ns), nb)
    v = view(mixed, (hv * r, n_k, nst, ns), nb)
    z = cont(view(mixed, (hv * r, n_k, nst, ns), nb))
    q = cont(q, hk * n_k, nst, ns)
    k = cont(k, hk * n_k, nst, ns)
    v = cont(v, hv * n_v, nst, ns)
    return concat(concat(q, k, 0), v, 0), z


def _beta_alpha(b, cur, il, nst, ns):
    """beta (sigmoid) and the gate (softplus(alpha + dt) * A) per value head: separate ``ssm_beta``/``ssm_alpha``
    projections (qwen35) or one ``ssm_ba`` split per key head (qwen3next)."""
    n_k, n_v = b.p.ssm_n_group, b.p.ssm_dt_rank
    if b.c.arch == "qwen3next":
        ba = b.mm(f"blk.{il}.ssm_ba.weight", cur)
        ba = reshape(ba, 2 * n_v // n_k, n_k, nst, ns)
        beta = cont(view(ba, (n_v // n_k, n_k, nst, ns), ba.nb[1:]))
        beta = unary("UNARY", beta)  # sigmoid
        alpha = cont(view(ba, (n_v // n_k, n_k, nst, ns), ba.nb[1:]), n_v, nst, ns)
    else:
        beta = reshape(b.mm(f"blk.{il}.ssm_beta.weight", cur), 1, n_v, nst, ns)
        beta = unary("UNARY", beta)  # sigmoid
        alpha = reshape(b.mm(f"blk.{il}.ssm_alpha.weight", cur), n_v, nst, ns)
    alpha = binary("ADD", alpha, b.w(f"blk.{il}.ssm_dt.bias"))
    alpha = unary("UNARY", alpha)  # softplus
    gate = binary("MUL", alpha, b.w(f"blk.{il}.ssm_a"))
    return reshape(beta, 1, n_v, nst, ns), reshape(gate, 1, n_v, nst, ns)


def delta_net_layer(b, cur, il):
    """``build_layer_attn_linear`` of qwen35/qwen35moe/qwen3next with ``build_conv_state`` and
    ``build_recurrent_attn``."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    d_conv, d_inner, d_state = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state
    hk, n_k, n_v = d_state, p.ssm_n_group, p.ssm_dt_rank
    hv = d_inner // n_v
    conv_ch = d_inner + 2 * n_k * d_state
    n_embd_r = (d_conv - 1) * conv_ch
    n_embd_s = d_state * d_inner
    n_rs = c.n_rs
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))
    qkv, z = _qkvz(b, cur, il, nst, ns)
    beta, gate = _beta_alpha(b, cur, il, nst, ns)
    # build_conv_state: the last d_conv - 1 columns back into r, or with n_rs_seq > 0 one snapshot per slot
    conv_states = build_rs(b, r_all, n_embd_r)
    conv_states = reshape(conv_states, d_conv - 1, conv_ch, ns)
    conv_input = concat(conv_states, transpose(qkv), 0)
    snaps = c.n_rs_seq + 1
    for _ in range(snaps):
        last = view(conv_input, (d_conv - 1, conv_ch, ns), (conv_input.nb[1], conv_input.nb[2]))
        g.expand(cpy(last, view(r_all, (n_embd_r, ns), (r_all.nb[1],))))
    state = build_rs(b, s_all, n_embd_s)
    state = reshape(state, hv, hv, n_v, ns)
    conv_out = new("f32", (conv_ch, nst, ns), "SSM_CONV", (conv_input, b.w(f"blk.{il}.ssm_conv1d.weight")))
    conv_out = unary("UNARY", conv_out)  # silu
    nb1 = 4 * (2 * hk * n_k + hv * n_v)
    q = view(conv_out, (hk, n_k, nst, ns), (4 * hk, nb1, nb1 * nst))
    k = view(conv_out, (hk, n_k, nst, ns), (4 * hk, nb1, nb1 * nst))
    v = view(conv_out, (hv, n_v, nst, ns), (4 * hv, nb1, nb1 * nst))
    q = unary("SCALE", unary("RMS_NORM", q))  # build_gdn_l2_norm
    k = unary("SCALE", unary("RMS_NORM", k))
    if c.arch == "qwen3next" and n_k != n_v:
        # qwen3next repeats the key heads even for the fused op (TAG_GGML_GDN_BCAST); qwen35 broadcasts
        r = n_v // n_k
        q = new("f32", (hk, r, n_k, nst * ns), "REPEAT", (reshape(q, hk, 1, n_k, nst * ns),))
        k = new("f32", (hk, r, n_k, nst * ns), "REPEAT", (reshape(k, hk, 1, n_k, nst * ns),))
        q = reshape(q, hk, n_v, nst, ns)
        k = reshape(k, hk, n_v, nst, ns)
    # build_recurrent_attn: one GATED_DELTA_NET op whose result holds the outputs, then K = n_rs_seq + 1 states
    gdn = new("f32", (hv * n_v, nst * ns + snaps * hv * ns), "GATED_DELTA_NET", (q, k, v, gate, beta, state))
    out = view(gdn, (hv, n_v, nst, ns), (4 * hv, 4 * hv * n_v, 4 * hv * n_v * nst))
    if snaps == 1:
        new_state = view(gdn, (hv, hv, n_v, ns), (4 * hv, 4 * hv * hv, 4 * hv * hv * n_v))
        g.expand(cpy(new_state, view(s_all, (n_embd_s, ns), (s_all.nb[1],))))
    else:  # the last min(n_seq_tokens, K) snapshots into their rollback groups
        written = min(nst, snaps)
        src = view(gdn, (n_embd_s, ns, written), (4 * n_embd_s, 4 * n_embd_s * ns))
        g.expand(cpy(src, view(s_all, (n_embd_s, ns, written), (s_all.nb[1], s_all.nb[1] * ns))))
    z = reshape(z, hv, n_v, nst, ns)
    normed = b.norm(out, f"blk.{il}.ssm_norm.weight", il)
    y = binary("MUL", normed, unary("UNARY", z))  # build_norm_gated: norm(out) * silu(z)
    y = reshape(y, hv * n_v, nst, ns)
    y = b.mm(f"blk.{il}.ssm_out.weight", y)
    return reshape(y, p.n_embd, nt)


def _qkv(b, cur, il):
    """``build_qkv(..., reshape=false)``: separate projections, or a fused attn_qkv split into contiguous parts."""
    p, nt = b.p, b.nt
    hd, n_head, n_kv = p.head_dim_k, p.n_head[il], p.n_head_kv[il]
    if b.w(f"blk.{il}.attn_qkv.weight") is None:
        q = b.add_b(b.mm(f"blk.{il}.attn_q.weight", cur), f"blk.{il}.attn_q.bias")
        k = b.add_b(b.mm(f"blk.{il}.attn_k.weight", cur), f"blk.{il}.attn_k.bias")
        v = b.add_b(b.mm(f"blk.{il}.attn_v.weight", cur), f"blk.{il}.attn_v.bias")
        return q, k, v
    qkv = b.add_b(b.mm(f"blk.{il}.attn_qkv.weight", cur), f"blk.{il}.attn_qkv.bias")
    q = cont(view(qkv, (2 * hd * n_head, nt), (qkv.nb[1],)))
    k = cont(view(qkv, (hd * n_kv, nt), (qkv.nb[1],)))
    v = cont(view(qkv, (hd * n_kv, nt), (qkv.nb[1],)))
    return q, k, v


def gated_attn(b, cur, pos, il):
    """``build_layer_attn``: Q and its gate from one projection, q/k norms, rope, attention, gated output."""
    p, nt = b.p, b.nt
    hd, n_head, n_kv = p.head_dim_k, p.n_head[il], p.n_head_kv[il]
    q_full, k, v = _qkv(b, cur, il)
    if b.c.arch == "qwen3next":
        q_full = reshape(q_full, hd * 2, n_head, nt, 1)
        q = view(q_full, (hd, n_head, nt, 1), q_full.nb[1:])
        gate = view(q_full, (hd, n_head, nt, 1), q_full.nb[1:])
        k = reshape(k, hd, n_kv, nt)
        v = reshape(v, hd, n_kv, nt)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
    else:
        q = view(q_full, (hd, n_head, nt), (4 * hd * 2, 4 * hd * 2 * n_head))
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(reshape(k, hd, n_kv, nt), f"blk.{il}.attn_k_norm.weight", il)
        gate = view(q_full, (hd, n_head, nt), (4 * hd * 2, 4 * hd * 2 * n_head))
        gate = cont(gate, hd * n_head, nt)
        v = reshape(v, hd, n_kv, nt)
    q = rope(q, pos)
    k = rope(k, pos)
    out = b.attn(il, q, k, v, None, None)
    if b.c.arch == "qwen3next":
        gate = cont(gate, hd * n_head, nt)
    out = binary("MUL", out, unary("UNARY", gate))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", out)


def ffn_block(b, cur, il):
    """post_attention_norm, then the dense SwiGLU FFN or (qwen35moe) the experts plus the gated shared expert."""
    cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
    if f"blk.{il}.ffn_gate_inp.weight" in b.c.names:
        moe_out = b.moe(cur, il, gating="softmax", norm_w=True, w_scale=b.c.expert_weights_scale)
        return b.shexp(cur, moe_out, il)
    return b.ffn(cur, "ffn", il)


def build_mtp(b):
    """``graph_mtp`` of qwen35.cpp / qwen35moe.cpp: the MTP draft context's graph over the one NextN block
    (:mod:`app.memory.compute.mtp`'s input and head around a full-attention decoder block on the MTP context's own
    KV cache, IMRoPE's 4 positions per token)."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il, 4)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    cur = binary("ADD", gated_attn(b, cur, pos, il), inpSA)
    cur = binary("ADD", ffn_block(b, cur, il), cur)
    return mtp_head(b, cur, il, out_ids)


def build_mtp_qwen3next(b):
    """``graph_mtp`` of qwen3next.cpp: as :func:`build_mtp` with NEOX rope (one position per token), but the
    output rows are picked after the attention (its output and the residual), so the FFN, the head norm
    (``h_nextn``) and the LM head run on those rows only."""
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    cur = gated_attn(b, cur, pos, il)
    cur = binary("ADD", get_rows(cur, out_ids), get_rows(inpSA, out_ids))
    cur = binary("ADD", ffn_block(b, cur, il), cur)
    head_norm = f"blk.{il}.nextn.shared_head_norm.weight"
    h = b.norm(cur, head_norm if head_norm in b.c.names else "output_norm.weight", -1)
    h.flags = h.fl0 = OUTPUT
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight") or b.w("token_embd.weight@output")
    logits = mul_mat(head, h)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


def _build_mtp(b):
    """The MTP draft context's graph: qwen3next's own, or qwen35/qwen35moe's :func:`build_mtp`."""
    return build_mtp_qwen3next(b) if b.c.arch == "qwen3next" else build_mtp(b)


def build(b):
    c = b.c
    inpL = b.inp_embd()
    # qwen35: IMRoPE, n_pos_per_embd = 4 positions per token; qwen3next: NEOX
    pos = b.inp_pos() if c.arch == "qwen3next" else b.inp("inp_pos", "i32", (4 * b.nt,))
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        b.g.expand(cur)
        if c.recurrent[il]:
            cur = delta_net_layer(b, cur, il)
        else:
            cur = gated_attn(b, cur, pos, il)
        cur = binary("ADD", cur, inpSA)
        inpL = binary("ADD", ffn_block(b, cur, il), cur)
    return output_after_norm(b, inpL, out_ids)


def output_after_norm(b, cur, out_ids):
    """The final norm on every token (``t_h_nextn``, a graph output), then the output rows and the head."""
    h = b.norm(cur, "output_norm.weight", -1)
    h.flags = h.fl0 = OUTPUT
    cur = get_rows(h, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


# checked against llama-fit-params --fit-print (full-size 27B, 35B-A3B, Qwen3-Next-80B-A3B: CPU and RPC, -ngl/-ts,
# -cmoe/-ncmoe, -np 2-4, flash attention on/off, q8_0 KV) and llama-server -lv 4 (tiny models):
# tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(
    name="qwen35",
    build=build,
    exact=frozenset({"qwen35", "qwen35moe", "qwen3next"}),
    build_mtp=_build_mtp,
    mtp_exact=frozenset({"qwen35", "qwen35moe", "qwen3next"}),
    rs_seq=True,
)
