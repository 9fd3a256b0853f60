"""The error hierarchy: every error the core raises on purpose sits under one area base of app.errors."""

from __future__ import annotations

import pytest

from app import errors
from app.devices.cuda import CudaProbeError
from app.devices.listing import ListingError, ListingParseError
from app.devices.planned import PlannedDeviceError
from app.launch.bench import BenchError
from app.launch.client import ServerError, ServerLoading, ServerUnreachable
from app.launch.process import LaunchError, RpcUnreachable
from app.llamacpp.binaries import LlamaCppNotFound
from app.llamacpp.build import BuildError
from app.llamacpp.fit_print import FitPrintError
from app.memory.device_adapter import DeviceSpecError, parse_device_spec
from app.memory.kv import SettingsError
from app.memory.layout import PlacementError
from app.model import BlockIdError
from app.model.errors import (CorruptGGUFError, GGUFError, MissingShardError, NotGGUFError, TruncatedGGUFError,
                              UnsupportedVersionError)
from app.placement.autofit import FitError
from app.placement.export import InexpressibleError
from app.placement.plan_file import PlanError, PlanMismatch

AREAS = {
    errors.ReadError: [GGUFError, NotGGUFError, UnsupportedVersionError, TruncatedGGUFError, CorruptGGUFError,
                       MissingShardError, BlockIdError, PlanError, PlanMismatch],
    errors.EstimateError: [SettingsError, PlacementError],
    errors.ExportError: [InexpressibleError, FitError],
    errors.LaunchError: [ServerError, ServerLoading, ServerUnreachable, BenchError, LaunchError, RpcUnreachable],
    errors.DetectError: [ListingParseError, ListingError, PlannedDeviceError, CudaProbeError, DeviceSpecError],
    errors.ToolError: [LlamaCppNotFound, FitPrintError, BuildError],
}
KEPT = {ValueError: [GGUFError, BlockIdError, PlanError, SettingsError, PlacementError, InexpressibleError, FitError,
                     ListingParseError, PlannedDeviceError, DeviceSpecError],
        RuntimeError: [ServerError, BenchError, LaunchError, ListingError, CudaProbeError, FitPrintError, BuildError],
        FileNotFoundError: [LlamaCppNotFound]}


@pytest.mark.parametrize("base", list(AREAS), ids=lambda b: b.__name__)
def test_each_class_has_one_area_base(base):
    for cls in AREAS[base]:
        assert issubclass(cls, base), cls
        others = [b for b in AREAS if b is not base and issubclass(cls, b)]
        assert not others, (cls, others)


def test_former_bases_are_kept():
    for old, classes in KEPT.items():
        for cls in classes:
            assert issubclass(cls, old), cls


def test_message_and_hint():
    e = errors.ExportError("no way", hint="try fewer layers")
    assert e.message == str(e) == "no way" and e.hint == "try fewer layers"
    g = GGUFError("bad file", "/x.gguf", 4)
    assert g.message == "bad file" and g.hint is None and g.path == "/x.gguf"
    assert isinstance(RpcUnreachable([("h:1", "refused")]).message, str)


def test_device_spec_errors_are_typed():
    for spec in ("CUDA0", "CUDA0=x", "CUDA0=nan", "CUDA0=inf", "CUDA0=-1", "CUDA0=10@fast"):
        with pytest.raises(DeviceSpecError):
            parse_device_spec(spec)
