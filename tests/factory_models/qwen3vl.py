"""Qwen3-VL's language model (``qwen3vl`` dense, ``qwen3vlmoe`` MoE): the text GGUF people run next to an mmproj.

``llama_model_qwen3vl`` / ``llama_model_qwen3vlmoe`` (``src/models/qwen3vl.cpp``, ``qwen3vlmoe.cpp``) load exactly
Qwen3's / Qwen3-MoE's tensors (q/k norms of head size, SwiGLU FFN or softmax top-k experts), so the tensors are
written by ``_build_qwen3`` / ``_build_qwen3moe`` under the ``qwen3vl*`` keys. On top the loader reads
``n_deepstack_layers`` (the converter writes ``len(vision_config.deepstack_visual_indexes)``: 3 for every published
Qwen3-VL) and requires ``rope.dimension_sections`` (IMRoPE; ``mrope_section`` [24, 20, 20] padded to 4).
``n_embd_inp`` = ``n_embd * (1 + n_deepstack_layers)``: the input embedding row of a deepstack model carries the
visual features added after each of the first ``n_deepstack_layers`` layers (text tokens are zero-padded)."""

from __future__ import annotations

from typing import Any

from gguf import GGUFValueType as VT

from tests import gguf_factory as gf


def _vl_keys(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    s.set("{arch}.n_deepstack_layers", int(hp["n_deepstack"]))
    s.set("{arch}.rope.dimension_sections", [int(x) for x in hp["rope_sections"]], VT.INT32)
    hd = int(hp["head_dim"] or hp["n_embd"] // int(hp["n_head"]))
    s.set("{arch}.rope.dimension_count", hd)  # the graph asserts n_rot == head size


def build_dense(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_qwen3(s, hp)
    _vl_keys(s, hp)


def build_moe(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_qwen3moe(s, hp)
    _vl_keys(s, hp)


# tiny: head size 32 -> 16 rotary pairs split (6, 5, 5) like the real (24, 20, 20) of 64
TINY_DENSE = dict(head_dim=32, n_ff=192, rms_eps=1e-6, rope_base=5000000.0, rope_sections=(6, 5, 5, 0),
                  n_deepstack=2)
TINY_MOE = dict(head_dim=32, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, rms_eps=1e-6,
                rope_base=5000000.0, rope_sections=(6, 5, 5, 0), n_deepstack=2)

# text_config of the published checkpoints (config.json): mrope_section [24, 20, 20], interleaved, rope_theta 5e6,
# 262144 positions, vocabulary 151936, 3 deepstack layers (deepstack_visual_indexes [8, 16, 24])
_VL = dict(head_dim=128, n_ctx_train=262144, rope_base=5000000.0, rms_eps=1e-6, n_vocab=151936,
           rope_sections=(24, 20, 20, 0), n_deepstack=3, quant="q4_k_m", file_type=15)

gf.register(
    "qwen3vl",
    build=build_dense,
    tiny=TINY_DENSE,
    sparse={
        # Qwen3-VL-8B-Instruct: 36 layers, 32 query / 8 KV heads of 128, FFN 12288, untied output
        "qwen3-vl-8b": dict(_VL, name="Qwen3-VL-8B-Instruct", n_layer=36, n_embd=4096, n_head=32, n_head_kv=8,
                            n_ff=12288),
        # Qwen3-VL-4B-Instruct: 36 layers of 2560, 32 query / 8 KV heads of 128, FFN 9728, tied embeddings
        "qwen3-vl-4b": dict(_VL, name="Qwen3-VL-4B-Instruct", n_layer=36, n_embd=2560, n_head=32, n_head_kv=8,
                            n_ff=9728, tied_embeddings=True),
    },
)

gf.register(
    "qwen3vlmoe",
    build=build_moe,
    tiny=TINY_MOE,
    sparse={
        # Qwen3-VL-30B-A3B-Instruct: 48 layers of 2048, 32 query / 4 KV heads of 128, 128 experts of 768 (8 used)
        "qwen3-vl-30b-a3b": dict(_VL, name="Qwen3-VL-30B-A3B-Instruct", n_layer=48, n_embd=2048, n_head=32,
                                 n_head_kv=4, n_ff=6144, n_expert=128, n_expert_used=8, n_ff_exp=768),
        # Qwen3-VL-235B-A22B-Instruct: 94 layers of 4096, 64 query / 4 KV heads of 128, 128 experts of 1536
        "qwen3-vl-235b-a22b": dict(_VL, name="Qwen3-VL-235B-A22B-Instruct", n_layer=94, n_embd=4096, n_head=64,
                                   n_head_kv=4, n_ff=12288, n_expert=128, n_expert_used=8, n_ff_exp=1536),
    },
)
