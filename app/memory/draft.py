"""Speculative decoding with a draft model (``-md``): the second model and context llama-server loads.

llama.cpp builds the draft's parameters from the main model's (``common_base_params_to_speculative``,
``common/speculative.cpp``) and creates its context beside the main one (``common_speculative_init_result``):

- everything not named below is the main model's: ``-np`` and the unified cache, ``-fa``, ``-b``/``-ub``,
  ``--swa-full``, ``-nkvo``, ``-ts``, ``-sm`` and ``-mg``, ``--no-repack``/``--no-host``;
- devices ``-devd`` (default: the main model's ``-dev``), ``-ngld`` (default auto), overrides ``-otd``,
  ``-cmoed``, ``-ncmoed`` only (the main model's ``-ot`` do not apply); a draft pinned to one device drops an
  inherited ``-sm tensor`` for ``layer``;
- cache types ``-ctkd``/``-ctvd``, f16 by default: the main model's ``-ctk``/``-ctv`` are not inherited;
- the context holds as many cells as the target's (``cparams.n_ctx = llama_n_ctx(ctx_tgt)``), whatever ``-c``
  the draft's own training context would give;
- its output rows are one per slot (``n_outputs_max = n_parallel``), where the main context reserves
  ``n_parallel * (1 + drafted tokens)`` (:meth:`~app.memory.settings.LlamaSettings.eff_n_outputs_max`).

``--fit`` counts the draft's memory on every device when it fits the main model (``common_fit_extra_model``)
but never moves the draft; Layerdeck exports ``--fit off`` and places both as shown.
"""

from __future__ import annotations

from typing import Any

from .kv import ContextShape, SettingsError
from .settings import LlamaSettings

#: --spec-type values whose draft heads read the target's hidden states from a model of their own, the
#: ``dflash`` architecture: DFlash (block diffusion) and DSpark (the same with a Markov head). (MTP, the main
#: model's own NextN layers in a second context, EAGLE-3 heads given with -md, see :func:`eagle3_target_layers`,
#: and Gemma 4's assistant given with -md and draft-mtp, are sized by ``app.memory.estimator`` too.)
DFLASH_SPEC_TYPES = ("draft-dflash", "draft-dspark")

#: Target graphs that set ``t_layer_inp[n_layer]`` (the last layer's output), so a DFlash head may read it:
#: ``src/models/deepseek4.cpp``, ``nemotron-h.cpp``, ``mimo2.cpp``; any other aborts on it in
#: ``llm_graph_result::set_outputs`` ("layer input tensor is null").
FINAL_LAYER_INP_ARCHS = frozenset({"deepseek4", "nemotron_h", "nemotron_h_moe", "mimo2"})


def dflash_target_layers(settings: LlamaSettings, draft: Any, n_layer: int, target_arch: str = "") -> tuple[int, ...]:
    """The target layers whose inputs ``--spec-type draft-dflash`` / ``draft-dspark`` extracts for the DFlash
    head ``draft`` given with ``-md`` (its ``dflash.target_layers``, read at open:
    :attr:`~app.model.hparams.ModelParams.target_layers`; ``common_speculative_impl_draft_dflash`` turns on
    ``llama_set_embeddings_layer_inp`` for each); empty without those types, without a draft or while the draft is
    not open. Raises :class:`SettingsError` where llama.cpp aborts on the pair."""
    if not any(t in settings.spec_types for t in DFLASH_SPEC_TYPES) or not settings.draft_model or draft is None:
        return ()
    if draft.params.arch != "dflash":
        return ()
    layers = draft.params.target_layers
    bad = max(layers) if max(layers) > n_layer else min(layers)
    if bad > n_layer or bad < 0:  # llama_context::set_embeddings_layer_inp((uint32_t) id): GGML_ASSERT
        raise SettingsError(
            f"the DFlash draft reads target layer {bad}, the model has {n_layer}: llama.cpp aborts "
            "(GGML_ASSERT lid <= n_layer); use the draft published for this model"
        )
    if n_layer in layers and target_arch and target_arch not in FINAL_LAYER_INP_ARCHS:
        raise SettingsError(
            f"the DFlash draft reads target layer {n_layer}, the output of the model's last layer, which llama.cpp's "
            f"{target_arch} graph does not extract: it aborts at the first decode ('layer input tensor is null'); "
            "use the draft published for this model"
        )
    return layers


