"""RWKV-6 "Finch" (``rwkv6``, ``src/models/rwkv6.cpp`` over ``rwkv6-base.cpp``): every layer recurrent, no
attention heads. LN0 (``token_embd_norm``, created with layer 0), per layer a layer-normed time mix (``lerp_x``, a
5-way token-shift LoRA ``time_mix_w1``/``w2`` of ``time_mix_extra_dim``, the fused lerp the converter writes, the
decay LoRA of ``time_decay_extra_dim``, ``time_mix_first``, a group norm and a SiLU gate) and a layer-normed
channel mix with a sigmoid receptance. Two token shifts; the state is ``n_embd * (2 + head_size)`` f32 a layer
and sequence. The converter writes ``rescale_every_n_layers`` (6 for the World models)."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_ff, hs = hp["n_layer"], hp["n_embd"], int(hp["n_ff"]), int(hp["wkv_head_size"])
    mix, decay = int(hp["time_mix_extra_dim"]), int(hp["time_decay_extra_dim"])
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["norm_eps"]))
    s.set("{arch}.rescale_every_n_layers", int(hp["rescale_every"]))
    s.set("{arch}.wkv.head_size", hs)
    s.set("{arch}.time_mix_extra_dim", mix)
    s.set("{arch}.time_decay_extra_dim", decay)
    gf._embeddings(s, hp, output_required=True)
    s.add("output_norm.bias", (n_embd,), "bias")
    s.add("token_embd_norm.weight", (n_embd,), "norm")
    s.add("token_embd_norm.bias", (n_embd,), "bias")
    for i in range(nl):
        p = f"blk.{i}."
        for n in ("attn_norm", "attn_norm_2"):
            s.add(p + f"{n}.weight", (n_embd,), "norm")
            s.add(p + f"{n}.bias", (n_embd,), "bias")
        s.add(p + "time_mix_w1.weight", (n_embd, mix * 5))
        s.add(p + "time_mix_w2.weight", (mix, n_embd, 5))
        s.add(p + "time_mix_lerp_x.weight", (n_embd, 1, 1), "bias")
        s.add(p + "time_mix_lerp_fused.weight", (n_embd, 1, 1, 5), "bias")
        s.add(p + "time_mix_first.weight", (hs, n_embd // hs), "bias")
        s.add(p + "time_mix_decay.weight", (n_embd,), "bias")
        s.add(p + "time_mix_decay_w1.weight", (n_embd, decay))
        s.add(p + "time_mix_decay_w2.weight", (decay, n_embd))
        for n in ("key", "value", "receptance", "gate"):
            s.add(p + f"time_mix_{n}.weight", (n_embd, n_embd))
        s.add(p + "time_mix_ln.weight", (n_embd,), "norm")
        s.add(p + "time_mix_ln.bias", (n_embd,), "bias")
        s.add(p + "time_mix_output.weight", (n_embd, n_embd))
        s.add(p + "channel_mix_lerp_k.weight", (n_embd, 1, 1), "bias")
        s.add(p + "channel_mix_lerp_r.weight", (n_embd, 1, 1), "bias")
        s.add(p + "channel_mix_key.weight", (n_embd, n_ff))
        s.add(p + "channel_mix_value.weight", (n_ff, n_embd))
        s.add(p + "channel_mix_receptance.weight", (n_embd, n_embd))


def _finch(name: str, n_layer: int, n_embd: int, quant: str, file_type: int) -> dict[str, Any]:
    """RWKV-6 World shapes: head size 64, FFN int(3.5 x n_embd) // 32 * 32, 65536 tokens, rescale every 6 layers,
    and the converter's LoRA widths (conversion/rwkv.py: 32/64, 64/128 at n_embd 4096)."""
    return dict(
        name=name, n_layer=n_layer, n_embd=n_embd, n_ff=int(n_embd * 3.5) // 32 * 32, wkv_head_size=64,
        time_mix_extra_dim=64 if n_embd == 4096 else 32, time_decay_extra_dim=128 if n_embd == 4096 else 64,
        rescale_every=6, n_ctx_train=1048576, n_vocab=65536, quant=quant, file_type=file_type)


gf.register(
    "rwkv6",
    build=build,
    tiny=dict(n_head=0, n_head_kv=0, n_embd=128, n_ff=448, wkv_head_size=64, time_mix_extra_dim=32,
              time_decay_extra_dim=64, rescale_every=2, norm_eps=1e-5),
    sparse={
        # RWKV/v6-Finch-3B-HF (RWKV-6 World 3B): 32 layers of 2560
        "rwkv6-finch-3b": _finch("v6-Finch-3B", 32, 2560, "q4_k_m", 15),
        # RWKV/v6-Finch-7B-HF (RWKV-6 World 7B): 32 layers of 4096
        "rwkv6-finch-7b": _finch("v6-Finch-7B", 32, 4096, "q4_k_m", 15),
    },
)
