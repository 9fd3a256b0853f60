"""``src/models/gemma4.cpp``: Gemma 4's text model (E2B, E4B, 26B-A4B, 31B).

gemma3's layer (scaled embeddings, q/k norms, V RMS-normed without a weight, post-attention and post-FFN norms,
GELU FFN, no Q scaling) with different head sizes and KV head counts on sliding and full layers; full layers rope
with the ``rope_freqs`` factors (one tensor created with the first full layer, ``TENSOR_DUPLICATED`` for the
others: each layer reads the copy on its own device) and, without ``attn_v`` (``attention_k_eq_v``), take V from
K's projection. An optional ``layer_output_scale`` multiplies each layer's output.

KV sharing (``n_layer_kv_from_start`` = n_layer - ``attention.shared_kv_layers``): later layers compute only Q
and attend over the cache of the last own sliding or full layer (the reuse callback of gemma3n), wherever it
lives; their cache references name the owning layer (``layer_crefs``). Per-layer embeddings (E2B/E4B): the rows
of ``per_layer_token_embd`` (its own token input) plus ``per_layer_model_proj`` of the scaled embedding, normed,
added and permuted to ``[n_pl, n_tokens, n_layer]``; each layer gates its output into its slice. MoE layers
(26B-A4B): the dense FFN as a shared MLP (post-normed by ``post_ffw_norm_1``) plus experts on
``pre_ffw_norm_2`` of the attention output, routed by ``ffn_gate_inp`` on the RMS-normed, scaled and
``ffn_gate_inp.scale``-weighted attention output (softmax, normalised top-k weights, GELU experts, the
per-expert ``ffn_down_exps.scale`` gathered for the selected experts), post-normed by ``post_ffw_norm_2``.
After the output norm the whole hidden state is a graph output (``t_h_nextn``), then the output rows are taken.

Quantized caches rotate per cache (``llama_kv_cache``: ``n_embd_head_k_all`` is per cache, and the sliding and
full caches each have one head size), so the rotation inputs are sized per layer kind here.

Like gemma3n, with per-layer embeddings or KV sharing every layer is its own kind (:func:`layer_kind`): each
reads its own slice of the per-layer input and the KV-sharing layers read caches by absolute layer.

Checked against llama-fit-params (tests/memory/accuracy.py ``g4*``: E2B, E4B, 26B-A4B and 31B on the CPU and
1-3 RPC devices) and llama-server's load log (tiny model with every feature at once), exact.
"""

from __future__ import annotations

from ...kv import CACHE_TYPE_BLOCKS
from ..builder import layer_copy, rope, sum_experts
from ..ggml import (
    OUTPUT,
    T,
    argsort_top_k,
    binary,
    cont,
    get_rows,
    glu_split,
    mul_mat,
    mul_mat_id,
    ne4,
    new,
    permute,
    reshape,
    row_size,
    sum_rows,
    unary,
    view,
)
from . import Family
from .gemma3n import reused_layer, shared_attn


def layer_kind(p, il):
    """With per-layer embeddings or KV sharing every layer is its own kind (see the module docstring); without
    either (26B-A4B, 31B) the layers differ only by what their tensors show, and the compression applies."""
    own = p.n_layer_kv_from_start < 0 or il < p.n_layer_kv_from_start
    if p.n_embd_per_layer or 0 <= p.n_layer_kv_from_start < p.n_layer:
        return (own, il)
    return (own,)


def rot_size(hd, quantized, head0):
    """``llama_kv_cache::build_input_k_rot``'s size for a cache whose layers all have head size ``hd``."""
    if not quantized or head0 % 64:
        return 0
    n = 64
    while True:
        n *= 2
        if hd % n:
            break
    return n // 2


def _slice(x, il):
    """``gemma4_view_2d_slice``: the ``il``-th ``[ne0, ne1]`` matrix of a 3-D tensor."""
    return view(x, (x.ne[0], x.ne[1]), (row_size(x.ty, x.ne[0]),))


