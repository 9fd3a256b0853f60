"""MiniCPM3 (``minicpm3``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/minicpm3.cpp``:
``attention.q_lora_rank`` and ``kv_lora_rank`` required; per layer ``attn_q_a`` / ``attn_q_a_norm`` /
``attn_q_b``, ``attn_kv_a_mqa`` / ``attn_kv_a_norm`` / ``attn_kv_b``, ``attn_output``, a SwiGLU FFN; the LongRoPE
factors ``rope_factors_long`` / ``rope_factors_short`` (rope dims / 2, once, TENSOR_DUPLICATED per layer);
``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _dense_ffn, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    rope, nope, hv = int(hp["qk_rope_dim"]), int(hp["qk_nope_dim"]), int(hp["v_head_dim"])
    q_lora, kv_lora = int(hp["q_lora_rank"]), int(hp["kv_lora_rank"])
    hp = dict(hp, n_head_kv=n_head)
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.key_length", rope + nope)
    s.set("{arch}.attention.value_length", hv)
    s.set("{arch}.rope.dimension_count", rope)
    s.set("{arch}.attention.q_lora_rank", q_lora)
    s.set("{arch}.attention.kv_lora_rank", kv_lora)
    _embeddings(s, hp)
    s.add("rope_factors_long.weight", (rope // 2,), "ones")
    s.add("rope_factors_short.weight", (rope // 2,), "ones")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q_a_norm.weight", (q_lora,), "norm")
        s.add(p + "attn_kv_a_norm.weight", (kv_lora,), "norm")
        s.add(p + "attn_q_a.weight", (n_embd, q_lora))
        s.add(p + "attn_q_b.weight", (q_lora, n_head * (rope + nope)))
        s.add(p + "attn_kv_a_mqa.weight", (n_embd, kv_lora + rope))
        s.add(p + "attn_kv_b.weight", (kv_lora, n_head * (nope + hv)))
        s.add(p + "attn_output.weight", (n_head * hv, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "minicpm3",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192, qk_rope_dim=16, qk_nope_dim=32, v_head_dim=32, q_lora_rank=32,
              kv_lora_rank=64),
    sparse={
        # openbmb/MiniCPM3-4B: 62 layers of 2560, 40 heads (K 32 rope + 64 nope, V 64), Q LoRA 768, KV LoRA 256,
        # intermediate 6400, vocabulary 73448, 32768 positions (LongRoPE)
        "minicpm3-4b": dict(
            name="MiniCPM3-4B", n_layer=62, n_embd=2560, n_head=40, n_head_kv=40, n_ff=6400, qk_rope_dim=32,
            qk_nope_dim=64, v_head_dim=64, q_lora_rank=768, kv_lora_rank=256, n_ctx_train=32768,
            n_vocab=73448, quant="q4_k_m", file_type=15),
    },
)
