"""Decoders whose llama.cpp graph is the llama layer with one difference, and Hunyuan's dense models: the
``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/arcee.cpp``, ``pangu-embed.cpp``,
``nanbeige.cpp``, ``maincoder.cpp``, ``mellum.cpp``, ``baichuan.cpp``, ``refact.cpp`` and ``hunyuan-vl.cpp``.

- ``arcee`` (Arcee AFM): the FFN is ``ffn_up`` -> squared ReLU -> ``ffn_down``, no gate; ``output`` optional.
- ``pangu-embedded`` (openPangu Embedded): ``attn_output.bias`` required; ``output`` optional.
- ``nanbeige`` (Nanbeige 4): the llama tensors; ``num_loops`` (written where set) runs the layers again.
- ``maincoder``: per-head ``attn_q_norm`` / ``attn_k_norm`` (required), applied after rope.
- ``mellum`` (Mellum MoE): q/k norms, softmax experts of ``expert_feed_forward_length`` on every layer (no dense
  FFN, ``output`` required), and with ``attention.sliding_window`` 3 of every 4 layers slide.
- ``baichuan`` (Baichuan 1/2): the llama tensors, ``output`` required; rope on the 7B (32 layers) only, ALiBi on
  the 13B (40 layers).
- ``refact`` (Refact-1.6B): the llama tensors without rope (ALiBi), ``output`` optional; the loader's optional
  biases are never used by the graph (none are written).
- ``bailingmoe`` (Ling 1.x): softmax experts of ``expert_feed_forward_length`` on every layer plus
  ``expert_shared_count`` gated shared experts fused into one FFN, ``output`` required.
- ``cogvlm`` (CogVLM's language model): one fused ``attn_qkv`` (no GQA) and, per layer, the visual expert's
  copies (``vis_attn_qkv``, ``vis_attn_output``, ``vis_gate`` / ``vis_up`` / ``vis_down``), loaded and placed but
  unused by text; ``output`` optional.
- ``maple``: mellum's tensors (q/k norms, experts on every layer, ``output`` required) with the window and the
  per-layer ``attention.sliding_window_pattern`` array required; rope on the sliding-window layers only.
- ``plamo`` (PLaMo 1): the llama tensors without ``ffn_norm`` (a parallel block), ``output`` required.
- the diffusion decoders, which llama.cpp runs without memory (``llama-diffusion-cli``; ``llama-server`` loads them
  but cannot answer): ``llada`` (LLaDA: the llama tensors), ``dream`` (Dream: Qwen2's, Q/K/V biases), ``llada-moe``
  and ``rnd1`` (q/k norms, softmax experts on every layer; ``llada-moe``'s ``output`` required).
- ``hunyuan-dense`` (Hunyuan 0.5B-7B) and ``hunyuan_vl`` (HunyuanOCR's text model): q/k norms of the head size
  (applied after rope), a dense SwiGLU FFN, ``output`` optional; HunyuanOCR's converter writes
  ``rope.dimension_sections`` (XD-RoPE, run as M-RoPE).
"""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from tests.gguf_factory import (ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _embeddings, _experts, _shared_expert,
                                register)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    arch = s.arch
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    if hp.get("num_loops"):
        s.set("{arch}.num_loops", int(hp["num_loops"]))
    if hp.get("sliding_window"):
        s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    if arch == "maple":  # required: the SwiGLU clamp of the experts, one per layer (0: none)
        s.set("{arch}.swiglu_clamp_exp", [float(hp["swiglu_clamp"])] * nl)
    if hp.get("swa_period"):
        period = int(hp["swa_period"])
        s.set("{arch}.attention.sliding_window_pattern", [il % period < period - 1 for il in range(nl)])
    if hp.get("rope_sections"):
        s.set("{arch}.rope.dimension_sections", [int(x) for x in hp["rope_sections"]], VT.INT32)
    if arch == "bailingmoe":
        s.set("{arch}.expert_shared_count", int(hp["n_expert_shared"]))
        s.set("{arch}.expert_weights_norm", bool(hp["norm_w"]))
    _embeddings(s, hp, output_required=arch in ("mellum", "maple", "baichuan", "bailingmoe", "plamo", "llada-moe"))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if arch == "cogvlm":
            for pre in ("attn", "vis_attn"):
                s.add(p + f"{pre}_qkv.weight", (n_embd, 3 * hd * n_head))
                s.add(p + f"{pre}_output.weight", (hd * n_head, n_embd))
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
            _dense_ffn(s, i, n_embd, hp["n_ff"])
            s.add(p + "vis_gate.weight", (n_embd, hp["n_ff"]))
            s.add(p + "vis_down.weight", (hp["n_ff"], n_embd))
            s.add(p + "vis_up.weight", (n_embd, hp["n_ff"]))
            continue
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv, bias=arch == "dream",
                   out_bias=arch == "pangu-embedded")
        if arch in ("maincoder", "mellum", "maple", "hunyuan-dense", "hunyuan_vl", "llada-moe", "rnd1"):
            s.add(p + "attn_k_norm.weight", (hd,), "norm")
            s.add(p + "attn_q_norm.weight", (hd,), "norm")
        if arch != "plamo":
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        if arch in ("mellum", "maple", "bailingmoe", "llada-moe", "rnd1"):
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if arch == "bailingmoe":
                _shared_expert(s, i, n_embd, int(hp["n_ff_exp"]) * int(hp["n_expert_shared"]))
            continue
        if arch != "arcee":
            s.add(p + "ffn_gate.weight", (n_embd, hp["n_ff"]))
        s.add(p + "ffn_down.weight", (hp["n_ff"], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, hp["n_ff"]))


