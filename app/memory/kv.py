"""KV cache, recurrent state and output buffer sizes, per layer, as llama.cpp allocates them.

Sources: ``src/llama-context.cpp`` (context padding and streams),
``src/llama-kv-cache.cpp`` (per-layer K/V tensors), ``src/llama-kv-cache-iswa.cpp``
(the sliding-window cache size), ``src/llama-memory-recurrent.cpp`` (state),
``src/llama-hparams.cpp`` (``n_embd_r``/``n_embd_s``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EstimateError
from ..model import ModelParams
from ..model.hparams import KDA_ARCHS, PARALLEL_HYBRID_ARCHS
from .settings import LlamaSettings

#: (elements per block, bytes per block) of the KV cache types (ggml/src/ggml-common.h).
CACHE_TYPE_BLOCKS = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q5_1": (32, 24),
    "q5_0": (32, 22),
    "q4_1": (32, 20),
    "q4_0": (32, 18),
    "iq4_nl": (32, 18),
}


class SettingsError(EstimateError, ValueError):
    """Settings llama.cpp itself would refuse (the message says which and what to change)."""


def row_size(type_name: str, n: int) -> int:
    block, size = CACHE_TYPE_BLOCKS[type_name]
    return n // block * size


def pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


@dataclass(frozen=True)
class ContextShape:
    n_ctx: int  # total cells over all streams
    n_ctx_seq: int  # cells per stream (kv_size)
    n_stream: int
    n_seq: int
    unified: bool
    n_batch: int
    n_ubatch: int
    size_swa: int  # cells per stream of the SWA cache (0 when the model has no SWA)
    flash_attn: bool
    n_outputs_max: int
    #: recurrent-state snapshots per sequence (``cparams.n_rs_seq``): MTP-style drafts roll the state back
    n_rs_seq: int = 0
    #: the MTP draft context (``LLAMA_CONTEXT_TYPE_MTP``): caches and graph of the NextN layers only
    mtp: bool = False
    #: layers whose input is a graph output (``llama_set_embeddings_layer_inp``: the target context of
    #: ``--spec-type draft-eagle3`` extracts the EAGLE-3 head's target layers; ``llm_graph_result::set_outputs``)
    layer_inp_out: tuple[int, ...] = ()
    #: the context reserves again with one top-k backend sampler per slot (``llama_set_sampler``, as
    #: ``common_speculative_impl_draft_eagle3`` does on the EAGLE-3 draft context); ``build_sampling``
    backend_sampler: bool = False
    #: sequences in the reserved ubatch when not ``n_seq`` (0): sched_reserve's last pp reserve with one sequence
    #: for the architectures whose graph input grows with n_seq_tokens^2 (:data:`ONE_SEQ_RESERVE_ARCHS`)
    ubatch_seqs: int = 0


#: ``llama_context::sched_reserve`` reserves the pp graph a last time with one sequence for these
#: ([TAG_RESERVE_DIAG_DECAY]: the diagonal decay input of n_seq_tokens^2 per head and sequence is largest then);
#: llama-fit-params reports the first pp reserve, llama-server allocates the largest of the three
ONE_SEQ_RESERVE_ARCHS = frozenset({"kimi-linear", "minimax-01"})


#: Architectures whose recurrent state can be rolled back per token (``llm_arch_supports_rs_rollback``,
#: ``src/llama-arch.cpp``); for the others llama.cpp clamps ``n_rs_seq`` to 0.
RS_ROLLBACK_ARCHS = frozenset(
    {
        "kimi-k3",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "glm5-next",
        "nemotron_h",
        "nemotron_h_moe",
        "lfm2",
        "lfm2moe",
        "bailingmoe3",
    }
)


#: architectures llama_init_from_model runs without flash attention whatever -fa says
NO_FLASH_ATTN_ARCHS = frozenset({"grok"})


def context_shape(p: ModelParams, s: LlamaSettings) -> ContextShape:
    n_ctx0 = s.n_ctx if s.n_ctx and s.n_ctx > 0 else p.n_ctx_train
    if n_ctx0 <= 0:
        raise SettingsError("the model does not state its context length: set one with -c.")
    n_seq = s.eff_n_parallel
    unified = s.eff_kv_unified
    n_ctx = pad(n_ctx0, 256)
    if unified:
        n_ctx_seq, n_stream = n_ctx, 1
    else:
        n_ctx_seq = pad(n_ctx // n_seq, 256)
        n_stream = n_seq
        n_ctx = n_ctx_seq * n_seq
    n_batch = min(n_ctx0, s.n_batch)
    n_ubatch = min(n_batch, s.n_ubatch or s.n_batch)
    for name, t in (("-ctk", s.type_k), ("-ctv", s.type_v)):
        if t not in CACHE_TYPE_BLOCKS:
            raise SettingsError(f"{name} {t} is not a cache type llama.cpp accepts ({', '.join(CACHE_TYPE_BLOCKS)}).")
    # llama_init_from_model: "flash_attn is not compatible with Grok - forcing off", before any check below
    fa = s.flash_attn != "off" and p.arch not in NO_FLASH_ATTN_ARCHS
    if not fa and CACHE_TYPE_BLOCKS[s.type_v][0] > 1:
        why = " (llama.cpp turns it off for Grok)" if p.arch in NO_FLASH_ATTN_ARCHS else ""
        raise SettingsError(
            f"a quantized V cache ({s.type_v}) needs flash attention{why}: use -fa on or -ctv f16."
            if not why
            else f"a quantized V cache ({s.type_v}) needs flash attention{why}: use -ctv f16."
        )
    if p.is_mla and s.type_k != s.type_v:
        raise SettingsError("MLA models cache K only: -ctk and -ctv must be equal.")
    if fa:
        _check_cache_blocks(p, s)
    size_swa = 0
    if p.has_swa:
        # llama_kv_cache_dsv4 keeps its raw window cache per sequence whatever -kvu says (unified_raw = false)
        window_seqs = n_seq if unified and p.arch != "deepseek4" else 1
        size_swa = n_ctx_seq if s.swa_full else pad(min(n_ctx_seq, p.n_swa * window_seqs + n_ubatch), 256)
    # llama_context: a model with an encoder (T5, and the EAGLE-3 / DFlash heads that encode the target's
    # features) always gets every token's output (n_outputs_max = n_batch, llama_model_has_encoder)
    server_outputs = s.tool == "server" and p.arch not in HAS_ENCODER_ARCHS
    n_outputs_max = min(n_batch, s.eff_n_outputs_max()) if server_outputs else n_batch
    n_rs_seq = s.rs_seq_requested if p.arch in RS_ROLLBACK_ARCHS else 0
    return ContextShape(
        n_ctx, n_ctx_seq, n_stream, n_seq, unified, n_batch, n_ubatch, size_swa, fa, n_outputs_max, n_rs_seq
    )


def _check_cache_blocks(p: ModelParams, s: LlamaSettings) -> None:
    """``llama_init_from_model``: with flash attention not disabled, a quantized cache type's block must divide
    every layer's head size (Phi-3-mini's 96, EXAONE 3.5 2.4B's 80 refuse q8_0 and q4_0)."""
    for flag, which, t, full, swa in (
        ("-ctk", "K", s.type_k, p.head_dim_k, p.head_dim_k_swa),
        ("-ctv", "V", s.type_v, p.head_dim_v, p.head_dim_v_swa),
    ):
        blk = CACHE_TYPE_BLOCKS[t][0]
        if blk <= 1:
            continue
        if p.is_mla:
            dims = [p.kv_lora_rank + (p.n_rot or 0)] if which == "K" else [p.kv_lora_rank]
            if p.arch == "dots3note" and any(p.swa_layers):  # its sliding layers: rows of their own geometry
                dims.append(swa)
        else:
            dims = [
                swa if p.has_swa and il < len(p.swa_layers) and p.swa_layers[il] else full for il in range(p.n_layer)
            ]
        bad = next((d for d in dims if d and d % blk), None)
        if bad is not None:
            raise SettingsError(
                f'{flag} {t}: llama.cpp refuses it for this model ("{which} cache type {t} with block size {blk} does not '
                f'divide n_embd_head_{which.lower()}={bad}"): use {flag} f16 or bf16, or a type whose block size divides '
                f"{bad}."
            )


