"""``layerdeck devices``: print what detection finds, as a table or as JSON.

Usage::

    layerdeck devices [--json] [--rpc HOST:PORT[,HOST:PORT...]] [--llama-dir DIR] [--timeout S]
    python -m app.cli.devices [same options]

Exit status: 0, or 1 when an ``--rpc`` host did not answer (so scripts can
check a cluster), 2 for bad arguments.

JSON schema (``"schema": "layerdeck.devices/1"``; sizes in bytes, bandwidth
in bytes/s, null where unknown)::

    {
      "schema": "layerdeck.devices/1",
      "devices": [Device, ...],        # llama.cpp model order: RPC, GPUs, (iGPUs), then accelerators, CPU
      "hidden": [Device, ...],         # GPUs the driver sees but llama.cpp will not use ("name": "")
      "host": {"cpu_model": str, "physical_cores": int, "logical_cores": int,
               "ram_total_bytes": int, "ram_available_bytes": int,
               "numa_nodes": [{"id": int, "cpus": str, "memory_total_bytes": int}]},
      "rpc_hosts": [{"endpoint": "host:port", "host": str, "port": int,
                     "status": "ok" | "invalid" | "duplicate" | "unreachable" | "refused" | "timed out"
                               | "no answer" | "not an rpc server" | "incompatible" | "error" | "not probed",
                     "error": str | null, "devices": ["RPC0", ...],
                     "server_command": ["ggml-rpc-server", "-H", ip, "-p", port], "server_note": str | null}],
      "llama_cpp": {"server": path | null, "listed": bool},   # listed: names come from --list-devices
      "errors": [{"source": str, "message": str}]              # a source that failed as a whole
    }

    Device = {
      "name": "CUDA0" | "ROCm0" | "Vulkan0" | "MTL0" | "SYCL0" | "RPC0" | "BLAS" | "CPU" | "Planned0" | "",
      "kind": "gpu" | "igpu" | "rpc" | "accel" | "cpu" | "planned",
      "description": str, "total_bytes": int | null, "free_bytes": int | null,
      "bandwidth_bytes_per_s": float | null,
      "name_guessed": bool,                  # true: llama.cpp did not report this name
      "sources": {fact: how it was obtained},   # facts: name, description, total, free, bandwidth, kind, match, telemetry
      "rpc_endpoint": "host:port" | null, "rpc_device_index": int | null,   # RPC<j>[host:port] buffer type index
      "warnings": [str], "errors": {fact: str},
      "vendor": "nvidia" | "amd" | null, "uuid": str | null, "pci_bus_id": "0000:01:00.0" | null,
      "pcie": {"current_gen": int, "current_width": int, "max_gen": int, "max_width": int} | null,
      "numa_node": int | null, "temperature_c": float | null, "power_w": float | null,
      "utilisation_percent": float | null,
      "processes": [{"pid": int, "name": str | null, "used_bytes": int | null}],
      "max_tensor_bytes": int | null,     # largest tensor an op may touch (Vulkan: the storage-buffer range)
      "refused_ops": [str],               # ops the backend refuses for the device's features (Vulkan subgroups)
      "buffer_alignment": int, "max_buffer": int,          # 0: the backend's default / unlimited
      "host_alignment": int, "host_max_buffer": int        # the host buffer type it brings (Vulkan_Host)
    }

The same schema is described in ``docs/cli-devices.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from app.devices.detect import detect
from app.devices.records import DetectionResult, Device, GiB

from .common import ERRORS, fail, print_json

log = logging.getLogger(__name__)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON (schema layerdeck.devices/1) instead of a table")
    p.add_argument(
        "--rpc",
        action="append",
        default=None,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="RPC servers to probe, in llama.cpp --rpc order (may be repeated)",
    )
    p.add_argument("--llama-dir", metavar="DIR", help="folder holding llama-server (default: the usual search)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="limit for each llama-server run")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``devices`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "devices",
        help="list the devices llama.cpp can use (GPUs, RPC hosts, CPU)",
        description="Detect GPUs, RPC hosts and the CPU, with llama.cpp's names for them.",
    )
    _add_arguments(p)
    p.set_defaults(func=run)
    return p


def _endpoints(values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [e.strip() for v in values for e in v.split(",")]  # an empty entry stays: it is reported as invalid


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Detect and print; the exit status is 1 when an RPC host failed."""
    out = out or sys.stdout
    try:
        result = detect(llama_dir=args.llama_dir, rpc=_endpoints(args.rpc), env=os.environ, timeout=args.timeout)
    except ERRORS as exc:
        return fail(exc)
    if args.json:
        print_json(result.to_dict(), out, indent=2)
    else:
        out.write(format_table(result))
    return 0 if all(h.ok for h in result.rpc_hosts) else 1


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GiB:.1f}"


