"""A physical GPU as the driver reports it (NVML or AMD sysfs), before matching to llama.cpp.

Also the helpers both vendors share: PCI bus id normalisation, the NUMA
node from sysfs and the PCIe link warnings.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from app.devices.records import GpuProcess, PcieLink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhysicalGpu:
    """One GPU from a vendor tool.  ``index`` is the vendor's own index (NVML: PCI order)."""

    vendor: str  # "nvidia" or "amd"
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None  # normalised 0000:01:00.0
    total_bytes: int | None = None
    used_bytes: int | None = None
    free_bytes: int | None = None
    bandwidth_bytes_per_s: float | None = None
    bandwidth_source: str | None = None
    pcie: PcieLink | None = None
    numa_node: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    utilisation_percent: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    integrated: bool = False
    mig_enabled: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    source: str = ""  # "NVML", "sysfs"


_BUS = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def normalise_bus_id(value: str | bytes | None) -> str | None:
    """PCI bus id in the Linux sysfs form ``0000:01:00.0`` (lower case, 4-digit domain).

    NVML prints ``00000000:01:00.0``, CUDA ``0000:01:00.0``, some tools omit
    the domain; all become the same string.  Returns None for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    m = _BUS.match(value.strip().rstrip("\x00"))
    if not m:
        return None
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{int(m['bus'], 16):02x}:{int(m['dev'], 16):02x}.{m['fn']}"


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def numa_node(bus_id: str | None, sysfs_root: str | Path = "/") -> int | None:
    """The NUMA node of a PCI device (``/sys/bus/pci/devices/<bus id>/numa_node``); -1 means none."""
    bus = normalise_bus_id(bus_id)
    if bus is None:
        return None
    text = read_text(Path(sysfs_root) / "sys/bus/pci/devices" / bus / "numa_node")
    try:
        node = int(text) if text is not None else -1
    except ValueError:
        return None
    return node if node >= 0 else None


def pcie_warnings(link: PcieLink | None) -> tuple[str, ...]:
    """Warnings for a link that is narrower than x8 or slower than the best generation it supports."""
    if link is None:
        return ()
    out = []
    if link.current_width is not None and 0 < link.current_width < 8:
        limit = f" (the card supports x{link.max_width})" if link.max_width else ""
        out.append(
            f"PCIe link runs at x{link.current_width}{limit}: weights and activations cross it slowly; "
            "use a x8 or x16 slot"
        )
    if link.current_gen and link.max_gen and link.current_gen < link.max_gen:
        out.append(
            f"PCIe link at generation {link.current_gen} of {link.max_gen}: GPUs lower the link speed when idle, "
            "so check again under load; if it stays low, check the slot, riser and BIOS settings"
        )
    return tuple(out)