register(
    "arcee",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # arcee-ai/AFM-4.5B: 36 layers of 2560, 20 query / 4 KV heads of 128, a squared-ReLU FFN of 18432,
        # vocabulary 128004, 65536 positions
        "afm-4.5b": dict(
            name="AFM-4.5B", n_layer=36, n_embd=2560, n_head=20, n_head_kv=4, n_ff=18432, n_ctx_train=65536,
            n_vocab=128004, quant="q4_k_m", file_type=15),
    },
)

register(
    "pangu-embedded",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # openPangu-Embedded-7B: 34 layers of 4096, 32 query / 8 KV heads, intermediate 12800, vocabulary 153376,
        # 32768 positions
        "pangu-embedded-7b": dict(
            name="openPangu-Embedded-7B", n_layer=34, n_embd=4096, n_head=32, n_head_kv=8, n_ff=12800,
            n_ctx_train=32768, rope_base=16000000.0, n_vocab=153376, quant="q4_k_m", file_type=15),
        # openPangu-Embedded-1B: 26 layers of 1536, 12 query / 6 KV heads, intermediate 6144, tied head
        "pangu-embedded-1b": dict(
            name="openPangu-Embedded-1B", n_layer=26, n_embd=1536, n_head=12, n_head_kv=6, n_ff=6144,
            n_ctx_train=32768, rope_base=10000000.0, n_vocab=153376, tied_embeddings=True, quant="q4_k_m",
            file_type=15),
    },
)

register(
    "nanbeige",
    build=_build,
    tiny=dict(n_ff=192, num_loops=None),
    sparse={
        # Nanbeige/Nanbeige4-3B: 32 layers of 2560, 20 query / 4 KV heads of 128, intermediate 10496, vocabulary
        # 166144, 65536 positions
        "nanbeige4-3b": dict(
            name="Nanbeige4-3B", n_layer=32, n_embd=2560, n_head=20, n_head_kv=4, n_ff=10496, n_ctx_train=65536,
            rope_base=70000000.0, n_vocab=166144, quant="q4_k_m", file_type=15),
    },
)

register(
    "maincoder",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # Maincoder 1B (llama.cpp's LLM_TYPE_1B at 32 layers): 32 layers of 1536, 16 query / 4 KV heads of 96,
        # intermediate 4096, vocabulary 151936
        "maincoder-1b": dict(
            name="Maincoder-1B", n_layer=32, n_embd=1536, n_head=16, n_head_kv=4, n_ff=4096, n_ctx_train=32768,
            n_vocab=151936, quant="q4_k_m", file_type=15),
    },
)

register(
    "mellum",
    build=_build,
    tiny=dict(head_dim=32, n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64, sliding_window=0),
    sparse={
        # a Mellum MoE of llama.cpp's 12B-A2.5B size (28 layers): 28 layers of 2048, 16 query / 4 KV heads of 128,
        # 96 experts of 1024 (8 used), sliding window 4096 on 3 of every 4 layers, vocabulary 98304
        "mellum-12b-a2.5b": dict(
            name="Mellum-12B-A2.5B", n_layer=28, n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_expert=96,
            n_expert_used=8, n_ff_exp=1024, sliding_window=4096, n_ctx_train=131072, n_vocab=98304,
            quant="q4_k_m", file_type=15),
        # the same without a window (every layer global)
        "mellum-12b-a2.5b-full": dict(
            name="Mellum-12B-A2.5B-full", n_layer=28, n_embd=2048, n_head=16, n_head_kv=4, head_dim=128,
            n_expert=96, n_expert_used=8, n_ff_exp=1024, sliding_window=0, n_ctx_train=131072, n_vocab=98304,
            quant="q4_k_m", file_type=15),
    },
)

