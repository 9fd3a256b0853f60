"""The full llama.cpp command for a placement: ``llama-server``, ``llama-cli`` or ``llama-bench``.

A thin placement-level front of :func:`app.command.build.build_llama_command`:
it computes (and verifies) the placement part with
:func:`app.placement.export.placement_args` and hands it, with the
placement's settings, to the command package.
"""

from __future__ import annotations

import os

from ..command.build import PROGRAMS, Command, apply_cuda_order, build_llama_command
from ..llamacpp.capabilities import UNKNOWN, Capabilities
from .export import ExportCache, placement_args
from .placement import Placement

__all__ = ["PROGRAMS", "Command", "apply_cuda_order", "build_command"]


def build_command(
    p: Placement,
    model_path: str | os.PathLike,
    *,
    tool: str = "server",
    rpc: list[str] | None = None,
    program: str | None = None,
    caps: Capabilities = UNKNOWN,
    host: str | None = None,
    port: int | None = None,
    extra: list[str] | None = None,
    cuda_order: list[int] | None = None,
    cache: ExportCache | None = None,
) -> Command:
    """Argument list (program first) that reproduces ``p`` exactly.

    ``cuda_order``: only when the user asked to hide or reorder GPUs (see :func:`apply_cuda_order`).
    ``cache``: the :class:`~app.placement.export.ExportCache` of ``p``'s model, when its owner has one.
    """
    if tool not in PROGRAMS:
        raise ValueError(f"unknown tool {tool!r}; use one of {', '.join(PROGRAMS)}")
    return build_llama_command(
        placement_args(p, cache),
        p.settings,
        model_path,
        tool=tool,
        rpc=rpc,
        program=program,
        caps=caps,
        host=host,
        port=port,
        extra=extra,
        cuda_order=cuda_order,
        has_lanes=bool(p.devices),
    )
