"""``src/models/granite-switch.cpp`` (Granite Switch): a dense Granite whose seven projections per layer each add a
LoRA delta of the adapter a token switched on, read from stacked ``lora_a`` / ``lora_b`` tensors through
``MUL_MAT_ID`` (one adapter slot per token).

The slot comes from a router built before the layers: a one-head attention (``il`` = the router layer, which
llama.cpp appends after the real layers and which has a KV cache but no weights) over three padded per-token
signals, whose first output row is clamped, rounded and cast to the i32 adapter ids every layer reads. The
tokens are embedded after substitution (``get_rows`` of a substituted-token input, no ``build_inp_embd``).

Per layer: RMS norm, the fused ``attn_qkv`` split by contiguous copies of 2-D views, each plus its LoRA delta,
rope (where ``rope.scaling.finetuned`` leaves it on), attention without an output projection, ``attn_output``
plus its delta, the residual scale, residual, RMS norm, gate and up each plus a delta, SiLU, the product,
``ffn_down`` plus a delta, the residual scale, residual. The last real layer keeps the output rows of the
adapter ids too. Logits scaled by ``1 / logit_scale``."""

from __future__ import annotations

from ..builder import qkv_2d, rope
from ..ggml import binary, cont, get_rows, mul_mat, mul_mat_id, new, pad, reshape, unary, view
from . import Family


def _delta(b, il, proj, cur, ids):
    """``build_switched_lora_delta``: B_a (A_a x) with the adapter chosen per token."""
    nt = cur.ne[1]
    x = reshape(cur, cur.ne[0], 1, nt)
    ids2 = reshape(ids, 1, nt)
    a = mul_mat_id(b.w(f"blk.{il}.{proj}.lora_a"), x, ids2)
    d = mul_mat_id(b.w(f"blk.{il}.{proj}.lora_b"), a, ids2)
    return reshape(d, d.ne[0], nt)


def _switched_mm(b, il, proj, cur, ids):
    """``build_switched_lora_mm``: the base product plus the adapter's delta."""
    base = mul_mat(b.w(f"blk.{il}.{proj}.weight"), cur)
    return binary("ADD", base, _delta(b, il, proj, cur, ids))


def build(b):
    c, p, nt = b.c, b.p, b.nt
    hd = p.head_dim_v
    router = p.router_layer
    last = router - 1
    sub = b.inp("sub_tokens", "i32", (nt,))
    ksig = b.inp("router_ksig", "f32", (nt,))
    vval = b.inp("router_vval", "f32", (nt,))
    q1 = b.inp("router_q", "f32", (nt,))
    inpL = get_rows(b.w("token_embd.weight"), sub)
    if c.embedding_scale:
        inpL = unary("SCALE", inpL)
    roped = bool(c.meta.get(f"{p.arch}.rope.scaling.finetuned", True))
    pos = b.inp_pos() if roped else None
    out_ids = b.inp_out_ids()

    def lane(sig):
        return pad(reshape(sig, 1, 1, nt), hd - 1)

    # the router: a causal one-head attention over the adapter signals, on the router layer's cache
    router_out = b.attn(router, lane(q1), lane(ksig), lane(vval), None, None)
    slot = reshape(cont(view(router_out, (1, nt), (router_out.nb[1],))), nt)
    slot = unary("UNARY", unary("CLAMP", slot))  # clamp to the slots, round
    ids = new("i32", slot.ne, "CPY", (slot,))  # ggml_cast to I32
    for il in b.layers:
        if il == router:
            continue
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv_2d(b, il, cur, hd)
        q = binary("ADD", q, _delta(b, il, "attn_q", cur, ids))
        k = binary("ADD", k, _delta(b, il, "attn_k", cur, ids))
        v = binary("ADD", v, _delta(b, il, "attn_v", cur, ids))
        q = reshape(q, hd, p.n_head[il], nt)
        k = reshape(k, hd, p.n_head_kv[il], nt)
        v = reshape(v, hd, p.n_head_kv[il], nt)
        if roped:
            q, k = rope(q, pos), rope(k, pos)
        attn = b.attn(il, q, k, v, None, None)
        cur = _switched_mm(b, il, "attn_output", attn, ids)
        if il == last:
            cur, inpSA = get_rows(cur, out_ids), get_rows(inpSA, out_ids)
            ids = reshape(get_rows(reshape(ids, 1, ids.ne[0]), out_ids), out_ids.ne[0])
        if c.residual_scale:
            cur = unary("SCALE", cur)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        gate = unary("UNARY", _switched_mm(b, il, "ffn_gate", cur, ids))  # ggml_silu
        up = _switched_mm(b, il, "ffn_up", cur, ids)
        cur = _switched_mm(b, il, "ffn_down", binary("MUL", gate, up), ids)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        inpL = binary("ADD", cur, ffn_inp)
    return b.output(inpL, out_ids)


FAMILY = Family(
    name="graniteswitch",
    build=build,
    exact=frozenset({"graniteswitch"}),
    # the last real layer keeps only the output rows (and their adapter ids): a structure of its own
    layer_kind=lambda p, il: il == p.router_layer - 1,
)
