"""Turn detected or planned devices into the estimator's :class:`Lane` list."""

from __future__ import annotations

import re

from ..errors import DetectError
from ..lanes import DeviceKind, Lane, rpc_buffer_type
from ..units import MiB

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\d*$")


class DeviceSpecError(DetectError, ValueError):
    """A ``--devices`` item is not ``NAME=MiB[@GB/s]``; the message says which and why."""


def from_detected(devices) -> list[Lane]:
    """:class:`app.devices.records.Device` objects (non-CPU) to estimator devices, keeping llama.cpp's order."""
    out = []
    per_endpoint: dict[str, int] = {}
    for d in devices:
        if d.kind in ("cpu", "accel"):
            continue
        if d.kind == "rpc" and d.rpc_endpoint:
            j = per_endpoint.get(d.rpc_endpoint, 0)
            per_endpoint[d.rpc_endpoint] = j + 1
            index = getattr(d, "rpc_device_index", None)
            buft = rpc_buffer_type(d.rpc_endpoint, j if index is None else index)
        else:
            buft = d.name
        total = d.total_bytes or 0
        free = d.free_bytes if d.free_bytes is not None else total
        out.append(
            Lane(
                d.name,
                buft,
                free,
                total,
                d.kind,
                endpoint=d.rpc_endpoint if d.kind == "rpc" else None,
                max_tensor_bytes=getattr(d, "max_tensor_bytes", None),
                refused_ops=tuple(getattr(d, "refused_ops", ())),
                alignment=getattr(d, "buffer_alignment", 0),
                max_buffer=getattr(d, "max_buffer", 0),
                host_alignment=getattr(d, "host_alignment", 0),
                host_max_buffer=getattr(d, "host_max_buffer", 0),
            )
        )
    return out


def parse_device_spec(spec: str) -> list[Lane]:
    """``CUDA0=24576,CUDA1=12288@360`` (MiB, optional @GB/s bandwidth) -> planned devices, free = total."""
    out = []
    for item in [x.strip() for x in spec.split(",") if x.strip()]:
        name, sep, size = item.partition("=")
        size, _, bw_text = size.partition("@")
        try:
            bandwidth = float(bw_text) * 1e9 if bw_text else 0.0
        except ValueError:
            raise DeviceSpecError(f"--devices item {item!r}: {bw_text!r} is not a bandwidth in GB/s.") from None
        if not sep or not _NAME.match(name):
            raise DeviceSpecError(f"--devices item {item!r} should look like CUDA0=24576 (device name = MiB).")
        try:
            mib = float(size.lower().removesuffix("mib"))
        except ValueError:
            raise DeviceSpecError(f"--devices item {item!r}: {size!r} is not a number of MiB.") from None
        if not mib < float("inf"):  # nan, inf: int() would fail on them
            raise DeviceSpecError(f"--devices item {item!r}: {size!r} is not a number of MiB.")
        if mib <= 0:
            raise DeviceSpecError(f"--devices item {item!r}: the capacity must be positive.")
        nbytes = int(mib * MiB)
        out.append(Lane(name, name, nbytes, nbytes, DeviceKind.PLANNED, bandwidth))
    return out