def _moe(b, cur, il, logits):
    """``build_moe_ffn`` as gemma4 calls it: router logits given, softmax, normalised top-k weights, GELU
    experts (fused ``ffn_gate_up_exps`` or separate), the per-expert down scale."""
    c, g = b.c, b.g
    n_embd, nt = cur.ne[0], cur.ne[1]
    n_exp, k = c.n_expert, c.n_expert_used
    probs = unary("SOFT_MAX", logits)
    selected = argsort_top_k(probs, k)
    weights = get_rows(reshape(probs, 1, n_exp, nt), selected)
    weights = reshape(weights, k, nt)
    wsum = unary("CLAMP", sum_rows(weights))
    weights = reshape(binary("DIV", weights, wsum), 1, k, nt)
    g.expand(weights)
    cur = reshape(cur, n_embd, 1, nt)
    gate_up = b.w(f"blk.{il}.ffn_gate_up_exps.weight")
    if gate_up is not None:
        gu = mul_mat_id(gate_up, cur, selected)
        nff = gu.ne[0] // 2
        gate = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
        up = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
    else:
        up = mul_mat_id(b.w(f"blk.{il}.ffn_up_exps.weight"), cur, selected)
        gate = mul_mat_id(b.w(f"blk.{il}.ffn_gate_exps.weight"), cur, selected)
    act = glu_split(gate, up)  # geglu
    experts = mul_mat_id(b.w(f"blk.{il}.ffn_down_exps.weight"), act, selected)
    down_s = b.w(f"blk.{il}.ffn_down_exps.scale")
    if down_s is not None:  # build_lora_mm_id's w_s
        # a reshape of the weight: a view with the weight's own strides (weights carry no compute type)
        s = T(down_s.ty, ne4((1, down_s.ne[0], 1)), down_s.nb, "RESHAPE", [down_s], down_s)
        s = new("f32", (1, down_s.ne[0], nt), "REPEAT", (s,))
        s = get_rows(s, selected)
        experts = binary("MUL", experts, s)
    experts = binary("MUL", experts, weights)
    return sum_experts(g, experts, k)


