"""Phi-2 (``phi2``) and StableLM 2 (``stablelm``): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/phi2.cpp`` and ``src/models/stablelm.cpp``. Both need ``attention.layer_norm_epsilon`` and write a
partial ``rope.dimension_count``.

- phi2: ``attn_norm`` weight and bias, one fused ``attn_qkv`` with its bias (as the converter writes it),
  ``attn_output`` with its bias, ``ffn_up``/``ffn_down`` with biases (no gate, no FFN norm), ``output_norm`` weight
  and bias, ``output`` weight and bias.
- stablelm: ``attn_norm`` weight and bias, Q/K/V (with biases on StableLM 2 1.6B), per-head ``attn_q_norm`` /
  ``attn_k_norm`` and no ``ffn_norm`` (a parallel residual) on 12B, else ``ffn_norm`` weight and bias; a gated FFN;
  ``output_norm`` weight and bias, ``output.weight``.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    n_ff = int(hp["n_ff"])
    _common_kv(s, hp, nl)
    del s.kv[s.key("{arch}.attention.layer_norm_rms_epsilon")]
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    s.add("output_norm.bias", (n_embd,), "bias")
    s.add("output.weight", (n_embd, _n_vocab(hp)))
    if s.arch == "phi2":
        s.add("output.bias", (_n_vocab(hp),), "bias")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.bias", (n_embd,), "bias")
        if s.arch == "phi2":
            s.add(p + "attn_qkv.weight", (n_embd, n_embd + 2 * hd * n_kv))
            s.add(p + "attn_qkv.bias", (n_embd + 2 * hd * n_kv,), "bias")
            s.add(p + "attn_output.weight", (n_embd, n_embd))
            s.add(p + "attn_output.bias", (n_embd,), "bias")
            s.add(p + "ffn_up.weight", (n_embd, n_ff))
            s.add(p + "ffn_up.bias", (n_ff,), "bias")
            s.add(p + "ffn_down.weight", (n_ff, n_embd))
            s.add(p + "ffn_down.bias", (n_embd,), "bias")
            continue
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv, bias=bool(hp["qkv_bias"]))
        if hp["parallel"]:
            s.add(p + "attn_q_norm.weight", (hd, n_head), "norm")
            s.add(p + "attn_k_norm.weight", (hd, n_kv), "norm")
        else:
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
            s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        _dense_ffn(s, i, n_embd, n_ff)


register(
    "phi2",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=256, rope_dim=8),
    sparse={
        # microsoft/phi-2: 32 layers of 2560, 32 heads of 80 (no GQA, rope over 32), intermediate 10240,
        # vocabulary 51200, 2048 positions
        "phi-2": dict(
            name="phi-2", n_layer=32, n_embd=2560, n_head=32, n_head_kv=32, n_ff=10240, rope_dim=32,
            n_ctx_train=2048, n_vocab=51200, quant="q4_k_m", file_type=15),
    },
)

register(
    "stablelm",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192, rope_dim=4, qkv_bias=True, parallel=False),
    sparse={
        # stabilityai/stablelm-2-1_6b-chat: 24 layers of 2048, 32 heads of 64 (rope over 16), intermediate 5632,
        # Q/K/V biases, vocabulary 100352, 4096 positions
        "stablelm-2-1.6b": dict(
            name="stablelm-2-1_6b-chat", n_layer=24, n_embd=2048, n_head=32, n_head_kv=32, n_ff=5632, rope_dim=16,
            qkv_bias=True, parallel=False, n_ctx_train=4096, n_vocab=100352, quant="q4_k_m", file_type=15),
        # stabilityai/stablelm-2-12b-chat: 40 layers of 5120, 32 query / 8 KV heads of 160 (rope over 40),
        # intermediate 13824, per-head Q/K layer norms, a parallel residual (no FFN norm)
        "stablelm-2-12b": dict(
            name="stablelm-2-12b-chat", n_layer=40, n_embd=5120, n_head=32, n_head_kv=8, n_ff=13824, rope_dim=40,
            qkv_bias=False, parallel=True, n_ctx_train=4096, n_vocab=100352, quant="q4_k_m", file_type=15),
    },
)
