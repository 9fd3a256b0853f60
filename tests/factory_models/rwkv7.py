"""RWKV-7 "Goose" (``rwkv7``, ``src/models/rwkv7.cpp`` over ``rwkv7-base.cpp``): every layer recurrent, no
attention heads (``attention.head_count`` 0, as the converter writes). An LN0 (``token_embd_norm``, created with
layer 0) after the embeddings; per layer a layer-normed time mix (the WKV7 linear attention with its decay,
in-context-learning-rate, value-residual and gate LoRAs, a fused 6-way token-shift lerp and a group norm over
``n_embd / wkv.head_size`` heads) and a layer-normed channel mix (squared-ReLU FFN). Layer 0's ``time_mix_v*``
are dummies the converter adds (v1 is n_lora_iclr wide there). The recurrent state per layer and sequence is
``token_shift_count * n_embd`` (two token shifts) plus ``n_embd * head_size`` (the WKV matrices), f32."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def time_mix(s: gf.ModelSpec, i: int, n_embd: int, r_decay: int, r_iclr: int, r_vres: int, r_gate: int,
             group_norm: bool) -> None:
    """``load_arch_tensors``' time-mix tensors of layer ``i`` (the gate LoRA and the 6th lerp only with
    ``r_gate`` > 0, the group norm ``time_mix_ln`` only with ``group_norm``), shared with arwkv7."""
    p = f"blk.{i}."
    for x, rank in (("w", r_decay), ("a", r_iclr), ("v", r_iclr if i == 0 else r_vres), ("g", r_gate)):
        if x == "g" and not rank:
            continue
        if x != "g":
            s.add(p + f"time_mix_{x}0.weight", (n_embd,), "bias")
        s.add(p + f"time_mix_{x}1.weight", (n_embd, rank))
        s.add(p + f"time_mix_{x}2.weight", (rank, n_embd))
    s.add(p + "time_mix_lerp_fused.weight", (n_embd, 1, 1, 6 if r_gate else 5), "bias")
    s.add(p + "time_mix_k_k.weight", (n_embd,), "norm")
    s.add(p + "time_mix_k_a.weight", (n_embd,), "norm")
    s.add(p + "time_mix_r_k.weight", (n_embd,), "bias")
    s.add(p + "time_mix_key.weight", (n_embd, n_embd))
    s.add(p + "time_mix_value.weight", (n_embd, n_embd))
    s.add(p + "time_mix_receptance.weight", (n_embd, n_embd))
    if group_norm:
        s.add(p + "time_mix_ln.weight", (n_embd,), "norm")
        s.add(p + "time_mix_ln.bias", (n_embd,), "bias")
    s.add(p + "time_mix_output.weight", (n_embd, n_embd))


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_ff = hp["n_layer"], hp["n_embd"], int(hp["n_ff"])
    r_decay, r_iclr, r_vres, r_gate = (int(hp[k]) for k in ("lora_decay", "lora_iclr", "lora_vres", "lora_gate"))
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["norm_eps"]))
    s.set("{arch}.wkv.head_size", int(hp["wkv_head_size"]))
    s.set("{arch}.attention.decay_lora_rank", r_decay)
    s.set("{arch}.attention.iclr_lora_rank", r_iclr)
    s.set("{arch}.attention.value_residual_mix_lora_rank", r_vres)
    s.set("{arch}.attention.gate_lora_rank", r_gate)
    gf._embeddings(s, hp, output_required=True)
    s.add("output_norm.bias", (n_embd,), "bias")
    s.add("token_embd_norm.weight", (n_embd,), "norm")
    s.add("token_embd_norm.bias", (n_embd,), "bias")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.bias", (n_embd,), "bias")
        s.add(p + "attn_norm_2.weight", (n_embd,), "norm")
        s.add(p + "attn_norm_2.bias", (n_embd,), "bias")
        time_mix(s, i, n_embd, r_decay, r_iclr, r_vres, r_gate, group_norm=True)
        s.add(p + "channel_mix_lerp_k.weight", (n_embd, 1, 1), "bias")
        s.add(p + "channel_mix_key.weight", (n_embd, n_ff))
        s.add(p + "channel_mix_value.weight", (n_ff, n_embd))


def _goose(name: str, n_layer: int, n_embd: int, quant: str, file_type: int) -> dict[str, Any]:
    """Published RWKV-7 shapes: head size 64, FFN 4 x n_embd, the 65536-token World vocabulary, and the LoRA
    ranks the converter derives (conversion/rwkv.py calc_lora_rank, equal to the ranks in the HF configs)."""

    def rank(e: float, m: float) -> int:
        return max(1, round(n_embd**e * m / 32)) * 32

    return dict(
        name=name, n_layer=n_layer, n_embd=n_embd, n_ff=4 * n_embd, wkv_head_size=64, lora_decay=rank(0.5, 1.8),
        lora_iclr=rank(0.5, 1.8), lora_vres=rank(0.5, 1.3), lora_gate=rank(0.8, 0.6), n_ctx_train=1048576,
        n_vocab=65536, quant=quant, file_type=file_type)


gf.register(
    "rwkv7",
    build=build,
    tiny=dict(n_head=0, n_head_kv=0, n_embd=128, n_ff=512, wkv_head_size=64, lora_decay=32, lora_iclr=32,
              lora_vres=32, lora_gate=32, norm_eps=1e-5),
    sparse={
        # fla-hub/rwkv7-1.5B-world (RWKV-7 "Goose" World 1.5B): 24 layers of 2048, LoRA ranks 96/96/64/256
        "rwkv7-1.5b-world": _goose("rwkv7-1.5B-world", 24, 2048, "f16", 1),
        # BlinkDL/rwkv7-g1 2.9B (same shape as rwkv7-2.9B-world): 32 layers of 2560, LoRA ranks 96/96/64/320
        "rwkv7-g1-2.9b": _goose("rwkv7-g1-2.9b", 32, 2560, "q4_k_m", 15),
        # BlinkDL/rwkv7-g1 7.2B: 32 layers of 4096, LoRA ranks 128/128/96/480
        "rwkv7-g1-7.2b": _goose("rwkv7-g1-7.2b", 32, 4096, "q4_k_m", 15),
    },
)
