"""Grok (``grok``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/grok.cpp`` with the keys its
converter writes (``conversion/grok.py``: the attention and router soft-caps, the attention output, embedding and
logit scales): per layer the llama attention, ``attn_output_norm``, ``ffn_norm``, experts of
``expert_feed_forward_length`` (else ``feed_forward_length``), optional dense FFN (Grok-2 has one), and the post-FFN
norm ``layer_output_norm`` (Grok-1's name; Grok-2's converter writes ``post_ffw_norm``)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    _common_kv(s, hp, nl)
    s.set("{arch}.attn_logit_softcapping", 30.0)
    s.set("{arch}.router_logit_softcapping", 30.0)
    s.set("{arch}.attention.output_scale", hd**-0.5)
    s.set("{arch}.embedding_scale", 78.38367176906169)
    s.set("{arch}.logit_scale", 0.5773502691896257)
    if hp.get("final_softcap"):
        s.set("{arch}.final_logit_softcapping", float(hp["final_softcap"]))
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        s.add(p + "attn_output_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"] or hp["n_ff"], hp["n_expert"])
        if hp["dense_ffn"]:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        s.add(p + ("post_ffw_norm.weight" if hp["dense_ffn"] else "layer_output_norm.weight"), (n_embd,), "norm")


register(
    "grok",
    build=_build,
    tiny=dict(n_ff=64, n_expert=8, n_expert_used=2, n_ff_exp=None, dense_ffn=False, final_softcap=None),
    sparse={
        # xai-org/grok-1: 64 layers of 6144, 48 query / 8 KV heads, 8 experts of 32768 (2 used), vocabulary
        # 131072, 8192 positions (314B)
        "grok-1": dict(
            name="grok-1", n_layer=64, n_embd=6144, n_head=48, n_head_kv=8, n_ff=32768, n_expert=8,
            n_expert_used=2, n_ctx_train=8192, n_vocab=131072, quant="q4_k_m", file_type=15),
        # xai-org/grok-2: 64 layers of 8192, 64 query / 8 KV heads, 8 experts of 16384 (2 used) plus a dense FFN
        # of 32768, final logits soft-capped at 50, vocabulary 131072
        "grok-2": dict(
            name="grok-2", n_layer=64, n_embd=8192, n_head=64, n_head_kv=8, n_ff=32768, n_ff_exp=16384,
            n_expert=8, n_expert_used=2, dense_ffn=True, final_softcap=50.0, n_ctx_train=131072,
            n_vocab=131072, quant="q4_k_m", file_type=15),
    },
)
