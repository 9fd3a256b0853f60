"""EAGLE-3 draft heads (``src/models/eagle3.cpp``, ``--spec-type draft-eagle3 -md head.gguf``).

The draft context reserves the head's decoder graph (``llama_model_eagle3::graph<false>``,
``LLM_GRAPH_TYPE_DEFAULT``): one layer over the draft token's embedding and the fused target features ``g``
(an input row per token); the encoder graph (``graph<true>``: ``fc`` over the three extracted target layers) is
only built by ``llama_process(LLAMA_PROCESS_TYPE_ENCODE)`` at run time, and is smaller (two tensors per token).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, concat, get_rows, mul_mat
from ..mtp import add_sampling
from . import Family
from .dflash import d2t_scatter


def build(b):
    """``llama_model_eagle3::graph<false>``: ``attn_norm`` on the token embeddings, ``attn_norm_2`` on ``g``
    (built with il = -1, so not pinned to the layer), their concatenation into Q/K/V, rope, attention with
    ``wo``, the residual on ``g`` (``norm_before_residual``: on the normed ``g``), ``ffn_norm``, the SiLU FFN,
    the residual, the pre-norm state as an output (``t_h_nextn``), ``output_norm`` and the lm_head over every
    token (no output-row selection)."""
    c, p, nt = b.c, b.p, b.nt
    # without its own token_embd / output, the decoder reads the target's (cparams.ctx_other: model_other->tok_embd,
    # model_other->output), in the target's buffers: compute_buffers' ``borrowed``
    tok_embd = b.w("token_embd.weight")
    if tok_embd is None:
        raise NotImplementedError("the EAGLE-3 head has no token_embd and the target model's is not known here")
    output = b.w("output.weight")
    if output is None:
        raise NotImplementedError("the EAGLE-3 head has no output.weight and the target model's is not known here")
    il = 0
    tokens = b.inp("inp_tokens", "i32", (nt,))
    inp_g = b.inp("inp_embd", "f32", (p.n_embd, nt))
    inp_embd = get_rows(tok_embd, tokens)
    pos = b.inp_pos()
    embd_norm = b.norm(inp_embd, f"blk.{il}.attn_norm.weight", il)
    g_norm = b.norm(inp_g, f"blk.{il}.attn_norm_2.weight", -1)
    norm_before_residual = bool(c.meta.get("eagle3.norm_before_residual"))
    inp_sa = g_norm if norm_before_residual else inp_g
    cur = concat(embd_norm, g_norm, 0)
    q, k, v = qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
    freqs = b.w(f"blk.{il}.rope_freqs.weight")
    cur = b.attn(il, rope(q, pos, freqs), rope(k, pos, freqs), v, b.w(f"blk.{il}.attn_output.weight"), None)
    ffn_inp = binary("ADD", cur, inp_sa)
    cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
    cur = b.ffn(cur, "ffn", il)
    cur = binary("ADD", cur, ffn_inp)
    cur.flags = cur.fl0 = OUTPUT  # t_h_nextn
    cur = b.norm(cur, "output_norm.weight", -1)
    logits = mul_mat(output, cur)
    d2t = b.w("d2t")
    if d2t is not None:
        # the head's vocabulary mapped onto the target's: a -inf filled [1, n_vocab, n_outputs] with the draft
        # logits set into their target rows (ggml_fill, ggml_set_rows), then 2-D again
        logits = d2t_scatter(b.g, logits, d2t, p.n_vocab)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    if c.backend_sampler:  # the second reserve, after llama_set_sampler: build_sampling's top-k per slot
        add_sampling(b, logits, c.n_seqs)
    return logits


FAMILY = Family(name="eagle3", build=build, exact=frozenset({"eagle3"}))
