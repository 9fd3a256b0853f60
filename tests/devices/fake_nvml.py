"""A fake ``pynvml``: the functions Layerdeck calls, backed by plain GPU descriptions.

Errors follow pynvml: every failure is an ``NVMLError`` whose ``value`` is the
NVML return code; the subclasses tests check for exist under the same names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_MEM = 2

GiB = 1024**3


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 15: "GPU is lost"}.get(
            self.value, f"Unknown Error {self.value}"
        )


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND)


class NVMLError_DriverNotLoaded(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_DRIVER_NOT_LOADED)


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_GPU_IS_LOST)


@dataclass
class FakeGpu:
    name: str
    uuid: str
    bus_id: str  # NVML form: 00000000:01:00.0
    total: int = 24 * GiB
    used: int = 1 * GiB
    bus_width: int = 384
    mem_clock_mhz: int = 10501
    pcie: tuple[int, int, int, int] = (4, 16, 4, 16)  # current gen, width, max gen, width
    temperature: int = 40
    power_mw: int = 80_000
    util: tuple[int, int] = (5, 3)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    lost: bool = False  # every call raises GPU_IS_LOST
    unsupported: set[str] = field(default_factory=set)  # function names raising NOT_SUPPORTED


class FakeNvml:
    """Module-like object; ``calls`` counts calls per function name."""

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_CLOCK_MEM = NVML_CLOCK_MEM

    def __init__(self, gpus: list[FakeGpu], init_error: type[NVMLError] | None = None):
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = 0
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _gpu(self, handle: FakeGpu, fn: str) -> FakeGpu:
        self._count(fn)
        if not self.initialised:
            raise NVMLError(1)
        if handle.lost:
            raise NVMLError_GpuIsLost()
        if fn in handle.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return handle

    def nvmlInit(self):
        self._count("nvmlInit")
        if self.init_error is not None:
            raise self.init_error()
        self.initialised += 1

    def nvmlShutdown(self):
        self._count("nvmlShutdown")
        self.initialised = max(0, self.initialised - 1)

    def nvmlSystemGetDriverVersion(self):
        return "570.00"

    def nvmlDeviceGetCount(self):
        self._count("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        self._count("nvmlDeviceGetHandleByIndex")
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        return self._gpu(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, h):
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetPciInfo(self, h):
        g = self._gpu(h, "nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=g.bus_id.encode(), busIdLegacy=g.bus_id[4:].encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        g = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=g.total, used=g.used, free=g.total - g.used)

    def nvmlDeviceGetUtilizationRates(self, h):
        g = self._gpu(h, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=g.util[0], memory=g.util[1])

    def nvmlDeviceGetMemoryBusWidth(self, h):
        return self._gpu(h, "nvmlDeviceGetMemoryBusWidth").bus_width

    def nvmlDeviceGetMaxClockInfo(self, h, clock_type):
        assert clock_type == NVML_CLOCK_MEM
        return self._gpu(h, "nvmlDeviceGetMaxClockInfo").mem_clock_mhz

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").pcie[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").pcie[3]

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == NVML_TEMPERATURE_GPU
        return self._gpu(h, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetPowerUsage(self, h):
        return self._gpu(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        g = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in g.processes]


def rtx4090(bus: str = "01", uuid: str = "GPU-aaaaaaaa-0000-0000-0000-000000000001", **kw) -> FakeGpu:
    return FakeGpu("NVIDIA GeForce RTX 4090", uuid, f"00000000:{bus}:00.0", **kw)


def rtx3090(bus: str = "02", uuid: str = "GPU-bbbbbbbb-0000-0000-0000-000000000002", **kw) -> FakeGpu:
    kw.setdefault("mem_clock_mhz", 9751)
    return FakeGpu("NVIDIA GeForce RTX 3090", uuid, f"00000000:{bus}:00.0", **kw)
