"""Gemma 4's assistant (``gemma4-assistant``, ``src/models/gemma4-assistant.cpp``): the small drafter published
beside Gemma 4, run as ``-md assistant.gguf --spec-type draft-mtp``.

Not a :func:`tests.gguf_factory.register`-ed architecture: it cannot serve alone (``llama_context`` refuses it
without ``ctx_other``, the target's context: "Gemma4Assistant requires ctx_other to be set"), so the tests that
load every factory architecture by itself would fail on it. :func:`write_gemma4_assistant` writes one for a
target of a given width and vocabulary.

The keys and tensors are those ``llama_model_gemma4_assistant::load_arch_hparams`` / ``load_arch_tensors`` read:

- every block is a NextN layer (``nextn_predict_layers`` = ``block_count``: ``n_layer`` 0, no trunk), loaded as
  any layer (created without ``TENSOR_SKIP``);
- ``embedding_length_out`` is the target's hidden size (the loader refuses it equal to ``embedding_length``);
- ``token_embd`` ``{n_embd, n_vocab}`` (also the lm_head, ``TENSOR_DUPLICATED``), ``output_norm``,
  ``nextn.pre_projection`` ``{2 * n_embd_tgt, n_embd}`` and ``nextn.post_projection`` ``{n_embd, n_embd_tgt}``
  (top-level names: no layer number in their format), one ``rope_freqs`` ``{head_dim / 2}`` (created with the first
  full-attention layer, top-level name too);
- per layer: ``attn_norm``, ``attn_q`` (no K or V: the layer reads the target's cache), ``attn_output``,
  ``attn_q_norm`` ``{head_dim}``, ``post_attention_norm``, ``layer_output_scale`` ``{1}``, ``ffn_norm``, the GELU
  FFN (gate, up, down), ``post_ffw_norm``.

Its KV cache shares the target's: the sliding layers read the target's layer ``n_layer - 2``, the full ones its
layer ``n_layer - 1`` (``llama_model::create_memory``, the ``share`` of ``LLM_ARCH_GEMMA4_ASSISTANT``), so the
target's last two layers must be one sliding and one full layer of the same head sizes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gguf import GGUFValueType as VT

from tests import gguf_factory as gf


def gemma4_assistant_spec(
    *,
    n_embd_tgt: int,
    n_vocab: int | None = None,
    n_layer: int = 4,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 1,
    head_dim: int = 64,
    head_dim_swa: int = 32,
    n_ff: int = 128,
    sliding_window: int = 128,
    n_ctx_train: int = 4096,
    quant: str = "mixed",
) -> gf.ModelSpec:
    """The spec of a Gemma 4 assistant for a target of hidden size ``n_embd_tgt`` (the last layer full attention,
    the others sliding, as the published assistant)."""
    hp: dict[str, Any] = dict(gf._COMMON_TINY)
    hp.update(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        n_ctx_train=n_ctx_train,
        quant=quant,
        name="layerdeck-tiny-gemma4-assistant",
        n_vocab=n_vocab,
        head_dim=head_dim,
        rms_eps=1e-6,
        rope_base=1000000.0,
    )
    s = gf.ModelSpec(arch="gemma4-assistant", gguf_arch="gemma4-assistant", hparams=hp)
    gf._common_kv(s, hp, n_layer)
    swa = [il != n_layer - 1 for il in range(n_layer)]
    s.set("{arch}.nextn_predict_layers", n_layer)
    s.set("{arch}.embedding_length_out", int(n_embd_tgt))
    s.set("{arch}.attention.key_length_swa", head_dim_swa)
    s.set("{arch}.attention.value_length_swa", head_dim_swa)
    s.set("{arch}.rope.dimension_count", head_dim)
    s.set("{arch}.rope.dimension_count_swa", head_dim_swa)
    s.set("{arch}.attention.sliding_window", sliding_window)
    s.set("{arch}.attention.sliding_window_pattern", swa, VT.BOOL)
    s.set("{arch}.rope.freq_base_swa", 10000.0)
    n_vocab = gf._n_vocab(hp)
    s.add("token_embd.weight", (n_embd, n_vocab))
    s.add("output_norm.weight", (n_embd,), "norm")
    s.add("nextn.pre_projection.weight", (2 * n_embd_tgt, n_embd))
    s.add("nextn.post_projection.weight", (n_embd, n_embd_tgt))
    s.add("rope_freqs.weight", (head_dim // 2,), "ones")
    for i in range(n_layer):
        p = f"blk.{i}."
        hd = head_dim_swa if swa[i] else head_dim
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q.weight", (n_embd, hd * n_head))
        s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "layer_output_scale.weight", (1,), "ones")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, n_ff)
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")
    policy = gf._POLICIES[quant]
    for t in s.tensors:
        t.qtype = policy(t, hp)
    return s


def write_gemma4_assistant(path: str | os.PathLike, *, seed: int = 0, sparse: bool = False, **kwargs: Any) -> Path:
    """Write a Gemma 4 assistant (:func:`gemma4_assistant_spec`'s ``kwargs``) to ``path``; ``sparse``: its data
    left a hole."""
    return gf.write_spec(gemma4_assistant_spec(**kwargs), path, seed=seed, sparse=sparse)