#: Architectures whose NextN/MTP layers hold a KV cache in the main context although their tensors are skipped:
#: hybrids built without an attention filter (``llama_model::create_memory``), so ``llama_memory_hybrid`` caches
#: every non-recurrent layer of ``n_layer_all``; deepseek4's raw window cache (``llama_kv_cache_dsv4``: its
#: ``hparams_raw.n_layer_nextn = 0``, so ``has_kv`` keeps them; the MTP layer's compress ratio 0 keeps it out of
#: the compressed caches and states).
NEXTN_KV_ARCHS = frozenset({"bailingmoe3", "deepseek4"})


#: architectures llama_model::create_memory makes no memory for (``res = nullptr``): the diffusion decoders, whose
#: non-causal attention runs over the ubatch alone (``build_attn_inp_no_cache``)
NO_MEMORY_ARCHS = frozenset({"dream", "llada", "llada-moe", "rnd1"})
#: Draft models whose every layer reads the target context's cache and allocate no KV of their own: Gemma 4's
#: assistant (``llama_model::create_memory``: a ``llama_kv_cache_iswa`` over ``cparams.ctx_other``'s memory whose
#: ``share`` maps its sliding layers to the target's layer ``n_layer - 2`` and its full ones to ``n_layer - 1``;
#: llama-server logs "sharing with layer N" for each and no KV buffer)
SHARED_KV_ARCHS = frozenset({"gemma4-assistant"})


