"""GPT-2 (``gpt2``), StarCoder (``starcoder``) and Falcon (``falcon``): ``load_arch_tensors`` /
``load_arch_hparams`` of ``src/models/gpt2.cpp``, ``starcoder.cpp`` and ``falcon.cpp``; all need
``attention.layer_norm_epsilon``.

- gpt2, starcoder: ``position_embd`` (n_embd x context_length), ``attn_norm`` weight and bias, a fused
  ``attn_qkv`` with its bias, ``attn_output`` with its bias, ``ffn_norm`` weight and bias, ``ffn_up``/``ffn_down``
  with biases, ``output_norm`` weight and bias, ``output.weight`` optional (GPT-2 ties it). StarCoder uses one KV
  head (multi-query).
- falcon: ``attn_norm`` weight and bias, ``attn_norm_2`` weight and bias on 40B/180B, a fused ``attn_qkv``
  without bias, ``attn_output``, ``ffn_up``/``ffn_down`` without biases, ``output_norm`` weight and bias.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    n_ff = int(hp["n_ff"])
    n_qkv = n_embd + 2 * hd * n_kv
    biases = bool(hp["biases"])  # Q/K/V, attention output, FFN
    norm_b = bool(hp["norm_bias"])
    _common_kv(s, hp, nl)
    del s.kv[s.key("{arch}.attention.layer_norm_rms_epsilon")]
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    if s.arch == "mpt":
        s.set("{arch}.attention.max_alibi_bias", 8.0)
        if hp["clamp_kqv"]:
            s.set("{arch}.attention.clamp_kqv", float(hp["clamp_kqv"]))
    if s.arch == "gptneox":
        s.set("{arch}.use_parallel_residual", bool(hp["parallel"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    if hp["pos_embd"]:
        s.add("position_embd.weight", (n_embd, int(hp["n_ctx_train"])))
    if s.arch == "bloom":
        s.add("token_embd_norm.weight", (n_embd,), "norm")
        s.add("token_embd_norm.bias", (n_embd,), "bias")
    s.add("output_norm.weight", (n_embd,), "norm")
    if norm_b:
        s.add("output_norm.bias", (n_embd,), "bias")
    if not hp.get("tied_embeddings"):
        s.add("output.weight", (n_embd, _n_vocab(hp)))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if norm_b:
            s.add(p + "attn_norm.bias", (n_embd,), "bias")
        if s.arch == "falcon" and hp["norm_2"]:
            s.add(p + "attn_norm_2.weight", (n_embd,), "norm")
            s.add(p + "attn_norm_2.bias", (n_embd,), "bias")
        if s.arch == "nemotron":
            _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv)
        else:
            s.add(p + "attn_qkv.weight", (n_embd, n_qkv))
            if biases:
                s.add(p + "attn_qkv.bias", (n_qkv,), "bias")
            s.add(p + "attn_output.weight", (n_embd, n_embd))
        if biases:
            s.add(p + "attn_output.bias", (n_embd,), "bias")
        if s.arch != "falcon":
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
            if norm_b:
                s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        s.add(p + "ffn_up.weight", (n_embd, n_ff))
        if biases:
            s.add(p + "ffn_up.bias", (n_ff,), "bias")
        s.add(p + "ffn_down.weight", (n_ff, n_embd))
        if biases:
            s.add(p + "ffn_down.bias", (n_embd,), "bias")


#: per architecture: position embeddings, biases on the projections, biases on the norms
_FLAGS = {
    "gpt2": dict(pos_embd=True, biases=True, norm_bias=True),
    "starcoder": dict(pos_embd=True, biases=True, norm_bias=True),
    "falcon": dict(pos_embd=False, biases=False, norm_bias=True),
    "mpt": dict(pos_embd=False, biases=False, norm_bias=False),
    "bloom": dict(pos_embd=False, biases=True, norm_bias=True),
    "gptneox": dict(pos_embd=False, biases=True, norm_bias=True),
    "codeshell": dict(pos_embd=False, biases=True, norm_bias=True),
    "nemotron": dict(pos_embd=False, biases=False, norm_bias=True),
}


register(
    "gpt2",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=256, **_FLAGS["gpt2"]),
    sparse={
        # openai-community/gpt2-xl: 48 layers of 1600, 25 heads of 64, FFN 6400, vocabulary 50257, 1024 positions,
        # tied head
        "gpt2-xl": dict(
            name="gpt2-xl", n_layer=48, n_embd=1600, n_head=25, n_head_kv=25, n_ff=6400, n_ctx_train=1024,
            n_vocab=50257, tied_embeddings=True, quant="q4_k_m", file_type=15),
    },
)

register(
    "starcoder",
    build=_build,
    tiny=dict(n_head_kv=1, n_ff=256, **_FLAGS["starcoder"]),
    sparse={
        # bigcode/starcoderbase: 40 layers of 6144, 48 query heads and one KV head (multi-query), FFN 24576,
        # vocabulary 49152, 8192 positions
        "starcoderbase-15b": dict(
            name="starcoderbase", n_layer=40, n_embd=6144, n_head=48, n_head_kv=1, n_ff=24576, n_ctx_train=8192,
            n_vocab=49152, quant="q4_k_m", file_type=15),
    },
)

register(
    "falcon",
    build=_build,
    tiny=dict(n_head_kv=1, n_ff=256, norm_2=False, **_FLAGS["falcon"]),
    sparse={
        # tiiuae/falcon-7b-instruct: 32 layers of 4544, 71 query heads of 64 and one KV head, FFN 18176,
        # vocabulary 65024, 2048 positions, one norm per layer
        "falcon-7b": dict(
            name="falcon-7b-instruct", n_layer=32, n_embd=4544, n_head=71, n_head_kv=1, n_ff=18176,
            n_ctx_train=2048, n_vocab=65024, norm_2=False, quant="q4_k_m", file_type=15),
        # tiiuae/falcon-40b-instruct: 60 layers of 8192, 128 query / 8 KV heads, FFN 32768, two norms per layer
        "falcon-40b": dict(
            name="falcon-40b-instruct", n_layer=60, n_embd=8192, n_head=128, n_head_kv=8, n_ff=32768,
            n_ctx_train=2048, n_vocab=65024, norm_2=True, quant="q4_k_m", file_type=15),
    },
)

register(
    "mpt",
    build=_build,
    # ALiBi, no biases; the tiny model clamps Q/K/V (attention.clamp_kqv, as MPT's clip_qkv)
    tiny=dict(n_head_kv=4, n_ff=256, clamp_kqv=8.0, **_FLAGS["mpt"]),
    sparse={
        # mosaicml/mpt-7b-instruct: 32 layers of 4096, 32 heads, FFN 16384, vocabulary 50432, 2048 positions, ALiBi
        "mpt-7b": dict(
            name="mpt-7b-instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=16384, n_ctx_train=2048,
            n_vocab=50432, clamp_kqv=0.0, quant="q4_k_m", file_type=15),
        # mosaicml/mpt-30b-instruct: 48 layers of 7168, 64 heads, FFN 28672, 8192 positions; clamp set to take
        # the clamped path on a full-size model
        "mpt-30b": dict(
            name="mpt-30b-instruct", n_layer=48, n_embd=7168, n_head=64, n_head_kv=64, n_ff=28672, n_ctx_train=8192,
            n_vocab=50432, clamp_kqv=8.0, quant="q4_k_m", file_type=15),
    },
)

register(
    "bloom",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=256, **_FLAGS["bloom"]),
    sparse={
        # bigscience/bloomz-7b1: 30 layers of 4096, 32 heads, FFN 16384, vocabulary 250880, ALiBi
        "bloomz-7b1": dict(
            name="bloomz-7b1", n_layer=30, n_embd=4096, n_head=32, n_head_kv=32, n_ff=16384, n_ctx_train=2048,
            n_vocab=250880, quant="q4_k_m", file_type=15),
    },
)

register(
    "gptneox",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=256, rope_dim=4, parallel=True, **_FLAGS["gptneox"]),
    sparse={
        # EleutherAI/pythia-12b: 36 layers of 5120, 40 heads of 128 (rope over 32), FFN 20480, vocabulary 50688,
        # parallel residual
        "pythia-12b": dict(
            name="pythia-12b", n_layer=36, n_embd=5120, n_head=40, n_head_kv=40, n_ff=20480, rope_dim=32,
            parallel=True, n_ctx_train=2048, n_vocab=50688, quant="q4_k_m", file_type=15),
        # EleutherAI/gpt-neox-20b: 44 layers of 6144, 64 heads of 96 (rope over 24), FFN 24576, parallel residual
        "gpt-neox-20b": dict(
            name="gpt-neox-20b", n_layer=44, n_embd=6144, n_head=64, n_head_kv=64, n_ff=24576, rope_dim=24,
            parallel=True, n_ctx_train=2048, n_vocab=50432, quant="q4_k_m", file_type=15),
    },
)

register(
    "codeshell",
    build=_build,
    tiny=dict(n_head_kv=2, n_ff=256, **_FLAGS["codeshell"]),
    sparse={
        # WisdomShell/CodeShell-7B-Chat: 42 layers of 4096, 32 query / 8 KV heads, FFN 16384, vocabulary 70144,
        # 8192 positions, rope
        "codeshell-7b": dict(
            name="CodeShell-7B-Chat", n_layer=42, n_embd=4096, n_head=32, n_head_kv=8, n_ff=16384, n_ctx_train=8192,
            n_vocab=70144, quant="q4_k_m", file_type=15),
    },
)

register(
    "nemotron",
    build=_build,
    tiny=dict(n_head_kv=2, n_ff=256, rope_dim=8, **_FLAGS["nemotron"]),
    sparse={
        # nvidia/Minitron-8B-Base: 32 layers of 4096, 48 query / 8 KV heads of 128 (rope over 64), FFN 16384 (relu
        # squared), vocabulary 256000, 4096 positions
        "minitron-8b": dict(
            name="Minitron-8B-Base", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=16384, rope_dim=64,
            n_ctx_train=4096, n_vocab=256000, quant="q4_k_m", file_type=15),
    },
)
