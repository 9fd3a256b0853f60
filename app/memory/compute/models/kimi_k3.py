"""``src/models/kimi-k3.cpp`` for ``kimi-k3`` (Kimi K3: Kimi-Linear's KDA + MLA hybrid with attention residuals).

What kimi-linear (:mod:`.kimi_linear`) does not have:

- cross-layer attention residuals (``attn_res.block_size`` > 0): every ``block_size``-th layer banks its raw
  input in a stack ``[n_embd, n_ckpt, n_tokens]`` (a ``CONCAT`` along ne1, so the stack grows through the model);
  before the attention and before the FFN of every layer (and once before the output norm) ``res_mix`` scores
  the stack and the current stream (``RMS_NORM``, times the layer's ``*_res_score``, ``SUM_ROWS``), soft-maxes
  the scores and mixes them (``DSV4_HC_PRE`` over the stack + the stream times its weight). A banking layer
  restarts the stream from its attention output.
- the KDA gate through ``kda.gate_lower_bound`` (K3: ``lower_bound * sigmoid(-(f_b(f_a(x)) + dt) * ssm_a)``)
  and a single full-rank output gate ``ssm_g`` (kimi-linear: ``ssm_g_a``/``ssm_g_b``); the short convs and the
  fused delta rule are :mod:`.bailingmoe3`'s (:func:`~.bailingmoe3.kda_convs`, :func:`~.bailingmoe3.kda_delta`).
- MLA with the q LoRA (or ``attn_q``), nope-only (no RoPE), absorbed over a K-only cache, the output projection
  after a sigmoid gate (``attn_gate`` on the layer's normed input) rather than inside ``build_attn``.
- the situ activation (``beta*tanh(g/beta)*sigmoid(g) * lb*tanh(u/lb)``) instead of SwiGLU everywhere.
- a latent MoE: the router reads the full-width input, the routed experts the ``ffn_routed_down`` projection
  (``expert_latent_length`` wide), their sum ``ffn_routed_norm``-ed and projected back by ``ffn_routed_up``;
  the shared experts (``n_ff_exp * expert_shared_count`` wide) read the full-width input.

The last layer keeps every token; the output rows are taken after the final ``res_mix``, before the output
norm. With ``n_rs_seq`` > 0 (state snapshots for speculative rollback) the KDA layers copy K = n_rs_seq + 1
states (:func:`.bailingmoe3.kda_convs`, :func:`.bailingmoe3.kda_delta`). Not modelled: the legacy MLA layers that
keep ``attn_kv_b`` (an MHA cache), a file without ``attn_k_b``/``attn_v_b``.
"""

from __future__ import annotations

from ..ggml import binary, concat, cont, mul_mat, new, permute, reshape, sum_rows, unary, view
from . import Family
from .bailingmoe3 import kda_convs, kda_delta
from .rwkv7 import weight_reshape


def situ(b, gate, up):
    """``kimi_k3_situ`` / build_moe_ffn's ``LLM_FFN_SITU``: scale, tanh, scale times sigmoid(gate); the up
    branch through the same scale-tanh-scale when ``activation.situ_linear_beta`` > 0."""
    act = unary("SCALE", unary("UNARY", unary("SCALE", gate)))  # beta * tanh(gate / beta)
    act = binary("MUL", act, unary("UNARY", gate))  # sigmoid
    if b.c.situ_linear:
        up = unary("SCALE", unary("UNARY", unary("SCALE", up)))
    return binary("MUL", act, up)


def situ_ffn(b, cur, il, sfx):
    """A dense or shared-expert FFN with situ: gate, then up, situ, down (``ffn_<x>{sfx}``)."""
    g = b.mm(f"blk.{il}.ffn_gate{sfx}.weight", cur)
    u = b.mm(f"blk.{il}.ffn_up{sfx}.weight", cur)
    return b.mm(f"blk.{il}.ffn_down{sfx}.weight", situ(b, g, u))


def res_mix(b, stack, cur, score_w):
    """``llama_model_kimi_k3::graph::res_mix``: the stack's and the stream's scores (plain ``ggml_rms_norm``, no
    build_norm callback), soft-maxed together, the stack mixed by ``DSV4_HC_PRE``, the stream added weighted."""
    if stack is None:
        return cur
    nt = b.nt
    n_ckpt = stack.ne[1]
    sc_src = sum_rows(binary("MUL", unary("RMS_NORM", stack), score_w))
    sc_src = reshape(sc_src, n_ckpt, nt)
    sc_cur = sum_rows(binary("MUL", unary("RMS_NORM", cur), score_w))
    probs = unary("SOFT_MAX", concat(sc_src, sc_cur, 0))
    p_src = cont(view(probs, (n_ckpt, nt), (probs.nb[1],)))
    p_cur = cont(view(probs, (1, nt), (probs.nb[1],)))
    out = new("f32", (stack.ne[0], nt), "DSV4_HC_PRE", (stack, p_src))
    return binary("ADD", out, binary("MUL", cur, p_cur))