def has_kv_layers(p: ModelParams) -> list[bool]:
    """Layers that own a KV cache in the main context: not recurrent, not NextN/MTP, not one that reuses an earlier
    layer's cache (``n_layer_kv_from_start``: ``llama_hparams::has_kv`` and the KV cache's ``reuse`` callback)."""
    if p.arch in NO_MEMORY_ARCHS or p.arch in SHARED_KV_ARCHS:
        return [False] * p.n_layer
    first_nextn = p.n_layer - p.nextn_layers if p.nextn_layers else p.n_layer
    if p.arch in NEXTN_KV_ARCHS:
        first_nextn = p.n_layer  # llama_memory_hybrid's default attention filter (!is_recr) keeps the MTP layers
    if p.n_layer_kv_from_start >= 0:
        first_nextn = min(first_nextn, p.n_layer_kv_from_start)
    attn_too = p.arch in PARALLEL_HYBRID_ARCHS  # falcon-h1: attention and Mamba2 in every layer
    # a plain cache (no recurrent layers, no hybrid memory's filter) keeps every layer (llama_hparams::has_kv),
    # those without KV heads too (deci's): their K is empty, but without flash attention their transposed V is
    # n_embd_v_gqa_max wide like every other layer's; hybrid caches keep only the layers with KV heads
    every = not any(p.recurrent_layers)
    return [
        il < first_nextn and (attn_too or not p.recurrent_layers[il]) and (every or p.n_head_kv[il] > 0)
        for il in range(p.n_layer)
    ]


def mtp_kv_layers(p: ModelParams) -> list[bool]:
    """Layers with a KV cache in the MTP draft context: the NextN layers (``create_memory`` with
    ``LLAMA_CONTEXT_TYPE_MTP``: ``filter = il >= n_layer()``, a plain attention cache even for hybrids)."""
    first = p.n_layer - p.nextn_layers
    return [il >= first and p.n_head_kv[il] > 0 for il in range(p.n_layer)]


