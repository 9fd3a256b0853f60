"""Put every source together: llama.cpp's listing, RPC hosts, NVML, AMD sysfs and the host.

:func:`detect` never raises for a failing source: each failure becomes a
:class:`SourceError` in the result, and the other sources still report.
Run it off the GUI thread: it starts ``llama-server`` (once, plus once per
RPC host) and, with NVIDIA GPUs, a short CUDA driver probe.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.devices import catalogue
from app.devices.amd import read_amd
from app.devices.cuda import CudaDevice, CudaProbeError, probe_cuda, visible_order
from app.devices.gpu import PhysicalGpu
from app.devices.host import cpu_device, read_host
from app.devices.listing import DEFAULT_TIMEOUT_S, ListedDevice, Listing, ListingError, run_list_devices
from app.devices.match import Match, match_by_name, match_cuda
from app.devices.nvidia import read_nvidia
from app.devices.records import DetectionResult, Device, DeviceKind, HostInfo, SourceError
from app.devices.rpc import ASSUMED, CONNECT_TIMEOUT_S, PROBE_TIMEOUT_S, RpcProbe, parse_endpoint, probe_rpc_hosts
from app.devices.rpc_protocol import query_limits
from app.errors import DetectError
from app.llamacpp.binaries import LlamaCppNotFound, find_tool

log = logging.getLogger(__name__)

LISTED = "llama.cpp --list-devices"
_IGPU_HINT = re.compile(r"\b(UHD|Iris|integrated)\b|Radeon(\(TM\))? Graphics|Radeon \d{3}M\b", re.IGNORECASE)


def rpc_from_env(env: Mapping[str, str]) -> list[str]:
    """The endpoints in ``LLAMA_ARG_RPC`` (what llama-server would add on its own)."""
    return [e.strip() for e in env.get("LLAMA_ARG_RPC", "").split(",") if e.strip()]


def detect(
    llama_dir: str | os.PathLike | None = None,
    rpc: Sequence[str] | None = None,
    nvml: Any = None,
    sysfs_root: str | Path = "/",
    env: Mapping[str, str] = os.environ,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    rpc_timeout: float = PROBE_TIMEOUT_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    cuda_probe: Callable[[Mapping[str, str]], Sequence[CudaDevice]] | None = probe_cuda,
    amd: bool | None = None,
    vulkan_probe: Callable[[Mapping[str, str]], Any] | None = None,
    rpc_limits: Callable[[str, int], Any] | None = query_limits,
) -> DetectionResult:
    """Detect the devices llama.cpp can use here, in llama.cpp's model-device order.

    Args:
        llama_dir: the configured llama.cpp folder (see :func:`find_tool`).
        rpc: ``host:port`` endpoints; None means those in ``LLAMA_ARG_RPC``.
        nvml: an NVML module (default ``pynvml``); tests inject a fake.
        sysfs_root: root for ``/sys`` and ``/proc`` reads.
        env: the environment llama.cpp will run with (CUDA_VISIBLE_DEVICES...).
        cuda_probe: asks the CUDA driver for PCI ids; None to skip it.
        amd: read AMD sysfs; default on Linux or with a non-default root.
        vulkan_probe: asks the Vulkan loader for the limits of llama.cpp's Vulkan devices (default
            :func:`app.devices.vulkan.probe_vulkan`); run only when llama.cpp lists a Vulkan device.
        rpc_limits: asks each listed RPC server for its buffers' alignment and largest size
            (:func:`app.devices.rpc_protocol.query_limits`); None to skip it.
    """
    env = dict(env)
    endpoints = list(rpc) if rpc is not None else rpc_from_env(env)
    errors: list[SourceError] = []

    try:
        host = read_host(sysfs_root)
    except Exception as exc:  # noqa: BLE001 - a broken /proc must not stop detection
        log.warning("host detection failed", exc_info=True)
        host = HostInfo()
        errors.append(SourceError("host", f"cannot read RAM and CPU details: {exc}"))

    nv = read_nvidia(nvml, sysfs_root)
    if nv.error:
        errors.append(SourceError("NVML", nv.error))
    gpus: list[PhysicalGpu] = list(nv.gpus)
    if amd if amd is not None else (sys.platform.startswith("linux") or str(sysfs_root) != "/"):
        try:
            gpus += read_amd(sysfs_root)
        except OSError as exc:
            errors.append(SourceError("AMD sysfs", f"cannot read /sys/class/drm: {exc}"))

    server: Path | None = None
    try:
        server = find_tool("llama-server", llama_dir).path
    except LlamaCppNotFound as exc:
        errors.append(SourceError("llama.cpp", f"{exc} Device names below are guessed."))

    nvidia = [g for g in gpus if g.vendor == "nvidia"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        probe_future = pool.submit(_probe, cuda_probe, env) if nvidia and cuda_probe is not None else None
        listing, rpc_probe, listing_error = _list(server, endpoints, env, timeout, rpc_timeout, connect_timeout)
        probe, probe_error = probe_future.result() if probe_future else (None, None)
    if listing_error:
        errors.append(SourceError("llama.cpp", listing_error))
    if rpc_probe is not None:
        errors += rpc_probe.errors
    if probe_error and listing is not None and any(d.backend == "CUDA" for d in listing.devices):
        errors.append(SourceError("CUDA driver", f"{probe_error}; CUDA devices were matched by name and order"))

    if listing is not None:
        devices, hidden = _from_listing(listing, rpc_probe, gpus, env, probe, errors)
        if any(d.backend == "Vulkan" for d in listing.devices):
            devices = _with_vulkan_limits(devices, env, vulkan_probe, errors)
        if rpc_limits is not None and any(d.rpc_endpoint and not d.warnings for d in devices):
            devices = _with_rpc_limits(devices, rpc_limits, errors)
    else:
        devices, hidden = _guessed(rpc_probe, gpus, env, probe)
    devices.append(cpu_device(host))
    return DetectionResult(
        devices=tuple(_order(devices)),
        host=host,
        hidden=tuple(hidden),
        rpc_hosts=rpc_probe.hosts if rpc_probe else (),
        errors=tuple(errors),
        llama_server=str(server) if server else None,
        llama_listed=listing is not None,
    )


def _with_vulkan_limits(devices: list[Device], env, vulkan_probe, errors: list[SourceError]) -> list[Device]:
    """Attach each Vulkan device's limits (the 128 MiB storage-buffer range of lavapipe, its alignments):
    they decide which weights llama.cpp leaves in host memory and where ops run. Without them, say so."""
    from app.devices.vulkan import probe_vulkan

    result: Any = None
    try:
        result = (vulkan_probe or (lambda e: probe_vulkan(env=e)))(env)
        problem = str(result.problem) if result.problem else ""
    except Exception as exc:  # noqa: BLE001 - a probe that fails must not stop detection
        result, problem = None, str(exc)
    out = []
    for d in devices:
        vk = result.by_llama_name(d.name) if result is not None and d.name.startswith("Vulkan") else None
        if vk is not None:
            host_align = vk.raw.min_memory_map_alignment or 0
            d = replace(
                d,
                max_tensor_bytes=vk.max_weight_bytes,
                refused_ops=tuple(sorted(vk.raw.refused_ops)),
                buffer_alignment=vk.alignment,
                max_buffer=vk.suballocation_block_size,
                host_alignment=host_align,
                host_max_buffer=vk.suballocation_block_size,
                sources={**d.sources, "limits": "Vulkan loader"},
            )
            if vk.raw.subgroup_size is None or vk.raw.subgroup_ops is None or vk.raw.subgroup_stages is None:
                errors.append(
                    SourceError(
                        "Vulkan",
                        f"subgroup facts of {d.name} unknown (the loader did not report "
                        "VkPhysicalDeviceSubgroupProperties): DSV4_HC_COMB is assumed to run on it, as it does with "
                        "16+ full subgroup lanes; deepseek4, hy_v4 and glm5-next compute may differ, use Verify",
                    )
                )
        elif d.name.startswith("Vulkan"):
            why = problem or "the Vulkan loader did not report this device"
            errors.append(
                SourceError(
                    "Vulkan",
                    f"limits of {d.name} unknown ({why}): weights and ops above the driver's storage-buffer range "
                    "are estimated on the device although llama.cpp keeps them in host memory; use Verify",
                )
            )
        out.append(d)
    return out


def _with_rpc_limits(devices: list[Device], query, errors: list[SourceError]) -> list[Device]:
    """Attach each RPC device's buffer alignment and largest buffer, asked of its server in the RPC protocol
    (a Vulkan host: alignment 16-256 and 1 GiB buffers, so compute buffers above 1 GiB are chunked). The hosts
    are asked in parallel, after llama-server's listing let go of them; a host that does not answer is said."""
    hosts = sorted({d.rpc_endpoint for d in devices if d.rpc_endpoint and not d.warnings})

    def ask(text: str):
        try:
            ep = parse_endpoint(text)
            return query(ep.host, ep.port), None
        except (OSError, DetectError) as exc:
            return None, str(exc)

    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        answers = dict(zip(hosts, pool.map(ask, hosts)))
    out = []
    for d in devices:
        limits, problem = answers.get(d.rpc_endpoint or "", (None, None)) if not d.warnings else (None, None)
        remote = None
        if limits is not None:
            remote = next((r for r in limits.devices if r.index == d.rpc_device_index), None)
            if remote is None:
                problem = f"the server reports {len(limits.devices)} devices, none with index {d.rpc_device_index}"
        if remote is not None and limits is not None:
            d = replace(
                d,
                buffer_alignment=remote.alignment,
                max_buffer=remote.max_size,
                sources={
                    **d.sources,
                    "limits": f"RPC server {d.rpc_endpoint} (protocol {'.'.join(map(str, limits.version))})",
                },
            )
        elif problem:
            errors.append(
                SourceError(
                    "RPC",
                    f"buffer limits of {d.name} ({d.rpc_endpoint}) unknown ({problem}): its compute buffer is "
                    "estimated as one buffer with alignment 32, as a CPU or CUDA server gives; a Vulkan server "
                    "splits buffers above 1 GiB; use Verify",
                )
            )
        out.append(d)
    return out


