"""HRM-Text (``hrm_text``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/hrm-text.cpp`` with the
tensors its converter writes (``conversion/hrm_text.py``): ``block_count`` is the expanded cache-slot count
(``hrm.layers_per_stack`` x ``hrm.h_cycles`` x (``hrm.l_cycles`` + 1), asserted by the loader), but the file holds
only 2 x layers_per_stack physical blocks (the low stack, then the high stack): per block Q/K/V, the sigmoid gate
``attn_gate`` (n_embd x n_embd_head * n_head), ``attn_output`` and the SwiGLU FFN, no norm weights at all (the
stacks' norms are parameterless); ``hrm.z_l_init`` ({n_embd}, the low stack's learned start state), ``output``
optional (else the tied embeddings)."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _dense_ffn, _n_vocab, register


def slots(hp: dict[str, Any]) -> int:
    """The cache-slot count llama.cpp asserts ``block_count`` equals."""
    return int(hp["layers_per_stack"]) * int(hp["h_cycles"]) * (int(hp["l_cycles"]) + 1)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    lps = int(hp["layers_per_stack"])
    n_embd, n_head, n_kv = hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    _common_kv(s, hp, slots(hp))
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.embedding_scale", float(hp["embedding_scale"]))
    s.set("{arch}.hrm.layers_per_stack", lps)
    s.set("{arch}.hrm.h_cycles", int(hp["h_cycles"]))
    s.set("{arch}.hrm.l_cycles", int(hp["l_cycles"]))
    s.set("{arch}.hrm.prefix_lm", False)
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    if not hp["tied_embeddings"]:
        s.add("output.weight", (n_embd, _n_vocab(hp)))
    s.add("hrm.z_l_init", (n_embd,), "norm")
    for i in range(2 * lps):
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(f"blk.{i}.attn_gate.weight", (n_embd, hd * n_head))
        _dense_ffn(s, i, n_embd, hp["n_ff"])


register(
    "hrm_text",
    build=_build,
    # 2 layers per stack, 2 high cycles of 2 low passes and a high one: 12 cache slots over 4 physical blocks
    tiny=dict(n_layer=12, n_ff=192, layers_per_stack=2, h_cycles=2, l_cycles=2, embedding_scale=8.0),
    sparse={
        # a 1B HRM-Text (danish-foundation-models/DFM-Mimir's size class; its configuration is not available here):
        # 12 layers per stack of 1536, 12 query / 4 KV heads of 128, intermediate 4096, 2 high cycles of 2 low
        # passes (72 cache slots over 24 physical blocks), vocabulary 50304
        "dfm-mimir-1b": dict(
            name="DFM-Mimir-1B", n_layer=72, n_embd=1536, n_head=12, n_head_kv=4, n_ff=4096, layers_per_stack=12,
            h_cycles=2, l_cycles=2, embedding_scale=39.191835884530846, n_ctx_train=8192, n_vocab=50304,
            quant="q4_k_m", file_type=15),
        # the same with tied embeddings and one low pass per cycle, 3 high cycles (36 slots over 12 blocks)
        "hrm-text-tied": dict(
            name="HRM-Text-tied", n_layer=36, n_embd=2048, n_head=16, n_head_kv=8, n_ff=5632, layers_per_stack=6,
            h_cycles=3, l_cycles=1, embedding_scale=45.254833995939045, n_ctx_train=8192, n_vocab=65536,
            tied_embeddings=True, quant="q4_k_m", file_type=15),
    },
)
