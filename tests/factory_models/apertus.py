"""Apertus (``apertus``): ``llama_model_apertus::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/apertus.cpp``.

A llama layer with Q/K RMS norms of head size (``attn_q_norm``/``attn_k_norm`` {head_dim}; their optional biases
are loaded but unused by the graph, so not written) and an ungated FFN: ``ffn_up`` -> xIELU -> ``ffn_down``
(no ``ffn_gate``). The xIELU parameters are global keys without the architecture prefix (``xielu.alpha_n``,
``xielu.alpha_p``, ``xielu.beta``, ``xielu.eps``; one float per layer, all required). The published files use
llama3 rope scaling, which ``convert_hf_to_gguf`` writes as a ``rope_freqs.weight`` tensor of head_dim / 2
floats (created with layer 0, duplicated per buffer type for the others); ``rope_freqs=False`` leaves it out.
``rope.dimension_count`` must equal the head size; ``output.weight`` is required.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, _n_vocab, _per_layer, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    if hp.get("rope_dim") and hp["rope_dim"] != hd:
        raise ValueError("apertus: llama.cpp asserts rope.dimension_count == head dim")
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.vocab_size", _n_vocab(hp))
    # xIELU parameters per layer (values of the order the published checkpoints carry)
    s.set("xielu.alpha_n", [0.8 + 0.01 * (i % 7) for i in range(nl)])
    s.set("xielu.alpha_p", [0.8 - 0.01 * (i % 5) for i in range(nl)])
    s.set("xielu.beta", [0.5] * nl)
    s.set("xielu.eps", [-1e-6] * nl)
    _embeddings(s, hp, output_required=True)
    if hp.get("rope_freqs"):
        s.add("rope_freqs.weight", (hd // 2,), "ones")
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_down.weight", (hp["n_ff"], n_embd))
        s.add(p + "ffn_up.weight", (n_embd, hp["n_ff"]))
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "attn_k_norm.weight", (hd,), "norm")


register(
    "apertus",
    build=_build,
    # 4 heads of 32 (n_head * head_dim = 128 != n_embd), 2 KV heads, ungated FFN of 192, llama3 rope factors
    tiny=dict(head_dim=32, n_ff=192, rope_base=12000000.0, rope_freqs=True),
    sparse={
        # Apertus-8B-2509 (swiss-ai/Apertus-8B-Instruct-2509 config.json): 32 layers, hidden 4096, 32 query / 8 KV
        # heads of 128, xIELU FFN of 21504, vocabulary 131072, 65536 context, rope theta 1.2e7 with llama3 scaling
        "apertus-8b": dict(
            name="Apertus-8B-Instruct-2509", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128,
            n_ff=21504, n_ctx_train=65536, rope_base=12000000.0, n_vocab=131072, quant="q4_k_m", file_type=15),
        # Apertus-70B-2509: 80 layers, hidden 8192, 64 query / 8 KV heads of 128, FFN 43008
        "apertus-70b": dict(
            name="Apertus-70B-Instruct-2509", n_layer=80, n_embd=8192, n_head=64, n_head_kv=8, head_dim=128,
            n_ff=43008, n_ctx_train=65536, rope_base=12000000.0, n_vocab=131072, quant="q4_k_m", file_type=15),
    },
)
