"""Lanes: the places a placement can put tensors, named once for the whole core.

A :class:`Lane` is what the placement, the estimator, the speed model and the
command builder need to know about one device: llama.cpp's name for it
(``CUDA0``, ``RPC1``, ``Vulkan0``), the buffer type ``-ot`` names it by, its
memory, kind, bandwidth and, for an RPC device, the ``host:port`` it is
served from. Host memory is always :data:`CPU`; llama.cpp's own printouts say
``Host`` for the same thing, and only the modules that read or imitate those
printouts (:mod:`app.llamacpp.fit_print`, :mod:`app.launch.buffers`, the CLI's
llama.cpp-style lines) translate, at that edge.

This module imports nothing from the rest of the package, so every layer may
use it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: The host (system RAM) in every placement, estimate and speed figure.
CPU = "CPU"
#: What llama.cpp prints for the same memory in ``--fit-print`` and its load log.
LLAMA_HOST = "Host"


class StrEnum(str, enum.Enum):
    """``enum.StrEnum`` for Python 3.10: members compare and format as their value."""

    def __str__(self) -> str:
        return str(self.value)


class DeviceKind(StrEnum):
    """llama.cpp's ``ggml_backend_dev_type`` plus the two kinds Layerdeck adds.

    ``gpu``/``igpu`` are GPU/IGPU devices (Metal counts as ``gpu``, as
    llama.cpp reports it), ``accel`` is ACCEL (BLAS), ``cpu`` is the host;
    ``rpc`` is a device reached through ``--rpc`` and ``planned`` is a card the
    user does not own yet.
    """

    GPU = "gpu"
    IGPU = "igpu"
    RPC = "rpc"
    ACCEL = "accel"
    CPU = "cpu"
    PLANNED = "planned"


def from_llama_name(name: str) -> str:
    """llama.cpp's ``Host`` row -> :data:`CPU`; every other device name is already ours."""
    return CPU if name == LLAMA_HOST else name


def to_llama_name(name: str) -> str:
    """:data:`CPU` -> ``Host``, for output that imitates llama.cpp's printouts."""
    return LLAMA_HOST if name == CPU else name


def rpc_buffer_type(endpoint: str, local_index: int) -> str:
    """``RPC<j>[host:port]``: RPC buffer types use the server-local device index (ggml-rpc.cpp)."""
    return f"RPC{local_index}[{endpoint}]"


@dataclass(frozen=True)
class Lane:
    """One device a placement can use, other than the CPU."""

    name: str  # "CUDA0", "RPC1", "Vulkan0"
    buft: str  # default buffer type: "CUDA0", "RPC0[127.0.0.1:50053]"
    free: int = 0  # bytes free at load time (default -ts is proportional to this)
    total: int = 0
    kind: DeviceKind = DeviceKind.GPU
    bandwidth: float = 0.0  # memory bandwidth, bytes/s (0 = unknown); auto-fit fills faster devices first
    endpoint: str | None = None  # "host:port" of the ggml-rpc-server for an RPC device
    # The largest tensor an op on this device may read or write (a Vulkan driver's maxStorageBufferRange, 128 MiB
    # on lavapipe); None: no such limit. Weights whose op exceeds it stay in host memory (app.memory.backends).
    max_tensor_bytes: int | None = None
    # Ops the device's backend refuses for its features (a Vulkan device without the 16-lane subgroups that
    # DSV4_HC_COMB's pipeline needs); empty: as the backend's supports_op decides by shape (app.memory.backends).
    refused_ops: tuple[str, ...] = ()
    # ggml buffer facts of the device's backend, 0 where the backend's default applies (app.memory.backends):
    # the alignment of its buffers, the largest single buffer (compute buffers above it are split into chunks),
    # and the same two for the host buffer type it brings (Vulkan_Host, CUDA_Host).
    alignment: int = 0
    max_buffer: int = 0
    host_alignment: int = 0
    host_max_buffer: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DeviceKind):
            object.__setattr__(self, "kind", DeviceKind(self.kind))
        if not isinstance(self.refused_ops, tuple):  # a plan file's list
            object.__setattr__(self, "refused_ops", tuple(self.refused_ops))
        if self.endpoint is None and self.kind is DeviceKind.RPC and "[" in self.buft and self.buft.endswith("]"):
            object.__setattr__(self, "endpoint", self.buft[self.buft.index("[") + 1 : -1])

    @property
    def capacity(self) -> int:
        """What the board measures against: free memory where known, else the total."""
        return self.free or self.total

    @property
    def is_loopback(self) -> bool:
        ep = self.endpoint or ""
        return ep.startswith(("127.", "localhost", "[::1]"))


def rpc_endpoints(lanes: list[Lane] | tuple[Lane, ...]) -> list[str]:
    """The ``--rpc`` list for these lanes, in order, each endpoint once (llama.cpp numbers RPC devices by
    their place in it, so unused hosts stay in)."""
    return list(dict.fromkeys(d.endpoint for d in lanes if d.kind is DeviceKind.RPC and d.endpoint))