register(
    "hunyuan-dense",
    build=_build,
    tiny=dict(head_dim=32, n_ff=192),
    sparse={
        # tencent/Hunyuan-7B-Instruct: 32 layers of 4096, 32 query / 8 KV heads of 128, intermediate 14336,
        # vocabulary 128167, 32768 positions (rope theta 1e4 scaled by alpha)
        "hunyuan-7b": dict(
            name="Hunyuan-7B-Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
            n_ctx_train=32768, n_vocab=128167, quant="q4_k_m", file_type=15),
        # tencent/Hunyuan-1.8B-Instruct: 32 layers of 2048, 16 query / 4 KV heads of 128, intermediate 6144, tied
        "hunyuan-1.8b": dict(
            name="Hunyuan-1.8B-Instruct", n_layer=32, n_embd=2048, n_head=16, n_head_kv=4, head_dim=128,
            n_ff=6144, n_ctx_train=32768, n_vocab=128167, tied_embeddings=True, quant="q4_k_m", file_type=15),
    },
)

register(
    "hunyuan_vl",
    build=_build,
    tiny=dict(head_dim=32, n_ff=192, rope_sections=None),
    sparse={
        # tencent/HunyuanOCR's text model: 24 layers of 1024, 16 query / 8 KV heads of 128, intermediate 3584,
        # vocabulary 120818, XD-RoPE sections 16/24/24/0, tied head
        "hunyuan-ocr": dict(
            name="HunyuanOCR", n_layer=24, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3584,
            n_ctx_train=32768, n_vocab=120818, rope_sections=[16, 24, 24, 0], tied_embeddings=True,
            quant="q4_k_m", file_type=15),
    },
)

register(
    "baichuan",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192),
    sparse={
        # baichuan-inc/Baichuan2-7B-Chat: 32 layers of 4096, 32 heads (no GQA), intermediate 11008, vocabulary
        # 125696 (rope)
        "baichuan2-7b": dict(
            name="Baichuan2-7B-Chat", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=11008,
            n_ctx_train=4096, n_vocab=125696, quant="q4_k_m", file_type=15),
        # baichuan-inc/Baichuan2-13B-Chat: 40 layers of 5120, 40 heads, intermediate 13696 (ALiBi, no rope)
        "baichuan2-13b": dict(
            name="Baichuan2-13B-Chat", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13696,
            n_ctx_train=4096, n_vocab=125696, quant="q4_k_m", file_type=15),
    },
)

register(
    "refact",
    build=_build,
    tiny=dict(n_head_kv=1, n_ff=192),
    sparse={
        # smallcloudai/Refact-1_6B-fim: 32 layers of 2048, 32 query heads / 1 KV head (MQA), intermediate 5632,
        # vocabulary 49216, ALiBi
        "refact-1.6b": dict(
            name="Refact-1_6B-fim", n_layer=32, n_embd=2048, n_head=32, n_head_kv=1, n_ff=5632, n_ctx_train=4096,
            n_vocab=49216, quant="q4_k_m", file_type=15),
    },
)

register(
    "bailingmoe",
    build=_build,
    tiny=dict(head_dim=32, n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64, n_expert_shared=2, norm_w=True),
    sparse={
        # inclusionAI/Ling-lite-1.5: 28 layers of 2048, 16 query / 4 KV heads of 128, 64 experts of 1408 (6 used,
        # softmax, normalised) plus 2 shared, vocabulary 126464, 32768 positions
        "ling-lite-1.5": dict(
            name="Ling-lite-1.5", n_layer=28, n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_expert=64,
            n_expert_used=6, n_ff_exp=1408, n_expert_shared=2, norm_w=True, n_ctx_train=32768, n_vocab=126464,
            quant="q4_k_m", file_type=15),
        # inclusionAI/Ling-plus: 88 layers of 5120, 40 query / 8 KV heads of 128, 64 experts of 3072 (4 used) plus 1
        # shared, top-k weights not normalised, vocabulary 126464 (290B)
        "ling-plus": dict(
            name="Ling-plus", n_layer=88, n_embd=5120, n_head=40, n_head_kv=8, head_dim=128, n_expert=64,
            n_expert_used=4, n_ff_exp=3072, n_expert_shared=1, norm_w=False, n_ctx_train=16384, n_vocab=126464,
            quant="q4_k_m", file_type=15),
    },
)

