"""Gemma 4's assistant (``src/models/gemma4-assistant.cpp``, ``-md assistant.gguf --spec-type draft-mtp``).

A drafter built over the target's context (``cparams.ctx_other``): its input is the target's token embedding of
each draft token (``model_other->tok_embd``, read where the target keeps it), scaled by sqrt(n_embd_backbone) and
concatenated with the target's hidden state of the token before (``inp_h``, an input row per token), projected
down by ``nextn.pre_projection``. Every layer is Gemma 4's attention with Q only: K and V are the target's cache
of its layer ``n_layer - 2`` (sliding layers) or ``n_layer - 1`` (full layers), which the assistant's memory
shares (``llama_model::create_memory``) and reads as its own ``get_k``/``get_v`` views: the target's row width
and tensor type, the assistant's head layout and cache size. Then the GELU FFN, the post norms, the per-layer
output scale, ``output_norm``, the logits over its own ``token_embd`` (``TENSOR_DUPLICATED`` as the lm_head) and
``h_nextn`` (``nextn.post_projection``), both outputs.

The target's tensors are ``borrowed`` (:func:`app.memory.estimator._borrowed`): ``target:token_embd.weight`` and
the caches of its layers ``n_layer - 2`` and ``n_layer - 1`` as ``target:cache_{k,v}_{swa,full}``, each on the
device where the target keeps it.
"""

from __future__ import annotations

from ..builder import cache_views, layer_copy, rope
from ..ggml import NONE, OUTPUT, binary, concat, get_rows, mul_mat, new, reshape, unary
from ..mtp import add_sampling
from . import Family

#: the target's token embeddings, as :func:`app.memory.estimator._borrowed` names them
TARGET_EMBD = "target:token_embd.weight"


def cache_name(which: str, swa: bool) -> str:
    """The borrowed name of the target's cache tensor ``which`` ('k' or 'v') that the assistant's sliding
    (``swa``) or full layers read."""
    return f"target:cache_{which}_{'swa' if swa else 'full'}"


def rot_name(which: str, swa: bool) -> str:
    """The borrowed entry saying the rotation size (n x n) the target's cache ``which`` applies, which the
    assistant's cache copies (``attn_rot_k``/``attn_rot_v`` of the shared cache, llama-kv-cache.cpp)."""
    return f"target:rot_{which}_{'swa' if swa else 'full'}"


def _cache(b, which: str, swa: bool):
    """The target's cache tensor ``which`` that the assistant's sliding or full layers read: a leaf in the
    target's buffer."""
    name = cache_name(which, swa)
    got = b.wcache.get(name)
    if got is not None:
        return got
    shape, ty = b.__dict__["borrowed"][name]
    t = new(ty, tuple(shape), NONE)
    t.size = 0
    t.name = name
    b.__dict__.setdefault("brefs", []).append((t, name))
    b.wcache[name] = t
    return t


def _shared_attn(b, il, q, wo):
    """``build_attn`` with Q alone over the target's cache (``get_k``/``get_v`` of the shared layer: the cache
    tensor's own row width, type and cells, the assistant's head size and KV heads), rotated as that cache is."""
    c, g = b.c, b.g
    hk, hv, n_head_kv, swa = b.kv_dims(il)
    kc, vc = _cache(b, "k", swa), _cache(b, "v", swa)
    kv_size = kc.ne[1]
    # the assistant's cache takes the shared cache's size ("kv_size = %u overridden to %u to match the shared
    # source cache") and rotations (attn_rot_k / attn_rot_v)
    if swa:
        c.size_swa = kv_size
    else:
        c.n_kv = kv_size
    lent = b.__dict__["borrowed"]
    c.rot_k = lent[rot_name("k", swa)][0][0] if rot_name("k", swa) in lent else 0
    c.rot_v = rot_name("v", swa) in lent
    _k_idxs, _v_idxs, mask, k_rot, v_rot, n_kv = b.attn_inputs(swa)
    if k_rot is not None:
        q = b.hadamard(q, k_rot)
    g.expand(q)
    kview, vview = cache_views(kc, vc, hk, hv, n_head_kv, n_kv, kv_size, c.n_stream, c.v_trans)
    cur = b.mha(q, kview, vview, mask, None, None, il)
    if v_rot is not None:
        cur = b.hadamard(cur, v_rot)
    return b.mm_s(wo, cur)


def build(b):
    c, p, g, nt = b.c, b.p, b.g, b.nt
    c.softcap = False
    n_bb = int(c.meta.get(f"{c.arch}.embedding_length_out") or 0)
    tokens = b.inp("inp_tokens", "i32", (nt,))
    inp_h = b.inp("inp_h", "f32", (n_bb, nt))
    tok_tgt = b.w(TARGET_EMBD)
    if tok_tgt is None:
        raise NotImplementedError("the assistant reads the target's token embeddings, which are not known here")
    x = unary("SCALE", get_rows(tok_tgt, tokens))
    cur = b.mm("nextn.pre_projection.weight", concat(x, inp_h, 0))
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    inpL = cur
    for il in b.layers:
        swa = c.is_swa(il)
        hd = p.head_dim_k_swa if swa else p.head_dim_k
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q = reshape(b.mm(f"blk.{il}.attn_q.weight", cur), hd, p.n_head[il], nt)
        q = b.norm(q, f"blk.{il}.attn_q_norm.weight", il)
        q = rope(q, pos, None if swa else layer_copy(b, "rope_freqs.weight", il))
        cur = _shared_attn(b, il, q, b.w(f"blk.{il}.attn_output.weight"))
        if il == b.last:
            cur, inpL = get_rows(cur, out_ids), get_rows(inpL, out_ids)
        cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
        attn_out = binary("ADD", cur, inpL)
        cur = b.norm(attn_out, f"blk.{il}.ffn_norm.weight", il)
        cur = b.ffn(cur, "ffn", il, act="gelu")
        cur = b.norm(cur, f"blk.{il}.post_ffw_norm.weight", -1)
        cur = binary("ADD", cur, attn_out)
        inpL = binary("MUL", cur, b.w(f"blk.{il}.layer_output_scale.weight"))
    cur = b.norm(inpL, "output_norm.weight", -1)
    logits = mul_mat(b.w("token_embd.weight@output"), cur)
    logits.flags = logits.fl0 = OUTPUT
    h_next = mul_mat(b.w("nextn.post_projection.weight"), cur)
    h_next.flags = h_next.fl0 = OUTPUT
    g.expand(logits)
    g.expand(h_next)
    if c.backend_sampler:  # the second reserve, after llama_set_sampler: build_sampling's top-k per slot
        add_sampling(b, logits, c.n_seqs)
    return logits


FAMILY = Family(name="gemma4_assistant", build=build, exact=frozenset({"gemma4-assistant"}))