def _mib(value: int) -> str:
    return f"{value / GiB:g} GiB" if value % GiB == 0 else f"{value / (1 << 20):,.0f} MiB"


def _gbs(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.0f}"


def _sources(d: Device) -> str:
    by_source: dict[str, list[str]] = {}
    for fact, source in d.sources.items():
        by_source.setdefault(source, []).append(fact)
    return "; ".join(f"{', '.join(facts)}: {source}" for source, facts in by_source.items())


def _rows(devices: Sequence[Device]) -> list[str]:
    header = ("NAME", "KIND", "DESCRIPTION", "TOTAL GiB", "FREE GiB", "BW GB/s")
    rows = [header] + [
        (
            (d.name or "-") + ("*" if d.name_guessed and d.name else ""),
            d.kind,
            d.description if len(d.description) <= 44 else d.description[:43] + "…",
            _gib(d.total_bytes),
            _gib(d.free_bytes),
            _gbs(d.bandwidth_bytes_per_s),
        )
        for d in devices
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) if i < 3 else r[i].rjust(widths[i]) for i in range(len(r))]
        lines.append("  ".join(cells).rstrip())
    for d in devices:
        label = d.name or d.description
        lines.append(f"  {label}: {_sources(d)}")
        if d.buffer_alignment or d.max_buffer or d.max_tensor_bytes:
            limits = [f"buffers aligned to {d.buffer_alignment or 'the default'} bytes"]
            limits.append(f"largest buffer {_mib(d.max_buffer)}" if d.max_buffer else "no largest buffer")
            if d.max_tensor_bytes:
                limits.append(f"ops on tensors up to {_mib(d.max_tensor_bytes)}")
            if d.refused_ops:
                limits.append(f"no {', '.join(sorted(d.refused_ops))} (its subgroups are too small)")
            lines.append(f"  {label}: {', '.join(limits)}")
        lines += [f"  {label}: warning: {w}" for w in d.warnings]
        lines += [f"  {label}: could not read {fact}: {msg}" for fact, msg in d.errors.items()]
        if d.pci_bus_id:
            extras = [f"PCI {d.pci_bus_id}"]
            if d.pcie and d.pcie.current_gen:
                extras.append(
                    f"PCIe gen{d.pcie.current_gen} x{d.pcie.current_width} (max gen{d.pcie.max_gen} x{d.pcie.max_width})"
                )
            if d.numa_node is not None:
                extras.append(f"NUMA node {d.numa_node}")
            if d.uuid:
                extras.append(d.uuid)
            lines.append(f"  {label}: {', '.join(extras)}")
    return lines


def format_table(result: DetectionResult) -> str:
    """The human-readable report ``layerdeck devices`` prints."""
    lines = []
    if result.llama_server:
        how = "names from --list-devices" if result.llama_listed else "listing failed, names guessed"
        lines.append(f"llama.cpp: {result.llama_server} ({how})")
    else:
        lines.append("llama.cpp: not found (names guessed)")
    lines.append("")
    lines += _rows(result.devices)
    if any(d.name_guessed for d in result.devices):
        lines.append("  * name guessed: llama.cpp did not report it")
    if result.hidden:
        lines += ["", "Not usable by llama.cpp:"] + _rows(result.hidden)
    h = result.host
    lines += [
        "",
        f"Host: {h.cpu_model or 'unknown CPU'}, {h.physical_cores} cores / {h.logical_cores} threads, "
        f"RAM {_gib(h.ram_total_bytes)} GiB ({_gib(h.ram_available_bytes)} GiB available), "
        f"{len(h.numa_nodes) or 1} NUMA node(s)",
    ]
    if result.rpc_hosts:
        lines += ["", "RPC hosts:"]
        for r in result.rpc_hosts:
            devices = f" -> {', '.join(r.devices)}" if r.devices else ""
            lines.append(f"  {r.endpoint}: {r.status}{devices}")
            if r.error:
                lines.append(f"    {r.error}")
            if r.server_command:
                lines.append(f"    run on that host: {' '.join(r.server_command)}")
            if r.server_note:
                lines.append(f"    note: {r.server_note}")
    if result.errors:
        lines += ["", "Sources that failed:"]
        lines += [f"  {e.source}: {e.message}" for e in result.errors]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.cli.devices", description=__doc__.split("\n")[0])
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
