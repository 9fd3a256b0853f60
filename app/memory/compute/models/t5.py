"""``src/models/t5.cpp`` (T5, Flan-T5): the decoder's graph, which is what llama.cpp reserves (``graph<false>`` for
``LLM_GRAPH_TYPE_DEFAULT``; the encoder's ``graph<true>`` is only built by ``llama_encode``).

Inputs: the token embeddings, the encoder's output ``cross_embd`` (``n_embd`` x ``n_ctx_train`` rows at reserve
time: no encoding has happened), the decoder's position buckets ``pos_bucket_dec`` (n_kv x n_tokens, i32), the
self-attention's cache inputs and the cross attention's mask (``n_ctx_train`` x n_tokens, f16 with flash
attention). Per decoder layer: RMS norm, Q/K/V, the relative-position bias (``build_pos_bias``: ``get_rows`` of
the layer's ``attn_rel_b``, else layer 0's, by the buckets, permuted to n_kv x n_tokens x n_head and made
contiguous) added to KQ, which keeps this attention off flash attention (``use_flash_attn = cparams.flash_attn
&& kq_b == nullptr``) whatever the context says; ``attn_o``, residual; RMS norm, cross attention over the
encoder rows (Q of the tokens, K and V projected from ``cross_embd``, no cache: expanded Q, K, V), ``cross_attn_o``,
residual; RMS norm, the gated-GELU FFN (ReLU without ``ffn_gate``), residual. Then ``dec.output_norm`` and
``output``.

A per-sequence cache (``-np`` > 1 without a unified cache) aborts llama.cpp: the bias of n_kv x n_tokens x n_head
cannot repeat over KQ split into streams (``GGML_ASSERT(ggml_can_repeat(b, a))``); refused with that reason."""

from __future__ import annotations

from ...backends import BackendAbort
from ..ggml import binary, cont, get_rows, glu_split, permute, reshape, unary
from . import Family


def _pos_bias(b, buckets, il):
    """``build_pos_bias`` with the layer's bias table, else layer 0's."""
    rel = b.w(f"dec.blk.{il}.attn_rel_b.weight") or b.w(f"dec.blk.{b.layers[0]}.attn_rel_b.weight")
    if rel is None:
        raise ValueError("the decoder has no attn_rel_b")
    flat = reshape(buckets, buckets.ne[0] * buckets.ne[1])
    bias = get_rows(rel, flat)
    bias = reshape(bias, bias.ne[0], buckets.ne[0], buckets.ne[1])
    return cont(permute(bias, 2, 0, 1, 3))


def build(b):
    c, p, nt = b.c, b.p, b.nt
    if c.n_stream > 1:
        raise BackendAbort(
            "llama.cpp aborts on T5 with a cache per sequence (-np above 1 without a unified cache): the "
            "relative-position bias cannot be added to attention scores split into streams "
            '("GGML_ASSERT(ggml_can_repeat(b, a)) failed"); use -kvu, or -np 1'
        )
    hd = p.head_dim_k
    n_head, n_head_kv = p.n_head[0], p.n_head_kv[0]
    inpL = b.inp_embd()
    n_enc = p.n_ctx_train
    embd_enc = b.inp("cross_embd", "f32", (p.n_embd, n_enc))
    buckets = b.inp("pos_bucket_dec", "i32", (c.n_kv, nt))
    out_ids = b.inp_out_ids()
    g = b.g
    dec_last = p.dec_n_layer - 1  # the decoder runs its first dec_n_layer layers (decoder_block_count)
    for il in b.layers:
        if il > dec_last:  # a layer of the encoder only: its cache exists (n_layer_all), no decoder op reads it
            continue
        pfx = f"dec.blk.{il}."
        inpSA = inpL
        cur = b.norm(inpL, pfx + "attn_norm.weight", il)
        q = reshape(b.mm_s(pfx + "attn_q.weight", cur), hd, n_head, nt)
        k = reshape(b.mm_s(pfx + "attn_k.weight", cur), hd, n_head_kv, nt)
        v = reshape(b.mm_s(pfx + "attn_v.weight", cur), hd, n_head_kv, nt)
        kq_b = _pos_bias(b, buckets, il)
        cur = b.attn(il, q, k, v, b.w(pfx + "attn_o.weight"), None, kq_b=kq_b)
        cur = binary("ADD", cur, inpSA)
        inpCA = cur
        cur = b.norm(cur, pfx + "cross_attn_norm.weight", il)
        qc = reshape(b.mm_s(pfx + "cross_attn_q.weight", cur), hd, n_head, nt)
        kc = reshape(b.mm_s(pfx + "cross_attn_k.weight", embd_enc), hd, n_head_kv, n_enc)
        vc = reshape(b.mm_s(pfx + "cross_attn_v.weight", embd_enc), hd, n_head_kv, n_enc)
        g.expand(qc)
        g.expand(kc)
        g.expand(vc)
        mask = b.inp("cross_kq_mask", "f16" if c.fa else "f32", (n_enc, nt, 1, 1))
        cur = b.mm_s(pfx + "cross_attn_o.weight", b.mha(qc, kc, vc, mask, None, None, il))
        if il == dec_last:
            cur, inpCA = get_rows(cur, out_ids), get_rows(inpCA, out_ids)
        ffn_inp = binary("ADD", cur, inpCA)
        cur = b.norm(ffn_inp, pfx + "ffn_norm.weight", il)
        up = b.mm_s(pfx + "ffn_up.weight", cur)
        gate = b.w(pfx + "ffn_gate.weight")
        if gate is not None:  # LLM_FFN_GELU, LLM_FFN_PAR: ggml_geglu_split(gate, up)
            cur = glu_split(b.mm_s(gate, cur), up)
        else:  # LLM_FFN_RELU, LLM_FFN_SEQ
            cur = unary("UNARY", up)
        cur = binary("ADD", b.mm_s(pfx + "ffn_down.weight", cur), ffn_inp)
        inpL = cur
    return b.output(inpL, norm="dec.output_norm")


FAMILY = Family(
    name="t5",
    build=build,
    exact=frozenset({"t5"}),
    # every layer's position bias is gathered from layer 0's table, on layer 0's device, and copied from there: that
    # device's peak grows with the layers replayed (a cut Flan-T5-large -ts 1,2,1 was 5.7 GiB short on it)
    uncut=True,
    # the decoder's last layer keeps only the output rows: a structure of its own where the encoder is deeper
    layer_kind=lambda p, il: (il == p.dec_n_layer - 1, il >= p.dec_n_layer),
)
