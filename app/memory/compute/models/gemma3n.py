"""``src/models/gemma3n.cpp``: Gemma 3n's text model (E2B, E4B).

Around gemma3's layer (q/k norms, V RMS-normed without a weight, post-attention and post-FFN norms, GELU FFN, no
Q scaling: ``f_attention_scale`` 1) the graph carries AltUp's 4 streams ``[n_embd, n_tokens, 4]``: before the
layers the token embedding is stacked with 3 projections of itself (``altup_proj``, each rescaled to the input's
magnitude); each layer predicts the streams (a router over the active stream, ``altup_predict_coef``, a
``[4, n_embd, n_tokens]`` matmul), runs LAuReL (``laurel_l``/``laurel_r``) and attention on the active
prediction, corrects the streams with the result (``altup_correct_coef``) and adds the per-layer input (the
layer's slice of ``per_layer_token_embd`` rows plus ``per_layer_model_proj`` of the embedding, gated by
``inp_gate``, projected by ``proj``) to the other three; after the layers ``altup_unembd_proj`` folds them back
into one. The first 10 layers sparsify the FFN gate (``gaussian_topk``: mean + 1.645 std cut-off).

KV sharing (``n_layer_kv_from_start`` = 20): layers from 20 on compute only Q and attend over the cache of layer
18 (sliding) or 19 (full), wherever that cache lives, so a layer on another device than the cache reads a copy of
the whole cache view (the scheduler's input copy); their cache references name the owning layer
(``layer_crefs``, bound by absolute layer in ``core._run``). Layers differ in structure by KV ownership and
sparsity, which their tensors do not show, and each reads its own slice of the per-layer input (one more input
copy per layer on a device other than layer 0's): :func:`layer_kind` makes every layer its own kind, so the layer
compression keeps them all.

Checked against llama-fit-params (tests/memory/accuracy.py ``g3n*``: E2B and E4B on the CPU and 1-3 RPC devices)
and llama-server's load log (tiny model), exact.
"""

from __future__ import annotations

from ..builder import cache_views, qkv, rope
from ..ggml import (
    OUTPUT,
    binary,
    concat,
    cont,
    get_rows,
    mul_mat,
    new,
    permute,
    reshape,
    row_size,
    sum_rows,
    transpose,
    unary,
    view,
)
from . import Family

N_ALTUP = 4  # llama_hparams::n_altup (gemma3n reads no AltUp key)
I_ALTUP_ACT = 0  # llama_hparams::i_altup_act
N_EMBD_ALTUP = 256  # llama_hparams::n_embd_altup
N_LAYER_SPARSITY = 10  # llama_model_gemma3n::graph::n_layer_sparsity


def layer_kind(p, il):
    """What sets a layer apart beyond its tensors: whether it owns a KV cache, whether it sparsifies, and the layer
    itself. Each layer reads its own slice of the per-layer input, computed on layer 0's device: a layer elsewhere
    brings one more input copy into its device's split, and those copies add up over the split (dropping a layer
    "like its neighbours" lost 4-130 MiB on the second device of the -ts cases), so no two layers are alike."""
    own = p.n_layer_kv_from_start < 0 or il < p.n_layer_kv_from_start
    return (own, il < N_LAYER_SPARSITY, il)


def reused_layer(b, il):
    """The layer whose cache ``il`` reads (``llama_model::create_memory``'s reuse callback), or None if its own."""
    start = b.p.n_layer_kv_from_start
    if start < 0 or il < start:
        return None
    return start - (2 if b.c.is_swa(il) else 1)


def slice2d(x, idx):
    """``gemma3n_view_2d_slice``: the ``idx``-th ``[ne0, ne1]`` matrix of a 3-D tensor."""
    return view(x, (x.ne[0], x.ne[1]), (row_size(x.ty, x.ne[0]),))


def rest3d(x):
    """The streams after the first: ``ggml_view_3d(x, ne0, ne1, n_altup - 1, ...)`` at offset ``ne0 * ne1``."""
    return view(x, (x.ne[0], x.ne[1], x.ne[2] - 1), (x.nb[1], x.nb[2]))


def magnitude(x):
    return unary("SQRT", sum_rows(unary("SQR", x)))


def rescale(x, target):
    """``ggml_div(ggml_mul(x, target), magnitude(x))``."""
    mag = magnitude(x)
    return binary("DIV", binary("MUL", x, target), mag)


