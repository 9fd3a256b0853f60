"""Gemma 3n (``gemma3n``), the text model of E2B / E4B: ``src/models/gemma3n.cpp``.

Tensors as ``llama_model_gemma3n::load_arch_tensors`` creates them: gemma3's layer (q/k norms, post-attention and
post-FFN norms, GELU FFN) plus, per layer, the per-layer-input gate and projection (``inp_gate``, ``proj``,
``post_norm``), AltUp (``altup_correct_coef`` {4, 4}, ``altup_correct_scale``, ``altup_predict_coef`` {4, 16},
``altup_router`` {n_embd, 4}, ``altup_router_norm``) and LAuReL (``laurel_l`` {n_embd, 64}, ``laurel_r``,
``laurel_post_norm``); globally ``per_layer_token_embd`` {256 * n_layer, n_vocab} (an input tensor: host memory),
``per_layer_model_proj`` {n_embd, 256 * n_layer} and ``per_layer_proj_norm`` {256} (created with layer 0),
``altup_proj`` / ``altup_unembd_proj`` {n_embd, n_embd, 3} (output tensors). llama.cpp reads none of the AltUp
keys: n_altup 4, laurel rank 64 and the per-layer width 256 are ``llama_hparams`` defaults, and the first 20 layers
own a KV cache whatever ``attention.shared_kv_layers`` says (``n_layer_kv_from_start = 20``); later layers reuse
layer 18's (sliding) or 19's (full) cache. The keys the converter (``conversion/gemma.py``, ``Gemma3NModel``)
writes are written anyway, with the sliding-window pattern as its per-layer bool array (``layer_types``)."""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from tests import gguf_factory as gf

N_ALTUP = 4  # llama_hparams::n_altup (not read from the file)
LAUREL_RANK = 64  # llama_hparams::laurel_rank
N_EMBD_ALTUP = 256  # llama_hparams::n_embd_altup


def _layer_types(n_layer: int, period: int) -> list[bool]:
    """The published ``layer_types``: 4 sliding layers, then a full one (True = sliding)."""
    return [il % period < period - 1 for il in range(n_layer)]


def _sparsity(n_layer: int) -> list[float]:
    """``activation_sparsity_scale``: normal icdf(0.95) on the first 10 layers (the graph hard-codes both)."""
    return [1.6448533535003662 if il < 10 else 0.0 for il in range(n_layer)]


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = gf._per_layer(hp["n_head_kv"], nl)
    n_ff = gf._per_layer(hp["n_ff"], nl)
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    s.set("{arch}.attention.sliding_window_pattern", _layer_types(nl, int(hp["swa_period"])), VT.BOOL)
    s.set("{arch}.rope.freq_base_swa", float(hp["rope_base_swa"]))
    s.set("{arch}.final_logit_softcapping", float(hp["final_logit_softcapping"]))
    s.set("{arch}.altup.active_idx", 0)
    s.set("{arch}.altup.num_inputs", N_ALTUP)
    s.set("{arch}.embedding_length_per_layer_input", N_EMBD_ALTUP)
    s.set("{arch}.attention.shared_kv_layers", int(hp["n_kv_shared"]))
    s.set("{arch}.activation_sparsity_scale", _sparsity(nl), VT.FLOAT32)
    n_vocab = gf._n_vocab(hp)
    s.add("token_embd.weight", (n_embd, n_vocab))
    if not hp.get("tied_embeddings"):
        s.add("output.weight", (n_embd, n_vocab))
    s.add("altup_proj.weight", (n_embd, n_embd, N_ALTUP - 1))
    s.add("altup_unembd_proj.weight", (n_embd, n_embd, N_ALTUP - 1))
    s.add("per_layer_token_embd.weight", (N_EMBD_ALTUP * nl, n_vocab))
    s.add("per_layer_model_proj.weight", (n_embd, N_EMBD_ALTUP * nl))
    s.add("per_layer_proj_norm.weight", (N_EMBD_ALTUP,), "norm")
    s.add("output_norm.weight", (n_embd,), "norm")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "post_attention_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        gf._dense_ffn(s, i, n_embd, n_ff[i])
        s.add(p + "post_ffw_norm.weight", (n_embd,), "norm")
        s.add(p + "inp_gate.weight", (n_embd, N_EMBD_ALTUP))
        s.add(p + "proj.weight", (N_EMBD_ALTUP, n_embd))
        s.add(p + "post_norm.weight", (n_embd,), "norm")
        # the AltUp coefficients are tiny f32 matrices in published files (llama-quant never quantizes altup/laurel)
        s.add(p + "altup_correct_coef.weight", (N_ALTUP, N_ALTUP), "router")
        s.add(p + "altup_correct_scale.weight", (n_embd,), "norm")
        s.add(p + "altup_predict_coef.weight", (N_ALTUP, N_ALTUP * N_ALTUP), "router")
        s.add(p + "altup_router.weight", (n_embd, N_ALTUP), "router")
        s.add(p + "altup_router_norm.weight", (n_embd,), "norm")
        s.add(p + "laurel_l.weight", (n_embd, LAUREL_RANK))
        s.add(p + "laurel_r.weight", (LAUREL_RANK, n_embd))
        s.add(p + "laurel_post_norm.weight", (n_embd,), "norm")


# tiny: 25 layers so that layers 20-24 share the caches of layers 18 (sliding) and 19 (full), as in the real
# models (llama.cpp's n_layer_kv_from_start is 20 whatever the size); the first 10 use activation sparsity. The
# per-layer embedding is 256 wide per layer whatever n_embd (6400 x 320 here), so the tiny file is Q4_K_M-like
# (Q4_K, Q5_0 where a row is not a multiple of 256) to stay a few MiB
TINY = dict(n_layer=25, head_dim=32, n_ff=128, sliding_window=128, swa_period=5, rope_base=1000000.0,
            rope_base_swa=10000.0, rms_eps=1e-6, final_logit_softcapping=30.0, n_kv_shared=5, quant="q4_k_m")

# text_config of google/gemma-3n-E2B-it / -E4B-it (config.json): hidden 2048, 8 query / 2 KV heads of 256, FFN 8192
# (E2B, 30 layers, 10 KV-shared) / 16384 (E4B, 35 layers, 15 KV-shared), sliding window 512 on 4 of every 5 layers,
# rope_theta 1e6 (full) / 1e4 (sliding), 32768 positions, vocabulary 262400 (the converter pads both embeddings
# to it), final logit soft-cap 30, tied embeddings; 4.46B text parameters for E2B
_G3N = dict(n_embd=2048, n_head=8, n_head_kv=2, head_dim=256, sliding_window=512, swa_period=5,
            n_ctx_train=32768, rope_base=1000000.0, rope_base_swa=10000.0, rms_eps=1e-6,
            final_logit_softcapping=30.0, n_vocab=262400, tied_embeddings=True, quant="q4_k_m", file_type=15)

gf.register(
    "gemma3n",
    build=build,
    tiny=TINY,
    sparse={
        "gemma-3n-e2b": dict(_G3N, name="gemma-3n-E2B-it", n_layer=30, n_ff=[8192] * 30, n_kv_shared=10),
        "gemma-3n-e4b": dict(_G3N, name="gemma-3n-E4B-it", n_layer=35, n_ff=[16384] * 35, n_kv_shared=15),
    },
)
