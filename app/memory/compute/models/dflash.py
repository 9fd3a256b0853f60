"""DFlash and DSpark draft heads (``src/models/dflash.cpp``, ``--spec-type draft-dflash`` / ``draft-dspark``
``-md draft.gguf``).

The draft context reserves the decoder graph on a token batch (``llama_model_dflash::graph<false>``, the noise
block path: ``sched_reserve``'s ubatch has tokens, no embeddings). The feature-injection path (an embeddings batch
of the target's fused layer inputs, ``fc`` then each layer's K/V into the cache) runs only from
``common_speculative_impl_draft_dflash::process`` and is smaller: a projection and two rows per layer and token.

Replayed: DFlash (block diffusion over the draft's cache, non-causal), DSpark (the same with a Markov head and its
optional confidence head), DFlash2 (per-layer dynamic convolutions around attention and FFN, and a candidate
selector packed into ``t_h_nextn``) and DeepSeek-V4 DSpark heads (``hyper_connection.count``: DeepSeek-V4 blocks
over a K-only sliding-window cache, ``graph_dsv4``).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import NONE, OUTPUT, binary, concat, cont, get_rows, mul_mat, new, permute, reshape, set_rows, unary, view
from ..mtp import add_sampling
from . import Family
from .deepseek4 import _block as deepseek4_block
from .deepseek4 import hc_head
from .rwkv7 import weight_reshape


def dflash_kind(p, tensor_names) -> str:
    """What a ``dflash`` file (its :class:`~app.model.hparams.ModelParams` ``p``) drafts as: "dflash2" (a candidate
    selector), "dsv4" (DeepSeek-V4 DSpark stages), "dspark" (a Markov head) or "dflash"."""
    if "selector_hidden.weight" in tensor_names:
        return "dflash2"
    if p.hc_mult > 0:
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
    kind = dflash_kind(p, c.names)
    if kind == "dsv4":
        return _build_dsv4(b)
    pos = b.inp_pos()
    nt = b.nt
    tokens = b.inp("inp_tokens", "i32", (nt,))
    cur = get_rows(_tok_embd(b), tokens)
    if p.dflash.get("embedding_scale"):
        cur = unary("SCALE", cur)
    inpL = cur
    value_scale = p.dflash.get("attention.value_scale", 0.0) != 0
    for il in b.layers:
        noise = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        attn_dyn = None
        if b.w(f"blk.{il}.attn_conv_proj.weight") is not None:  # DFlash2: a dynamic convolution in and out
            attn_dyn = b.mm_s(f"blk.{il}.attn_conv_proj.weight", noise)
            noise = _conv(b, noise, attn_dyn, b.w(f"blk.{il}.attn_conv_base"), 0)
        shared_kv = b.w(f"blk.{il}.attn_v.weight") is None  # no wv: V is K's projection, RMS-normed alone
        if shared_kv:
            hd, nt_ = p.head_dim_k, b.nt
            q = reshape(b.mm_s(f"blk.{il}.attn_q.weight", noise), hd, p.n_head[il], nt_)
            kp = b.mm_s(f"blk.{il}.attn_k.weight", noise)
            k, v = reshape(kp, hd, p.n_head_kv[il], nt_), reshape(kp, hd, p.n_head_kv[il], nt_)
        else:
            q, k, v = qkv(b, il, noise, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        k = b.norm(k, f"blk.{il}.attn_k_norm.weight", il)
        if shared_kv:
            v = unary("RMS_NORM", v)
        freqs = b.w("blk.0.rope_freqs.weight")
        q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        sinks = b.w(f"blk.{il}.attn_sinks.weight")
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None, sinks=sinks)
        if value_scale:
            cur = unary("SCALE", cur)
        if attn_dyn is not None:
            cur = _conv(b, cur, attn_dyn, b.w(f"blk.{il}.attn_conv_base"), 1)
        if b.w(f"blk.{il}.post_attention_norm.weight") is not None:
            cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        ffn_inp = binary("ADD", cur, inpL)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        ffn_dyn = None
        if b.w(f"blk.{il}.ffn_conv_proj.weight") is not None:
            ffn_dyn = b.mm_s(f"blk.{il}.ffn_conv_proj.weight", cur)
            cur = _conv(b, cur, ffn_dyn, b.w(f"blk.{il}.ffn_conv_base"), 0)
        cur = b.ffn(cur, "ffn", il)
        if ffn_dyn is not None:
            cur = _conv(b, cur, ffn_dyn, b.w(f"blk.{il}.ffn_conv_base"), 1)
        if b.w(f"blk.{il}.post_ffw_norm.weight") is not None:
            cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", il)
        cur = binary("ADD", cur, ffn_inp)
        scale = b.w(f"blk.{il}.layer_output_scale.weight")
        if scale is not None:
            cur = binary("MUL", cur, scale)
        inpL = cur
    embd = b.norm(inpL, "output_norm.weight", -1)
    embd.flags = embd.fl0 = OUTPUT  # t_embd
    logits = b.mm_s(_lm_head(b), embd)
    if kind == "dflash2":  # the selector reads these logits: the target's output transforms first
        if p.dflash.get("logit_scale"):
            logits = unary("SCALE", logits)
        if p.dflash.get("final_logit_softcapping", 0.0) > 0:
            logits = unary("SCALE", unary("UNARY", unary("SCALE", logits)))
    d2t = b.w("d2t")
    if d2t is not None:
        logits = d2t_scatter(b.g, logits, d2t, p.n_vocab)
    b.g.expand(logits)
    if kind == "dspark":  # its biased logits replace t_logits: the unbiased ones are no output then
        logits = _markov(b, logits, embd, tokens, d2t)
    logits.flags = logits.fl0 = OUTPUT
    if kind == "dflash2":
        _selector(b, logits, embd, tokens)
    if c.backend_sampler and kind != "dflash2":  # the reserve after llama_set_sampler (DFlash2 gets no sampler)
        _sample(b, logits)
    return logits


def _tok_embd(b):
    """The noise tokens' embeddings: the head's own ``token_embd``, else the target's (``ctx_other``: compute_buffers'
    borrowed tensors)."""
    t = b.w("token_embd.weight")
    if t is None:
        raise NotImplementedError("the DFlash head has no token_embd and the target model's is not known here")
    return t


def _lm_head(b):
    """The head's lm_head: its ``output``, its own ``token_embd`` (TENSOR_DUPLICATED), else the target's."""
    t = b.w("output.weight") or (b.w("token_embd.weight@output") if "token_embd.weight" in b.c.names else None)
    if t is None:
        raise NotImplementedError("the DFlash head has no output.weight and the target model's is not known here")
    return t


def _sample(b, logits):
    """The top-k backend sampler's rows: common_base_params_to_speculative gives a block draft
    ``n_outputs_max_per_seq`` = n_max + 1 with backend sampling; ubatch_prepare_reserve gives each slot's sampler up
    to that many of the reserve's outputs, in slot order, and build_sampling samples every one (a slot left
    without outputs samples a dummy row)."""
    c = b.c
    per_seq = min(b.nt // c.n_seqs, max(1, c.spec_draft_n_max + 1))
    left, rows = c.n_outputs, 0
    for _ in range(c.n_seqs):
        got = min(per_seq, max(0, left))
        left -= got
        rows += max(got, 1)
    add_sampling(b, logits, rows)


def _build_dsv4(b):
    """``llama_model_dflash::graph_dsv4`` on a token batch: the noise tokens' embeddings repeated over the hc
    streams, per stage a DeepSeek-V4 block (hyper-connected q-LoRA attention over the draft's K-only window cache,
    hyper-connected sqrt-softplus MoE plus the shared expert), the hc head (its pre-norm result is ``t_embd``, the
    confidence head's input), ``output_norm`` and the lm_head over every token, then DSpark's Markov head. No
    d2t scatter on this path."""
    c, p, nt = b.c, b.p, b.nt
    b.inp_pos()
    tokens = b.inp("inp_tokens", "i32", (nt,))
    cur = get_rows(_tok_embd(b), tokens)
    inpL = new(cur.ty, (p.n_embd, p.hc_mult, nt), "REPEAT", (reshape(cur, p.n_embd, 1, nt),))  # hc_init
    for il in b.layers:
        inpL = deepseek4_block(b, il, inpL, None, 0)
    embd = hc_head(b, inpL)
    embd.flags = embd.fl0 = OUTPUT  # t_embd, before the norm
    logits = b.mm_s(_lm_head(b), b.norm(embd, "output_norm.weight", -1))
    b.g.expand(logits)
    if "markov_w1.weight" in c.names:
        logits = _markov(b, logits, embd, tokens, None)
    logits.flags = logits.fl0 = OUTPUT
    if c.backend_sampler:
        _sample(b, logits)
    return logits


def d2t_scatter(g, x, d2t, n_vocab):
    """A draft vocabulary's rows (``x``: ``[n_draft, n]``) set into a filled ``[1, n_vocab, n]`` through the d2t
    map (``ggml_fill``, ``ggml_set_rows``), 2-D again. ``ggml_set_rows`` keeps its destination as its last source
    (``src = [b, c, a]``), so the graph reaches the rows and the map before the fill: on the rows' device, where
    the scheduler's expansion puts the fill after them."""
    n_draft, n = x.ne[0], x.ne[1]
    rows, ids = reshape(x, 1, n_draft, n), weight_reshape(d2t, n_draft, 1, 1)
    g.expand(rows)
    g.expand(ids)
    filled = unary("FILL", new("f32", (1, n_vocab, n), NONE))
    return reshape(set_rows(filled, rows, ids), n_vocab, n)


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
    block_size = int(c.p.dflash.get("block_size", 0))
    sample_from_anchor = bool(c.p.dflash["sample_from_anchor"])
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
            cat_conf = unary("UNARY", cont(view(base, (1, n_blocks), (drafts * base.nb[1],))))
    for i in range(0 if sample_from_anchor else 1, drafts):
        w1_prev = get_rows(w1, prev)
        bias = b.mm_s(w2, w1_prev)
        if d2t is not None:
            bias = d2t_scatter(g, bias, d2t, n_vocab)
        base_i = view(base, (n_vocab, n_blocks), (drafts * base.nb[1],))
        col = binary("ADD", base_i, bias)
        cat = concat(cat, col, 1) if cat is not None else col
        if conf_w is not None:
            emb_i = view(embd, (embd.ne[0], n_blocks), (drafts * embd.nb[1],))
            feat = concat(cont(emb_i), w1_prev, 0)
            conf = mul_mat(conf_w, feat)
            if conf_b is not None:
                conf = binary("ADD", conf, conf_b)
            conf = unary("UNARY", conf)  # ggml_sigmoid: GGML_OP_UNARY, computed in place where it may
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


def _conv(b, hidden, dynamic, base, side):
    """``build_dflash2_conv``: a causal convolution within each block whose per-token weights are the projected
    coefficients (``dynamic``'s ``side`` half, repeated over each channel group) plus the static ``base``; each
    tap reads the block shifted by that many positions (``ggml_pad_ext`` on the left), multiplied and summed."""
    c = b.c
    kernel = int(c.p.dflash["conv_kernel_size"])
    group = int(c.p.dflash["conv_group_size"])
    width, nt = hidden.ne[0], hidden.ne[1]
    n_blocks = c.n_seqs
    n_groups = width // group
    block = nt // n_blocks
    blocks = reshape(hidden, width, block, n_blocks)
    coeffs = reshape(dynamic, n_groups, kernel, 2, nt)
    side_view = view(coeffs, (n_groups, kernel, nt), (coeffs.nb[1], coeffs.nb[3]))
    coeff_all = reshape(cont(side_view), 1, n_groups, kernel, nt)
    coeff_all = new(coeff_all.ty, (group, n_groups, kernel, nt), "REPEAT", (coeff_all,))
    base_side = weight_reshape(base, group, n_groups, kernel, 1)  # a view of one side of the base
    weight_all = binary("ADD", coeff_all, base_side)
    result = None
    for tap in range(min(kernel, block)):
        values = blocks
        if tap:
            prev = view(blocks, (width, block - tap, n_blocks), (blocks.nb[1], blocks.nb[2]))
            values = new(prev.ty, (width, block, n_blocks), "PAD", (prev,))
        values = reshape(values, width, nt)
        w = view(weight_all, (group, n_groups, 1, nt), weight_all.nb[1:])
        w = reshape(cont(w), width, nt)
        term = binary("MUL", w, values)
        result = binary("ADD", result, term) if result is not None else term
    return result


def _selector(b, logits, embd, tokens):
    """``build_dflash2_selector``: the top-k candidates of every position, their logits, and for each drafted
    position of a block the pairwise scores of its candidates against the previous position's (the anchor token
    for position 1), gated by the hidden state's projection; packed into n_embd-wide rows of ``t_h_nextn``."""
    c, g = b.c, b.g
    top_k = int(c.p.dflash["selector_top_k"])
    rank = int(c.p.dflash["selector_rank"])
    n_embd, nt = embd.ne[0], b.nt
    n_blocks = c.n_seqs
    per_block = nt // n_blocks
    block_size = min(per_block, int(c.p.dflash["block_size"]))
    cand = new("i32", (top_k, nt), "TOP_K", (logits,))
    unary_s = reshape(get_rows(reshape(logits, 1, logits.ne[0], nt), cand), top_k, nt)
    gate = b.mm_s("selector_hidden.weight", embd)
    cand_blk = reshape(cand, top_k, per_block, n_blocks)
    unary_blk = reshape(unary_s, top_k, per_block, n_blocks)
    gate_blk = reshape(gate, rank, per_block, n_blocks)

    def score_run(n_pos, pred_ids):
        cand_run = cont(view(cand_blk, (top_k, n_pos, n_blocks), cand_blk.nb[1:3]))
        unary_run = cont(view(unary_blk, (top_k, n_pos, n_blocks), unary_blk.nb[1:3]))
        gate_run = cont(view(gate_blk, (rank, n_pos, n_blocks), gate_blk.nb[1:3]))
        n_pred = pred_ids.ne[0] // (n_pos * n_blocks)
        succ = get_rows(b.w("selector_successor.weight"), reshape(cand_run, top_k * n_pos * n_blocks))
        succ = reshape(succ, rank, top_k, n_pos, n_blocks)
        pred = reshape(get_rows(b.w("selector_predecessor.weight"), pred_ids), rank, n_pred, n_pos, n_blocks)
        gate_b = reshape(gate_run, rank, 1, n_pos, n_blocks)
        cond = binary("MUL", pred, new(gate_b.ty, pred.ne, "REPEAT", (gate_b,)))
        score = mul_mat(succ, cond)
        if n_pred == 1:
            score = new(score.ty, (top_k, top_k, n_pos, n_blocks), "REPEAT", (score,))
        unary_b = reshape(unary_run, top_k, 1, n_pos, n_blocks)
        score = binary("ADD", score, new(unary_b.ty, score.ne, "REPEAT", (unary_b,)))
        row = concat(new("f32", cand_run.ne, "CPY", (cand_run,)), reshape(score, top_k * top_k, n_pos, n_blocks), 0)
        return new(row.ty, (n_embd, n_pos, n_blocks), "PAD", (row,))  # ggml_pad: a PAD node even when 0 wide

    packed = unary("FILL", new("f32", (n_embd, 1, n_blocks), NONE))
    if block_size > 1:
        anchors = cont(view(tokens, (1, n_blocks), (per_block * tokens.nb[0],)), n_blocks)
        packed = concat(packed, score_run(1, anchors), 1)
    if block_size > 2:
        prev = cont(view(cand_blk, (top_k, block_size - 2, n_blocks), cand_blk.nb[1:3]))
        packed = concat(packed, score_run(block_size - 2, reshape(prev, top_k * (block_size - 2) * n_blocks)), 1)
    packed = reshape(packed, n_embd, block_size * n_blocks)
    packed.flags = packed.fl0 = OUTPUT  # t_h_nextn
    g.expand(packed)


FAMILY = Family(
    name="dflash",
    build=build,
    exact=frozenset({"dflash"}),
    uncut=True,
    # resolve_fused_ops probes DeepSeek-V4's fused hyper-connection ops for a DSV4 DSpark head; other heads have none
    fused=("DSV4_HC_PRE", "DSV4_HC_COMB", "DSV4_HC_POST"),
)
