"""Planned devices: cards the user does not own yet, for "what if I add a 3090?".

A planned device comes from the catalogue (:mod:`app.devices.catalogue`) or
from a capacity and bandwidth the user types.  Typed values are validated
here so the UI can show the error message as is.
"""

from __future__ import annotations

import logging
import math
import re

from app.devices import catalogue
from app.devices.catalogue import CatalogueEntry
from app.devices.records import Device, DeviceKind, GiB, MiB
from app.errors import DetectError

log = logging.getLogger(__name__)

MAX_CAPACITY_BYTES = 16 * 1024 * GiB  # 16 TiB: beyond any single device
MAX_BANDWIDTH_GB_S = 100_000.0  # 100 TB/s


class PlannedDeviceError(DetectError, ValueError):
    """A typed capacity or bandwidth is not usable; the message says what to type."""


_SIZE_UNITS = {
    "": GiB,
    "g": GiB,
    "gb": GiB,
    "gib": GiB,
    "m": MiB,
    "mb": MiB,
    "mib": MiB,
    "t": 1024 * GiB,
    "tb": 1024 * GiB,
    "tib": 1024 * GiB,
}
_BW_UNITS = {"": 1.0, "gb/s": 1.0, "gbps": 1.0, "gb": 1.0, "tb/s": 1000.0, "tbps": 1000.0, "mb/s": 0.001}


def parse_capacity(value: float | int | str) -> int:
    """Capacity in bytes from GiB (a number) or a string such as ``"24 GB"`` or ``"24576 MiB"``.

    GB and MB mean GiB and MiB here, the way graphics cards are labelled
    (a "24 GB" card has 24 GiB).
    """
    number, unit = _split(value, "capacity", "24 or 24 GiB")
    factor = _SIZE_UNITS.get(unit)
    if factor is None:
        raise PlannedDeviceError(f"unknown capacity unit {unit!r}: use GiB, MiB or TiB (for example 24 GiB)")
    size = number * factor
    if size <= 0:
        raise PlannedDeviceError("the capacity must be more than zero")
    if size > MAX_CAPACITY_BYTES:
        raise PlannedDeviceError(f"{value!r} is more memory than any device has (the limit is 16 TiB)")
    return int(size)


def parse_bandwidth(value: float | int | str) -> float:
    """Bandwidth in bytes/s from GB/s (a number) or a string such as ``"1008 GB/s"`` or ``"3.35 TB/s"``."""
    number, unit = _split(value, "bandwidth", "936 or 936 GB/s")
    factor = _BW_UNITS.get(unit)
    if factor is None:
        raise PlannedDeviceError(f"unknown bandwidth unit {unit!r}: use GB/s or TB/s (for example 936 GB/s)")
    gb_s = number * factor
    if gb_s <= 0:
        raise PlannedDeviceError("the memory bandwidth must be more than zero")
    if gb_s > MAX_BANDWIDTH_GB_S:
        raise PlannedDeviceError(f"{value!r} is faster than any device (the limit is 100 TB/s); the unit is GB/s")
    return gb_s * catalogue.GB_S


def _split(value, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise PlannedDeviceError(f"the {what} must be a number, for example {example}")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)\s*", value)
        if not m:
            raise PlannedDeviceError(f"{value!r} is not a {what}: type a number, for example {example}")
        number, unit = float(m.group(1)), m.group(2).lower()
    else:
        raise PlannedDeviceError(f"the {what} must be a number, for example {example}")
    if not math.isfinite(number):
        raise PlannedDeviceError(f"the {what} must be a finite number")
    return number, unit


def _name(name: str | None, index: int) -> str:
    if name is not None:
        if not name.strip() or "," in name:
            raise PlannedDeviceError("a planned device needs a name without commas")
        return name.strip()
    return f"Planned{index}"


def planned_from_catalogue(entry: CatalogueEntry | str, name: str | None = None, index: int = 0) -> Device:
    """A planned device from a catalogue entry (or its id, e.g. ``"rtx-3090"``)."""
    if isinstance(entry, str):
        try:
            entry = catalogue.get(entry)
        except KeyError as exc:
            raise PlannedDeviceError(exc.args[0]) from None
    source = f"catalogue: {entry.name} (published specification)"
    warnings: tuple[str, ...] = ()
    if entry.unified:
        warnings = (
            "unified memory shared with the CPU: Metal lets llama.cpp use about two thirds to three quarters of "
            "it by default (raise it with sysctl iogpu.wired_limit_mb)",
        )
    return Device(
        name=_name(name, index),
        kind=DeviceKind.PLANNED,
        description=entry.name,
        total_bytes=entry.memory_bytes,
        free_bytes=entry.memory_bytes,
        bandwidth_bytes_per_s=entry.bandwidth_bytes_per_s,
        name_guessed=True,
        sources={"name": "planned", "total": source, "free": "planned: all free", "bandwidth": source},
        warnings=warnings,
        vendor=entry.vendor,
    )


def planned_device(
    capacity: float | int | str,
    bandwidth: float | int | str,
    description: str = "Planned GPU",
    name: str | None = None,
    index: int = 0,
) -> Device:
    """A planned device from a typed capacity (GiB) and bandwidth (GB/s).

    Raises :class:`PlannedDeviceError` with a message to show the user.
    """
    total = parse_capacity(capacity)
    bw = parse_bandwidth(bandwidth)
    return Device(
        name=_name(name, index),
        kind=DeviceKind.PLANNED,
        description=description.strip() or "Planned GPU",
        total_bytes=total,
        free_bytes=total,
        bandwidth_bytes_per_s=bw,
        name_guessed=True,
        sources={
            "name": "planned",
            "total": "typed by the user",
            "free": "planned: all free",
            "bandwidth": "typed by the user",
        },
    )
