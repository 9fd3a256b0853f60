"""The host: RAM, cores, NUMA nodes (psutil and ``/sys/devices/system/node``) and the CPU model."""

from __future__ import annotations

import logging
import platform
import re
import subprocess
import sys
from pathlib import Path

import psutil

from app.devices.gpu import read_text
from app.devices.records import Device, DeviceKind, HostInfo, NumaNode

log = logging.getLogger(__name__)


def cpu_model(sysfs_root: str | Path = "/") -> str | None:
    """The CPU model name: ``/proc/cpuinfo`` on Linux, sysctl on macOS, else ``platform.processor()``."""
    text = read_text(Path(sysfs_root) / "proc/cpuinfo")
    if text:
        for key in ("model name", "Hardware", "Processor", "cpu model"):
            m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
            if m:
                return m.group(1).strip()
    if sys.platform == "darwin" and str(sysfs_root) == "/":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or None


def numa_nodes(sysfs_root: str | Path = "/") -> tuple[NumaNode, ...]:
    """NUMA nodes from ``/sys/devices/system/node/node*`` (empty off Linux or on a non-NUMA kernel)."""
    base = Path(sysfs_root) / "sys/devices/system/node"
    nodes = []
    for path in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        mem = None
        meminfo = read_text(path / "meminfo") or ""
        m = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo)
        if m:
            mem = int(m.group(1)) * 1024
        nodes.append(NumaNode(int(path.name[4:]), read_text(path / "cpulist"), mem))
    return tuple(nodes)


def read_host(sysfs_root: str | Path = "/") -> HostInfo:
    vm = psutil.virtual_memory()
    return HostInfo(
        cpu_model=cpu_model(sysfs_root),
        physical_cores=psutil.cpu_count(logical=False),
        logical_cores=psutil.cpu_count(logical=True),
        ram_total_bytes=vm.total,
        ram_available_bytes=vm.available,
        numa_nodes=numa_nodes(sysfs_root),
    )


def cpu_device(host: HostInfo) -> Device:
    """The ``CPU`` device llama.cpp always has (``--list-devices`` never prints it)."""
    cores = f"{host.physical_cores} cores" if host.physical_cores else None
    description = ", ".join(x for x in (host.cpu_model, cores) if x) or "CPU"
    warnings: tuple[str, ...] = ()
    if len(host.numa_nodes) > 1:
        warnings = (
            f"{len(host.numa_nodes)} NUMA nodes: consider llama.cpp --numa distribute, or pin it to one node with numactl",
        )
    return Device(
        name="CPU",
        kind=DeviceKind.CPU,
        description=description,
        total_bytes=host.ram_total_bytes,
        free_bytes=host.ram_available_bytes,
        name_guessed=False,
        sources={
            "name": "llama.cpp always has a CPU device",
            "total": "psutil total RAM",
            "free": "psutil available RAM",
        },
        warnings=warnings,
    )
