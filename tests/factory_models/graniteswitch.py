"""Granite Switch (``graniteswitch``): ``load_arch_hparams`` / ``load_arch_tensors`` of ``src/models/granite-switch.cpp``.

A dense Granite with embedded LoRA adapters that a token switches on: ``logit_scale`` required (``residual_scale``,
``embedding_scale``, ``attention.scale`` optional), ``adapters.count``, ``adapters.lora_rank`` and the two token-id
arrays (``token_ids_activate``, ``token_ids_substitute``, one per adapter, substitutes inside the vocabulary)
required, ``adapters.router_gain`` optional. Per layer the fused ``attn_qkv``, ``attn_output`` and a SwiGLU FFN,
and for each of the seven projections a stacked ``lora_a`` {in, rank, adapters + 1} and ``lora_b``
{rank, out, adapters + 1} (slot 0 is the base model's zero delta); ``output`` optional (else the tied
embeddings). ``block_count`` is the real layer count: llama.cpp adds the router's one-head attention layer after
them (``n_layer_all`` = block_count + 1), which has no tensors."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _embeddings, _n_vocab, register

#: (projection, the width it reads, the width it writes) given n_embd, q width, kv width and n_ff
_PROJ = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    n_ff, rank, n_ad = int(hp["n_ff"]), int(hp["lora_rank"]), int(hp["n_adapters"])
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.set("{arch}.residual_scale", 0.22)
    s.set("{arch}.embedding_scale", 12.0)
    s.set("{arch}.attention.scale", 0.015625)
    s.set("{arch}.adapters.count", n_ad)
    s.set("{arch}.adapters.lora_rank", rank)
    s.set("{arch}.adapters.router_gain", 16.0)
    # the adapters' control tokens at the top of the vocabulary, each substituted by a plain token
    n_vocab = _n_vocab(hp)
    s.set("{arch}.adapters.token_ids_activate", [n_vocab - 1 - a for a in range(n_ad)])
    s.set("{arch}.adapters.token_ids_substitute", [3 + a for a in range(n_ad)])
    _embeddings(s, hp)
    n_q, n_kvw = hd * n_head, hd * n_kv
    widths = {
        "attn_q": (n_embd, n_q),
        "attn_k": (n_embd, n_kvw),
        "attn_v": (n_embd, n_kvw),
        "attn_output": (n_q, n_embd),
        "ffn_gate": (n_embd, n_ff),
        "ffn_up": (n_embd, n_ff),
        "ffn_down": (n_ff, n_embd),
    }
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_qkv.weight", (n_embd, n_q + 2 * n_kvw))
        s.add(p + "attn_output.weight", (n_q, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_gate.weight", (n_embd, n_ff))
        s.add(p + "ffn_down.weight", (n_ff, n_embd))
        s.add(p + "ffn_up.weight", (n_embd, n_ff))
        for proj in _PROJ:
            n_in, n_out = widths[proj]
            s.add(p + f"{proj}.lora_a", (n_in, rank, n_ad + 1))
            s.add(p + f"{proj}.lora_b", (rank, n_out, n_ad + 1))


register(
    "graniteswitch",
    build=_build,
    tiny=dict(n_layer=4, n_ff=192, n_adapters=3, lora_rank=16, logit_scale=8.0),
    sparse={
        # ibm-granite/granite-switch-4.1-3b-preview's size class (its configuration is not available here: a
        # Granite 4 3B trunk, 40 layers of 2560, 40 query / 8 KV heads of 64, intermediate 8192, vocabulary
        # 100352, tied embeddings), with 6 adapters of rank 32
        "granite-switch-3b": dict(
            name="granite-switch-4.1-3b-preview", n_layer=40, n_embd=2560, n_head=40, n_head_kv=8, n_ff=8192,
            n_adapters=6, lora_rank=32, logit_scale=10.0, n_ctx_train=131072, n_vocab=100352,
            tied_embeddings=True, quant="q4_k_m", file_type=15),
        # an 8B-shaped one (llama.cpp's 40 layers of 4096), an output matrix of its own, 12 adapters of rank 64
        "granite-switch-8b": dict(
            name="granite-switch-8b", n_layer=40, n_embd=4096, n_head=32, n_head_kv=8, n_ff=12800,
            n_adapters=12, lora_rank=64, logit_scale=16.0, n_ctx_train=131072, n_vocab=100352,
            quant="q4_k_m", file_type=15),
    },
)
