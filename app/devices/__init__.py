"""Device detection: what llama.cpp can place tensors on, here and on RPC hosts.

Start with :func:`detect`; :mod:`app.devices.telemetry` samples the same
devices while a model runs, and :mod:`app.devices.planned` adds cards the
user does not own yet.  Nothing here imports Qt.
"""

from app.devices.detect import detect
from app.devices.planned import PlannedDeviceError, planned_device, planned_from_catalogue
from app.devices.records import (
    DetectionResult,
    Device,
    DeviceKind,
    GpuProcess,
    HostInfo,
    NumaNode,
    PcieLink,
    RpcHostStatus,
    SourceError,
)
from app.devices.rpc import rpc_server_command, rpc_server_note

__all__ = [
    "DetectionResult",
    "Device",
    "DeviceKind",
    "GpuProcess",
    "HostInfo",
    "NumaNode",
    "PcieLink",
    "PlannedDeviceError",
    "RpcHostStatus",
    "SourceError",
    "detect",
    "planned_device",
    "planned_from_catalogue",
    "rpc_server_command",
    "rpc_server_note",
]
