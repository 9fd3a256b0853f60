"""QRWKV6 (``rwkv6qwen2``, ``src/models/rwkv6qwen2.cpp`` over ``rwkv6-base.cpp``): a Qwen2.5 model whose attention
was distilled into RWKV-6 time mixing. Every layer recurrent, no attention heads (``head_count`` 0) but
``head_count_kv`` written from Qwen2's KV heads, so ``time_mix_key``/``value`` are ``head_count_kv * head_size``
wide (GQA) and repeated over the ``n_embd / head_size`` heads in the graph. No LN0, no ``time_mix_first`` and no
group norm (the "QRWKV" form: ``GATED_LINEAR_ATTN``, a sigmoid gate); Qwen2's q/k/v biases become the
receptance/key/value biases; one token shift (``token_shift_count`` 1); Qwen2's RMS-normed SwiGLU FFN. The state
per layer and sequence is ``n_embd`` (one token shift) plus ``n_embd * head_size``, f32."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_ff, hs = hp["n_layer"], hp["n_embd"], int(hp["n_ff"]), int(hp["wkv_head_size"])
    mix, decay = int(hp["time_mix_extra_dim"]), int(hp["time_decay_extra_dim"])
    n_kv = int(hp["n_head_kv"])
    n_kv_embd = n_embd if n_kv == 0 or n_embd // hs == n_kv else n_kv * hs
    gf._common_kv(s, hp, nl)
    s.set("{arch}.wkv.head_size", hs)
    s.set("{arch}.time_mix_extra_dim", mix)
    s.set("{arch}.time_decay_extra_dim", decay)
    s.set("{arch}.token_shift_count", 1)
    gf._embeddings(s, hp, output_required=True)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "time_mix_w1.weight", (n_embd, mix * 5))
        s.add(p + "time_mix_w2.weight", (mix, n_embd, 5))
        s.add(p + "time_mix_lerp_x.weight", (n_embd, 1, 1), "bias")
        s.add(p + "time_mix_lerp_fused.weight", (n_embd, 1, 1, 5), "bias")
        s.add(p + "time_mix_decay.weight", (n_embd,), "bias")
        s.add(p + "time_mix_decay_w1.weight", (n_embd, decay))
        s.add(p + "time_mix_decay_w2.weight", (decay, n_embd))
        s.add(p + "time_mix_key.weight", (n_embd, n_kv_embd))
        s.add(p + "time_mix_value.weight", (n_embd, n_kv_embd))
        s.add(p + "time_mix_receptance.weight", (n_embd, n_embd))
        s.add(p + "time_mix_gate.weight", (n_embd, n_embd))
        if hp["qkv_bias"]:
            s.add(p + "time_mix_key.bias", (n_kv_embd,), "bias")
            s.add(p + "time_mix_value.bias", (n_kv_embd,), "bias")
            s.add(p + "time_mix_receptance.bias", (n_embd,), "bias")
        s.add(p + "time_mix_output.weight", (n_embd, n_embd))
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, n_ff)


def _qrwkv(name: str, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int) -> dict[str, Any]:
    """A Qwen2.5 shape (152064 tokens, untied output) as the converter writes it (conversion/rwkv.py
    RWKV6Qwen2Model): head size ``hidden_size / num_attention_heads``, the LoRA widths' defaults (32/64, 64/128
    from n_embd 4096; a config's ``lora_rank_tokenshift``/``lora_rank_decay`` would override them: unconfirmed),
    Qwen2's q/k/v biases kept (unconfirmed)."""
    return dict(
        name=name, n_layer=n_layer, n_embd=n_embd, n_head=0, n_head_kv=n_head_kv, n_ff=n_ff,
        wkv_head_size=n_embd // n_head, time_mix_extra_dim=64 if n_embd >= 4096 else 32,
        time_decay_extra_dim=128 if n_embd >= 4096 else 64, qkv_bias=True, n_ctx_train=1048576, n_vocab=152064,
        rms_eps=1e-6, quant="q4_k_m", file_type=15)


gf.register(
    "rwkv6qwen2",
    build=build,
    tiny=dict(n_head=0, n_head_kv=1, n_embd=128, n_ff=256, wkv_head_size=64, time_mix_extra_dim=32,
              time_decay_extra_dim=64, qkv_bias=True, rms_eps=1e-6),
    sparse={
        # recursal/QRWKV6-32B-Instruct-Preview-v0.1: Qwen2.5-32B-Instruct's shape (64 layers of 5120, 40 heads of
        # 128, 8 KV heads, FFN 27648)
        "qrwkv6-32b": _qrwkv("QRWKV6-32B-Instruct-Preview-v0.1", 64, 5120, 40, 8, 27648),
        # a QRWKV6 of Qwen2.5-7B's shape (28 layers of 3584, 28 heads of 128, 4 KV heads, FFN 18944): the 7B
        # conversions' exact figures are unconfirmed
        "qrwkv6-7b": _qrwkv("QRWKV6-7B-Instruct", 28, 3584, 28, 4, 18944),
    },
)