def _probe(cuda_probe, env) -> tuple[Sequence[CudaDevice] | None, str | None]:
    try:
        return list(cuda_probe(env)), None
    except CudaProbeError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - an injected or broken probe must not stop detection
        log.warning("CUDA probe failed", exc_info=True)
        return None, f"the CUDA driver probe failed: {exc}"


def _list(server, endpoints, env, timeout, rpc_timeout, connect_timeout):
    """(local listing or None, RPC probe or None, error message or None)."""
    rpc_probe = None
    if endpoints:
        rpc_probe = probe_rpc_hosts(endpoints, server, env, connect_timeout, rpc_timeout)
        if rpc_probe.listing is not None:
            return rpc_probe.listing, rpc_probe, None
    if server is None:
        return None, rpc_probe, None
    try:
        return run_list_devices(server, [], env, timeout), rpc_probe, None
    except ListingError as exc:
        return None, rpc_probe, f"{exc}. Device names below are guessed."


def _kind(dev: ListedDevice, gpu: PhysicalGpu | None) -> tuple[str, str]:
    if dev.backend == "RPC":
        return DeviceKind.RPC, "llama.cpp RPC device"
    if dev.backend in ("BLAS", "ACCEL") or (dev.total_mib == 0 and dev.free_mib == 0 and not dev.name[-1:].isdigit()):
        return DeviceKind.ACCEL, "accelerator: llama.cpp reports no memory for it"
    if (gpu is not None and gpu.integrated) or _IGPU_HINT.search(dev.description):
        return DeviceKind.IGPU, "guessed from the description (--list-devices does not print the device type)"
    return DeviceKind.GPU, "llama.cpp GPU backend"


