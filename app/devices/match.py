"""Tie llama.cpp's devices (``CUDA0``, ``ROCm1``, ``Vulkan0``) to the physical GPUs NVML/sysfs report.

CUDA devices are matched by PCI bus id, taken from the CUDA driver in the
same environment (:func:`app.devices.cuda.probe_cuda`).  Without the driver
the match falls back to the device name plus the order CUDA_VISIBLE_DEVICES
and PCI order imply, and says so.  ROCm and Vulkan devices are matched by
name and PCI order (neither tool prints a PCI id in ``--list-devices``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.devices.cuda import CudaDevice, VisibleOrder, visible_order
from app.devices.gpu import PhysicalGpu
from app.devices.listing import VIRTUAL_SUFFIX, ListedDevice

log = logging.getLogger(__name__)

BY_DRIVER = "PCI bus id from the CUDA driver (cuDeviceGetPCIBusId), same environment as llama.cpp"


@dataclass(frozen=True)
class Match:
    gpu: PhysicalGpu | None
    method: str | None = None
    warnings: tuple[str, ...] = ()
    virtual: bool = False


@dataclass(frozen=True)
class CudaMatching:
    matches: dict[str, Match]  # llama.cpp name -> match
    hidden: tuple[PhysicalGpu, ...]  # NVIDIA GPUs CUDA does not show llama.cpp
    notes: tuple[str, ...] = field(default=())


def split_virtual(description: str) -> tuple[str, int | None]:
    """``"RTX 4090 (dev p0/v1)"`` -> (``"RTX 4090"``, 0): GGML_CUDA_DEVICES virtual devices."""
    m = VIRTUAL_SUFFIX.match(description)
    return (m["name"], int(m["phys"])) if m else (description, None)


def match_cuda(
    listed: Sequence[ListedDevice],
    nvidia: Sequence[PhysicalGpu],
    env: Mapping[str, str],
    probe: Sequence[CudaDevice] | None,
) -> CudaMatching:
    """Match ``CUDA<i>`` devices to NVML GPUs; the probe (when given) makes it exact."""
    cuda = [d for d in listed if d.backend == "CUDA"]
    if probe is not None:
        virtual = any(split_virtual(d.description)[1] is not None for d in cuda)
        if virtual or len(probe) == len(cuda):
            return _match_by_probe(cuda, nvidia, probe)
        note = (
            f"llama.cpp lists {len(cuda)} CUDA devices but the CUDA driver reports {len(probe)}: "
            "matched by name instead"
        )
        result = _match_by_order(cuda, nvidia, visible_order(nvidia, env))
        return CudaMatching(result.matches, result.hidden, (note,) + result.notes)
    return _match_by_order(cuda, nvidia, visible_order(nvidia, env))


def _match_by_probe(cuda, nvidia, probe) -> CudaMatching:
    by_bus = {g.pci_bus_id: g for g in nvidia if g.pci_bus_id}
    by_uuid = {g.uuid.lower(): g for g in nvidia if g.uuid}
    matches: dict[str, Match] = {}
    for k, dev in enumerate(cuda):
        base, phys = split_virtual(dev.description)
        i = phys if phys is not None else k
        if i >= len(probe):
            matches[dev.name] = Match(None, None, ("the CUDA driver reports fewer devices than llama.cpp",))
            continue
        c = probe[i]
        gpu = by_bus.get(c.pci_bus_id) or (by_uuid.get(c.uuid.lower()) if c.uuid else None)
        warnings = []
        if gpu is None:
            warnings.append(f"NVML does not show the GPU at PCI {c.pci_bus_id}")
        if c.name != base:
            warnings.append(f"the CUDA driver calls this device {c.name!r}, llama.cpp {base!r}")
        if phys is not None:
            warnings.append("virtual device (GGML_CUDA_DEVICES): it shares one physical GPU with others")
        matches[dev.name] = Match(gpu, BY_DRIVER if gpu else None, tuple(warnings), phys is not None)
    seen = {m.gpu.pci_bus_id for m in matches.values() if m.gpu}
    probed = {c.pci_bus_id for c in probe}
    hidden = tuple(g for g in nvidia if g.pci_bus_id not in probed and g.pci_bus_id not in seen)
    return CudaMatching(matches, hidden)


def _match_by_order(cuda, nvidia, order: VisibleOrder) -> CudaMatching:
    matches: dict[str, Match] = {}
    used: list[PhysicalGpu] = []
    names = [g.name for g in order.visible]
    for dev in cuda:
        base, phys = split_virtual(dev.description)
        warnings: list[str] = []
        method: str | None
        if phys is not None:
            gpu = order.visible[phys] if phys < len(order.visible) else None
            method = "physical index of a virtual device (GGML_CUDA_DEVICES) in the guessed CUDA order"
            warnings.append("virtual device (GGML_CUDA_DEVICES): it shares one physical GPU with others")
        else:
            gpu = next((g for g in order.visible if g.name == base and g not in used), None)
            if names.count(base) == 1:
                method = "unique device name (llama.cpp and NVML agree)"
            else:
                method = f"device name, then CUDA order guessed from {order.source} and PCI bus order"
        if gpu is None:
            warnings.append(f"no NVIDIA GPU named {base!r} among those CUDA should show llama.cpp")
            method = None
        elif not order.certain and names.count(base) > 1:
            warnings.append(
                "several GPUs share this name and their CUDA order is a guess: the extras shown may belong to "
                "another of them"
            )
        if gpu is not None:
            used.append(gpu)
        matches[dev.name] = Match(gpu, method, tuple(warnings), phys is not None)
    hidden = order.hidden + tuple(g for g in order.visible if g not in used)
    return CudaMatching(matches, hidden, order.notes)


def match_by_name(
    listed: Sequence[ListedDevice],
    gpus: Sequence[PhysicalGpu],
    backend: str,
    taken: Sequence[PhysicalGpu] = (),
) -> dict[str, Match]:
    """Match ``ROCm<i>``/``Vulkan<i>`` devices: a GPU whose name appears in the description, in PCI order.

    A ROCm device with no usable name (sysfs lacks ``product_name`` on most
    consumer cards) takes the next discrete AMD GPU in PCI order.
    """
    ordered = sorted(gpus, key=lambda g: (g.pci_bus_id or "~", g.index))
    used: list[PhysicalGpu] = list(taken) if backend != "Vulkan" else []
    out: dict[str, Match] = {}
    for dev in (d for d in listed if d.backend == backend):
        desc = dev.description.lower()
        pool = [g for g in ordered if g not in used]
        gpu = next((g for g in pool if g.name.lower() in desc or desc in g.name.lower()), None)
        method = "device name and PCI order"
        if gpu is None and backend == "ROCm":
            gpu = next((g for g in pool if g.vendor == "amd" and not g.integrated), None)
            method = "position in PCI bus order (a guess: sysfs gives no product name)"
        warnings: tuple[str, ...] = ()
        if gpu is not None:
            used.append(gpu)
            if backend == "Vulkan" and gpu in taken:
                warnings = ("the same GPU is also listed by another backend: llama.cpp uses it only once by default",)
        out[dev.name] = Match(gpu, method if gpu else None, warnings)
    return out