def target_layers(settings: LlamaSettings, draft: Any, n_layer: int, target_arch: str = "") -> tuple[int, ...]:
    """The target layers the open draft head ``draft`` extracts (:func:`eagle3_target_layers`,
    :func:`dflash_target_layers`)."""
    return eagle3_target_layers(settings, draft, n_layer) or dflash_target_layers(settings, draft, n_layer, target_arch)


def eagle3_target_layers(settings: LlamaSettings, draft: Any, n_layer: int) -> tuple[int, ...]:
    """The target layers whose hidden states ``--spec-type draft-eagle3`` extracts for the EAGLE-3 head ``draft``
    given with ``-md`` (its ``eagle3.target_layers``, read at open; ``common_speculative_impl_draft_eagle3``: ids
    below the target's ``n_layer`` turn on ``llama_set_embeddings_layer_inp``, an id equal to it
    ``llama_set_embeddings_nextn``); empty without that type, without a draft or while the draft is not open.
    Raises :class:`SettingsError` where llama.cpp refuses the pair."""
    if "draft-eagle3" not in settings.spec_types or not settings.draft_model or draft is None:
        return ()
    layers = draft.params.target_layers if draft.params.arch == "eagle3" else ()
    if len(layers) != 3:  # the constructor of common_speculative_impl_draft_eagle3
        raise SettingsError(
            f"--spec-type draft-eagle3 needs an EAGLE-3 head as -md: llama.cpp says 'draft model is not eagle3 "
            f"(expected 3 extract layers, got {len(layers)})'"
        )
    if max(layers) > n_layer:  # GGML_ABORT("EAGLE3: target layer id %d exceeds target n_layer %d")
        raise SettingsError(f"the EAGLE-3 head extracts target layer {max(layers)}, the model has {n_layer}")
    if min(layers) < 0:  # llama_set_embeddings_layer_inp((uint32_t) id): GGML_ASSERT(lid <= n_layer)
        raise SettingsError(
            f"the EAGLE-3 head extracts target layer {min(layers)}: llama.cpp aborts (GGML_ASSERT lid <= n_layer); "
            "the head's file is broken, convert it again"
        )
    return layers


#: The --spec-type a draft file is used with, by its architecture (common_speculative_init, and
#: ``common_speculative_types_from_gguf`` for ``dflash`` files): an EAGLE-3 head with draft-eagle3, Gemma 4's
#: assistant with draft-mtp (the MTP driver over ``ctx_other``), a DFlash head with draft-dflash (draft-dspark when
#: it has a Markov head, :func:`spec_type_of`); any other model with draft-simple.
SPEC_TYPE_OF_ARCH = {"eagle3": "draft-eagle3", "gemma4-assistant": "draft-mtp", "dflash": "draft-dflash"}


def spec_type_for(draft_arch: str) -> str:
    """The ``--spec-type`` that drafts with a ``-md`` file of ``draft_arch``."""
    return SPEC_TYPE_OF_ARCH.get(draft_arch, "draft-simple")


def spec_type_of(draft: Any) -> str:
    """The ``--spec-type`` that drafts with the open ``-md`` model ``draft``: as :func:`spec_type_for`, a DFlash
    file with ``markov_w1`` being a DSpark head (``common_speculative_types_from_gguf``)."""
    if draft.params.arch == "dflash" and any(t.name == "markov_w1.weight" for t in draft.tensors):
        return "draft-dspark"
    return spec_type_for(draft.params.arch)