def _rpc_devices(rpc_probe: RpcProbe | None) -> list[Device]:
    out = []
    for d in rpc_probe.devices if rpc_probe else ():
        if d.assumed:
            out.append(
                Device(
                    name=d.listed.name,
                    kind=DeviceKind.RPC,
                    description=d.endpoint,
                    name_guessed=True,
                    sources={
                        "name": "assumed: one device on this host, numbered like llama.cpp "
                        "(one RPC counter across the hosts in --rpc order)",
                        "total": "unknown: llama.cpp did not list this host",
                        "free": "unknown: llama.cpp did not list this host",
                    },
                    rpc_endpoint=d.endpoint,
                    rpc_device_index=0,
                    warnings=(ASSUMED,),
                )
            )
            continue
        name_source = (
            "llama.cpp --rpc (all reachable hosts) --list-devices"
            if d.name_from_llama
            else "numbered like llama.cpp (one RPC counter across the hosts in --rpc order)"
        )
        out.append(
            Device(
                name=d.listed.name,
                kind=DeviceKind.RPC,
                description=d.listed.description,
                total_bytes=d.listed.total_bytes,
                free_bytes=d.listed.free_bytes,
                name_guessed=not d.name_from_llama,
                sources={
                    "name": name_source,
                    "total": f"{LISTED} (reported by the RPC server)",
                    "free": f"{LISTED} (reported by the RPC server)",
                },
                rpc_endpoint=d.endpoint,
                rpc_device_index=d.local_index,
            )
        )
    return out


