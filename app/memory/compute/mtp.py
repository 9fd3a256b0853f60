"""The pieces every ``graph_mtp`` shares (``LLM_GRAPH_TYPE_DECODER_MTP``: the MTP draft context of
``--spec-type draft-mtp``, over one NextN block): its input half and its head.

The input: the draft token's embedding (``nextn.embed_tokens`` or ``token_embd``) and the target's hidden state
(``mtp_h_input``), each RMS-normed (``enorm``/``hnorm``), concatenated and projected by ``eh_proj``. The head:
the shared head norm (``nextn.shared_head_norm`` or ``output_norm``) on every token (``h_nextn``, a graph
output), the output rows, and the LM head (``nextn.shared_head_head`` or the model's output)."""

from __future__ import annotations

from .ggml import OUTPUT, concat, get_rows, mul_mat, new, pad, reshape, view


def mtp_input(b, il, n_pos_per_token=1):
    """The NextN block's input projection; returns (hidden, positions, output row ids)."""
    p, nt = b.p, b.nt
    tokens = b.inp("inp_tokens", "i32", (nt,))
    emb = b.w(f"blk.{il}.nextn.embed_tokens.weight") or b.w("token_embd.weight")
    tok = get_rows(emb, tokens)
    h = b.inp("mtp_h_input", "f32", (p.n_embd, nt))
    pos = b.inp("inp_pos", "i32", (n_pos_per_token * nt,))
    out_ids = b.inp_out_ids()
    h_norm = b.norm(h, f"blk.{il}.nextn.hnorm.weight", il)
    e_norm = b.norm(tok, f"blk.{il}.nextn.enorm.weight", il)
    return b.mm(f"blk.{il}.nextn.eh_proj.weight", concat(e_norm, h_norm, 0)), pos, out_ids


def mtp_head(b, cur, il, out_ids):
    """The shared head norm on every token, the output rows, the logits."""
    head_norm = f"blk.{il}.nextn.shared_head_norm.weight"
    h = b.norm(cur, head_norm if head_norm in b.c.names else "output_norm.weight", -1)
    h.flags = h.fl0 = OUTPUT
    cur = get_rows(h, out_ids)
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight") or b.w("token_embd.weight@output")
    logits = mul_mat(head, cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


#: the draft's backend sampler (``common_speculative``'s MTP state: ``llama_sampler_init_top_k(10)`` per slot)
DRAFT_TOP_K = 10


def add_sampling(b, logits, n_rows):
    """``llm_graph_context::build_sampling`` with a top-k sampler per slot, as the MTP draft context gets once
    ``llama_set_sampler`` is called (it reserves again with these ops): the logits padded by a dummy row, then per
    sampled row (one per slot, or as many as ``ubatch_prepare_reserve`` gives each slot) a row view, ``TOP_K``
    (``llama_sampler_top_k_backend_apply``) and the chosen logits' ``GET_ROWS``."""
    n_vocab = logits.ne[0]
    lt = pad(logits, 0, 1)
    g = b.g
    for _ in range(n_rows):
        row = reshape(view(lt, (n_vocab,), ()), n_vocab)
        top = new("i32", (DRAFT_TOP_K,), "TOP_K", (row,))
        chosen = get_rows(reshape(row, 1, n_vocab), top)
        chosen.flags = chosen.fl0 = OUTPUT
        top.flags = top.fl0 = OUTPUT
        g.expand(chosen)
        g.expand(top)
    return logits
