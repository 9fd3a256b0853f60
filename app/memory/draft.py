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

from collections.abc import Mapping
from typing import Any

from .kv import ContextShape, SettingsError
from .settings import LlamaSettings

#: --spec-type values whose drafts need a context Layerdeck does not model: DFlash and DSpark draft heads read the
#: target's hidden states from models of their own. (MTP, the main model's own NextN layers in a second context,
#: EAGLE-3 heads given with -md, see :func:`eagle3_target_layers`, and Gemma 4's assistant given with -md and
#: draft-mtp, are sized by ``app.memory.estimator``.)
UNMODELLED_SPEC_TYPES = ("draft-dflash", "draft-dspark")


def eagle3_target_layers(
    settings: LlamaSettings, draft_meta: Mapping[str, Any] | None, n_layer: int
) -> tuple[int, ...]:
    """The target layers whose hidden states ``--spec-type draft-eagle3`` extracts for the EAGLE-3 head given
    with ``-md`` (its ``eagle3.target_layers``; ``common_speculative_impl_draft_eagle3``: ids below the target's
    ``n_layer`` turn on ``llama_set_embeddings_layer_inp``, an id equal to it ``llama_set_embeddings_nextn``);
    empty without that type, without a draft or while the draft is not open. Raises :class:`SettingsError` where
    llama.cpp refuses the pair."""
    if "draft-eagle3" not in settings.spec_types or not settings.draft_model or draft_meta is None:
        return ()
    ids = draft_meta.get("eagle3.target_layers") if draft_meta.get("general.architecture") == "eagle3" else None
    if not ids or len(ids) != 3:
        # the constructor of common_speculative_impl_draft_eagle3
        raise SettingsError(
            f"--spec-type draft-eagle3 needs an EAGLE-3 head as -md: llama.cpp says 'draft model is not eagle3 "
            f"(expected 3 extract layers, got {len(ids or ())})'"
        )
    layers = tuple(int(x) for x in ids)
    if max(layers) > n_layer:  # GGML_ABORT("EAGLE3: target layer id %d exceeds target n_layer %d")
        raise SettingsError(f"the EAGLE-3 head extracts target layer {max(layers)}, the model has {n_layer}")
    return layers


#: The --spec-type a draft file is used with, by its architecture (common_speculative_init): an EAGLE-3 head with
#: draft-eagle3, Gemma 4's assistant with draft-mtp (the MTP driver over ``ctx_other``); any other model with
#: draft-simple.
SPEC_TYPE_OF_ARCH = {"eagle3": "draft-eagle3", "gemma4-assistant": "draft-mtp"}


def spec_type_for(draft_arch: str) -> str:
    """The ``--spec-type`` that drafts with a ``-md`` file of ``draft_arch``."""
    return SPEC_TYPE_OF_ARCH.get(draft_arch, "draft-simple")


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


def unmodelled_types(settings: LlamaSettings) -> list[str]:
    """The chosen --spec-type values whose draft context Layerdeck does not size."""
    return [t for t in settings.spec_types if t in UNMODELLED_SPEC_TYPES]
