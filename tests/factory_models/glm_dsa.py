"""GLM-5 (``glm-dsa``): ``llama_model_glm_dsa`` loads DeepSeek-V3.2's tensors (MLA with split ``attn_k_b``/
``attn_v_b``, the DSA lightning indexer, a dense lead and sigmoid-gated experts with selection bias + a shared
expert) under ``glm-dsa.*`` keys; its indexer tensors are optional. ``indexer_types`` (one bool per layer,
``attention.indexer.types`` as ``conversion/glm.py`` writes GLM-5.2's ``indexer_types``) marks the layers that
run their own indexer; the others ("shared") carry no indexer tensors and reuse the previous full layer's top-k.
Without the key, GLM-5/5.1 (context < 1M) run the indexer on every layer."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf
from tests.factory_models import deepseek32


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    deepseek32.build(s, hp)
    types = hp.get("indexer_types")
    if types is None:
        return
    types = [bool(t) for t in types]
    if len(types) != hp["n_layer"]:
        raise ValueError(f"indexer_types needs one entry per layer ({hp['n_layer']}), got {len(types)}")
    s.set("{arch}.attention.indexer.types", types)
    nl = hp["n_layer"]  # NextN blocks after the trunk keep theirs (loaded with the MTP flags, then skipped)
    s.tensors[:] = [t for t in s.tensors if ".indexer." not in t.name
                    or (gf._layer_of(t.name) or 0) >= nl or types[gf._layer_of(t.name) or 0]]


# layer 1 shares layer 0's top-k: both kinds of layer on the tiny model
TINY = dict(deepseek32.TINY, n_expert_groups=0, n_group_used=0, expert_gating_func=2,
            indexer_types=[True, False, True])

gf.register(
    "glm-dsa",
    build=build,
    tiny=TINY,
    sparse={
        # GLM-5 (zai-org/GLM-5 config.json, 744B-A40B): 78 layers of 6144, 3 dense (12288), 256 experts of 2048
        # (8 used, sigmoid with selection bias, scale 2.5) + 1 shared, MLA with q_lora 2048, kv_lora 512, rope 64,
        # nope 192, v 256 over 64 heads; DSA indexer 32 heads of 128, top 2048 on every layer (no indexer_types,
        # context 202752 < 1M) and the NextN/MTP block, skipped without MTP
        "glm-5": dict(
            name="GLM-5", n_layer=78, n_embd=6144, n_head=64, n_head_kv=1, n_ff=12288,
            n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=3,
            q_lora_rank=2048, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=192, v_head_dim=256,
            n_expert_groups=0, n_group_used=0, expert_gating_func=2, expert_weights_scale=2.5,
            expert_weights_norm=True, exp_probs_b=True, n_ctx_train=202752, rope_base=1000000.0, rms_eps=1e-5,
            indexer_n_head=32, indexer_head_size=128, indexer_top_k=2048, indexer_types=None, n_nextn=1,
            n_vocab=154880, quant="q4_k_m", file_type=15),
        # GLM-5's first dense layer, one MoE layer and its MTP block at full size (as deepseek-v3.2-slice)
        "glm-5-slice": dict(
            name="GLM-5-slice", n_layer=2, n_embd=6144, n_head=64, n_head_kv=1, n_ff=12288,
            n_expert=256, n_expert_used=8, n_ff_exp=2048, n_expert_shared=1, n_layer_dense_lead=1,
            q_lora_rank=2048, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=192, v_head_dim=256,
            n_expert_groups=0, n_group_used=0, expert_gating_func=2, expert_weights_scale=2.5,
            expert_weights_norm=True, exp_probs_b=True, n_ctx_train=202752, rope_base=1000000.0, rms_eps=1e-5,
            indexer_n_head=32, indexer_head_size=128, indexer_top_k=2048, indexer_types=None, n_nextn=1,
            n_vocab=154880, quant="q4_k_m", file_type=15),
    },
)
