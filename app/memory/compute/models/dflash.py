"""DFlash and DSpark draft heads (``src/models/dflash.cpp``, ``--spec-type draft-dflash`` / ``draft-dspark``
``-md draft.gguf``).

The draft context reserves the decoder graph on a token batch (``llama_model_dflash::graph<false>``, the noise
block path: ``sched_reserve``'s ubatch has tokens, no embeddings). The feature-injection path (an embeddings batch
of the target's fused layer inputs, ``fc`` then each layer's K/V into the cache) runs only from
``common_speculative_impl_draft_dflash::process`` and is smaller: a projection and two rows per layer and token.

Replayed: DFlash (block diffusion over the draft's cache, non-causal) and DSpark (the same with a Markov head and
its optional confidence head). Not replayed, refused by :func:`build` with the reason: DFlash2 (per-layer dynamic
convolutions and a candidate selector, ``selector_hidden``) and DeepSeek-V4's DSpark stages
(``hyper_connection_count``).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import NONE, OUTPUT, binary, concat, cont, get_rows, mul_mat, new, permute, reshape, set_rows, unary, view
from ..mtp import add_sampling
from . import Family
from .rwkv7 import weight_reshape


def dflash_kind(meta, tensor_names) -> str:
    """What a ``dflash`` file drafts as: "dflash2" (a candidate selector), "dsv4" (DeepSeek-V4 DSpark stages),
    "dspark" (a Markov head) or "dflash"."""
    if "selector_hidden.weight" in tensor_names:
        return "dflash2"
    if int(meta.get("dflash.hyper_connection.count") or 0) > 0:
        return "dsv4"
    if "markov_w1.weight" in tensor_names:
        return "dspark"
    return "dflash"


def build(b):
    """``llama_model_dflash::graph<false>`` on a token batch: the noise tokens' embeddings (the draft's own
    ``token_embd`` or the target's through ``ctx_other``), per layer ``attn_norm``, Q/K/V with q/k norms and rope,
    attention over the draft's cache (non-causal unless the file says otherwise: same shapes), optional value
    scale and post norms, the residual, ``ffn_norm``, the FFN and its residual; ``output_norm`` as ``t_embd`` (an
    output), the lm_head over every token (no output-row selection), the d2t scatter onto the target's vocabulary,
    then DSpark's Markov head."""
    c, p = b.c, b.p
    kind = dflash_kind(c.meta, c.names)
    if kind == "dflash2":
        raise NotImplementedError("DFlash2's dynamic convolutions and candidate selector are not replayed")
    if kind == "dsv4":
        raise NotImplementedError("DeepSeek-V4's DSpark stages (hyper-connections, MLA, MoE) are not replayed")
    pos = b.inp_pos()
    tok_embd = b.w("token_embd.weight")
    if tok_embd is None:
        raise NotImplementedError("the DFlash head has no token_embd and the target model's is not known here")
    nt = b.nt
    tokens = b.inp("inp_tokens", "i32", (nt,))
    cur = get_rows(tok_embd, tokens)
    if c.embedding_scale:
        cur = unary("SCALE", cur)
    inpL = cur
    value_scale = bool(c.meta.get("dflash.attention.value_scale"))
    for il in b.layers:
        noise = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = qkv(b, il, noise, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if b.w(f"blk.{il}.attn_v.weight") is None:  # K shared as V, normed without a weight
            v = unary("RMS_NORM", v)
        freqs = b.w("blk.0.rope_freqs.weight")
        q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        sinks = b.w(f"blk.{il}.attn_sinks.weight")
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, sinks=sinks)
        if value_scale:
            cur = unary("SCALE", cur)
        if b.w(f"blk.{il}.post_attention_norm.weight") is not None:
            cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpL)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il)
        if b.w(f"blk.{il}.post_ffw_norm.weight") is not None:
            cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", il)
        cur = binary("ADD", cur, ffn_inp)
        scale = b.w(f"blk.{il}.layer_output_scale.weight")
        if scale is not None:
            cur = binary("MUL", cur, scale)
        inpL = cur
    embd = b.norm(inpL, "output_norm.weight", -1)
    embd.flags = embd.fl0 = OUTPUT  # t_embd
    # the draft's lm_head, its tied token_embd (TENSOR_DUPLICATED), else the target's (compute_buffers' borrowed)
    output = b.w("output.weight") or (b.w("token_embd.weight@output") if "token_embd.weight" in c.names else None)
    if output is None:
        raise NotImplementedError("the DFlash head has no output.weight and the target model's is not known here")
    logits = b.mm_s(output, embd)
    d2t = b.w("d2t")
    if d2t is not None:
        logits = _scatter(logits, d2t, p.n_vocab, "-inf")
    b.g.expand(logits)
    if kind == "dspark":  # its biased logits replace t_logits: the unbiased ones are no output then
        logits = _markov(b, logits, embd, tokens, d2t)
    logits.flags = logits.fl0 = OUTPUT
    if c.backend_sampler:  # the second reserve, after llama_set_sampler: top-k per slot (not for DFlash2)
        # common_base_params_to_speculative: a block draft's n_outputs_max_per_seq is n_max + 1 with backend
        # sampling, so the reserve samples that many rows of each slot (ubatch_prepare_reserve)
        per_seq = min(nt // c.n_seqs, max(1, c.spec_draft_n_max + 1))
        add_sampling(b, logits, c.n_seqs, max(1, min(per_seq, c.n_outputs // c.n_seqs)))
    return logits


def _scatter(x, d2t, n_vocab, _fill):
    """The draft vocabulary's rows set into a filled ``[1, n_vocab, n]`` (``ggml_fill``, ``ggml_set_rows``),
    2-D again."""
    n_draft, n = x.ne[0], x.ne[1]
    filled = unary("FILL", new("f32", (1, n_vocab, n), NONE))
    rows = set_rows(filled, reshape(x, 1, n_draft, n), weight_reshape(d2t, n_draft, 1, 1))
    return reshape(rows, n_vocab, n)


def _markov(b, base, embd, tokens, d2t):
    """``build_dspark_markov_head``: for each drafted position of every block (``ubatch.n_seqs_unq`` blocks of
    ``n_tokens / n_blocks`` tokens, skipped where that exceeds ``dflash.block_size``), the previous token's
    ``markov_w1`` row through ``markov_w2`` as a bias on the position's logits, chained by argmax; with a
    confidence head, a sigmoid of ``conf_proj`` over the position's hidden state and that row. The columns are
    concatenated position-major and permuted back to block-major order (the new ``t_logits``, and the
    confidences broadcast to ``t_h_nextn``)."""
    c, g = b.c, b.g
    n_vocab, n_tok = base.ne[0], base.ne[1]
    n_blocks = c.n_seqs
    block_size = int(c.meta.get("dflash.block_size") or 0)
    anchor = c.meta.get("dflash.sample_from_anchor")
    sample_from_anchor = anchor is None or bool(anchor)
    drafts = n_tok // n_blocks
    if drafts > block_size:
        return base
    w1, w2 = b.w("markov_w1.weight"), b.w("markov_w2.weight")
    conf_w, conf_b = b.w("conf_proj.weight"), b.w("conf_proj.bias")
    prev = cont(view(tokens, (1, n_blocks), (drafts * tokens.nb[0],)), n_blocks)
    cat = cat_conf = None
    if not sample_from_anchor:
        cat = cont(view(base, (n_vocab, n_blocks), (drafts * base.nb[1],)))
        if conf_w is not None:
            cat_conf = unary("SIGMOID", cont(view(base, (1, n_blocks), (drafts * base.nb[1],))))
    for i in range(0 if sample_from_anchor else 1, drafts):
        w1_prev = get_rows(w1, prev)
        bias = b.mm_s(w2, w1_prev)
        if d2t is not None:
            bias = _scatter(bias, d2t, n_vocab, 0.0)
        base_i = view(base, (n_vocab, n_blocks), (drafts * base.nb[1],))
        col = binary("ADD", base_i, bias)
        cat = concat(cat, col, 1) if cat is not None else col
        if conf_w is not None:
            emb_i = view(embd, (embd.ne[0], n_blocks), (drafts * embd.nb[1],))
            feat = concat(cont(emb_i), w1_prev, 0)
            conf = mul_mat(conf_w, feat)
            if conf_b is not None:
                conf = binary("ADD", conf, conf_b)
            conf = unary("SIGMOID", conf)
            cat_conf = concat(cat_conf, conf, 1) if cat_conf is not None else conf
        if i + 1 < drafts:
            prev = new("i32", (n_blocks,), "ARGMAX", (col,))
    out = reshape(cat, n_vocab, n_blocks, drafts)
    out = reshape(cont(permute(out, 0, 2, 1, 3)), n_vocab, n_tok)
    if cat_conf is not None:
        conf = reshape(cat_conf, 1, n_blocks, drafts)
        conf = reshape(cont(permute(conf, 0, 2, 1, 3)), 1, n_tok)
        conf = new("f32", embd.ne, "REPEAT", (conf,))
        conf.flags = conf.fl0 = OUTPUT  # t_h_nextn
        g.expand(conf)
    g.expand(out)
    return out


FAMILY = Family(name="dflash", build=build, exact=frozenset({"dflash"}), uncut=True)
