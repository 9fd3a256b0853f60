"""The per-graph facts every architecture's builder reads (hyper-parameters, context shape, cache types)."""

from __future__ import annotations

from ...model.hparams import PARALLEL_HYBRID_ARCHS
from ..kv import CACHE_TYPE_BLOCKS

#: Architectures whose loader turns an unset ``expert_gating_func`` into sigmoid (``load_arch_hparams`` in
#: src/models/afmoe.cpp, cohere2moe.cpp, glm4-moe.cpp, glm-dsa.cpp, glm5-next.cpp, hy-v3.cpp, laguna.cpp,
#: step35.cpp); llama4.cpp always gates with a sigmoid; the others default to softmax.
#: the architectures whose load_arch_hparams reads ``attention.clamp_kqv`` (LLM_KV_ATTENTION_CLAMP_KQV)
CLAMP_KQV_ARCHS = frozenset({"dbrx", "mpt", "olmo"})
_SIGMOID_WHEN_UNSET = frozenset({"afmoe", "cohere2moe", "glm4moe", "glm-dsa", "glm5-next", "hy_v3", "laguna", "step35"})


def _unset_gating(arch, p) -> str:
    if arch in _SIGMOID_WHEN_UNSET or arch == "llama4":
        return "sigmoid"
    if arch == "deepseek2" and p.n_layer in (47, 48) and p.n_vocab == 154880:
        return "sigmoid"  # deepseek2.cpp: GLM 4.7 Lite GGUFs state no gating function
    return "softmax"


