"""GroveMoE (``grovemoe``): ``llama_model_grovemoe::load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/grovemoe.cpp``.

Every layer: Qwen3-MoE's attention (Q/K/V and output without biases, ``attn_q_norm`` / ``attn_k_norm`` of the head
size), ``ffn_norm``, ``ffn_gate_inp``, the routed experts (``*_exps`` of ``expert_feed_forward_length``, required)
and the chunk ("adjugate") experts ``ffn_{gate,down,up}_chexps``: ``n_expert / experts_per_group`` of them, each
``expert_chunk_feed_forward_length`` wide (optional key, default the head size; the converter writes the head size).
``expert_group_scale`` and ``experts_per_group`` are required keys (the converter hard-codes 0.05 and 2).
``output.weight`` is optional.
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _embeddings, _experts, _per_layer, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    if hp.get("rope_dim") and int(hp["rope_dim"]) != hd:
        raise ValueError("grovemoe: the graph asserts n_rot == head dim")
    per_group = int(hp["experts_per_group"])
    if per_group <= 0 or hp["n_expert"] % per_group:
        raise ValueError("grovemoe: experts_per_group must divide expert_count")
    n_chunk = hp["n_expert"] // per_group
    n_ff_chexp = int(hp["n_ff_chexp"] or hd)
    kv = _per_layer(hp["n_head_kv"], nl)
    _common_kv(s, hp, nl)
    if hp["n_ff_chexp"]:
        s.set("{arch}.expert_chunk_feed_forward_length", int(hp["n_ff_chexp"]))
    s.set("{arch}.expert_group_scale", float(hp["expert_group_scale"]))
    s.set("{arch}.experts_per_group", per_group)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        s.add(p + "attn_k_norm.weight", (hd,), "norm")
        s.add(p + "attn_q_norm.weight", (hd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
        s.add(p + "ffn_gate_chexps.weight", (n_embd, n_ff_chexp, n_chunk))
        s.add(p + "ffn_down_chexps.weight", (n_ff_chexp, n_embd, n_chunk))
        s.add(p + "ffn_up_chexps.weight", (n_embd, n_ff_chexp, n_chunk))


register(
    "grovemoe",
    build=_build,
    # 4 heads of 32, 2 KV heads, 8 experts of 64 (2 used) + 4 chunk experts of 32 (2 per group)
    tiny=dict(head_dim=32, n_ff=192, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_chexp=32, experts_per_group=2,
              expert_group_scale=0.05, rms_eps=1e-6, rope_base=1000000.0),
    sparse={
        # GroveMoE-Inst (inclusionAI/GroveMoE-Inst config.json, a Qwen3MoeConfig: Qwen3-30B-A3B's shape): 48 layers,
        # hidden 2048, 32 query / 4 KV heads of 128, 128 experts of 768 (8 used) + 64 adjugate experts of 128 (the
        # head size; 2 experts per group, scale 0.05), vocabulary 151936, untied output, rope theta 1e6 (33B)
        "grovemoe-inst": dict(
            name="GroveMoE-Inst", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=6144,
            n_expert=128, n_expert_used=8, n_ff_exp=768, n_ff_chexp=128, experts_per_group=2,
            expert_group_scale=0.05, n_ctx_train=40960, rope_base=1000000.0, n_vocab=151936, quant="q4_k_m",
            file_type=15),
    },
)