def _from_listing(listing: Listing, rpc_probe, gpus, env, probe, errors) -> tuple[list[Device], list[Device]]:
    nvidia = [g for g in gpus if g.vendor == "nvidia"]
    amd = [g for g in gpus if g.vendor == "amd"]
    cuda = match_cuda(listing.devices, nvidia, env, probe)
    matches: dict[str, Match] = dict(cuda.matches)
    matches.update(match_by_name(listing.devices, amd, "ROCm"))
    taken = [m.gpu for m in matches.values() if m.gpu is not None]
    matches.update(match_by_name(listing.devices, gpus, "Vulkan", taken))
    for note in cuda.notes:
        errors.append(SourceError("CUDA_VISIBLE_DEVICES", note))
    if listing.unparsed:
        errors.append(SourceError("llama.cpp", f"unrecognised --list-devices lines: {list(listing.unparsed)}"))

    devices = _rpc_devices(rpc_probe)
    for dev in listing.devices:
        if dev.backend == "RPC":
            continue  # RPC devices come from the probe, tied to their host
        match = matches.get(dev.name, Match(None))
        kind, kind_source = _kind(dev, match.gpu)
        sources = {"name": LISTED, "description": LISTED, "total": LISTED, "free": LISTED, "kind": kind_source}
        devices.append(
            _device(dev.name, kind, dev.description, dev.total_bytes, dev.free_bytes, False, sources, match.gpu, match)
        )

    used = {id(m.gpu) for m in matches.values() if m.gpu is not None}
    hidden = []
    cuda_hidden = {id(g) for g in cuda.hidden}
    for gpu in gpus:
        if id(gpu) in used:
            continue
        if id(gpu) in cuda_hidden and any(d.backend == "CUDA" for d in listing.devices):
            why = "hidden from CUDA (CUDA_VISIBLE_DEVICES): llama.cpp will not use it"
        else:
            why = "not listed by llama.cpp: this build has no backend for it, or the backend cannot see it"
        hidden.append(_physical_device(gpu, "", True, {"name": "not a llama.cpp device"}, (why,)))
    return devices, hidden


def _guessed(rpc_probe, gpus, env, probe) -> tuple[list[Device], list[Device]]:
    """Devices from NVML/sysfs alone, named the way llama.cpp's CUDA/ROCm backends would name them."""
    devices = _rpc_devices(rpc_probe)
    hidden = []
    nvidia = [g for g in gpus if g.vendor == "nvidia"]
    notes: tuple[str, ...]
    if probe is not None:
        by_bus = {g.pci_bus_id: g for g in nvidia}
        visible = [by_bus[c.pci_bus_id] for c in probe if c.pci_bus_id in by_bus]
        hidden_nv = [g for g in nvidia if g not in visible]
        how, notes = "guessed: CUDA index from the CUDA driver (llama.cpp was not run)", ()
    else:
        order = visible_order(nvidia, env)
        visible, hidden_nv, notes = list(order.visible), list(order.hidden), order.notes
        how = f"guessed: CUDA order from {order.source} and PCI bus order" + ("" if order.certain else " (uncertain)")
    for i, gpu in enumerate(visible):
        devices.append(_physical_device(gpu, f"CUDA{i}", True, {"name": how}, notes))
    for gpu in hidden_nv:
        hidden.append(
            _physical_device(
                gpu,
                "",
                True,
                {"name": "not a llama.cpp device"},
                ("hidden from CUDA (CUDA_VISIBLE_DEVICES): llama.cpp will not use it",),
            )
        )
    amd = sorted((g for g in gpus if g.vendor == "amd"), key=lambda g: (g.pci_bus_id or "~", g.index))
    for i, gpu in enumerate(g for g in amd if not g.integrated):
        devices.append(_physical_device(gpu, f"ROCm{i}", True, {"name": "guessed: ROCm order = PCI bus order"}))
    for gpu in (g for g in amd if g.integrated):
        hidden.append(
            _physical_device(
                gpu,
                "",
                True,
                {"name": "not a llama.cpp device"},
                ("integrated GPU: llama.cpp uses it (through Vulkan) only when there is no discrete GPU",),
            )
        )
    return devices, hidden


