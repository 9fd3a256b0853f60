"""Xiaomi MiMo-V2-Flash (``mimo2``): ``llama_model_mimo2::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/mimo2.cpp``.

Every layer: ``attn_norm``, Q/K of ``attention.key_length`` per head and V of ``attention.value_length`` (no
biases; ``create_tensor_qkv`` also takes one fused ``attn_qkv``), the output projection, optional attention sinks
(``attn_sinks.weight``, one per head: MiMo-V2-Flash has them on its sliding layers only), ``ffn_norm``; then a
dense SwiGLU FFN (``feed_forward_length``) where the layer has no router, else the router, the selection bias
``exp_probs_b.bias`` and the three ``*_exps`` (``expert_feed_forward_length``; sigmoid routing and normalised
weights are fixed in the graph). KV heads per layer (``head_count_kv`` array: 4 on global, 8 on sliding layers).
Required: ``attention.sliding_window`` and ``attention.sliding_window_pattern`` (one int per block, 1 = sliding,
NextN blocks included, as the converter writes ``hybrid_layer_pattern``). Optional: ``rope.freq_base_swa``,
``attention.value_scale`` (a SCALE on the attention output). ``block_count`` counts the NextN/MTP blocks
(``nextn_predict_layers``, ``TENSOR_SKIP`` without MTP): sliding attention with one fused ``attn_qkv`` (the
converter's ``qkv_proj``; ``graph_mtp`` requires it), a dense FFN, ``nextn.eh_proj``/``enorm``/``hnorm``. ``output.weight`` is required.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (
    ModelSpec,
    _common_kv,
    _dense_ffn,
    _embeddings,
    _experts,
    register,
)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hk, hv = int(hp["head_dim"]), int(hp["head_dim_v"])
    swa = [int(x) for x in hp["swa_layers"]] + [1] * n_nextn  # convert_hf_to_gguf: hybrid_layer_pattern + [1]*nextn
    if len(swa) != nall:
        raise ValueError(f"mimo2: swa_layers has {len(swa) - n_nextn} entries, expected {nl}")
    kv = [int(hp["n_head_kv_swa"]) if w else int(hp["n_head_kv_full"]) for w in swa]
    dense = set(hp["dense_layers"])
    _common_kv(s, {**hp, "n_head_kv": kv}, nall)
    s.set("{arch}.attention.value_length", hv)
    s.set("{arch}.rope.dimension_count", int(hp["rope_dim"]))
    s.set("{arch}.rope.freq_base_swa", float(hp["rope_base_swa"]))
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attention.sliding_window_pattern", swa)
    if hp.get("value_scale"):
        s.set("{arch}.attention.value_scale", float(hp["value_scale"]))
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp, output_required=True)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if i >= nl:  # the MTP blocks: one fused qkv_proj (mimo2.cpp's graph_mtp requires attn_qkv)
            s.add(p + "attn_qkv.weight", (n_embd, hk * n_head + hk * kv[i] + hv * kv[i]))
        else:
            s.add(p + "attn_q.weight", (n_embd, hk * n_head))
            s.add(p + "attn_k.weight", (n_embd, hk * kv[i]))
            s.add(p + "attn_v.weight", (n_embd, hv * kv[i]))
        s.add(p + "attn_output.weight", (hv * n_head, n_embd))
        if swa[i] and hp.get("swa_sinks"):
            s.add(p + "attn_sinks.weight", (n_head,), "zero")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if i in dense or i >= nl:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            s.add(p + "exp_probs_b.bias", (hp["n_expert"],), "zero")
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")


def _flash_pattern(n: int) -> list[int]:
    # 9 global layers (0 and every 6th after it, and the last) among 48, the others sliding
    return [0 if i % 6 == 0 or i == n - 1 else 1 for i in range(n)]


register(
    "mimo2",
    build=_build,
    # 4 main layers (0 global and dense, 1-2 sliding over 128 tokens with sinks, 3 global) + 1 NextN block; K heads
    # of 32, V heads of 16, partial rope (16), 1 KV head on global / 2 on sliding layers, 8 experts of 64 (2 used)
    tiny=dict(n_nextn=1, head_dim=32, head_dim_v=16, rope_dim=16, n_head_kv_full=1, n_head_kv_swa=2,
              swa_layers=[0, 1, 1, 0], dense_layers=[0], swa_sinks=True, n_ff=128, n_expert=8, n_expert_used=2,
              n_ff_exp=64, sliding_window=128, value_scale=0.707, rope_base=5000000.0, rope_base_swa=10000.0),
    sparse={
        # MiMo-V2-Flash (XiaomiMiMo/MiMo-V2-Flash config.json, MiMoV2FlashForCausalLM): 48 layers + 3 MTP blocks,
        # hidden 4096, 64 query heads, K head 192 / V head 128, 4 KV heads on the 9 global layers and 8 on the 39
        # sliding ones (window 128, sinks on sliding layers), partial rope 0.334 (64 dims), first layer dense
        # (intermediate 16384), 256 experts of 2048 (8 used, sigmoid with selection bias), value scale 0.707,
        # vocabulary 152576, 262144 context, rope theta 5e6 / 1e4 on sliding layers (309B). Which layers are global
        # is assumed here (layer 0, every 6th, the last), not taken from the config.
        "mimo-v2-flash": dict(
            name="MiMo-V2-Flash", n_layer=48, n_nextn=3, n_embd=4096, n_head=64, head_dim=192, head_dim_v=128,
            rope_dim=64, n_head_kv_full=4, n_head_kv_swa=8, swa_layers=_flash_pattern(48), dense_layers=[0],
            swa_sinks=True, n_ff=16384, n_expert=256, n_expert_used=8, n_ff_exp=2048, sliding_window=128,
            value_scale=0.707, n_ctx_train=262144, rope_base=5000000.0, rope_base_swa=10000.0, n_vocab=152576,
            quant="q4_k_m", file_type=15),
    },
)
