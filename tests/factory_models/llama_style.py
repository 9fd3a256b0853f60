"""Decoders whose llama.cpp graph is the llama layer (``src/models/internlm2.cpp``, ``xverse.cpp``, ``qwen.cpp``,
``orion.cpp``, ``deepseek.cpp``): their ``load_arch_tensors`` / ``load_arch_hparams``.

- ``internlm2`` (InternLM2/2.5), ``xverse`` (XVERSE): the llama tensors, an RMS epsilon required, ``output.weight``
  required.
- ``qwen`` (Qwen 1): one fused ``attn_qkv`` of 3 x n_embd with its bias (no GQA), FFN tensors of
  ``feed_forward_length`` / 2 (the converter writes the HF intermediate size, twice the FFN width).
- ``orion`` (Orion-14B): layer norms with biases (``attention.layer_norm_epsilon``) on attention, FFN and output.
- ``minicpm`` (MiniCPM 1/2/4): the llama tensors run by granite's graph (embedding, residual and logit scales,
  which llama.cpp sets by default when the file has no keys for them); ``output.weight`` optional.
- ``olmo`` (OLMo 1): layer norms without weights or biases (no norm tensor at all), ``output.weight`` optional.
- ``dbrx`` (DBRX): layer norms without biases, a fused ``attn_qkv`` clamped (``attention.clamp_kqv`` required),
  the FFN's norm named ``attn_output_norm``, softmax experts of ``feed_forward_length`` (normalised top-k).
- ``deepseek`` (DeepSeek-MoE 16B, V1): ``leading_dense_block_count`` dense layers, then softmax-routed experts
  (``expert_feed_forward_length``) plus ``expert_shared_count`` ungated shared experts fused into one FFN of
  n_ff_exp x n_shared; ``output.weight`` optional.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (
    ModelSpec,
    _attn_qkvo,
    _common_kv,
    _dense_ffn,
    _embeddings,
    _experts,
    _n_vocab,
    _shared_expert,
    register,
)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    arch = s.arch
    _common_kv(s, hp, nl)
    if arch == "dbrx":  # n_ff is the expert width; the clamp is required
        s.set("{arch}.attention.clamp_kqv", float(hp["clamp_kqv"]))
    if arch in ("orion", "olmo", "dbrx"):
        del s.kv[s.key("{arch}.attention.layer_norm_rms_epsilon")]
        s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    if arch == "minicpm" and hp["scales"]:  # newer exports write the muP scales; older ones rely on the defaults
        s.set("{arch}.embedding_scale", 12.0)
        s.set("{arch}.residual_scale", 1.4 / nl**0.5)
        s.set("{arch}.logit_scale", 256.0 / n_embd)
    if arch == "deepseek":
        s.set("{arch}.leading_dense_block_count", int(hp["n_layer_dense_lead"]))
        s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
        s.set("{arch}.expert_weights_scale", 1.0)
    if arch == "olmo":  # no norm weights at all
        s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
        if not hp.get("tied_embeddings"):
            s.add("output.weight", (n_embd, _n_vocab(hp)))
    else:
        _embeddings(s, hp, output_required=arch not in ("deepseek", "minicpm"))
    if arch == "orion":
        s.add("output_norm.bias", (n_embd,), "bias")
    for i in range(nl):
        p = f"blk.{i}."
        if arch != "olmo":
            s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if arch == "orion":
            s.add(p + "attn_norm.bias", (n_embd,), "bias")
        if arch == "dbrx":
            s.add(p + "attn_qkv.weight", (n_embd, n_embd + 2 * hd * n_kv))
            s.add(p + "attn_output.weight", (n_embd, n_embd))
            s.add(p + "attn_output_norm.weight", (n_embd,), "norm")
            _experts(s, i, n_embd, hp["n_ff"], hp["n_expert"])
            continue
        if arch == "qwen":
            s.add(p + "attn_qkv.weight", (n_embd, 3 * n_embd))
            s.add(p + "attn_qkv.bias", (3 * n_embd,), "bias")
            s.add(p + "attn_output.weight", (n_embd, n_embd))
        else:
            _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        if arch != "olmo":
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if arch == "orion":
            s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        if arch == "deepseek" and i >= int(hp["n_layer_dense_lead"]):
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            _shared_expert(s, i, n_embd, int(hp["n_ff_exp"]) * int(hp["n_expert_shared"]))
        else:
            _dense_ffn(s, i, n_embd, int(hp["n_ff"]) // (2 if arch == "qwen" else 1))


register(
    "internlm2",
    build=_build,
    tiny=dict(n_ff=192, rope_base=1000000.0),
    sparse={
        # internlm/internlm2_5-7b-chat: 32 layers of 4096, 32 query / 8 KV heads, intermediate 14336, vocabulary
        # 92544, rope theta 1e6, 32768 positions
        "internlm2.5-7b": dict(
            name="internlm2_5-7b-chat", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336,
            n_ctx_train=32768, rope_base=1000000.0, n_vocab=92544, quant="q4_k_m", file_type=15),
        # internlm/internlm2_5-20b-chat: 48 layers of 6144, 48 query / 8 KV heads, intermediate 16384
        "internlm2.5-20b": dict(
            name="internlm2_5-20b-chat", n_layer=48, n_embd=6144, n_head=48, n_head_kv=8, n_ff=16384,
            n_ctx_train=32768, rope_base=1000000.0, n_vocab=92544, quant="q4_k_m", file_type=15),
    },
)

register(
    "xverse",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # xverse/XVERSE-13B-Chat: 40 layers of 5120, 40 heads (no GQA), intermediate 13824, vocabulary 100534
        "xverse-13b": dict(
            name="XVERSE-13B-Chat", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13824,
            n_ctx_train=8192, n_vocab=100534, quant="q4_k_m", file_type=15),
    },
)

register(
    "qwen",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=384),
    sparse={
        # Qwen/Qwen-7B-Chat: 32 layers of 4096, 32 heads (no GQA), intermediate 22016 (FFN 11008), vocabulary
        # 151936, 8192 positions
        "qwen-7b": dict(
            name="Qwen-7B-Chat", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=22016, n_ctx_train=8192,
            n_vocab=151936, quant="q4_k_m", file_type=15),
    },
)

register(
    "orion",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # OrionStarAI/Orion-14B-Chat: 40 layers of 5120, 40 heads (no GQA), intermediate 15360, vocabulary 84608,
        # layer norms with biases
        "orion-14b": dict(
            name="Orion-14B-Chat", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=15360, n_ctx_train=4096,
            n_vocab=84608, quant="q4_k_m", file_type=15),
    },
)

register(
    "deepseek",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=2,
              n_layer_dense_lead=1),
    sparse={
        # deepseek-ai/deepseek-moe-16b-chat: 28 layers of 2048 (the first dense, intermediate 10944), 16 heads (no
        # GQA), 64 experts of 1408 (6 used, softmax) + 2 shared, vocabulary 102400
        "deepseek-moe-16b": dict(
            name="deepseek-moe-16b-chat", n_layer=28, n_embd=2048, n_head=16, n_head_kv=16, n_ff=10944,
            n_ff_exp=1408, n_expert=64, n_expert_used=6, n_expert_shared=2, n_layer_dense_lead=1,
            n_ctx_train=4096, n_vocab=102400, quant="q4_k_m", file_type=15),
    },
)

register(
    "olmo",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192),
    sparse={
        # allenai/OLMo-7B-0424-hf: 32 layers of 4096, 32 heads, intermediate 11008, vocabulary 50304 (clip_qkv 8)
        "olmo-7b": dict(
            name="OLMo-7B-0424", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=11008, n_ctx_train=4096,
            n_vocab=50304, quant="q4_k_m", file_type=15),
    },
)

register(
    "minicpm",
    build=_build,
    # an older export: no scale keys (llama.cpp's defaults apply)
    tiny=dict(n_head_kv=4, n_ff=192, scales=False),
    sparse={
        # openbmb/MiniCPM-2B-sft-bf16: 40 layers of 2304, 36 heads (no GQA), intermediate 5760, vocabulary 122753,
        # tied head, no scale keys
        "minicpm-2b": dict(
            name="MiniCPM-2B-sft", n_layer=40, n_embd=2304, n_head=36, n_head_kv=36, n_ff=5760, n_ctx_train=4096,
            n_vocab=122753, tied_embeddings=True, scales=False, quant="q4_k_m", file_type=15),
        # openbmb/MiniCPM4-8B: 32 layers of 4096, 32 query / 2 KV heads, intermediate 16384, vocabulary 73448,
        # 32768 positions, the scales written
        "minicpm4-8b": dict(
            name="MiniCPM4-8B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=2, n_ff=16384, n_ctx_train=32768,
            n_vocab=73448, scales=True, quant="q4_k_m", file_type=15),
    },
)

register(
    "dbrx",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=64, n_expert=8, n_expert_used=2, clamp_kqv=8.0),
    sparse={
        # databricks/dbrx-instruct: 40 layers of 6144, 48 query / 8 KV heads, 16 experts of 10752 (4 used,
        # softmax, normalised), Q/K/V clamped at 8, vocabulary 100352, 32768 positions (132B)
        "dbrx-132b": dict(
            name="dbrx-instruct", n_layer=40, n_embd=6144, n_head=48, n_head_kv=8, n_ff=10752, n_expert=16,
            n_expert_used=4, clamp_kqv=8.0, n_ctx_train=32768, rope_base=500000.0, n_vocab=100352,
            quant="q4_k_m", file_type=15),
    },
)