def _physical_device(gpu: PhysicalGpu, name: str, guessed: bool, sources: dict, warnings=()) -> Device:
    src = "NVML memory info" if gpu.vendor == "nvidia" else "sysfs mem_info_vram_total/used"
    sources = {**sources, "description": gpu.source, "total": src, "free": src}
    kind = DeviceKind.IGPU if gpu.integrated else DeviceKind.GPU
    return _device(
        name, kind, gpu.name, gpu.total_bytes, gpu.free_bytes, guessed, sources, gpu, Match(gpu, None, tuple(warnings))
    )


def _device(name, kind, description, total, free, guessed, sources, gpu: PhysicalGpu | None, match: Match) -> Device:
    sources = dict(sources)
    warnings = list(match.warnings)
    bandwidth = None
    if gpu is not None and gpu.bandwidth_bytes_per_s:
        bandwidth = gpu.bandwidth_bytes_per_s
        sources["bandwidth"] = gpu.bandwidth_source or gpu.source
    else:
        entry = catalogue.lookup(description, total)
        if entry is None and gpu is not None:
            entry = catalogue.lookup(gpu.name, gpu.total_bytes)
        if entry is not None:
            bandwidth = entry.bandwidth_bytes_per_s
            sources["bandwidth"] = f"catalogue: {entry.name} (published specification)"
    if gpu is None:
        return Device(name, kind, description, total, free, bandwidth, guessed, sources, warnings=tuple(warnings))
    if match.method:
        sources["match"] = match.method
    sources.setdefault("telemetry", gpu.source)
    warnings += [w for w in gpu.warnings if w not in warnings]
    return Device(
        name=name,
        kind=kind,
        description=description,
        total_bytes=total,
        free_bytes=free,
        bandwidth_bytes_per_s=bandwidth,
        name_guessed=guessed,
        sources=sources,
        warnings=tuple(warnings),
        errors=dict(gpu.errors),
        vendor=gpu.vendor,
        uuid=gpu.uuid,
        pci_bus_id=gpu.pci_bus_id,
        pcie=gpu.pcie,
        numa_node=gpu.numa_node,
        temperature_c=gpu.temperature_c,
        power_w=gpu.power_w,
        utilisation_percent=gpu.utilisation_percent,
        processes=gpu.processes,
    )


def _order(devices: list[Device]) -> list[Device]:
    """llama.cpp's model order (``llama_prepare_model_devices``): RPC, GPUs, iGPUs only without a GPU.

    After them, for display: iGPUs llama.cpp skips by default, GPUs it
    already uses through another backend, accelerators, then the CPU.
    """
    dup = "the same GPU is also listed by another backend: llama.cpp uses it only once by default"
    rpc = [d for d in devices if d.kind == DeviceKind.RPC]
    gpu = [d for d in devices if d.kind == DeviceKind.GPU and dup not in d.warnings]
    again = [d for d in devices if d.kind == DeviceKind.GPU and dup in d.warnings]
    igpu = [d for d in devices if d.kind == DeviceKind.IGPU]
    if gpu:
        note = "integrated GPU: llama.cpp uses it only when there is no discrete GPU (name it with -dev to use it)"
        igpu = [replace(d, warnings=d.warnings + (note,)) for d in igpu]
        models = rpc + gpu + igpu
    else:
        models = rpc + igpu
    rest = [d for d in devices if d.kind not in (DeviceKind.RPC, DeviceKind.GPU, DeviceKind.IGPU, DeviceKind.CPU)]
    cpu = [d for d in devices if d.kind == DeviceKind.CPU]
    return models + again + rest + cpu