def kv_bytes_per_layer(p: ModelParams, s: LlamaSettings, shape: ContextShape) -> list[int]:
    """K+V bytes of each layer (0 for layers without KV); in the MTP context, of the NextN layers only."""
    has = mtp_kv_layers(p) if shape.mtp else has_kv_layers(p)
    v_trans = not shape.flash_attn
    dims_v = [((p.head_dim_v_swa if p.swa_layers[il] else p.head_dim_v) * p.n_head_kv[il]) for il in range(p.n_layer)]
    max_v = max((d for d, h in zip(dims_v, has) if h), default=0)
    out = []
    for il in range(p.n_layer):
        if not has[il]:
            out.append(0)
            continue
        if p.arch == "deepseek4" and not shape.mtp:
            out.append(dsv4_bytes(p, s, shape, il))
            continue
        cells = shape.size_swa if p.swa_layers[il] and shape.size_swa else shape.n_ctx_seq
        n_k = (p.head_dim_k_swa if p.swa_layers[il] else p.head_dim_k) * p.n_head_kv[il]
        k = row_size(s.type_k, n_k) * cells * shape.n_stream
        v = 0
        if not p.is_mla:
            v = row_size(s.type_v, max_v if v_trans else dims_v[il]) * cells * shape.n_stream
        if p.arch in DSA_ARCHS and p.indexer_full[il] and not shape.mtp:  # the MTP head runs dense MLA
            # llama_kv_cache_dsa: the lightning indexer's own K-only cache, one head of indexer.key_length per layer
            # that runs its indexer (filter_lid: glm-dsa's shared layers have none)
            # dots3-note's DSA cache holds every cell of the context beside the SWA cache (llama_kv_cache_dsa_iswa)
            lid_cells = shape.n_ctx_seq if p.arch == "dots3note" else cells
            k += row_size(s.type_k, p.indexer_head_size) * lid_cells * shape.n_stream
        if p.arch == "minimax-m3" and il >= p.n_layer_dense_lead:
            # llama_kv_cache_msa: the MSA indexer's own llama_kv_cache on the sparse layers (filter_idx), one head
            # per layer with K of indexer.key_length and V of the model's value head, both of the cache types
            k += row_size(s.type_k, p.indexer_head_size) * cells * shape.n_stream
            v += row_size(s.type_v, p.head_dim_v) * cells * shape.n_stream
        if p.arch == "glm5-next" and p.indexer_full[il]:
            # llama_memory_hybrid_idx's indexer cache (filter_idx: the full indexer layers): one head per cell of
            # key | gate | pooled key, 3 * indexer.key_length of the K type, no V
            k += row_size(s.type_k, 3 * p.indexer_head_size) * cells * shape.n_stream
        out.append(k + v)
    return out