def router_modalities(b, x, il):
    cur = b.norm(x, f"blk.{il}.altup_router_norm.weight", il)
    cur = unary("SCALE", cur)
    return unary("UNARY", b.mm(f"blk.{il}.altup_router.weight", cur))  # tanh


def altup_predict(b, cur, il):
    nt = b.nt
    modalities = router_modalities(b, slice2d(cur, I_ALTUP_ACT), il)
    coefs = b.mm(f"blk.{il}.altup_predict_coef.weight", modalities)
    coefs = reshape(coefs, N_ALTUP, N_ALTUP, nt)
    permuted = cont(permute(cur, 1, 2, 0, 3))  # [n_altup, n_embd, n_tokens]
    pred = mul_mat(permuted, coefs)  # [n_embd, n_altup, n_tokens]
    pred = cont(permute(pred, 0, 2, 1, 3))
    return binary("ADD", pred, cur)


def altup_correct(b, predictions, activated, il):
    nt, n_embd = b.nt, b.p.n_embd
    modalities = router_modalities(b, activated, il)
    innovation = binary("SUB", activated, slice2d(predictions, I_ALTUP_ACT))
    coefs = b.mm(f"blk.{il}.altup_correct_coef.weight", modalities)
    coefs = unary("SCALE", coefs)  # ggml_scale_bias(.., 1, 1)
    coefs = cont(transpose(coefs), 1, nt, N_ALTUP)
    innovation = new(innovation.ty, (n_embd, nt, N_ALTUP), "REPEAT", (innovation,))
    corrected = binary("MUL", innovation, coefs)
    return binary("ADD", corrected, predictions)


def laurel(b, cur, il):
    tmp = b.mm(f"blk.{il}.laurel_l.weight", cur)
    tmp = b.mm(f"blk.{il}.laurel_r.weight", tmp)
    tmp = b.norm(tmp, f"blk.{il}.laurel_post_norm.weight", il)
    return binary("ADD", tmp, cur)


def gaussian_topk(x):
    mean = new("f32", (1, x.ne[1], x.ne[2], x.ne[3]), "MEAN", (x,))
    std = unary("SQRT", unary("SCALE", sum_rows(unary("SQR", binary("SUB", x, mean)))))
    cutoff = binary("ADD", mean, unary("SCALE", std))
    return unary("UNARY", binary("SUB", x, cutoff))  # relu


def shared_attn(b, il, src, q, wo):
    """``build_attn`` with no K/V of its own: Q over layer ``src``'s cache (nothing stored)."""
    c, g = b.c, b.g
    hk, hv, n_head_kv, swa = b.kv_dims(il)
    _k_idxs, _v_idxs, mask, k_rot, v_rot, n_kv = b.attn_inputs(swa)
    if k_rot is not None:
        q = b.hadamard(q, k_rot)
    g.expand(q)
    ns = c.n_stream
    kv_size = c.size_swa if swa else c.n_kv
    n_embd_k = hk * n_head_kv
    refs = b.__dict__.setdefault("layer_crefs", [])
    kc = new(c.type_k, (n_embd_k, kv_size, ns), "NONE")
    kc.size = 0
    kc.name = f"cache_k_l{src}"
    refs.append((kc, src))
    n_embd_v = c.n_embd_v_gqa_max if c.v_trans else hv * n_head_kv  # the cache's layout (context.py: v_trans)
    vc = new(c.type_v, (n_embd_v, kv_size, ns), "NONE")
    vc.size = 0
    vc.name = f"cache_v_l{src}"
    refs.append((vc, src))
    kview, vview = cache_views(kc, vc, hk, hv, n_head_kv, n_kv, kv_size, ns, c.v_trans)
    cur = b.mha(q, kview, vview, mask, None, None, il)
    if v_rot is not None:
        cur = b.hadamard(cur, v_rot)
    return mul_mat(wo, cur)


