"""One module per architecture family, as llama.cpp keeps one ``src/models/<arch>.cpp`` per model.

Each module here builds its family's graph with the shared :class:`~app.memory.compute.builder.Builder` and
declares it in a module-level ``FAMILY = Family(...)``: the graph builder, the ``general.architecture`` names
whose compute buffers were checked against llama.cpp with it (``exact``), and whether it is the graph used for
architectures nobody has written a module for (``fallback``, the llama-style decoder). Modules are found by
listing this package, so adding an architecture is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Family:
    """An architecture family's graph: ``build(builder)`` adds its ops and returns the logits tensor."""

    name: str
    build: Callable[[Any], Any]
    exact: frozenset[str]  # architectures checked against llama-fit-params --fit-print with this graph
    fallback: bool = False  # the graph tried for architectures without a module (results approximate)
    also: frozenset[str] = frozenset()  # architectures built with this graph but not (yet) checked
    #: ``layer_kind(params, il)``: what sets a layer's ops apart that its tensors do not show (gemma3n's KV-sharing
    #: and sparsified layers), added to the layer's structure so the layer compression keeps one of each
    layer_kind: Callable[[Any, int], Any] | None = None
    #: layers either side that :func:`~app.memory.compute.compress.compress` compares before dropping a repeated
    #: neighbourhood (core.py takes the larger of this and its own choice)
    hood: int = 1
    #: build every layer (no compression): the graph has per-layer leafs the allocator places before any op
    #: (deepseek32's zero-filled top-k rows), so the peak grows with the number of layers
    uncut: bool = False
    #: ``build_mtp(builder)``: the MTP draft context's graph (``LLM_GRAPH_TYPE_DECODER_MTP``) over the NextN
    #: layers, for ``--spec-type draft-mtp``; ``mtp_exact``: the architectures it was checked for
    build_mtp: Callable[[Any], Any] | None = None
    mtp_exact: frozenset[str] = frozenset()
    #: the main graph replays the recurrent-state snapshot copies of ``n_rs_seq`` > 0 (rollback drafts, e.g.
    #: ``--spec-type draft-mtp``) for the architectures in ``exact``
    rs_seq: bool = False
    #: fused ops llama.cpp probes in this order (``llama_context::resolve_fused_ops``) and turns off when the
    #: scheduler puts one of their nodes off its layer's device: the builder reads ``b.unfused`` (the ops turned
    #: off) and records ``b.fused_nodes`` as (op, tensor, layer); core.py re-runs the graph until they agree
    fused: tuple[str, ...] = ()
    #: why this llama.cpp aborts on the family's graph with flash attention (on, or auto, whose probe builds it):
    #: the estimate refuses anything but ``-fa off`` with this reason; empty where flash attention works
    fa_aborts: str = ""


def _discover() -> list[Family]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        family = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    return found


FAMILIES: tuple[Family, ...] = tuple(_discover())

#: ``general.architecture`` -> the family whose graph builds it.
REGISTRY: dict[str, Family] = {}
for _f in FAMILIES:
    for _arch in _f.exact | _f.also:
        if _arch in REGISTRY:
            raise RuntimeError(f"architecture {_arch!r} is claimed by {REGISTRY[_arch].name} and {_f.name}")
        REGISTRY[_arch] = _f

_FALLBACKS = [f for f in FAMILIES if f.fallback]
if len(_FALLBACKS) != 1:
    raise RuntimeError(f"exactly one fallback family expected, found {[f.name for f in _FALLBACKS]}")
FALLBACK: Family = _FALLBACKS[0]

#: Architectures whose compute buffers were checked against llama.cpp's own numbers (tests/memory); the
#: others use their family's or the llama-style graph and may be off.
CHECKED_ARCHS: frozenset[str] = frozenset(a for f in FAMILIES for a in f.exact)


def family_of(arch: str) -> Family:
    """The family that builds ``arch``'s graph (the fallback for architectures without a module)."""
    return REGISTRY.get(arch, FALLBACK)


def graph_builder(arch: str) -> Callable[[Any], Any]:
    return family_of(arch).build


#: How every note about an architecture whose compute graph was not confirmed starts (the KV panel looks for it).
UNCHECKED = "compute buffers are not checked"


def unchecked_note(arch: str, state_modelled: bool = True) -> str | None:
    """The note for an estimate of ``arch`` when its compute graph (or recurrent state) was not confirmed against
    llama.cpp; None for the architectures in :data:`CHECKED_ARCHS` whose state is modelled."""
    if arch in CHECKED_ARCHS and state_modelled:
        return None
    fam = REGISTRY.get(arch)
    graph = f"the {fam.name} graph" if fam is not None else "a llama-style graph (no module of its own)"
    exact = "weights and KV are exact" if state_modelled else "weights are exact; its recurrent state is not modelled"
    return (
        f"{UNCHECKED} for '{arch}': they follow {graph}, not confirmed against llama.cpp for this architecture "
        f"(docs/coverage.md); {exact}, compute may be off; use Verify (llama-fit-params)"
    )
