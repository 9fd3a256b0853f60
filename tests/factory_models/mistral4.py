"""Mistral Small 4 (``mistral4``): ``llama_model_mistral4`` reuses DeepSeek-V2's hparams, tensors and graph
(``models.h``), so the tensors are deepseek2's, written under ``mistral4.*`` keys. Its converter
(``conversion/mistral3.py``, ``merge_expert = False``) keeps the checkpoint's stacked ``gate_up_proj``: the experts
come as one fused ``ffn_gate_up_exps`` per layer (``create_tensor_gate_up_exps``), which ``fused_gate_up`` writes."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    gf._build_deepseek2(s, hp)
    if not hp["fused_gate_up"]:
        return
    out = []
    for t in s.tensors:
        if t.name.endswith(".ffn_up_exps.weight"):
            continue
        if t.name.endswith(".ffn_gate_exps.weight"):
            n_embd, n_ff, n_expert = t.shape
            t = gf.TensorSpec(t.name.replace("ffn_gate_exps", "ffn_gate_up_exps"), (n_embd, 2 * n_ff, n_expert),
                              t.qtype, t.kind)
        out.append(t)
    s.tensors[:] = out


TINY = dict(gf._TINY["deepseek2"], fused_gate_up=True, n_expert_groups=0, n_group_used=0, expert_gating_func=1,
            exp_probs_b=False, expert_weights_norm=True, expert_weights_scale=1.0)

gf.register(
    "mistral4",
    build=build,
    tiny=TINY,
    sparse={
        # Mistral-Small-4-119B-2603 as published (128 experts, 4 used, 1 shared, MLA, 256k context); the widths
        # are inferred from its totals (119B, 6.5B active, 22.5 KiB KV per token at f16: 36 x (256 + 64) x 2 B)
        "mistral-small-4": dict(
            name="Mistral-Small-4-119B", n_layer=36, n_embd=4096, n_head=32, n_head_kv=1, n_ff=12288,
            n_expert=128, n_expert_used=4, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=0,
            q_lora_rank=1024, kv_lora_rank=256, qk_rope_dim=64, qk_nope_dim=64, v_head_dim=128,
            n_ctx_train=262144, rope_base=10000.0, rms_eps=1e-6,
            rope_scaling=dict(type="yarn", factor=64.0, original_context_length=4096, yarn_log_multiplier=0.1),
            n_vocab=131072, quant="q4_k_m", file_type=15),
    },
)