def build(b):
    c, p, g = b.c, b.p, b.g
    c.softcap = False  # attention logits are never soft-capped (only the final logits)
    nt, n_layer = b.nt, p.n_layer
    names = c.names
    # per-cache Hadamard rotations of quantized caches (sliding / full caches each have one head size)
    qk = CACHE_TYPE_BLOCKS.get(c.type_k, (1, 2))[0] > 1
    qv = CACHE_TYPE_BLOCKS.get(c.type_v, (1, 2))[0] > 1
    head0_k = p.head_dim_k_swa if c.is_swa(0) else p.head_dim_k
    head0_v = p.head_dim_v_swa if c.is_swa(0) else p.head_dim_v
    rot_k = {True: rot_size(p.head_dim_k_swa, qk, head0_k), False: rot_size(p.head_dim_k, qk, head0_k)}
    rot_v = {True: qv and head0_v % 64 == 0, False: qv and head0_v % 64 == 0}
    inpL = b.inp_embd()
    inpL = unary("SCALE", inpL)  # sqrt(n_embd) for token input
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    per_layer = None
    if "per_layer_token_embd.weight" in names:
        n_pl = c.shapes[names["per_layer_model_proj.weight"]][1] // n_layer
        tokens = b.inp("inp_tokens_per_layer", "i32", (nt,))
        per_layer = get_rows(b.w("per_layer_token_embd.weight"), tokens)
        per_layer = reshape(per_layer, n_pl, n_layer, nt)
        per_layer = unary("SCALE", per_layer)
        g.expand(per_layer)
        proj = b.mm("per_layer_model_proj.weight", inpL)
        proj = unary("SCALE", proj)
        proj = reshape(proj, n_pl, n_layer, nt)
        proj = b.norm(proj, "per_layer_proj_norm.weight", -1)
        per_layer = unary("SCALE", binary("ADD", proj, per_layer))
        per_layer = cont(permute(per_layer, 0, 2, 1, 3))  # [n_pl, n_tokens, n_layer]
    for il in b.layers:
        swa = c.is_swa(il)
        c.rot_k, c.rot_v = rot_k[swa], rot_v[swa]
        hd = p.head_dim_k_swa if swa else p.head_dim_k
        n_head, n_head_kv = p.n_head[il], p.n_head_kv[il]
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        freqs = None if swa else layer_copy(b, "rope_freqs.weight", il)
        q = b.mm(f"blk.{il}.attn_q.weight", cur)
        q = reshape(q, hd, n_head, nt)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        q = rope(q, pos, freqs)
        wo = b.w(f"blk.{il}.attn_output.weight")
        src = reused_layer(b, il)
        if src is None:
            k = b.mm(f"blk.{il}.attn_k.weight", cur)
            v = b.mm(f"blk.{il}.attn_v.weight", cur) if f"blk.{il}.attn_v.weight" in names else k
            k = reshape(k, hd, n_head_kv, nt)
            v = reshape(v, hd, n_head_kv, nt)
            k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
            v = unary("RMS_NORM", v)
            k = rope(k, pos, freqs)
            cur = b.attn(il, q, k, v, wo, None, iswa_order=True)
        else:
            cur = shared_attn(b, il, src, q, wo)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        attn_out = binary("ADD", cur, inpL)
        if f"blk.{il}.ffn_gate_inp.weight" in names:
            mlp = b.norm(attn_out, f"blk.{il}.ffn_norm.weight", il)
            mlp = b.ffn(mlp, "ffn", il, act="gelu")
            mlp = b.norm(mlp, f"blk.{il}.post_ffw_norm_1.weight", il)
            moe = b.norm(attn_out, f"blk.{il}.pre_ffw_norm_2.weight", il)
            tmp = unary("RMS_NORM", attn_out)
            tmp = unary("SCALE", tmp)
            tmp = binary("MUL", tmp, b.w(f"blk.{il}.ffn_gate_inp.scale"))
            logits = b.mm(f"blk.{il}.ffn_gate_inp.weight", tmp)
            moe = _moe(b, moe, il, logits)
            moe = b.norm(moe, f"blk.{il}.post_ffw_norm_2.weight", il)
            cur = binary("ADD", mlp, moe)
        else:
            cur = b.norm(attn_out, f"blk.{il}.ffn_norm.weight", il)
            cur = b.ffn(cur, "ffn", il, act="gelu")
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        cur = binary("ADD", cur, attn_out)
        if per_layer is not None:
            pe_in = cur
            cur = b.mm(f"blk.{il}.inp_gate.weight", cur)
            cur = unary("UNARY", cur)  # gelu
            cur = binary("MUL", cur, _slice(per_layer, il))
            cur = b.mm(f"blk.{il}.proj.weight", cur)
            cur = b.norm(cur, f"blk.{il}.post_norm.weight", il)
            cur = binary("ADD", pe_in, cur)
        scale = b.w(f"blk.{il}.layer_output_scale.weight")
        if scale is not None:
            cur = binary("MUL", cur, scale)
        inpL = cur
    cur = b.norm(inpL, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_h_nextn: the whole post-norm hidden state
    cur = get_rows(cur, out_ids)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    if c.meta.get(f"{c.arch}.final_logit_softcapping"):
        logits = unary("SCALE", logits)
        logits = unary("UNARY", logits)  # tanh
        logits = unary("SCALE", logits)
    logits.flags = logits.fl0 = OUTPUT
    g.expand(logits)
    return logits


FAMILY = Family(name="gemma4", build=build, exact=frozenset({"gemma4"}), layer_kind=layer_kind)
