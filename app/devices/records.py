"""The device records detection produces: small frozen dataclasses with a JSON form.

A :class:`Device` is one place llama.cpp can put tensors (a GPU, an RPC
device, an accelerator such as BLAS, the CPU) or a device the user plans to
buy.  Every fact says where it came from in :attr:`Device.sources`, so the UI
can show "24 GiB (llama.cpp --list-devices)" rather than a bare number.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from app.lanes import DeviceKind  # noqa: F401 (re-export: the values of Device.kind)
from app.units import GiB, MiB  # noqa: F401 (re-export)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PcieLink:
    """PCIe link state as NVML or sysfs reports it (None where unknown)."""

    current_gen: int | None = None
    current_width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU (NVML compute processes)."""

    pid: int
    name: str | None = None
    used_bytes: int | None = None


@dataclass(frozen=True)
class Device:
    """One device llama.cpp can place tensors on (or one the user plans).

    ``name`` is the llama.cpp device name (``CUDA0``, ``RPC1``, ``BLAS``,
    ``CPU``...).  When llama.cpp did not report it (no llama.cpp configured,
    a GPU llama.cpp could not see, a planned card) ``name_guessed`` is True.
    ``sources`` maps a fact (``name``, ``total``, ``free``, ``bandwidth``,
    ``match``...) to how it was obtained.  ``errors`` maps a fact to the error
    met while reading it; a failed read never aborts detection.
    """

    name: str
    kind: str  # a DeviceKind; it is a str, so to_dict() and the JSON form hold the plain value ("gpu")
    description: str
    total_bytes: int | None = None
    free_bytes: int | None = None
    bandwidth_bytes_per_s: float | None = None
    name_guessed: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    rpc_endpoint: str | None = None
    rpc_device_index: int | None = None  # index on the RPC server: buffer type RPC<j>[host:port]
    warnings: tuple[str, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)
    # Physical GPU extras (NVML or AMD sysfs); None where unknown.
    vendor: str | None = None  # "nvidia" or "amd"
    uuid: str | None = None
    pci_bus_id: str | None = None  # normalised: 0000:01:00.0
    pcie: PcieLink | None = None
    numa_node: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    utilisation_percent: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    # What the device's backend allows, where it changes memory (a Vulkan driver's limits, from
    # app.devices.vulkan): the largest tensor an op may touch, buffer alignment and largest buffer, and the
    # same two for the host buffer type it brings. None/0: the backend's default (app.memory.backends).
    max_tensor_bytes: int | None = None
    # ops the device's backend refuses for its features (a Vulkan device without the subgroup support a pipeline
    # needs: app.devices.vulkan.RawVulkanDevice.refused_ops)
    refused_ops: tuple[str, ...] = ()
    buffer_alignment: int = 0
    max_buffer: int = 0
    host_alignment: int = 0
    host_max_buffer: int = 0

    @property
    def used_bytes(self) -> int | None:
        if self.total_bytes is None or self.free_bytes is None:
            return None
        return max(0, self.total_bytes - self.free_bytes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form documented in :mod:`app.cli.devices`."""
        out = asdict(self)
        out["kind"] = str(self.kind)  # the plain value, not the DeviceKind member
        out["warnings"] = list(self.warnings)
        out["processes"] = [asdict(p) for p in self.processes]
        out["refused_ops"] = list(self.refused_ops)
        return out


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: str | None = None  # kernel cpulist, e.g. "0-15,32-47"
    memory_total_bytes: int | None = None


@dataclass(frozen=True)
class HostInfo:
    """The machine running llama.cpp: RAM, cores, NUMA layout, CPU model."""

    cpu_model: str | None = None
    physical_cores: int | None = None
    logical_cores: int | None = None
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    numa_nodes: tuple[NumaNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["numa_nodes"] = [asdict(n) for n in self.numa_nodes]
        return out


@dataclass(frozen=True)
class SourceError:
    """A detection source that failed as a whole (NVML missing, llama-server crashed...)."""

    source: str
    message: str


@dataclass(frozen=True)
class RpcHostStatus:
    """The outcome of probing one ``--rpc`` endpoint.

    ``status`` is one of :data:`RPC_STATUSES`; ``devices`` holds the llama.cpp
    names given to this host's devices (``RPC0``...) when it answered.
    ``server_command`` is the ``ggml-rpc-server`` command to run on that host.
    """

    endpoint: str
    host: str | None
    port: int | None
    status: str
    error: str | None = None
    devices: tuple[str, ...] = ()
    server_command: tuple[str, ...] = ()
    server_note: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["devices"] = list(self.devices)
        out["server_command"] = list(self.server_command)
        return out


RPC_STATUSES = (
    "ok",
    "invalid",  # the endpoint string is not host:port
    "duplicate",  # the same server was already given
    "unreachable",  # name does not resolve, no route, host down
    "refused",  # the host answered but nothing listens on the port
    "timed out",  # TCP connect got no answer
    "no answer",  # TCP connected but no RPC answer (busy with another client, or not RPC)
    "not an rpc server",  # something answered, but not the RPC protocol
    "incompatible",  # an RPC server of another protocol version
    "error",  # llama-server failed for another reason (see error)
    "not probed",  # llama-server is not available, only TCP was checked
)


@dataclass(frozen=True)
class DetectionResult:
    """Everything :func:`app.devices.detect.detect` found.

    ``devices`` is in llama.cpp's model-device order (RPC, GPUs, iGPUs when no
    GPU) followed by accelerators and the CPU; this is the order ``-ts`` and
    ``--fit-target`` index.  ``hidden`` holds GPUs the driver sees but
    llama.cpp will not use (hidden by ``CUDA_VISIBLE_DEVICES``, or missing
    from this llama.cpp build).
    """

    devices: tuple[Device, ...]
    host: HostInfo
    hidden: tuple[Device, ...] = ()
    rpc_hosts: tuple[RpcHostStatus, ...] = ()
    errors: tuple[SourceError, ...] = ()
    llama_server: str | None = None
    llama_listed: bool = False

    def device(self, name: str) -> Device | None:
        for d in self.devices:
            if d.name.lower() == name.lower():
                return d
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "layerdeck.devices/1",
            "devices": [d.to_dict() for d in self.devices],
            "hidden": [d.to_dict() for d in self.hidden],
            "host": self.host.to_dict(),
            "rpc_hosts": [h.to_dict() for h in self.rpc_hosts],
            "llama_cpp": {"server": self.llama_server, "listed": self.llama_listed},
            "errors": [asdict(e) for e in self.errors],
        }
