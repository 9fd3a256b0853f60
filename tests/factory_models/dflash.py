"""DFlash and DSpark draft heads (``dflash``, ``src/models/dflash.cpp``): a block-diffusion drafter fed the
target's hidden states (``--spec-type draft-dflash`` / ``draft-dspark`` ``-md draft.gguf``).

Not a :func:`tests.gguf_factory.register`-ed architecture, for the reason EAGLE-3 heads are not (it cannot serve
alone: without ``token_embd`` / ``output`` it reads the target's through ``ctx_other``). :func:`write_dflash_draft`
writes one beside a tiny target of the same vocabulary.

The keys and tensors are those ``conversion/qwen.py`` (``DFlashModel``, ``DSparkModel``) writes and
``llama_model_dflash::load_arch_hparams`` / ``load_arch_tensors`` read:

- ``dflash.target_layers`` (the target layers whose inputs it reads; the converter writes HF ids + 1),
  ``dflash.block_size``, ``tokenizer.ggml.mask_token_id`` (the noise token of each block),
  ``dflash.attention.causal`` (false: block-internal attention sees the whole block);
- ``fc.weight`` ``{n_targets * n_embd, n_embd}`` and ``enc.output_norm`` (the fused features' norm), optional
  ``token_embd`` / ``output`` (else the target's), optional ``d2t``;
- per layer: ``attn_norm``, q/k/v/o with ``attn_q_norm`` / ``attn_k_norm``, ``ffn_norm`` and the SiLU FFN;
- DSpark: ``markov_w1`` ``{rank, n_vocab}``, ``markov_w2`` ``{rank, n_vocab_draft}``, optionally the confidence
  head ``conf_proj`` ``{n_embd + rank, 1}`` with its bias; ``dflash.sample_from_anchor``,
  ``dflash.has_confidence_head``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests import gguf_factory as gf

#: the mask token of the factory's byte vocabulary the heads denoise from (any id inside the vocabulary)
MASK_TOKEN = 3


def dflash_spec(
    *,
    n_embd: int = 64,
    target_layers: tuple[int, ...] = (1, 2, 3),
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    block_size: int = 16,
    own_embd: bool = False,
    own_output: bool = False,
    n_ctx_train: int = 4096,
    quant: str = "mixed",
    n_vocab: int | None = None,
    head_dim: int | None = None,
    d2t: int | None = None,
    markov_rank: int = 0,
    confidence: bool = True,
    sample_from_anchor: bool = True,
    causal: bool = False,
    selector: tuple[int, int, int, int] | None = None,
    logit_scale: float | None = None,
    shared_kv: bool = False,
) -> gf.ModelSpec:
    """The spec of a tiny DFlash head (a DSpark head with ``markov_rank``, a DFlash2 head with ``selector`` =
    (conv kernel, conv group size, selector rank, selector top-k)) for a target of hidden size ``n_embd`` (the
    draft's width is the target's: llama.cpp sizes ``fc`` by the draft's own ``n_embd``)."""
    hp: dict[str, Any] = dict(gf._COMMON_TINY)
    hp.update(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        n_ctx_train=n_ctx_train,
        quant=quant,
        name="layerdeck-tiny-dspark" if markov_rank else "layerdeck-tiny-dflash",
        n_vocab=n_vocab,
        head_dim=head_dim,
    )
    s = gf.ModelSpec(arch="dflash", gguf_arch="dflash", hparams=hp)
    gf._common_kv(s, hp, n_layer)
    hd = head_dim or n_embd // n_head
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.target_layers", [int(x) for x in target_layers], gf.VT.INT32)
    s.set("{arch}.block_size", int(block_size))
    s.set("{arch}.attention.causal", bool(causal))
    s.set("tokenizer.ggml.mask_token_id", MASK_TOKEN)
    n_vocab_all = gf._n_vocab(hp)
    n_vocab_draft = d2t or n_vocab_all
    if logit_scale is not None:
        s.set("{arch}.logit_scale", float(logit_scale))
    if selector:
        kernel, group, rank, top_k = selector
        s.set("{arch}.conv_kernel_size", int(kernel))
        s.set("{arch}.conv_group_size", int(group))
        s.set("{arch}.selector_rank", int(rank))
        s.set("{arch}.selector_top_k", int(top_k))
        s.add("selector_predecessor.weight", (rank, n_vocab_all))
        s.add("selector_successor.weight", (rank, n_vocab_all))
        s.add("selector_hidden.weight", (n_embd, rank))
    if markov_rank:
        s.set("{arch}.sample_from_anchor", bool(sample_from_anchor))
        s.set("{arch}.has_confidence_head", bool(confidence))
    s.add("fc.weight", (len(target_layers) * n_embd, n_embd))
    s.add("enc.output_norm.weight", (n_embd,), "norm")
    s.add("output_norm.weight", (n_embd,), "norm")
    if own_embd:
        s.add("token_embd.weight", (n_embd, n_vocab_all))
    if own_output:
        s.add("output.weight", (n_embd, n_vocab_draft))
    if d2t:
        s.add("d2t", (d2t,), "ids")
    if markov_rank:
        s.add("markov_w1.weight", (markov_rank, n_vocab_all))
        s.add("markov_w2.weight", (markov_rank, n_vocab_draft))
        if confidence:
            s.add("conf_proj.weight", (n_embd + markov_rank, 1))
            s.add("conf_proj.bias", (1,), "bias")
    for il in range(n_layer):
        p = f"blk.{il}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        gf._attn_qkvo(s, il, n_embd, hd * n_head, hd * n_head_kv, hd * n_head_kv)
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, il, n_embd, n_ff)
        if selector:  # load_arch_tensors: per layer, the two dynamic convolutions' bases and projections
            proj = 2 * kernel * (n_embd // group)
            for side in ("attn", "ffn"):
                s.add(p + f"{side}_conv_base", (n_embd, kernel, 2), "norm")
                s.add(p + f"{side}_conv_proj.weight", (n_embd, proj))
    if shared_kv:  # no attn_v (TENSOR_NOT_REQUIRED): V is K's projection
        s.tensors = [t for t in s.tensors if not t.name.endswith(".attn_v.weight")]
    policy = gf._POLICIES[quant]
    for t in s.tensors:
        if t.name == "d2t":
            t.qtype = gf.Q.I64
        elif t.name.startswith(("markov_", "conf_proj", "selector_")) or t.name.endswith("_conv_base"):
            t.qtype = gf.Q.F32 if t.name.startswith("conf_proj") or t.name.endswith("_conv_base") else gf.Q.F16
        else:
            t.qtype = policy(t, hp)
    return s


def write_dflash_draft(path: str | os.PathLike, *, seed: int = 0, sparse: bool = False, **kwargs: Any) -> Path:
    """Write a DFlash / DSpark head (:func:`dflash_spec`'s ``kwargs``) to ``path``; ``sparse``: its data left a
    hole (a full-size head)."""
    return gf.write_spec(dflash_spec(**kwargs), path, seed=seed, sparse=sparse)
