"""Gemma 4 (``gemma4``), the text model of E2B / E4B / 26B-A4B / 31B: ``src/models/gemma4.cpp``.

Tensors as ``llama_model_gemma4::load_arch_tensors`` creates them: gemma3's layer (q/k norms, post-attention and
post-FFN norms, GELU FFN) with different head sizes on sliding (``key_length_swa``) and full layers
(``key_length``) and per-layer KV head counts; on full layers a ``rope_freqs`` {head_dim/2} (proportional rope;
one tensor, created with the first full layer, ``TENSOR_DUPLICATED`` for the others) and, where
``attention_k_eq_v`` (26B-A4B, 31B), no ``attn_v`` (V is K); per layer an optional ``layer_output_scale`` {1}.
Layers from ``n_layer - shared_kv_layers`` on reuse the cache of the last own sliding / full layer and have no
``attn_k``/``attn_v``/``attn_k_norm``. MoE layers (26B-A4B) keep the dense FFN as a shared MLP and add a router on
the rms-normed, scaled input (``ffn_gate_inp`` with its ``.scale`` {n_embd}), ``pre_ffw_norm_2``,
``post_ffw_norm_1``/``_2`` and experts with a per-expert ``ffn_down_exps.scale`` {n_expert}. With per-layer
embeddings (E2B/E4B, ``embedding_length_per_layer_input`` > 0): ``per_layer_token_embd``
{n_pl * n_layer, n_vocab}, ``per_layer_model_proj``, ``per_layer_proj_norm`` and per layer ``inp_gate``, ``proj``,
``post_norm``. Keys as ``conversion/gemma.py`` (``Gemma4Model``) writes them: the sliding pattern as a bool array,
per-layer KV heads and FFN widths (``use_double_wide_mlp``: shared-KV layers twice as wide)."""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from tests import gguf_factory as gf


def _layer_types(n_layer: int, period: int) -> list[bool]:
    """``layer_types`` as published: every ``period``-th layer full attention, and the last (True = sliding)."""
    out = [(il + 1) % period != 0 for il in range(n_layer)]
    out[-1] = False
    return out


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    hd_swa, hd_full = int(hp["head_dim_swa"]), int(hp["head_dim"])
    swa = _layer_types(nl, int(hp["swa_period"]))
    kv = [int(hp["n_head_kv"]) if swa[il] else int(hp["n_head_kv_full"]) for il in range(nl)]
    n_shared = int(hp["n_kv_shared"])
    kv_from = nl - n_shared
    n_ff = gf._per_layer(hp["n_ff"], nl)
    if hp.get("double_wide"):
        n_ff = [f if il < kv_from else 2 * f for il, f in enumerate(n_ff)]
    n_pl = int(hp["n_embd_per_layer"])
    n_expert = int(hp.get("n_expert") or 0)
    hpp = dict(hp, n_head_kv=kv, n_ff=n_ff)
    gf._common_kv(s, hpp, nl)
    s.set("{arch}.attention.key_length_swa", hd_swa)
    s.set("{arch}.attention.value_length_swa", hd_swa)
    s.set("{arch}.rope.dimension_count", hd_full)
    s.set("{arch}.rope.dimension_count_swa", hd_swa)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attention.sliding_window_pattern", swa, VT.BOOL)
    s.set("{arch}.rope.freq_base_swa", float(hp["rope_base_swa"]))
    s.set("{arch}.final_logit_softcapping", float(hp["final_logit_softcapping"]))
    s.set("{arch}.attention.shared_kv_layers", n_shared)
    s.set("{arch}.embedding_length_per_layer_input", n_pl)
    n_vocab = gf._n_vocab(hp)
    s.add("token_embd.weight", (n_embd, n_vocab))
    if not hp.get("tied_embeddings"):
        s.add("output.weight", (n_embd, n_vocab))
    s.add("rope_freqs.weight", (hd_full // 2,), "ones")
    if n_pl:
        s.add("per_layer_token_embd.weight", (n_pl * nl, n_vocab))
        s.add("per_layer_model_proj.weight", (n_embd, n_pl * nl))
        s.add("per_layer_proj_norm.weight", (n_pl,), "norm")
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        hd = hd_swa if swa[i] else hd_full
        own = i < kv_from
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_q.weight", (n_embd, hd * n_head))
        if own:
            s.add(p + "attn_k.weight", (n_embd, hd * kv[i]))
            if swa[i] or not hp.get("k_eq_v"):
                s.add(p + "attn_v.weight", (n_embd, hd * kv[i]))
        s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        if own:
            s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        if hp.get("layer_scalar"):
            s.add(p + "layer_output_scale.weight", (1,), "ones")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, n_ff[i])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")
        if n_expert:
            n_ff_exp = int(hp["n_ff_exp"])
            s.add(p + "ffn_gate_inp.weight", (n_embd, n_expert), "router")
            s.add(p + "ffn_gate_inp.scale", (n_embd,), "norm")
            s.add(p + "pre_ffw_norm_2.weight", (n_embd,), "norm")
            s.add(p + "post_ffw_norm_1.weight", (n_embd,), "norm")
            s.add(p + "post_ffw_norm_2.weight", (n_embd,), "norm")
            if hp.get("gate_up_exps"):
                s.add(p + "ffn_gate_up_exps.weight", (n_embd, 2 * n_ff_exp, n_expert))
            else:
                s.add(p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert))
                s.add(p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert))
            s.add(p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert))
            s.add(p + "ffn_down_exps.scale", (n_expert,), "norm")
        if n_pl:
            s.add(p + "inp_gate.weight", (n_embd, n_pl))
            s.add(p + "proj.weight", (n_pl, n_embd))
            s.add(p + "post_norm.weight", (n_embd,), "norm")


