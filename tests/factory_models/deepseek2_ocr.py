"""DeepSeek-OCR's decoder (``deepseek2-ocr``): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/deepseek2ocr.cpp`` ("similar to deepseek2, but without MLA"): separate Q/K/V of n_embd (no GQA),
``leading_dense_block_count`` dense layers, then softmax experts of ``expert_feed_forward_length`` plus
``expert_shared_count`` gated shared experts fused into one FFN (``expert_shared_count`` required);
``output`` optional. The graph asserts a rope base of 10000."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts,
                                _shared_expert, register)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    lead, n_shared, ff_exp = int(hp["n_layer_dense_lead"]), int(hp["n_expert_shared"]), int(hp["n_ff_exp"])
    hp = dict(hp, n_head_kv=n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.leading_dense_block_count", lead)
    s.set("{arch}.expert_shared_count", n_shared)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        _attn_qkvo(s, i, n_embd, n_embd, n_embd, n_embd)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if i < lead:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, ff_exp, hp["n_expert"])
            _shared_expert(s, i, n_embd, ff_exp * n_shared)


register(
    "deepseek2-ocr",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=2,
              n_layer_dense_lead=1),
    sparse={
        # deepseek-ai/DeepSeek-OCR's decoder (DeepSeek3B-MoE-A570M): 12 layers of 1280 (the first dense, 6848 wide),
        # 10 heads (no GQA), 64 softmax experts of 896 (6 used) plus 2 shared, vocabulary 129280, 8192 positions
        "deepseek-ocr": dict(
            name="DeepSeek-OCR", n_layer=12, n_embd=1280, n_head=10, n_head_kv=10, n_ff=6848, n_expert=64,
            n_expert_used=6, n_ff_exp=896, n_expert_shared=2, n_layer_dense_lead=1, n_ctx_train=8192,
            n_vocab=129280, quant="f16", file_type=1),
    },
)
