"""NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

The module is injectable: tests pass an object with the same functions.  A
missing library, a driver that is not loaded or a GPU that falls off the bus
never raises: whole-source failures come back as a message, per-GPU and
per-fact failures are recorded in :attr:`PhysicalGpu.errors`.

Memory bandwidth is ``bus width (bits) / 8 x max memory clock x 2``: NVML
reports the memory clock at half the transfer rate for GDDR5/5X/6/6X/7 and
HBM alike (an RTX 4090: 384 bit, 10501 MHz -> 1008 GB/s; an A100 40 GB:
5120 bit, 1215 MHz -> 1555 GB/s; an RTX 5090: 512 bit, 14001 MHz ->
1792 GB/s, the published figures).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.devices.gpu import PhysicalGpu, normalise_bus_id, numa_node, pcie_warnings
from app.devices.records import GpuProcess, PcieLink

log = logging.getLogger(__name__)

DDR_FACTOR = 2  # NVML's memory clock is half the data rate (double data rate)

# NVML return codes (nvml.h); a fake module may define only NVMLError with .value.
_LIBRARY_NOT_FOUND = 12
_DRIVER_NOT_LOADED = 9
_NO_PERMISSION = 4
_GPU_IS_LOST = 15
_RM_VERSION_MISMATCH = 18
_NOT_SUPPORTED = 3
_FUNCTION_NOT_FOUND = 13


def load_nvml(nvml: Any = None) -> tuple[Any, str | None]:
    """The NVML module to use (the injected one, else ``pynvml``) or an error message."""
    if nvml is not None:
        return nvml, None
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py): NVIDIA GPUs are not read"
    return pynvml, None


def nvml_error_message(exc: BaseException) -> str:
    """A message a user can act on for an NVML error."""
    code = getattr(exc, "value", None)
    if code == _LIBRARY_NOT_FOUND:
        return "the NVIDIA management library (libnvidia-ml) was not found: no NVIDIA driver is installed"
    if code == _DRIVER_NOT_LOADED:
        return "the NVIDIA driver is not loaded (no NVIDIA GPU, or the kernel module failed to load)"
    if code == _RM_VERSION_MISMATCH:
        return "the NVIDIA driver and its library have different versions: reboot after a driver update"
    if code == _NO_PERMISSION:
        return "no permission to query the NVIDIA driver"
    if code == _GPU_IS_LOST:
        return "the GPU is lost (fell off the bus or hung): it needs a reset or a reboot"
    if code == _NOT_SUPPORTED:
        return "not supported on this GPU"
    if code == _FUNCTION_NOT_FOUND:
        return "not available in this driver version"
    text = str(exc) or type(exc).__name__
    return f"NVML error: {text}"


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class _Reader:
    """Calls NVML functions, recording failures per fact instead of raising."""

    def __init__(self, nvml: Any):
        self.nvml = nvml
        self.error_type = getattr(nvml, "NVMLError", Exception)
        self.errors: dict[str, str] = {}

    def call(self, fact: str, name: str, *args: Any, optional: bool = False) -> Any:
        fn: Callable | None = getattr(self.nvml, name, None)
        if fn is None:
            if not optional:
                self.errors[fact] = f"{name} is not available in this NVML"
            return None
        try:
            return fn(*args)
        except self.error_type as exc:
            if not (optional and getattr(exc, "value", None) in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND)):
                self.errors[fact] = nvml_error_message(exc)
            return None


@dataclass(frozen=True)
class NvidiaReport:
    gpus: tuple[PhysicalGpu, ...]
    error: str | None = None  # the whole source failed (no library, no driver)
    driver_version: str | None = None


def read_nvidia(nvml: Any = None, sysfs_root: str | Path = "/", process_names: bool = True) -> NvidiaReport:
    """Read every NVIDIA GPU NVML sees (all of them: CUDA_VISIBLE_DEVICES does not apply to NVML)."""
    mod, err = load_nvml(nvml)
    if mod is None:
        return NvidiaReport((), err)
    error_type = getattr(mod, "NVMLError", Exception)
    try:
        mod.nvmlInit()
    except error_type as exc:
        return NvidiaReport((), nvml_error_message(exc))
    except OSError as exc:  # a broken library file
        return NvidiaReport((), f"cannot load the NVIDIA management library: {exc}")
    try:
        reader = _Reader(mod)
        driver = reader.call("driver", "nvmlSystemGetDriverVersion", optional=True)
        count = reader.call("count", "nvmlDeviceGetCount")
        if count is None:
            return NvidiaReport((), f"cannot count NVIDIA GPUs: {reader.errors.get('count')}")
        gpus = tuple(read_gpu(mod, i, sysfs_root, process_names) for i in range(count))
        return NvidiaReport(gpus, None, _text(driver) if driver is not None else None)
    finally:
        try:
            mod.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down must not hide what was read
            log.debug("nvmlShutdown failed", exc_info=True)


def read_gpu(nvml: Any, index: int, sysfs_root: str | Path = "/", process_names: bool = True) -> PhysicalGpu:
    """Every fact NVML gives about GPU ``index``; failures land in ``errors``."""
    r = _Reader(nvml)
    handle = r.call("handle", "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        return PhysicalGpu("nvidia", index, f"NVIDIA GPU {index}", errors=dict(r.errors), source="NVML")
    name = r.call("name", "nvmlDeviceGetName", handle)
    uuid = r.call("uuid", "nvmlDeviceGetUUID", handle)
    pci = r.call("pci", "nvmlDeviceGetPciInfo", handle)
    bus_id = bus_id_of(pci)
    mem = r.call("memory", "nvmlDeviceGetMemoryInfo", handle)
    util = r.call("utilisation", "nvmlDeviceGetUtilizationRates", handle)
    width = r.call("bandwidth", "nvmlDeviceGetMemoryBusWidth", handle)
    clock = r.call("bandwidth", "nvmlDeviceGetMaxClockInfo", handle, getattr(nvml, "NVML_CLOCK_MEM", 2))
    link = PcieLink(
        r.call("pcie", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        r.call("pcie", "nvmlDeviceGetCurrPcieLinkWidth", handle),
        r.call("pcie", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        r.call("pcie", "nvmlDeviceGetMaxPcieLinkWidth", handle),
    )
    temp = r.call("temperature", "nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
    power_mw = r.call("power", "nvmlDeviceGetPowerUsage", handle)
    procs = r.call("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    mig = r.call("mig", "nvmlDeviceGetMigMode", handle, optional=True)

    bandwidth = source = None
    if width and clock:
        bandwidth = width / 8 * clock * 1e6 * DDR_FACTOR
        source = f"NVML bus width x memory clock ({width} bit x {clock} MHz x {DDR_FACTOR})"
    mig_enabled = bool(mig and (mig[0] if isinstance(mig, (tuple, list)) else mig) == 1)
    warnings = list(pcie_warnings(link))
    if mig_enabled:
        warnings.append("MIG is enabled: CUDA sees MIG instances, not the whole GPU")
    return PhysicalGpu(
        vendor="nvidia",
        index=index,
        name=_text(name) if name is not None else f"NVIDIA GPU {index}",
        uuid=_text(uuid) if uuid is not None else None,
        pci_bus_id=bus_id,
        total_bytes=getattr(mem, "total", None),
        used_bytes=getattr(mem, "used", None),
        free_bytes=getattr(mem, "free", None),
        bandwidth_bytes_per_s=bandwidth,
        bandwidth_source=source,
        pcie=link if any(v is not None for v in vars(link).values()) else None,
        numa_node=numa_node(bus_id, sysfs_root),
        temperature_c=float(temp) if temp is not None else None,
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        utilisation_percent=float(util.gpu) if util is not None else None,
        processes=tuple(_process(p, process_names) for p in procs or ()),
        mig_enabled=mig_enabled,
        errors=dict(r.errors),
        warnings=tuple(warnings),
        source="NVML",
    )


def bus_id_of(pci: Any) -> str | None:
    """The normalised bus id of an ``nvmlPciInfo_t`` (``busId``, else the legacy field)."""
    if pci is None:
        return None
    return normalise_bus_id(getattr(pci, "busId", None)) or normalise_bus_id(getattr(pci, "busIdLegacy", None))


def _process(p: Any, with_name: bool) -> GpuProcess:
    pid = int(getattr(p, "pid", 0))
    used = getattr(p, "usedGpuMemory", None)
    name = None
    if with_name:
        try:
            import psutil

            name = psutil.Process(pid).name()
        except Exception:  # noqa: BLE001 - another user's or a finished process
            name = None
    return GpuProcess(pid, name, int(used) if isinstance(used, int) else None)