def dsv4_bytes(p: ModelParams, s: LlamaSettings, shape: ContextShape, il: int) -> int:
    """``llama_kv_cache_dsv4`` for one deepseek4 layer: always per-sequence streams (``unified`` false whatever
    ``-kvu`` says), each of ``n_ctx_seq`` cells. The raw K-only sliding-window cache (``llama_kv_cache_iswa``,
    one head of ``key_length``, ``n_swa + n_ubatch`` cells padded to 256); on a ratio-4 layer (CSA) the compressed
    K cache and the lightning indexer's (``indexer.key_length``), on a ratio-128 layer (HCA) the compressed K
    cache, each of ``ceil(n_ctx_seq / ratio)`` cells padded to 256 and of the K type; and their compressor states
    (``llama_dsv4_comp_state``, f32 kv + score of ``n_embd_state`` x ``state_size`` per plane, ``n_seq * (1 +
    n_rs_seq)`` planes): CSA ``2 * key_length`` x 8, HCA ``key_length`` x 128, indexer ``2 * indexer.key_length``
    x 8."""
    n_seq, n_ctx_seq = max(1, shape.n_seq), shape.n_ctx_seq
    hk = p.head_dim_k
    raw = n_ctx_seq if s.swa_full else pad(min(n_ctx_seq, p.n_swa + shape.n_ubatch), 256)
    out = row_size(s.type_k, hk * p.n_head_kv[il]) * raw * n_seq
    ratio = p.compress_ratios[il] if il < len(p.compress_ratios) else 0
    planes = n_seq * (1 + shape.n_rs_seq)
    comp = pad(max(1, -(-n_ctx_seq // ratio)), 256) if ratio else 0
    if ratio == 4:
        out += (row_size(s.type_k, hk) + row_size(s.type_k, p.indexer_head_size)) * comp * n_seq
        out += 2 * 4 * (2 * hk * 8 + 2 * p.indexer_head_size * 8) * planes
    elif ratio == 128:
        out += row_size(s.type_k, hk) * comp * n_seq
        out += 2 * 4 * hk * 128 * planes
    return out


#: T5, the encoder-decoder Layerdeck plans: llama_context sizes its outputs for every token (``n_outputs_max`` =
#: n_batch, as for any model with ``llama_model_has_encoder``) and keeps its embeddings in the output buffer (the
#: "hacky enc-dec support" of ``output_reserve``, for LLM_ARCH_T5 alone). The other models with an encoder are
#: drafts (eagle3, dflash) sized by their own rules, and t5encoder, which is not placed for text generation.
ENCODER_DECODER_ARCHS = frozenset({"t5"})
#: ``llama_model_has_encoder``: T5 and the draft heads with an encoder graph (their ``n_outputs_max`` is n_batch).
HAS_ENCODER_ARCHS = ENCODER_DECODER_ARCHS | {"eagle3", "dflash"}

#: Architectures whose attention layers also cache the DSA lightning indexer's keys (``llama_kv_cache_dsa``; hy_v4
#: only with ``indexer.top_k`` > 0, where :attr:`~app.model.hparams.ModelParams.indexer_full` marks its layers).
DSA_ARCHS = frozenset({"deepseek32", "glm-dsa", "hy_v4", "dots3note"})


#: Architectures whose recurrent state llama.cpp sizes from the ``ssm.*`` keys the way
#: :func:`recurrent_bytes_per_layer` does (``llama_hparams::n_embd_r``/``n_embd_s`` without RWKV, short-conv,
#: KDA or lightning-attention sizes): Mamba 1/2 layers, and the gated delta-net layers of qwen3next/qwen35,
#: whose conv state is ``(d_conv - 1) * (d_inner + 2 * n_group * d_state)`` (q, k and v channels) and whose
#: delta-rule state ``d_state * d_inner`` (a head_v_dim x head_v_dim matrix per value head, head_v_dim =
#: d_state), and LFM2's short-conv layers (``shortconv.l_cache``: a conv state of ``(l_cache - 1) * n_embd``, no
#: s state). RWKV (token shift, wkv) sizes its own way (:data:`RWKV_STATE_ARCHS`), so does Kimi delta attention
#: from ``kda.head_dim`` (bailingmoe3, kimi-linear, kimi-k3: :data:`~app.model.hparams.KDA_ARCHS`), and MiniMax-01's
#: lightning attention from its head size (:data:`LIGHTNING_STATE_ARCHS`).
MAMBA_STATE_ARCHS = frozenset(
    {
        "plamo2",
        "mamba",
        "mamba2",
        "jamba",
        "falcon-h1",
        "granitehybrid",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "lfm2",
        "lfm2moe",
    }
)


#: RWKV architectures whose state (``llama_hparams::n_embd_r`` = ``token_shift_count * n_embd`` token shifts,
#: ``n_embd_s`` = ``n_embd * wkv_head_size`` WKV matrices) :func:`recurrent_bytes_per_layer` sizes and the tests
#: compare with llama.cpp.
RWKV_STATE_ARCHS = frozenset({"rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})


#: Lightning attention (``src/models/minimax-01.cpp``): ``n_embd_head_la`` = the head size, so ``n_embd_s`` is one
#: head x head matrix per head (``llama_hparams::n_embd_s``: 128 x 128 x 64 for MiniMax-Text-01) and ``n_embd_r`` is
#: 0 (no ``ssm.*`` keys: the conv state llama.cpp still creates holds nothing).
LIGHTNING_STATE_ARCHS = frozenset({"minimax-01"})


def state_is_modelled(p: ModelParams) -> bool:
    """False when the model has recurrent layers whose state this module does not size as llama.cpp does."""
    return (
        not any(p.recurrent_layers)
        or p.arch in MAMBA_STATE_ARCHS
        or p.arch in RWKV_STATE_ARCHS
        or p.arch in KDA_ARCHS
        or p.arch in LIGHTNING_STATE_ARCHS
    )


def _rs_rows(shape: ContextShape) -> int:
    """Rows of each recurrent state tensor: one per cell (``max(1, n_seq_max)``), times ``1 + n_rs_seq``
    snapshot groups (``llama_memory_recurrent``: ``n_rows = mem_size * (1 + n_rs_seq)``)."""
    return max(1, shape.n_seq) * (1 + shape.n_rs_seq)


def recurrent_bytes_per_layer(p: ModelParams, shape: ContextShape) -> list[int]:
    """Recurrent state (r + s, f32) of each recurrent layer; independent of the context length."""
    if not any(p.recurrent_layers):
        return [0] * p.n_layer
    if p.wkv_head_size:
        # llama_hparams::n_embd_r / n_embd_s for RWKV: the token shifts and one head_size x head_size matrix per head
        n_embd_r = p.token_shift_count * p.n_embd
        n_embd_s = p.n_embd * p.wkv_head_size
        return [(n_embd_r + n_embd_s) * _rs_rows(shape) * 4 if r else 0 for r in p.recurrent_layers]
    if p.arch in KDA_ARCHS:
        # llama_hparams::n_embd_r / n_embd_s for Kimi delta attention: the q, k and v conv states of d_conv - 1
        # columns of n_head * head_dim each, and one head_dim x head_dim matrix per head
        d_inner = (p.n_head[0] if p.n_head else 0) * p.kda_head_dim
        n_embd_r = 3 * (p.ssm_d_conv - 1 if p.ssm_d_conv > 0 else 3) * d_inner
        n_embd_s = p.kda_head_dim * d_inner
        return [(n_embd_r + n_embd_s) * _rs_rows(shape) * 4 if r else 0 for r in p.recurrent_layers]
    if p.arch in LIGHTNING_STATE_ARCHS:
        # llama_hparams::n_embd_s with n_embd_head_la (the full head size): one head x head matrix per head of layer 0
        n_embd_s = p.head_dim_k * p.head_dim_k * (p.n_head[0] if p.n_head else 0)
        return [n_embd_s * _rs_rows(shape) * 4 if r else 0 for r in p.recurrent_layers]
    if p.shortconv_l_cache:
        # llama_hparams::n_embd_r for LFM2: the short conv keeps l_cache - 1 columns of n_embd; no s state
        n_embd_r = p.n_embd * (p.shortconv_l_cache - 1)
    elif p.ssm_d_conv:
        n_embd_r = (p.ssm_d_conv - 1) * (p.ssm_d_inner + 2 * p.ssm_n_group * p.ssm_d_state)
    else:
        n_embd_r = 0
    n_embd_s = p.ssm_d_state * p.ssm_d_inner
    rows = _rs_rows(shape)
    size = (n_embd_r + n_embd_s) * rows * 4
    return [size if r else 0 for r in p.recurrent_layers]


def output_buffer_bytes(p: ModelParams, shape: ContextShape) -> int:
    """Logits buffer reserved at context creation: n_vocab x n_seq floats (grows at run time if needed); an
    encoder-decoder also keeps its embeddings there (llama_context::output_reserve: "hacky enc-dec support",
    has_embd for T5)."""
    width = p.n_vocab + (p.n_embd if p.arch in ENCODER_DECODER_ARCHS else 0)
    return width * max(1, shape.n_seq) * 4