def build(b):
    c, p, g = b.c, b.p, b.g
    c.softcap = False  # gemma3n never soft-caps attention logits (hparams.attn_soft_cap stays false)
    nt, n_embd, n_layer = b.nt, p.n_embd, p.n_layer
    inpL = b.inp_embd()
    inpL = unary("SCALE", inpL)  # sqrt(n_embd) for token input
    pos = b.inp_pos()
    # build_inp_per_layer: its own token input, the rows of per_layer_token_embd, [n_embd_altup, n_layer, n_tokens]
    tokens = b.inp("inp_tokens_per_layer", "i32", (nt,))
    per_layer = get_rows(b.w("per_layer_token_embd.weight"), tokens)
    per_layer = reshape(per_layer, N_EMBD_ALTUP, n_layer, nt)
    per_layer = unary("SCALE", per_layer)
    g.expand(per_layer)
    # project_per_layer_inputs
    proj = b.mm("per_layer_model_proj.weight", inpL)
    proj = unary("SCALE", proj)
    proj = reshape(proj, N_EMBD_ALTUP, n_layer, nt)
    proj = b.norm(proj, "per_layer_proj_norm.weight", -1)
    per_layer = unary("SCALE", binary("ADD", proj, per_layer))
    per_layer = cont(permute(per_layer, 0, 2, 1, 3))  # [n_embd_altup, n_tokens, n_layer]
    # the other AltUp streams
    target = magnitude(inpL)
    repeated = new(inpL.ty, (n_embd, nt, N_ALTUP - 1), "REPEAT", (inpL,))
    added = rescale(mul_mat(b.w("altup_proj.weight"), repeated), target)
    inpL = concat(inpL, added, 2)  # [n_embd, n_tokens, n_altup]
    iswa = c.has_swa
    for il in b.layers:
        predictions = altup_predict(b, inpL, il)
        active = slice2d(predictions, I_ALTUP_ACT)
        cur = b.norm(active, f"blk.{il}.attn_norm.weight", il)
        laurel_out = laurel(b, cur, il)
        wo = b.w(f"blk.{il}.attn_output.weight")
        hd = p.head_dim_k_swa if c.is_swa(il) else p.head_dim_k
        hv = p.head_dim_v_swa if c.is_swa(il) else p.head_dim_v
        src = reused_layer(b, il)
        if src is None:
            q, k, v = qkv(b, il, cur, hd, hd, hv)
            q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
            k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
            v = unary("RMS_NORM", v)
            q = rope(q, pos)
            k = rope(k, pos)
            cur = b.attn(il, q, k, v, wo, None, iswa_order=iswa)
        else:
            q = reshape(b.mm(f"blk.{il}.attn_q.weight", cur), hd, p.n_head[il], nt)
            q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
            q = rope(q, pos)
            cur = shared_attn(b, il, src, q, wo)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        cur = binary("ADD", cur, active)
        attn_laurel = unary("SCALE", binary("ADD", cur, laurel_out))
        cur = b.norm(attn_laurel, f"blk.{il}.ffn_norm.weight", il)
        up = b.mm(f"blk.{il}.ffn_up.weight", cur)
        gate = b.mm(f"blk.{il}.ffn_gate.weight", cur)
        if il < N_LAYER_SPARSITY:
            gate = gaussian_topk(gate)
        gate = unary("UNARY", gate)  # gelu
        cur = b.mm(f"blk.{il}.ffn_down.weight", binary("MUL", up, gate))
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        gated = binary("ADD", cur, attn_laurel)
        corrected = altup_correct(b, predictions, gated, il)
        first = binary("MUL", slice2d(corrected, I_ALTUP_ACT), b.w(f"blk.{il}.altup_correct_scale.weight"))
        first = unary("UNARY", b.mm(f"blk.{il}.inp_gate.weight", first))  # gelu
        first = binary("MUL", first, slice2d(per_layer, il))
        first = b.mm(f"blk.{il}.proj.weight", first)
        first = b.norm(first, f"blk.{il}.post_norm.weight", il)
        tmp = binary("ADD", rest3d(corrected), first)
        inpL = concat(slice2d(corrected, 0), tmp, 2)
    # fold the streams back into one
    target = magnitude(slice2d(inpL, I_ALTUP_ACT))
    unembd = rescale(mul_mat(b.w("altup_unembd_proj.weight"), rest3d(inpL)), target)
    cur = slice2d(inpL, 0)
    for i in range(N_ALTUP - 1):
        cur = binary("ADD", cur, slice2d(unembd, i))
    cur = unary("SCALE", cur)
    cur = get_rows(cur, b.inp_out_ids())
    cur = b.norm(cur, "output_norm.weight", -1)
    cur.flags = cur.fl0 = OUTPUT  # t_embd
    logits = mul_mat(b.w("output.weight") or b.w("token_embd.weight@output"), cur)
    logits = unary("SCALE", logits)  # final logit soft-capping (always on: f_final_logit_softcapping 30)
    logits = unary("UNARY", logits)
    logits = unary("SCALE", logits)
    logits.flags = logits.fl0 = OUTPUT
    g.expand(logits)
    return logits


FAMILY = Family(name="gemma3n", build=build, exact=frozenset({"gemma3n"}), layer_kind=layer_kind)
