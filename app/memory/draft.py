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

from .kv import ContextShape
from .settings import LlamaSettings

#: --spec-type values whose drafts need a context Layerdeck does not model: EAGLE-3, DFlash and DSpark draft heads
#: read the target's hidden states from models of their own. (MTP, the main model's own NextN layers in a second
#: context, is sized by ``app.memory.estimator``.)
UNMODELLED_SPEC_TYPES = ("draft-eagle3", "draft-dflash", "draft-dspark")


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
