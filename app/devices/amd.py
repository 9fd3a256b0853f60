"""AMD GPUs on Linux through the amdgpu driver's sysfs files.

Reads ``/sys/class/drm/card*/device/``: ``vendor`` (``0x1002``),
``mem_info_vram_total``/``mem_info_vram_used`` (bytes), ``gpu_busy_percent``,
``product_name`` (only some cards have it), the PCI link attributes
(``current_link_speed``/``width``, ``max_link_speed``/``width``),
``numa_node`` and ``hwmon/hwmon*/temp1_input`` (m°C) and ``power1_average``
(µW).  The root is injectable so tests use a fake tree.  sysfs does not
expose the memory bus width, so bandwidth comes from the catalogue when the
product name is known.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from app.devices import catalogue
from app.devices.gpu import PhysicalGpu, normalise_bus_id, pcie_warnings, read_text
from app.devices.records import GiB, PcieLink

log = logging.getLogger(__name__)

AMD_VENDOR = "0x1002"
_GT_PER_GEN = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
IGPU_VRAM_LIMIT = 2 * GiB  # APUs carve out at most a few hundred MiB to 2 GiB of "VRAM"


def _int(path: Path) -> int | None:
    text = read_text(path)
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def _gen(text: str | None) -> int | None:
    """``16.0 GT/s PCIe`` -> 4."""
    if not text:
        return None
    m = re.match(r"([\d.]+)\s*GT/s", text)
    return _GT_PER_GEN.get(m.group(1)) if m else None


def _bus_id(device_dir: Path) -> str | None:
    uevent = read_text(device_dir / "uevent") or ""
    m = re.search(r"^PCI_SLOT_NAME=(\S+)$", uevent, re.MULTILINE)
    if m:
        return normalise_bus_id(m.group(1))
    try:
        return normalise_bus_id(os.path.basename(os.path.realpath(device_dir)))
    except OSError:
        return None


def _hwmon(device_dir: Path) -> tuple[float | None, float | None]:
    temp = power = None
    for hw in sorted((device_dir / "hwmon").glob("hwmon*")):
        t = _int(hw / "temp1_input")
        p = _int(hw / "power1_average")
        if p is None:
            p = _int(hw / "power1_input")
        temp = t / 1000.0 if t is not None else temp
        power = p / 1e6 if p is not None else power
    return temp, power


def card_number(path: Path) -> int:
    return int(path.name[4:])


def read_amd(sysfs_root: str | Path = "/") -> tuple[PhysicalGpu, ...]:
    """Every amdgpu card under ``<root>/sys/class/drm``, in card order."""
    drm = Path(sysfs_root) / "sys/class/drm"
    cards = sorted((p for p in drm.glob("card*") if re.fullmatch(r"card\d+", p.name)), key=card_number)
    out: list[PhysicalGpu] = []
    for card in cards:
        dev = card / "device"
        if (read_text(dev / "vendor") or "").lower() != AMD_VENDOR:
            continue
        out.append(_read_card(dev, len(out)))
    return tuple(out)


def _read_card(dev: Path, index: int) -> PhysicalGpu:
    errors: dict[str, str] = {}
    total = _int(dev / "mem_info_vram_total")
    used = _int(dev / "mem_info_vram_used")
    if total is None:
        errors["memory"] = "mem_info_vram_total is missing: not an amdgpu device, or the driver is too old"
    busy = _int(dev / "gpu_busy_percent")
    product = read_text(dev / "product_name") or None
    device_id = read_text(dev / "device")
    name = product or f"AMD GPU {device_id or '?'}"
    link = PcieLink(
        _gen(read_text(dev / "current_link_speed")),
        _int(dev / "current_link_width"),
        _gen(read_text(dev / "max_link_speed")),
        _int(dev / "max_link_width"),
    )
    node = _int(dev / "numa_node")
    temp, power = _hwmon(dev)
    bus = _bus_id(dev)
    bandwidth = source = None
    entry = catalogue.lookup(product, total) if product else None
    if entry is not None:
        bandwidth = entry.bandwidth_bytes_per_s
        source = f"catalogue: {entry.name} (published specification)"
    integrated = total is not None and total <= IGPU_VRAM_LIMIT
    return PhysicalGpu(
        vendor="amd",
        index=index,
        name=name,
        pci_bus_id=bus,
        total_bytes=total,
        used_bytes=used,
        free_bytes=total - used if total is not None and used is not None else None,
        bandwidth_bytes_per_s=bandwidth,
        bandwidth_source=source,
        pcie=link if any(v is not None for v in vars(link).values()) else None,
        numa_node=node if node is not None and node >= 0 else None,
        temperature_c=temp,
        power_w=power,
        utilisation_percent=float(busy) if busy is not None else None,
        integrated=integrated,
        errors=errors,
        warnings=pcie_warnings(link) if not integrated else (),
        source="sysfs",
    )
