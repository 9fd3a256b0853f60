"""PLM (``plm``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/plm.cpp``: ``attention.kv_lora_rank``
required; per layer ``attn_q`` (n_embd x n_head*key_length), ``attn_kv_a_mqa`` (n_embd x kv_lora + rope dims),
``attn_kv_a_norm``, ``attn_kv_b`` (kv_lora x n_head*(nope + value_length)), ``attn_output``, and an ungated FFN
(``ffn_up``, ``ffn_down``); no ``output`` (the head is the embeddings, TENSOR_DUPLICATED)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    rope, nope, hv, lora = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"]), int(hp["kv_lora_rank"])
    hp = dict(hp, n_head_kv=n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.key_length", rope + nope)
    s.set("{arch}.attention.value_length", hv)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.attention.kv_lora_rank", lora)
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q.weight", (n_embd, n_head * (rope + nope)))
        s.add(p + "attn_kv_a_mqa.weight", (n_embd, lora + rope))
        s.add(p + "attn_kv_a_norm.weight", (lora,), "norm")
        s.add(p + "attn_kv_b.weight", (lora, n_head * (nope + hv)))
        s.add(p + "attn_output.weight", (n_head * hv, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_down.weight", (hp["n_ff"], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, hp["n_ff"]))


register(
    "plm",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192, qk_rope_dim=16, qk_nope_dim=32, v_head_dim=32, kv_lora_rank=64),
    sparse={
        # PLM-Team/PLM-1.8B-Instruct: 32 layers of 2048, 16 heads (K 64 rope + 128 nope, V 128), KV LoRA rank 512,
        # a squared-ReLU FFN of 8192, vocabulary 151936, 4096 positions
        "plm-1.8b": dict(
            name="PLM-1.8B-Instruct", n_layer=32, n_embd=2048, n_head=16, n_head_kv=16, n_ff=8192, qk_rope_dim=64,
            qk_nope_dim=128, v_head_dim=128, kv_lora_rank=512, n_ctx_train=4096, rope_base=100000.0,
            n_vocab=151936, quant="q4_k_m", file_type=15),
    },
)
