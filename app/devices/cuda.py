"""Which NVIDIA GPU is ``CUDA<i>``: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and a driver probe.

llama.cpp names CUDA devices by the CUDA runtime's index (``ggml-cuda.cu``
``ggml_backend_cuda_reg``), and ``--list-devices`` prints only the device
name, not its PCI id.  CUDA numbers the *visible* devices in the order
``CUDA_VISIBLE_DEVICES`` lists them; indices in that variable refer to the
order of all devices, which is ``FASTEST_FIRST`` unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``.  NVML, on the other hand, always numbers
GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``.

The exact mapping comes from the CUDA driver itself: :func:`probe_cuda` runs
a small child process with the same environment as llama.cpp and asks
``libcuda`` for each device's PCI bus id (``cuDeviceGetPCIBusId``).  When the
driver cannot be asked, :func:`visible_order` guesses from the variables and
NVML's PCI order, and says when the guess may be wrong.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.devices.gpu import PhysicalGpu, normalise_bus_id
from app.errors import DetectError

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class CudaDevice:
    """One device as the CUDA driver numbers it for a given environment."""

    index: int
    name: str
    pci_bus_id: str | None
    uuid: str | None = None


class CudaProbeError(DetectError, RuntimeError):
    """The CUDA driver could not be asked (no libcuda, a frozen app, a crash)."""


def parse_visible_devices(value: str | None) -> list[str] | None:
    """The tokens of ``CUDA_VISIBLE_DEVICES``; None when unset (all devices), [] when empty (none)."""
    if value is None:
        return None
    return [t.strip() for t in value.split(",")] if value.strip() else []


@dataclass(frozen=True)
class VisibleOrder:
    """NVML GPUs in CUDA's order (``visible[i]`` is ``CUDA<i>``) and the ones CUDA cannot see."""

    visible: tuple[PhysicalGpu, ...]
    hidden: tuple[PhysicalGpu, ...]
    certain: bool
    source: str
    notes: tuple[str, ...] = field(default=())


def _all_order(gpus: Sequence[PhysicalGpu], env: Mapping[str, str]) -> tuple[list[PhysicalGpu], bool, list[str]]:
    """All NVIDIA GPUs in CUDA's enumeration order (before CUDA_VISIBLE_DEVICES)."""
    by_pci = sorted(gpus, key=lambda g: (g.pci_bus_id or "~", g.index))
    if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper() == "PCI_BUS_ID":
        return by_pci, True, []
    if len({g.name for g in gpus}) <= 1:
        # Identical GPUs are equally fast; CUDA then keeps PCI order.
        return by_pci, True, []
    return (
        by_pci,
        False,
        [
            "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers them fastest first, "
            "which Layerdeck can only guess (it assumed PCI order). Set CUDA_DEVICE_ORDER=PCI_BUS_ID for llama.cpp "
            "to make the numbering predictable"
        ],
    )


