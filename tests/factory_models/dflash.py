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
from tests.factory_models import deepseek4

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
    dsv4: dict[str, Any] | None = None,
) -> gf.ModelSpec:
    """The spec of a tiny DFlash head (a DSpark head with ``markov_rank``, a DFlash2 head with ``selector`` =
    (conv kernel, conv group size, selector rank, selector top-k)) for a target of hidden size ``n_embd`` (the
    draft's width is the target's: llama.cpp sizes ``fc`` by the draft's own ``n_embd``). ``dsv4``: DeepSeek-V4
    DSpark stages in place of the plain layers (:data:`DSV4_STAGES`' keys, any overridden): one K-only head of
    ``head_dim``, the q LoRA, the grouped output LoRA, hyper-connections and a sqrt-softplus MoE with one shared
    expert per stage, every stage sliding over the draft's ring (``sliding_window``, compress ratio 0)."""
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
    for il in range(n_layer if dsv4 is None else 0):
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
    if dsv4 is not None:
        _dsv4_stages(s, n_layer, n_embd, n_head, {**DSV4_STAGES, **dsv4}, hp)
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


#: a DeepSeek-V4 DSpark head's stage shape (``load_arch_hparams``' DSV4 keys) for the tiny deepseek4 target
DSV4_STAGES: dict[str, Any] = dict(
    head_dim=64,
    rope_dim=16,
    q_lora_rank=32,
    o_groups=2,
    o_lora_rank=16,
    hc_mult=4,
    hc_sinkhorn_iters=20,
    n_swa=64,
    n_expert=8,
    n_expert_used=2,
    n_ff_exp=32,
    n_expert_shared=1,
    expert_weights_scale=1.5,
    swiglu_limit=10.0,
)


def _dsv4_stages(s: gf.ModelSpec, n_layer: int, n_embd: int, n_head: int, d: dict[str, Any], hp: dict) -> None:
    """``load_arch_tensors``' DSV4 branch and the keys ``load_arch_hparams`` requires with ``hyper_connection.count``
    (a DSV4 head's one KV head of ``key_length``, its window, compress ratios all 0, sqrt-softplus gating)."""
    hd, hc = int(d["head_dim"]), int(d["hc_mult"])
    q_lora, o_groups, o_lora = int(d["q_lora_rank"]), int(d["o_groups"]), int(d["o_lora_rank"])
    n_expert, n_ff_exp = int(d["n_expert"]), int(d["n_ff_exp"])
    s.set("{arch}.attention.head_count_kv", 1)
    s.set("{arch}.attention.key_length", hd)
    s.set("{arch}.attention.value_length", hd)
    s.set("{arch}.rope.dimension_count", int(d["rope_dim"]))
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.sliding_window", int(d["n_swa"]))
    s.set("{arch}.expert_count", n_expert)
    s.set("{arch}.expert_used_count", int(d["n_expert_used"]))
    s.set("{arch}.expert_feed_forward_length", n_ff_exp)
    s.set("{arch}.expert_shared_count", int(d["n_expert_shared"]))
    s.set("{arch}.expert_weights_scale", float(d["expert_weights_scale"]))
    s.set("{arch}.expert_weights_norm", True)
    s.set("{arch}.expert_gating_func", 4)  # sqrtsoftplus: the only scoring the loader accepts
    s.set("{arch}.swiglu_clamp_exp", [float(d["swiglu_limit"])] * n_layer)
    s.set("{arch}.attention.output_group_count", o_groups)
    s.set("{arch}.attention.output_lora_rank", o_lora)
    s.set("{arch}.attention.compress_ratios", [0] * n_layer)
    s.set("{arch}.hyper_connection.count", hc)
    s.set("{arch}.hyper_connection.sinkhorn_iterations", int(d["hc_sinkhorn_iters"]))
    s.set("{arch}.hyper_connection.epsilon", 1e-6)
    deepseek4.hc_head(s, n_embd, hc)
    for i in range(n_layer):
        p = f"blk.{i}."
        deepseek4.attention_and_hc(s, i, n_embd, n_head, hd, q_lora, o_groups, o_lora, hc)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._experts(s, i, n_embd, n_ff_exp, n_expert)
        s.add(p + "exp_probs_b.bias", (n_expert,), "zero")
        gf._shared_expert(s, i, n_embd, n_ff_exp * int(d["n_expert_shared"]))


def write_dflash_draft(path: str | os.PathLike, *, seed: int = 0, sparse: bool = False, **kwargs: Any) -> Path:
    """Write a DFlash / DSpark head (:func:`dflash_spec`'s ``kwargs``) to ``path``; ``sparse``: its data left a
    hole (a full-size head)."""
    return gf.write_spec(dflash_spec(**kwargs), path, seed=seed, sparse=sparse)
