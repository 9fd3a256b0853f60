"""Live readings while llama.cpp runs: GPU memory, load, temperature, power; host RAM/CPU; one process tree.

:class:`TelemetrySampler` is built once and then sampled every few hundred
milliseconds: NVML is initialised once and its device handles are kept, AMD
sysfs paths are found once, and psutil ``Process`` objects are kept so
``cpu_percent(interval=None)`` measures the time since the previous sample
without sleeping.  An NVML error on one GPU (a GPU that is lost mid-run) is
recorded in that GPU's reading; the other GPUs are still read.  Nothing
here raises once the sampler exists.  ``benchmarks/bench_telemetry.py``
prints the cost of one sample.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from app.devices.amd import AMD_VENDOR, card_number
from app.devices.gpu import normalise_bus_id, read_text
from app.devices.nvidia import bus_id_of, load_nvml, nvml_error_message
from app.devices.records import DetectionResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceReading:
    """One GPU at one instant.  ``key`` is its PCI bus id (or ``nvml:<i>`` when unknown)."""

    key: str
    name: str | None  # llama.cpp name, when the sampler was given one
    vendor: str
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilisation_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class HostReading:
    ram_total_bytes: int
    ram_used_bytes: int
    ram_available_bytes: int
    cpu_percent: float  # all cores together, 0..100


@dataclass(frozen=True)
class ProcessReading:
    """One process of the watched tree.  ``cpu_percent`` is psutil's: 100 = one full core."""

    pid: int
    name: str | None
    rss_bytes: int | None
    cpu_percent: float | None  # None on the first sample of a process
    error: str | None = None


@dataclass(frozen=True)
class TelemetrySample:
    time: float  # time.monotonic()
    devices: tuple[DeviceReading, ...]
    host: HostReading
    processes: tuple[ProcessReading, ...] = ()  # the watched PID first, then its children
    errors: tuple[str, ...] = ()  # a whole source failed (no NVML...)

    @property
    def process_rss_bytes(self) -> int:
        return sum(p.rss_bytes or 0 for p in self.processes)

    @property
    def process_cpu_percent(self) -> float:
        return sum(p.cpu_percent or 0.0 for p in self.processes)


def names_from(result: DetectionResult) -> dict[str, str]:
    """PCI bus id -> llama.cpp name, from a detection, to label readings."""
    return {d.pci_bus_id: d.name for d in result.devices if d.pci_bus_id and d.name}