def kda_layer(b, cur, il):
    """The KDA branch: shared short convs, the lower-bound sigmoid gate, the fused delta rule, the full-rank
    output gate over the RMS-normed output."""
    c, p = b.c, b.p
    nt, ns = b.nt, c.n_seqs
    nst = nt // ns
    n_head, hd = p.n_head[il], p.kda_head_dim
    d_inner = n_head * hd
    q, k, v = kda_convs(b, cur, il, hd)
    g1 = b.mm(f"blk.{il}.ssm_f_b.weight", b.mm(f"blk.{il}.ssm_f_a.weight", cur))
    g1 = binary("ADD", g1, b.w(f"blk.{il}.ssm_dt.bias"))
    a = weight_reshape(b.w(f"blk.{il}.ssm_a"), 1, n_head, 1)
    if c.kda_lower_bound:
        g1 = binary("MUL", reshape(g1, hd, n_head, nt), a)
        g1 = unary("SCALE", unary("UNARY", unary("SCALE", g1)))  # sigmoid(-x), times the lower bound
    else:
        g1 = binary("MUL", reshape(unary("UNARY", g1), hd, n_head, nt), a)  # softplus
    g1 = reshape(g1, hd, n_head, nst, ns)
    beta = unary("UNARY", reshape(b.mm(f"blk.{il}.ssm_beta.weight", cur), 1, n_head, nst, ns))  # sigmoid
    cur3 = reshape(cur, cur.ne[0], nst, ns)
    out = kda_delta(b, q, k, v, g1, beta, il, hd)
    g2 = b.mm(f"blk.{il}.ssm_g.weight", reshape(cur3, cur3.ne[0], nst * ns))
    g2 = reshape(g2, hd, n_head, nt)
    out = b.norm(reshape(out, hd, n_head, nt), f"blk.{il}.ssm_norm.weight", il)
    out = binary("MUL", out, unary("UNARY", g2))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", cont(out, d_inner, nt))


def mla_layer(b, cur, il):
    """The MLA branch: absorbed latent attention without RoPE, then the sigmoid output gate and ``attn_output``."""
    c, p = b.c, b.p
    nt = b.nt
    n_head = p.n_head[il]
    hk_mla = c.hk_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
    inp_gate = cur
    if b.w(f"blk.{il}.attn_q_a.weight") is not None:
        q = b.mm(f"blk.{il}.attn_q_a.weight", cur)
        q = b.norm(q, f"blk.{il}.attn_q_a_norm.weight", il)
        q = b.mm(f"blk.{il}.attn_q_b.weight", q)
    else:
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
    out = b.attn(il, Q, K, kv, None, None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
    gate = b.w(f"blk.{il}.attn_gate.weight")
    if gate is not None:
        out = binary("MUL", out, unary("UNARY", mul_mat(gate, inp_gate)))  # sigmoid
    return b.mm(f"blk.{il}.attn_output.weight", out)


def latent_moe(b, cur, il):
    """``build_latent_moe``: routed experts on the down-projected input with the router's logits from the
    full-width one, situ, then ``ffn_routed_norm``/``ffn_routed_up``; plus the situ shared experts."""
    c = b.c
    routed_in = b.mm(f"blk.{il}.ffn_routed_down.weight", cur) if b.w(f"blk.{il}.ffn_routed_down.weight") else cur
    logits = b.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
    moe = b.moe(
        routed_in,
        il,
        gating=c.gating,
        norm_w=c.expert_weights_norm,
        w_scale=c.expert_weights_scale,
        probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
        probs_in=logits,
        act=lambda g, u: situ(b, g, u),
    )
    if b.w(f"blk.{il}.ffn_routed_norm.weight") is not None:
        moe = b.norm(moe, f"blk.{il}.ffn_routed_norm.weight", il)
    if b.w(f"blk.{il}.ffn_routed_up.weight") is not None:
        moe = b.mm(f"blk.{il}.ffn_routed_up.weight", moe)
    if b.w(f"blk.{il}.ffn_gate_shexp.weight") is not None:
        moe = binary("ADD", moe, situ_ffn(b, cur, il, "_shexp"))
    return moe


def build(b):
    c, p = b.c, b.p
    meta = c.meta
    a = c.arch
    c.situ_linear = float(meta.get(f"{a}.activation.situ_linear_beta", 0.0) or 0.0) > 0.0
    c.kda_lower_bound = meta.get(f"{a}.kda.gate_lower_bound") is not None
    res_bs = int(meta.get(f"{a}.attn_res.block_size", 0) or 0)
    nt = b.nt
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    stack = None
    for il in b.layers:
        prefix = inpL
        cur = res_mix(b, stack, prefix, b.w(f"blk.{il}.attn_res_score.weight")) if res_bs else prefix
        banked = bool(res_bs) and il % res_bs == 0
        if banked:
            ckpt = reshape(prefix, p.n_embd, 1, nt)
            stack = concat(stack, ckpt, 1) if stack is not None else ckpt
        cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
        b.g.expand(cur)
        if c.recurrent[il]:
            cur = kda_layer(b, cur, il)
        else:
            cur = mla_layer(b, cur, il)
        prefix = cur if banked else binary("ADD", prefix, cur)
        cur = res_mix(b, stack, prefix, b.w(f"blk.{il}.ffn_res_score.weight")) if res_bs else prefix
        cur = b.norm(cur, f"blk.{il}.ffn_norm.weight", il)
        if il < p.n_layer_dense_lead:
            cur = situ_ffn(b, cur, il, "")
        else:
            cur = latent_moe(b, cur, il)
        inpL = binary("ADD", prefix, cur)
    cur = res_mix(b, stack, inpL, b.w("output_res_score.weight")) if res_bs else inpL
    return b.output(cur, out_ids, norm_first=False)


FAMILY = Family(name="kimi-k3", build=build, exact=frozenset({"kimi-k3"}), rs_seq=True)