# tiny: everything at once (llama.cpp's graph allows it): per-layer embeddings, KV sharing (layers 5-9 read the
# caches of layers 3 (sliding) and 4 (full), as E2B's 15-34 read 13's and 14's), double-wide FFNs on the sharing
# layers, K=V on full layers, experts with a shared MLP on every layer, different head sizes and KV heads on
# sliding and full layers
TINY = dict(n_layer=10, n_embd=128, n_head=4, n_head_kv=2, n_head_kv_full=1, head_dim=64, head_dim_swa=32,
            n_ff=128, double_wide=True, swa_period=5, sliding_window=128, rope_base=1000000.0,
            rope_base_swa=10000.0, rms_eps=1e-6, final_logit_softcapping=30.0, n_kv_shared=5,
            n_embd_per_layer=64, k_eq_v=True, layer_scalar=True, n_expert=4, n_expert_used=2, n_ff_exp=64,
            gate_up_exps=False)

# text_config of the google/gemma-4-* models (config.json; conversion/gemma.py Gemma4Model): head_dim 256 on
# sliding and global_head_dim 512 on full layers, rope_theta 1e6 (full, proportional) / 1e4 (sliding), vocabulary
# 262144, final logit soft-cap 30, tied embeddings, layer_scalar on every layer
_G4 = dict(head_dim=512, head_dim_swa=256, rope_base=1000000.0, rope_base_swa=10000.0, rms_eps=1e-6,
           final_logit_softcapping=30.0, n_vocab=262144, tied_embeddings=True, layer_scalar=True, quant="q4_k_m",
           file_type=15, gate_up_exps=False, n_expert=0, n_expert_used=0, n_ff_exp=0)

gf.register(
    "gemma4",
    build=build,
    tiny=TINY,
    sparse={
        # E2B: 35 layers, hidden 1536, 8 query / 1 KV head, FFN 6144 (12288 on the 20 KV-sharing layers,
        # use_double_wide_mlp), sliding window 512 on 4 of every 5 layers, per-layer input 256, 131072 positions
        "gemma-4-e2b": dict(_G4, name="gemma-4-E2B-it", n_layer=35, n_embd=1536, n_head=8, n_head_kv=1,
                            n_head_kv_full=1, n_ff=6144, double_wide=True, swa_period=5, sliding_window=512,
                            n_kv_shared=20, n_embd_per_layer=256, k_eq_v=False, n_ctx_train=131072),
        # E4B: 42 layers, hidden 2560, 8 query / 2 KV heads, FFN 10240 (no double-wide MLP), sliding window 512 on 5
        # of every 6 layers, 18 KV-sharing layers (24-41 read 22's and 23's caches), per-layer input 256
        "gemma-4-e4b": dict(_G4, name="gemma-4-E4B-it", n_layer=42, n_embd=2560, n_head=8, n_head_kv=2,
                            n_head_kv_full=2, n_ff=10240, double_wide=False, swa_period=6, sliding_window=512,
                            n_kv_shared=18, n_embd_per_layer=256, k_eq_v=False, n_ctx_train=131072),
        # 26B-A4B: 30 layers, hidden 2816, 16 query heads, 8 KV heads (sliding) / 2 (full, K=V), shared MLP 2112,
        # 128 experts of 704, top 8, sliding window 1024 on 5 of every 6 layers, 262144 positions
        "gemma-4-26b-a4b": dict(_G4, name="gemma-4-26B-A4B-it", n_layer=30, n_embd=2816, n_head=16, n_head_kv=8,
                                n_head_kv_full=2, n_ff=2112, double_wide=False, swa_period=6,
                                sliding_window=1024, n_kv_shared=0, n_embd_per_layer=0, k_eq_v=True,
                                n_expert=128, n_expert_used=8, n_ff_exp=704, n_ctx_train=262144),
        # 31B: 60 layers, hidden 5376, 32 query heads, 16 KV heads (sliding) / 4 (full, K=V), FFN 21504, sliding
        # window 1024 on 5 of every 6 layers, 262144 positions
        "gemma-4-31b": dict(_G4, name="gemma-4-31B-it", n_layer=60, n_embd=5376, n_head=32, n_head_kv=16,
                            n_head_kv_full=4, n_ff=21504, double_wide=False, swa_period=6, sliding_window=1024,
                            n_kv_shared=0, n_embd_per_layer=0, k_eq_v=True, n_ctx_train=262144),
    },
)