def visible_order(gpus: Sequence[PhysicalGpu], env: Mapping[str, str]) -> VisibleOrder:
    """Guess CUDA's numbering from CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and NVML's PCI order.

    CUDA stops reading CUDA_VISIBLE_DEVICES at the first entry that names no
    device; ``GPU-`` entries may be a unique prefix of the UUID; ``MIG-``
    entries name MIG instances, which NVML's GPU list cannot place.
    """
    nvidia = [g for g in gpus if g.vendor == "nvidia"]
    ordered, order_certain, order_notes = _all_order(nvidia, env)
    tokens = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    if tokens is None:
        return VisibleOrder(
            tuple(ordered), (), order_certain, "all GPUs (CUDA_VISIBLE_DEVICES unset)", tuple(order_notes)
        )
    visible: list[PhysicalGpu] = []
    notes: list[str] = []
    index_tokens = mig = False
    for tok in tokens:
        gpu = None
        if tok.isdigit():
            i = int(tok)
            gpu = ordered[i] if i < len(ordered) else None
            index_tokens = True
        elif tok.upper().startswith("GPU-"):
            matches = [g for g in nvidia if g.uuid and g.uuid.lower().startswith(tok.lower())]
            gpu = matches[0] if len(matches) == 1 else None
        elif tok.upper().startswith("MIG-"):
            # Old form MIG-GPU-<uuid>/<gi>/<ci> names its parent; new form MIG-<uuid> cannot be placed via NVML's GPU list.
            mig = True
            parent = tok[4:].split("/")[0].lower()
            notes.append(f"CUDA_VISIBLE_DEVICES names MIG instance {tok}: it has only a slice of its GPU's memory")
            matches = [g for g in nvidia if g.uuid and g.uuid.lower() == parent]
            if matches and matches[0] not in visible:
                visible.append(matches[0])
            continue
        if gpu is None:
            notes.append(f"CUDA_VISIBLE_DEVICES entry {tok!r} names no GPU: CUDA ignores it and every entry after it")
            break
        if gpu in visible:
            notes.append(f"CUDA_VISIBLE_DEVICES lists {tok!r} twice")
            continue
        visible.append(gpu)
    certain = (order_certain or not index_tokens) and not mig
    if index_tokens:
        notes = order_notes + notes
    hidden = tuple(g for g in ordered if g not in visible)
    return VisibleOrder(tuple(visible), hidden, certain, "CUDA_VISIBLE_DEVICES", tuple(notes))


_PROBE_SCRIPT = r"""
import ctypes, json, sys
lib = None
for name in (["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so", "libcuda.dylib"]):
    try:
        lib = ctypes.CDLL(name)
        break
    except OSError:
        pass
if lib is None:
    print(json.dumps({"error": "the CUDA driver library (libcuda) was not found"})); sys.exit(0)
rc = lib.cuInit(0)
if rc == 100:  # CUDA_ERROR_NO_DEVICE, e.g. CUDA_VISIBLE_DEVICES=""
    print(json.dumps({"devices": []})); sys.exit(0)
if rc != 0:
    print(json.dumps({"error": "cuInit failed with CUDA error %d" % rc})); sys.exit(0)
n = ctypes.c_int()
lib.cuDeviceGetCount(ctypes.byref(n))
out = []
for i in range(n.value):
    dev = ctypes.c_int()
    lib.cuDeviceGet(ctypes.byref(dev), i)
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(name, 256, dev)
    bus = ctypes.create_string_buffer(64)
    lib.cuDeviceGetPCIBusId(bus, 64, dev)
    raw = (ctypes.c_ubyte * 16)()
    get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
    uuid = None
    if get_uuid is not None and get_uuid(raw, dev) == 0:
        h = bytes(raw).hex()
        uuid = "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    out.append({"index": i, "name": name.value.decode(errors="replace"), "pci_bus_id": bus.value.decode(), "uuid": uuid})
print(json.dumps({"devices": out}))
"""


def parse_probe_output(text: str) -> list[CudaDevice]:
    """Parse the probe's JSON line; raises :class:`CudaProbeError` on an error report."""
    try:
        data = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CudaProbeError(f"unexpected CUDA probe output: {text[:200]!r}") from None
    if "error" in data:
        raise CudaProbeError(data["error"])
    return [
        CudaDevice(d["index"], d["name"], normalise_bus_id(d.get("pci_bus_id")), d.get("uuid")) for d in data["devices"]
    ]


def probe_cuda(env: Mapping[str, str], timeout: float = PROBE_TIMEOUT_S) -> list[CudaDevice]:
    """Ask the CUDA driver, in a child process with ``env``, for each visible device's PCI bus id.

    A child process is needed because CUDA reads CUDA_VISIBLE_DEVICES once,
    at initialisation, and ``env`` may differ from this process's.
    """
    if getattr(sys, "frozen", False):
        raise CudaProbeError("the CUDA driver probe needs a Python interpreter, which a frozen app does not have")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE_SCRIPT],
            env=dict(env),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise CudaProbeError(f"the CUDA driver did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise CudaProbeError(f"cannot start the CUDA probe: {exc}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise CudaProbeError(f"the CUDA probe failed: {err[-1] if err else proc.returncode}")
    return parse_probe_output(proc.stdout.decode("utf-8", errors="replace"))