class Ctx:
    """What the graph's structure depends on: hyper-parameters, the context shape and cache types.

    Nothing here depends on where weights are placed, so graphs built from it can be reused across placements.
    """

    def __init__(self, model, settings, shape, facts):
        p = model.params
        meta = model.metadata
        a = p.arch
        self.p = p
        self.arch = a
        self.meta = meta
        self.names = facts["names"]
        self.shapes = facts["shapes"]
        self.n_nextn = p.nextn_layers
        n_seqs = shape.ubatch_seqs or max(1, shape.n_seq)  # the reserved ubatch's sequences
        nt = min(shape.n_ctx, shape.n_ubatch)  # sched_reserve: n_tokens = min(n_ctx, n_ubatch)
        # n_outputs_pp = min(n_tokens, n_outputs_max) is taken before graph_reserve rounds n_tokens up
        self.n_outputs = max(1, min(nt, shape.n_outputs_max))
        self.layer_inp_out = frozenset(shape.layer_inp_out)  # t_layer_inp outputs (EAGLE-3 extraction)
        self.backend_sampler = shape.backend_sampler  # build_sampling over n_seq top-k samplers (EAGLE-3 draft)
        self.spec_draft_n_max = settings.spec_draft_n_max  # a DFlash draft's sampled rows per slot
        if nt % n_seqs:
            nt = (nt + n_seqs - 1) // n_seqs * n_seqs  # graph_reserve rounds to a multiple of n_seqs
        self.n_tokens = nt
        self.n_seqs = n_seqs
        # the attention's streams are the ubatch's sequences (n_seqs_unq) unless the cache is unified
        self.n_stream = 1 if shape.unified else min(max(1, shape.n_stream), n_seqs)
        self.n_kv = shape.n_ctx_seq  # the reserve uses the full cache: n_kv = kv_size
        self.fa = shape.flash_attn
        # the KV cache's layout is fixed when it is created (llama_context::llama_context: v_trans =
        # !cparams.flash_attn), before resolve_fused_ops may turn an auto flash attention off (core.py): the
        # graph then runs the unfused attention on the untransposed V cache
        self.v_trans = not shape.flash_attn
        self.type_k = settings.type_k
        self.type_v = settings.type_v
        self.size_swa = shape.size_swa or shape.n_ctx_seq
        self.has_swa = p.has_swa
        self.swa = p.swa_layers
        if a == "llama4" and not p.has_swa and meta.get(f"{a}.attention.sliding_window") is None:
            # llama_model_llama4::load_arch_hparams: without a window key, chunked attention over 8192 tokens on
            # 3 of every 4 layers (ModelParams does not know this default)
            period = int(meta.get(f"{a}.attention.sliding_window_pattern", 4) or 4)
            self.has_swa = True
            self.swa = [il % period < period - 1 for il in range(p.n_layer)]
            window = 8192 * (max(1, shape.n_seq) if shape.unified else 1) + shape.n_ubatch
            self.size_swa = min(shape.n_ctx_seq, (window + 255) // 256 * 256)
        self.recurrent = p.recurrent_layers
        self.n_rs = max(1, shape.n_seq)  # the recurrent memory's cells (all of them, in a reserve)
        self.n_rs_seq = shape.n_rs_seq  # recurrent-state snapshots per sequence (MTP-style drafts roll back)
        self.mla = p.is_mla and bool(meta.get(f"{a}.attention.key_length_mla"))
        self.hk_mla = int(meta.get(f"{a}.attention.key_length_mla", 0) or p.head_dim_k)
        self.hv_mla = int(meta.get(f"{a}.attention.value_length_mla", 0) or p.head_dim_v)
        attn_too = a in PARALLEL_HYBRID_ARCHS  # falcon-h1: attention and Mamba2 in every layer
        # the caches' layers: the trunk's, or in the MTP draft context the NextN layers'
        first, last = (p.n_layer - p.nextn_layers, p.n_layer) if shape.mtp else (0, p.n_layer - p.nextn_layers)
        kv_layers = [
            il for il in range(first, last) if (attn_too or not p.recurrent_layers[il]) and p.n_head_kv[il] > 0
        ]
        dims_v = [(p.head_dim_v_swa if self.is_swa(il) else p.head_dim_v) * p.n_head_kv[il] for il in kv_layers]
        self.n_embd_v_gqa_max = max(dims_v, default=0)
        heads_k = {(p.head_dim_k_swa if self.is_swa(il) else p.head_dim_k) for il in kv_layers}
        heads_v = {(p.head_dim_v_swa if self.is_swa(il) else p.head_dim_v) for il in kv_layers}
        hk_all = heads_k.pop() if len(heads_k) == 1 else -1
        hv_all = heads_v.pop() if len(heads_v) == 1 else -1
        # Hadamard rotations of quantized caches (llama_kv_cache constructor: attn_rot_k / attn_rot_v)
        self.rot_k = 0
        if CACHE_TYPE_BLOCKS.get(settings.type_k, (1, 2))[0] > 1 and hk_all > 0 and p.head_dim_k % 64 == 0:
            n = 64
            while True:
                n *= 2
                if hk_all % n:
                    break
            self.rot_k = n // 2
        self.rot_v = (
            CACHE_TYPE_BLOCKS.get(settings.type_v, (1, 2))[0] > 1
            and hv_all > 0
            and p.head_dim_v % 64 == 0
            and not p.is_mla
        )
        # build_attn_mha's soft-capped KQ without flash attention (scale, tanh, scale): hparams.attn_soft_cap, which
        # only gemma2.cpp's loader sets, and grok's own branch (arch == LLM_ARCH_GROK: attn_output_multiplier / 30
        # then tanh then 30); with flash attention the cap is a parameter of the op
        self.softcap = a in ("gemma2", "grok")
        # minicpm.cpp's load_arch_hparams sets all three before reading the optional keys (older MiniCPM GGUFs
        # have none), grok.cpp the embedding and logit scales: the scales are there unless a key says 0
        dflt = 1.0 if a == "minicpm" else 0.0
        dflt_el = 1.0 if a in ("minicpm", "grok") else 0.0
        self.embedding_scale = bool(meta.get(f"{a}.embedding_scale", dflt_el))
        self.residual_scale = bool(meta.get(f"{a}.residual_scale", dflt))
        self.logit_scale = bool(meta.get(f"{a}.logit_scale", dflt_el))
        # hparams.f_clamp_kqv, read by dbrx.cpp, mpt.cpp and olmo.cpp only: build_qkv clamps the projections
        self.clamp_kqv = a in CLAMP_KQV_ARCHS and float(meta.get(f"{a}.attention.clamp_kqv", 0) or 0) > 0
        self.n_expert = p.n_expert
        self.n_expert_used = p.n_expert_used
        self.n_expert_groups = int(meta.get(f"{a}.expert_group_count", 0) or 0)
        self.n_group_used = int(meta.get(f"{a}.expert_group_used_count", 0) or 0)
        norm_w = meta.get(f"{a}.expert_weights_norm")
        self.expert_weights_norm = bool(norm_w) if norm_w is not None else a in NORM_W_ARCHS
        ws = meta.get(f"{a}.expert_weights_scale")
        self.expert_weights_scale = bool(ws) and float(ws) != 1.0
        gf = int(meta.get(f"{a}.expert_gating_func", 0) or 0)
        self.gating = {1: "softmax", 2: "sigmoid", 3: "softmax_weight"}.get(gf) or _unset_gating(a, p)

    def is_swa(self, il):
        return self.has_swa and self.swa[il]


#: architectures whose graph normalises the selected experts' weights without saying so in the GGUF
NORM_W_ARCHS = frozenset(
    ("llama", "qwen3moe", "qwen3vlmoe", "granitemoe", "granitehybrid", "minimax-m2", "dbrx", "mellum", "maple", "rnd1")
)