register(
    "cogvlm",
    build=_build,
    tiny=dict(n_head_kv=4, n_ff=192),
    sparse={
        # zai-org/cogvlm2-llama3-chat-19B's language model: 32 layers of 4096, 32 heads (no GQA), intermediate
        # 14336, vocabulary 128256, the visual expert's weights beside the text ones
        "cogvlm2-19b": dict(
            name="cogvlm2-llama3-chat-19B", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=14336,
            n_ctx_train=8192, rope_base=500000.0, n_vocab=128256, quant="q4_k_m", file_type=15),
    },
)

register(
    "maple",
    build=_build,
    tiny=dict(head_dim=32, n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64, sliding_window=64, swa_period=4,
              swiglu_clamp=7.0),
    sparse={
        # a Maple MoE (its configuration is not available here): 32 layers of 2048, 16 query / 4 KV heads of 128,
        # 64 experts of 1024 (8 used), a 4096-token window on 3 of every 4 layers (roped; the global ones NoPE),
        # vocabulary 131072
        "maple-moe": dict(
            name="Maple-MoE", n_layer=32, n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_expert=64,
            n_expert_used=8, n_ff_exp=1024, sliding_window=4096, swa_period=4, swiglu_clamp=7.0,
            n_ctx_train=131072, n_vocab=131072, quant="q4_k_m", file_type=15),
    },
)

register(
    "plamo",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # pfnet/plamo-13b: 40 layers of 5120, 40 heads (no GQA), intermediate 13824, vocabulary 50432, 4096
        # positions
        "plamo-13b": dict(
            name="plamo-13b", n_layer=40, n_embd=5120, n_head=40, n_head_kv=40, n_ff=13824, n_ctx_train=4096,
            n_vocab=50432, quant="q4_k_m", file_type=15),
    },
)

register(
    "llada",
    build=_build,
    tiny=dict(n_ff=192),
    sparse={
        # GSAI-ML/LLaDA-8B-Instruct: 32 layers of 4096, 32 heads (no GQA), intermediate 12288, vocabulary 126464
        "llada-8b": dict(
            name="LLaDA-8B-Instruct", n_layer=32, n_embd=4096, n_head=32, n_head_kv=32, n_ff=12288, n_ctx_train=4096,
            rope_base=500000.0, n_vocab=126464, quant="q4_k_m", file_type=15),
    },
)

register(
    "dream",
    build=_build,
    tiny=dict(n_head_kv=2, n_ff=192),
    sparse={
        # Dream-org/Dream-v0-Instruct-7B (Qwen2.5-7B's shapes): 28 layers of 3584, 28 query / 4 KV heads, Q/K/V
        # biases, intermediate 18944, vocabulary 152064
        "dream-7b": dict(
            name="Dream-v0-Instruct-7B", n_layer=28, n_embd=3584, n_head=28, n_head_kv=4, n_ff=18944,
            n_ctx_train=131072, rope_base=1000000.0, n_vocab=152064, quant="q4_k_m", file_type=15),
    },
)

register(
    "llada-moe",
    build=_build,
    tiny=dict(head_dim=16, n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64),
    sparse={
        # inclusionAI/LLaDA-MoE-7B-A1B-Instruct: 16 layers of 2048, 16 heads of 128 (no GQA), 64 experts of 1024
        # (8 used), vocabulary 157184
        "llada-moe-7b": dict(
            name="LLaDA-MoE-7B-A1B-Instruct", n_layer=16, n_embd=2048, n_head=16, n_head_kv=16, head_dim=128,
            n_expert=64, n_expert_used=8, n_ff_exp=1024, n_ctx_train=8192, n_vocab=157184, quant="q4_k_m",
            file_type=15),
    },
)

register(
    "rnd1",
    build=_build,
    tiny=dict(head_dim=32, n_ff=None, n_expert=8, n_expert_used=2, n_ff_exp=64),
    sparse={
        # radicalnumerics/RND1-Base (Qwen3-30B-A3B's shapes): 48 layers of 2048, 32 query / 4 KV heads of 128, 128
        # experts of 768 (8 used, normalised), vocabulary 151936
        "rnd1-30b": dict(
            name="RND1-Base-0910", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_expert=128,
            n_expert_used=8, n_ff_exp=768, n_ctx_train=40960, rope_base=1000000.0, n_vocab=151936,
            quant="q4_k_m", file_type=15),
    },
)
