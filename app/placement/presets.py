"""One-click placements: all on GPU, experts to CPU, ``--n-cpu-moe N``, all on CPU."""

from __future__ import annotations

from ..command.parse import n_cpu_moe_patterns
from ..lanes import Lane
from ..memory.settings import LlamaSettings
from ..model import Model
from .placement import CPU, Placement


def _gpu_settings(p_settings: LlamaSettings, devices: list[Lane]) -> LlamaSettings:
    # spread layers by capacity, as llama.cpp does without -ts
    return p_settings.copy(
        n_gpu_layers=-2, tensor_split=[float(d.free or d.total) for d in devices] or None, overrides=[], devices=None
    )


def all_on_gpus(model: Model, devices: list[Lane], settings: LlamaSettings) -> Placement:
    if not devices:
        return all_on_cpu(model, devices, settings)
    return Placement.from_settings(model, devices, _gpu_settings(settings, devices)).with_settings(settings)


def experts_to_cpu(model: Model, devices: list[Lane], settings: LlamaSettings) -> Placement:
    s = _gpu_settings(settings, devices)
    s.overrides = [(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps", "CPU")]
    return Placement.from_settings(model, devices, s).with_settings(settings)


def n_cpu_moe(model: Model, devices: list[Lane], settings: LlamaSettings, n: int) -> Placement:
    s = _gpu_settings(settings, devices)
    s.overrides = n_cpu_moe_patterns(n)
    return Placement.from_settings(model, devices, s).with_settings(settings)


def all_on_cpu(model: Model, devices: list[Lane], settings: LlamaSettings) -> Placement:
    p = Placement.from_settings(model, devices, settings.copy(n_gpu_layers=0, overrides=[], tensor_split=None))
    assert all(d in (CPU, "") for d in p.tensor_device)
    return p.with_settings(settings)
