"""Compute buffer model (placeholder, calibrated below)."""

from __future__ import annotations

from ..model import Model
from .kv import ContextShape
from .layout import HOST, WeightPlacement
from .settings import LlamaSettings


def compute_buffers(model: Model, placement: WeightPlacement, settings: LlamaSettings, shape: ContextShape,
                    pipeline: bool) -> dict[str, int]:
    return {}
