"""EAGLE-3 draft heads (``eagle3``, ``src/models/eagle3.cpp``): a one-layer decoder fed the target's hidden states
of three extract layers (``--spec-type draft-eagle3 -md draft.gguf``).

Not a :func:`tests.gguf_factory.register`-ed architecture: the head cannot serve alone (``llama_context`` needs
the target's context for its token embeddings and, without ``output.weight``, its lm_head), so the tests that
load every factory architecture by itself would fail on it. :func:`write_eagle3_draft` writes one beside a tiny
target of the same vocabulary.

The keys and tensors are those ``convert_hf_to_gguf.py`` (``Eagle3Model``) writes and
``llama_model_eagle3::load_arch_hparams`` / ``load_arch_tensors`` read:

- ``eagle3.target_layers`` (exactly three layer ids of the target; one equal to its ``n_layer`` means its final
  hidden state), ``eagle3.target_hidden_size`` (the target's ``n_embd``);
- ``fc.weight`` ``{3 * n_embd_tgt, n_embd}``, ``output_norm``, optional ``output`` (else the target's lm_head),
  optional ``token_embd`` (else the target's), optional ``d2t`` (an i64 table mapping the head's smaller vocabulary
  to the target's, with ``output`` over that vocabulary);
- one layer: ``attn_norm``, ``attn_norm_2`` (the fused features' norm), q/k/v over ``2 * n_embd`` inputs, ``wo``,
  ``ffn_norm`` and the SiLU FFN.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests import gguf_factory as gf


def eagle3_spec(
    *,
    n_embd_tgt: int = 64,
    target_layers: tuple[int, int, int] = (1, 2, 3),
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    own_embd: bool = False,
    own_output: bool = True,
    norm_before_fc: bool = False,
    n_ctx_train: int = 4096,
    quant: str = "mixed",
    n_vocab: int | None = None,
    head_dim: int | None = None,
    d2t: int | None = None,
) -> gf.ModelSpec:
    """The spec of a tiny EAGLE-3 head for a target of hidden size ``n_embd_tgt`` (the factory's byte vocabulary,
    as the tiny targets)."""
    hp: dict[str, Any] = dict(gf._COMMON_TINY)
    hp.update(
        n_layer=1,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        n_ctx_train=n_ctx_train,
        quant=quant,
        name="layerdeck-tiny-eagle3",
        n_vocab=n_vocab,
        head_dim=head_dim,
    )
    s = gf.ModelSpec(arch="eagle3", gguf_arch="eagle3", hparams=hp)
    gf._common_kv(s, hp, 1)
    hd = head_dim or n_embd // n_head
    s.set("{arch}.rope.dimension_count", hd)
    # llama_model_eagle3::load_arch_hparams: LLM_KV_TARGET_LAYERS (an i32 array), LLM_KV_TARGET_HIDDEN_SIZE
    s.set("{arch}.target_layers", [int(x) for x in target_layers], gf.VT.INT32)
    s.set("{arch}.target_hidden_size", int(n_embd_tgt))
    if norm_before_fc:
        s.set("{arch}.norm_before_fc", True)
        s.add("enc.output_norm.weight", (3 * n_embd_tgt,), "norm")
    n_vocab = gf._n_vocab(hp)
    s.add("fc.weight", (3 * n_embd_tgt, n_embd))
    s.add("output_norm.weight", (n_embd,), "norm")
    if own_output:
        s.add("output.weight", (n_embd, d2t or n_vocab))
    if d2t:  # load_arch_tensors: d2t {n_draft_vocab}, the lm_head over that many tokens
        s.add("d2t", (d2t,), "ids")
    if own_embd:
        s.add("token_embd.weight", (n_embd, n_vocab))
    p = "blk.0."
    s.add(p + "attn_norm.weight", (n_embd,), "norm")
    s.add(p + "attn_norm_2.weight", (n_embd,), "norm")
    gf._attn_qkvo(s, 0, 2 * n_embd, hd * n_head, hd * n_head_kv, hd * n_head_kv)
    # load_arch_tensors: wo is {n_embd_head_k * n_head, n_embd}, not over the 2 * n_embd input
    wo = s.tensor(p + "attn_output.weight")
    wo.shape = (hd * n_head, n_embd)
    s.add(p + "ffn_norm.weight", (n_embd,), "norm")
    gf._dense_ffn(s, 0, n_embd, n_ff)
    policy = gf._POLICIES[quant]
    for t in s.tensors:
        t.qtype = gf.Q.I64 if t.name == "d2t" else policy(t, hp)
    return s


def write_eagle3_draft(path: str | os.PathLike, *, seed: int = 0, sparse: bool = False, **kwargs: Any) -> Path:
    """Write an EAGLE-3 head (:func:`eagle3_spec`'s ``kwargs``) to ``path``; ``sparse``: its data left a hole (a
    full-size head, as :func:`tests.gguf_factory.write_sparse_model`)."""
    return gf.write_spec(eagle3_spec(**kwargs), path, seed=seed, sparse=sparse)
