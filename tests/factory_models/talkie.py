"""Talkie (``talkie``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/talkie.cpp``, with the
tensors its converter writes (``conversion/talkie.py``): no norm weights at all, ``output`` required, per layer
Q/K/V/O, a per-head Q gain ``attn_q_norm`` of 1 x n_head, the SwiGLU FFN, ``layer_output_scale`` ({1}) and the
per-tensor scales ``attn_output.scale`` / ``ffn_down.scale`` ({1}, loaded by llama.cpp's generic scale pass);
``logit_scale`` required, the RMS epsilon float32's (the model's F.rms_norm has none)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output.weight", (n_embd, _n_vocab(hp)))
    for i in range(nl):
        p = f"blk.{i}."
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_output.scale", (1,), "ones")
        s.add(p + "attn_q_norm.weight", (1, n_head), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + "ffn_down.scale", (1,), "ones")
        s.add(p + "layer_output_scale.weight", (1,), "ones")


register(
    "talkie",
    build=_build,
    tiny=dict(n_ff=192, rms_eps=1.1920929e-07, logit_scale=0.5),
    sparse={
        # a 13B Talkie (lewtun/talkie-1930-13b-it-hf's size class; its config is not available here): 40 layers of
        # 5120, 40 heads of 128 (no GQA), intermediate 13824, vocabulary 65536
        "talkie-13b": dict(
            name="talkie-1930-13b", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13824,
            n_ctx_train=4096, n_vocab=65536, rms_eps=1.1920929e-07, logit_scale=0.5, quant="q4_k_m",
            file_type=15),
    },
)
