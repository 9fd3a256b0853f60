"""The placement part of a llama.cpp command (what :mod:`app.placement.export` computes), and its error.

These sit in the command package, below placement, so the command builder
(:mod:`app.command.build`) takes them without importing a
:class:`~app.placement.placement.Placement`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ExportError
from ..memory.settings import LlamaSettings
from .values import FFN_EXPS_REGEX, n_cpu_moe_patterns

__all__ = ["InexpressibleError", "PlacementArgs"]


class InexpressibleError(ExportError, ValueError):
    """llama.cpp cannot express this placement; the message says why and what to do instead."""


@dataclass
class PlacementArgs:
    """The placement part of a command line, before tool-specific flags."""

    devices: list[str]  # -dev order
    n_gpu_layers: int
    tensor_split: list[int]
    overrides: list[tuple[str, str]]  # -ot pattern, buffer type
    cpu_moe: bool = False  # --cpu-moe
    n_cpu_moe: int = 0  # --n-cpu-moe N
    notes: list[str] = field(default_factory=list)

    def settings(self, base: LlamaSettings) -> LlamaSettings:
        """``base`` with these placement flags applied in the order the exporter writes them."""
        ot = list(self.overrides)
        if self.n_cpu_moe:
            ot += n_cpu_moe_patterns(self.n_cpu_moe)
        if self.cpu_moe:
            ot.append((FFN_EXPS_REGEX, "CPU"))
        return base.copy(
            devices=self.devices or ["none"],
            n_gpu_layers=self.n_gpu_layers,
            tensor_split=[float(x) for x in self.tensor_split] or None,
            overrides=ot,
        )
