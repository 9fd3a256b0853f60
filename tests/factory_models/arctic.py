"""Snowflake Arctic (``arctic``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/arctic.cpp``: per
layer the llama attention (no GQA tensors wider than the file says), a dense residual MLP of n_embd x n_embd
(``ffn_gate`` / ``ffn_up`` / ``ffn_down``), ``ffn_norm_exps`` and experts of ``feed_forward_length`` (softmax,
normalised top-k); ``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    _common_kv(s, hp, nl)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, n_embd)
        s.add(p + "ffn_norm_exps.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])


register(
    "arctic",
    build=_build,
    tiny=dict(n_ff=64, n_expert=8, n_expert_used=2),
    sparse={
        # Snowflake/snowflake-arctic-instruct: 35 layers of 7168, 56 query / 8 KV heads, a residual MLP of 7168 and
        # 128 experts of 4864 (2 used), vocabulary 32000, 4096 positions (480B)
        "arctic-480b": dict(
            name="snowflake-arctic-instruct", n_layer=35, n_embd=7168, n_head=56, n_head_kv=8, n_ff=4864,
            n_expert=128, n_expert_used=2, n_ctx_train=4096, n_vocab=32000, quant="q4_k_m", file_type=15),
    },
)
