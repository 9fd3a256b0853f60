"""Jais (``jais``) and Jais 2 (``jais2``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/jais.cpp``
and ``jais2.cpp``; both need ``attention.layer_norm_epsilon`` and have layer norms with biases (attention, FFN,
output) and biases on every projection.

- jais: one fused ``attn_qkv`` (n_embd + 2 n_embd_gqa) with its bias, a SwiGLU FFN with biases, ``output``
  required; ALiBi (``attention.max_alibi_bias``, optional), no rope.
- jais2: separate Q/K/V (no biases), ``attn_output`` with bias, an ungated squared-ReLU FFN (``ffn_up`` and
  ``ffn_down`` with biases), rope, ``output`` optional.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    ff = int(hp["n_ff"])
    _common_kv(s, hp, nl)
    del s.kv[s.key("{arch}.attention.layer_norm_rms_epsilon")]
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    if s.arch == "jais":
        s.set("{arch}.attention.max_alibi_bias", 8.0)
    _embeddings(s, hp, output_required=s.arch == "jais")
    s.add("output_norm.bias", (n_embd,), "bias")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.bias", (n_embd,), "bias")
        if s.arch == "jais":
            s.add(p + "attn_qkv.weight", (n_embd, n_embd + 2 * hd * n_kv))
            s.add(p + "attn_qkv.bias", (n_embd + 2 * hd * n_kv,), "bias")
            s.add(p + "attn_output.weight", (n_embd, n_embd))
            s.add(p + "attn_output.bias", (n_embd,), "bias")
        else:
            _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv, out_bias=True)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        s.add(p + "ffn_down.weight", (ff, n_embd))
        s.add(p + "ffn_down.bias", (n_embd,), "bias")
        if s.arch == "jais":
            s.add(p + "ffn_gate.weight", (n_embd, ff))
            s.add(p + "ffn_gate.bias", (ff,), "bias")
        s.add(p + "ffn_up.weight", (n_embd, ff))
        s.add(p + "ffn_up.bias", (ff,), "bias")


register(
    "jais",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192),
    sparse={
        # inceptionai/jais-13b-chat: 40 layers of 5120, 40 heads (no GQA), a SwiGLU FFN of 13653, vocabulary 84992,
        # 2048 positions, ALiBi
        "jais-13b": dict(
            name="jais-13b-chat", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13653, n_ctx_train=2048,
            n_vocab=84992, quant="q4_k_m", file_type=15),
    },
)

register(
    "jais2",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # a Jais 2 of 8B size (its configuration is not available here): 32 layers of 4096, 32 query / 8 KV heads,
        # a squared-ReLU FFN of 16384, vocabulary 150272, 8192 positions
        "jais2-8b": dict(
            name="Jais-2-8B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=16384, n_ctx_train=8192,
            n_vocab=150272, quant="q4_k_m", file_type=15),
    },
)