class TelemetrySampler:
    """Cheap repeated sampling; see the module docstring.

    Args:
        nvml: an NVML module (default ``pynvml``); False to skip NVIDIA.
        sysfs_root: root for AMD sysfs reads.
        pid: the process whose tree to watch (a llama-server), or None.
        names: PCI bus id -> llama.cpp name, e.g. :func:`names_from`.
        amd: read AMD sysfs (default: when ``/sys/class/drm`` exists under the root).
    """

    def __init__(
        self,
        nvml: Any = None,
        sysfs_root: str | Path = "/",
        pid: int | None = None,
        names: Mapping[str, str] | None = None,
        amd: bool | None = None,
    ):
        self._names = dict(names or {})
        self._errors: list[str] = []
        self._nvml = None
        self._handles: list[tuple[str, Any]] = []
        if nvml is not False:
            self._open_nvml(nvml)
        drm = Path(sysfs_root) / "sys/class/drm"
        self._amd_cards: list[tuple[str, Path, Path | None]] = []
        if amd or (amd is None and drm.is_dir()):
            self._find_amd(drm)
        self._procs: dict[int, psutil.Process] = {}
        self._root: psutil.Process | None = None
        self._root_error: str | None = None
        psutil.cpu_percent(interval=None)  # prime: the first call has nothing to compare with
        self.set_pid(pid)

    # -- setup ------------------------------------------------------------------------------

    def _open_nvml(self, nvml: Any) -> None:
        mod, err = load_nvml(nvml)
        if mod is None:
            self._errors.append(f"NVML: {err}")
            return
        error_type = getattr(mod, "NVMLError", Exception)
        try:
            mod.nvmlInit()
            count = mod.nvmlDeviceGetCount()
        except error_type as exc:
            self._errors.append(f"NVML: {nvml_error_message(exc)}")
            return
        except OSError as exc:
            self._errors.append(f"NVML: cannot load the library: {exc}")
            return
        self._nvml = mod
        for i in range(count):
            try:
                handle = mod.nvmlDeviceGetHandleByIndex(i)
            except error_type as exc:
                self._handles.append((f"nvml:{i}", exc))
                continue
            try:
                key = bus_id_of(mod.nvmlDeviceGetPciInfo(handle)) or f"nvml:{i}"
            except error_type:
                key = f"nvml:{i}"
            self._handles.append((key, handle))

    def _find_amd(self, drm: Path) -> None:
        cards = sorted((p for p in drm.glob("card*") if p.name[4:].isdigit()), key=card_number)
        for card in cards:
            dev = card / "device"
            if (read_text(dev / "vendor") or "").lower() != AMD_VENDOR:
                continue
            uevent = read_text(dev / "uevent") or ""
            bus = next(
                (
                    normalise_bus_id(line.split("=", 1)[1])
                    for line in uevent.splitlines()
                    if line.startswith("PCI_SLOT_NAME=")
                ),
                None,
            )
            hwmon = sorted((dev / "hwmon").glob("hwmon*"))
            self._amd_cards.append((bus or f"amd:{card.name}", dev, hwmon[0] if hwmon else None))

    def set_pid(self, pid: int | None) -> None:
        """Watch another process tree (or none)."""
        self._procs.clear()
        self._root, self._root_error = None, None
        if pid is None:
            return
        try:
            self._root = psutil.Process(pid)
            self._root.cpu_percent(interval=None)
            self._procs[pid] = self._root
        except psutil.Error as exc:
            self._root_error = _psutil_message(exc, pid)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - closing must not raise
                log.debug("nvmlShutdown failed", exc_info=True)
            self._nvml = None
            self._handles = []

    def __enter__(self) -> TelemetrySampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sampling ---------------------------------------------------------------------------

    def sample(self) -> TelemetrySample:
        devices = [self._read_nvidia(key, handle) for key, handle in self._handles]
        devices += [self._read_amd(key, dev, hwmon) for key, dev, hwmon in self._amd_cards]
        vm = psutil.virtual_memory()
        host = HostReading(vm.total, vm.total - vm.available, vm.available, psutil.cpu_percent(interval=None))
        return TelemetrySample(
            time.monotonic(), tuple(devices), host, tuple(self._read_processes()), tuple(self._errors)
        )

    def _read_nvidia(self, key: str, handle: Any) -> DeviceReading:
        nvml = self._nvml
        name = self._names.get(key)
        if nvml is None:
            return DeviceReading(key, name, "nvidia", error="NVML was closed")
        if isinstance(handle, BaseException):
            return DeviceReading(key, name, "nvidia", error=nvml_error_message(handle))
        error_type = getattr(nvml, "NVMLError", Exception)
        errors: dict[str, str] = {}

        def call(fact, fn, *args):
            try:
                return fn(handle, *args)
            except error_type as exc:
                errors[fact] = nvml_error_message(exc)
                return None

        mem = call("memory", nvml.nvmlDeviceGetMemoryInfo)
        util = call("utilisation", nvml.nvmlDeviceGetUtilizationRates)
        temp = call("temperature", nvml.nvmlDeviceGetTemperature, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        power = call("power", nvml.nvmlDeviceGetPowerUsage)
        return DeviceReading(
            key,
            name,
            "nvidia",
            memory_used_bytes=getattr(mem, "used", None),
            memory_total_bytes=getattr(mem, "total", None),
            utilisation_percent=float(util.gpu) if util is not None else None,
            temperature_c=float(temp) if temp is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            error=_join(errors),
        )

    def _read_amd(self, key: str, dev: Path, hwmon: Path | None) -> DeviceReading:
        def num(path: Path) -> int | None:
            text = read_text(path)
            try:
                return int(text) if text is not None else None
            except ValueError:
                return None

        used, total, busy = (
            num(dev / "mem_info_vram_used"),
            num(dev / "mem_info_vram_total"),
            num(dev / "gpu_busy_percent"),
        )
        temp = power = None
        if hwmon is not None:
            t = num(hwmon / "temp1_input")
            p = num(hwmon / "power1_average")
            temp = t / 1000.0 if t is not None else None
            power = p / 1e6 if p is not None else None
        error = None if total is not None else "cannot read mem_info_vram_total (GPU removed or driver reset?)"
        return DeviceReading(
            key, self._names.get(key), "amd", used, total, float(busy) if busy is not None else None, temp, power, error
        )

    def _read_processes(self) -> Iterable[ProcessReading]:
        if self._root is None:
            if self._root_error:
                yield ProcessReading(-1, None, None, None, self._root_error)
            return
        try:
            tree = [self._root] + self._root.children(recursive=True)
        except psutil.Error as exc:
            yield ProcessReading(self._root.pid, None, None, None, _psutil_message(exc, self._root.pid))
            return
        alive = set()
        for proc in tree:
            known = self._procs.get(proc.pid)
            first = known is None
            proc = known or proc
            alive.add(proc.pid)
            try:
                with proc.oneshot():
                    cpu = proc.cpu_percent(interval=None)
                    rss = proc.memory_info().rss
                    name = proc.name()
            except psutil.Error as exc:
                yield ProcessReading(proc.pid, None, None, None, _psutil_message(exc, proc.pid))
                continue
            self._procs[proc.pid] = proc
            yield ProcessReading(proc.pid, name, rss, None if first else cpu)
        for pid in list(self._procs):
            if pid not in alive:
                del self._procs[pid]


def _join(errors: Mapping[str, str]) -> str | None:
    if not errors:
        return None
    messages = list(dict.fromkeys(errors.values()))
    if len(messages) == 1:
        return messages[0]
    return "; ".join(f"{k}: {v}" for k, v in errors.items())


def _psutil_message(exc: psutil.Error, pid: int) -> str:
    if isinstance(exc, psutil.NoSuchProcess):
        return f"process {pid} has exited"
    if isinstance(exc, psutil.AccessDenied):
        return f"no permission to read process {pid}"
    return f"cannot read process {pid}: {exc}"