def detected_spec_types(draft: Any) -> list[str]:
    """The ``--spec-type`` llama.cpp infers from the ``-md`` file when none is given
    (``common_speculative_types_from_gguf``, ``common/arg.cpp``): draft-dflash or draft-dspark (a Markov head) for a
    ``dflash`` file, draft-mtp for a model whose last block holds ``nextn.eh_proj``, else none."""
    if draft is None:
        return []
    if draft.params.arch == "dflash":
        return [spec_type_of(draft)]
    n = int(draft.metadata.get(f"{draft.params.arch}.block_count") or 0)
    last = f"blk.{n - 1}.nextn.eh_proj.weight"
    return ["draft-mtp"] if n and any(t.name == last for t in draft.tensors) else []


def with_detected_spec_type(settings: LlamaSettings, draft: Any) -> LlamaSettings:
    """``settings`` with the DFlash / DSpark type :func:`detected_spec_types` infers from the open draft ``draft``
    where no ``--spec-type`` (or only ``none``) was given, as llama-server and llama-cli do; else ``settings``
    itself (an inferred draft-mtp is not followed: the estimate says so, :func:`inferred_mtp`)."""
    if settings.spec_types or not settings.draft_model or settings.tool not in ("server", "cli"):
        return settings
    found = [t for t in detected_spec_types(draft) if t in DFLASH_SPEC_TYPES]
    return settings.copy(spec_types=found) if found else settings


def inferred_mtp(settings: LlamaSettings, draft: Any) -> bool:
    """Whether llama.cpp would infer draft-mtp from the ``-md`` file (no ``--spec-type`` given), which the estimate
    does not follow."""
    return (
        not settings.spec_types
        and bool(settings.draft_model)
        and settings.tool in ("server", "cli")
        and "draft-mtp" in detected_spec_types(draft)
        and draft.params.arch not in SPEC_TYPE_OF_ARCH
    )


def draft_settings(main: LlamaSettings, shape: ContextShape) -> LlamaSettings:
    """The settings llama.cpp creates the draft model and context with, from the main model's ``main`` and its
    context ``shape`` (``common_base_params_to_speculative`` and ``common_speculative_init_result``)."""
    devices = main.draft_devices if main.draft_devices else main.devices
    pinned_one = len([d for d in main.draft_devices or () if d.lower() != "none"]) == 1
    return main.copy(
        n_ctx=shape.n_ctx,
        devices=list(devices) if devices else None,
        n_gpu_layers=main.draft_n_gpu_layers,
        overrides=list(main.draft_overrides),
        type_k=main.draft_type_k,
        type_v=main.draft_type_v,
        split_mode="layer" if pinned_one else main.split_mode,
        # the draft context itself: one output row per slot, no speculation of its own, no draft of its own
        spec_types=[],
        draft_model=None,
        draft_overrides=[],
        draft_devices=None,
    )


def check_dflash_head(draft: Any) -> None:
    """Refuse, with llama.cpp's reason, a DFlash file its loader or graph refuses (``load_arch_tensors``: a DFlash2
    selector without its conv/selector keys, a width the conv groups or the selector lattice do not fit;
    ``build_dspark_markov_head``: a DSpark head without ``dflash.block_size``)."""
    if draft is None or draft.params.arch != "dflash":
        return
    names, n_embd, keys = {t.name for t in draft.tensors}, draft.params.n_embd, draft.params.dflash

    def key(name: str) -> int:
        return int(keys.get(name, 0))

    why = ""
    if "selector_hidden.weight" in names:
        top_k, group = key("selector_top_k"), key("conv_group_size")
        if min(key("selector_rank"), key("block_size"), top_k, key("conv_kernel_size"), group) <= 0:
            why = "DFlash2 model is missing conv/selector metadata"
        elif n_embd % group:
            why = "DFlash2 hidden size must be divisible by conv_group_size"
        elif n_embd < top_k * (top_k + 1):
            why = "DFlash2 hidden size is too small for the selector lattice"
    elif "markov_w1.weight" in names and key("block_size") <= 0:
        why = "DSpark draft requires 'dflash.block_size' in GGUF metadata (GGML_ASSERT)"
    if why:
        raise SettingsError(
            f"the draft {draft.path.name} is a DFlash head llama.cpp refuses: '{why}'; convert it again or use the "
            "published file"
        )
