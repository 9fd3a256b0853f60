"""ARWKV-7 (``arwkv7``, ``src/models/arwkv7.cpp`` over ``rwkv7-base.cpp``): a Qwen2.5 model whose attention was
distilled into RWKV-7 time mixing. Every layer recurrent, no attention heads; no LN0; per layer an RMS-normed
RWKV-7 time mix (the gate LoRA and the 6th lerp optional: ``wkv_has_gate``; the group norm optional) with one
token shift (``token_shift_count`` 1, which the converter writes), then Qwen2's RMS-normed SwiGLU FFN. The
state per layer and sequence is ``n_embd`` (one token shift) plus ``n_embd * head_size``, f32."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf
from tests.factory_models.rwkv7 import time_mix


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_ff = hp["n_layer"], hp["n_embd"], int(hp["n_ff"])
    r_decay, r_iclr, r_vres, r_gate = (int(hp[k]) for k in ("lora_decay", "lora_iclr", "lora_vres", "lora_gate"))
    gf._common_kv(s, hp, nl)
    s.set("{arch}.wkv.head_size", int(hp["wkv_head_size"]))
    s.set("{arch}.attention.decay_lora_rank", r_decay)
    s.set("{arch}.attention.iclr_lora_rank", r_iclr)
    s.set("{arch}.attention.value_residual_mix_lora_rank", r_vres)
    s.set("{arch}.attention.gate_lora_rank", r_gate)
    s.set("{arch}.token_shift_count", 1)
    gf._embeddings(s, hp, output_required=True)
    for i in range(nl):
        s.add(f"blk.{i}.attn_norm.weight", (n_embd,), "norm")
        time_mix(s, i, n_embd, r_decay, r_iclr, r_vres, r_gate, group_norm=bool(hp["group_norm"]))
        s.add(f"blk.{i}.ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, n_ff)


def _arwkv(name: str, n_layer: int, n_embd: int, n_ff: int, n_vocab: int, gate: bool) -> dict[str, Any]:
    """The converter's fixed ARWKV LoRA ranks (conversion/rwkv.py ARwkv7Model: 64/64/32, gate 128 or 0)."""
    return dict(
        name=name, n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, wkv_head_size=64, lora_decay=64, lora_iclr=64,
        lora_vres=32, lora_gate=128 if gate else 0, group_norm=True, n_ctx_train=1048576, n_vocab=n_vocab,
        rms_eps=1e-6, quant="q4_k_m", file_type=15)


gf.register(
    "arwkv7",
    build=build,
    tiny=dict(n_head=0, n_head_kv=0, n_embd=128, n_ff=256, wkv_head_size=64, lora_decay=32, lora_iclr=32,
              lora_vres=32, lora_gate=32, group_norm=True, rms_eps=1e-6),
    sparse={
        # RWKV-Red-Team/ARWKV-7B-Preview-0.1: Qwen2.5-7B-Instruct's shape (28 layers of 3584, FFN 18944, 152064
        # tokens) with RWKV-7 time mixing, no WKV gate
        "arwkv-7b-preview": _arwkv("ARWKV-7B-Preview-0.1", 28, 3584, 18944, 152064, gate=False),
        # RWKV-Red-Team/ARWKV-R1-1B5: Qwen2.5-1.5B's shape (28 layers of 1536, FFN 8960, 151936 tokens), gated
        "arwkv-r1-1.5b": _arwkv("ARWKV-R1-1B5", 28, 1536, 8960, 151936, gate=True),
    },
)
