"""Which device a llama.cpp buffer type lives on, and the logged buffer sizes per device.

Buffer-type names (docs/launch.md): a GPU's own buffer type carries the device
name (``CUDA0``, ``Vulkan1``, ``ROCm0``); host memory shows up as ``CPU``,
``CPU_Mapped`` (mmapped weights), ``CPU_REPACK``, ``AMX`` or a pinned
``<backend>_Host`` type; an RPC buffer type is ``RPC<j>[host:port]`` with
``j`` the device's index *on that server*, while the device itself is named
with a global counter across ``--rpc`` entries (``ggml-rpc.cpp``
``ggml_backend_rpc_add_server``). The global names come from the log's
``llama_prepare_model_devices: using device RPC1 (host:port) ...`` lines
(``src/llama.cpp``), else from the ``--rpc`` order.

The sizes themselves come from :func:`app.llamacpp.logparse.buffer_sizes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.lanes import CPU
from app.llamacpp.logparse import BufferLine, buffer_sizes, real_load

_RPC_BUFT = re.compile(r"^RPC(\d+)\[(.+)\]$")
_USING_DEVICE = re.compile(r"using device (\S+) \((.*?)\) \(")
_DEVICE_INFO = re.compile(r"common_param:\s+- (\S+)\s*: (.+?) \(\d+ MiB, \d+ MiB free\)")
_HOST_BUFTS = re.compile(r"^(CPU(_\w+)?|AMX|\w+_Host|BLAS)$")


def rpc_names_from_log(text: str) -> dict[tuple[str, int], str]:
    """(endpoint, index on that server) -> global device name, from the device lines of a log."""
    names: dict[tuple[str, int], str] = {}
    counters: dict[str, int] = {}
    seen: set[str] = set()
    matches = list(_USING_DEVICE.finditer(text)) or list(_DEVICE_INFO.finditer(text))
    for m in matches:
        name, desc = m.group(1), m.group(2)
        if not name.startswith("RPC") or name in seen:
            continue
        seen.add(name)
        j = counters.get(desc, 0)
        counters[desc] = j + 1
        names[(desc, j)] = name
    return names


def rpc_names_from_endpoints(endpoints: Sequence[str]) -> dict[tuple[str, int], str]:
    """Fallback when the log has no device lines: one device per server, numbered in ``--rpc`` order."""
    return {(ep, 0): f"RPC{i}" for i, ep in enumerate(endpoints)}


def device_for_buffer_type(buft: str, rpc_names: Mapping[tuple[str, int], str] | None = None) -> str:
    """Our device name for a buffer type: ``RPC0[h:p]`` -> ``RPC<k>``, host types -> ``CPU``, else itself."""
    m = _RPC_BUFT.match(buft)
    if m:
        key = (m.group(2), int(m.group(1)))
        if rpc_names and key in rpc_names:
            return rpc_names[key]
        return f"RPC[{m.group(2)}]#{m.group(1)}" if int(m.group(1)) else f"RPC[{m.group(2)}]"
    if _HOST_BUFTS.match(buft):
        return CPU
    return buft


def describe_buffer_type(buft: str) -> str:
    """Plain words for a buffer type, for messages."""
    m = _RPC_BUFT.match(buft)
    if m:
        index = f" (its device {m.group(1)})" if m.group(1) != "0" else ""
        return f"the RPC server at {m.group(2)}{index}"
    if _HOST_BUFTS.match(buft):
        return f"host RAM ({buft})"
    m = re.match(r"^(CUDA|ROCm|MUSA|Vulkan|SYCL|MTL|Metal)(\d*)$", buft)
    if m:
        return f"GPU {buft}"
    return buft


@dataclass
class DeviceBuffers:
    """Logged buffer sizes of one device, MiB."""

    device: str
    model: float = 0.0
    kv: float = 0.0  # KV cache
    rs: float = 0.0  # recurrent state
    compute: float = 0.0
    output: float = 0.0  # logits (host)
    buffer_types: tuple[str, ...] = ()

    @property
    def context(self) -> float:
        return self.kv + self.rs

    @property
    def total(self) -> float:
        return self.model + self.kv + self.rs + self.compute + self.output


_KIND_FIELD = {"model": "model", "KV": "kv", "RS": "rs", "compute": "compute", "output": "output"}


def device_buffers(
    lines: Iterable[BufferLine], rpc_names: Mapping[tuple[str, int], str] | None = None
) -> dict[str, DeviceBuffers]:
    """Sum buffer lines per device (in first-seen order). A context that reserves its graph again (the MTP
    draft context does, once its sampler is set) logs the same compute buffer again: the last size counts."""
    out: dict[str, DeviceBuffers] = {}
    compute: dict[str, dict[str, float]] = {}
    for line in lines:
        dev = device_for_buffer_type(line.buft, rpc_names)
        entry = out.setdefault(dev, DeviceBuffers(dev))
        field = _KIND_FIELD.get(line.kind)
        if field == "compute":
            compute.setdefault(dev, {})[line.buft] = line.mib
            entry.compute = sum(compute[dev].values())
        elif field:
            setattr(entry, field, getattr(entry, field) + line.mib)
        if line.buft not in entry.buffer_types:
            entry.buffer_types += (line.buft,)
    return out


#: where llama-server starts loading the draft model or, with ``--spec-type draft-mtp``, creating the MTP draft
#: context on the model's NextN layers (``common_speculative_init_result``): the buffer lines after it are the
#: draft's
DRAFT_MARKS = ("loading draft model", "creating MTP draft context")


def _draft_cut(load: str) -> int:
    """Where the draft's part of a load log starts (-1: none)."""
    return min((i for i in (load.find(m) for m in DRAFT_MARKS) if i >= 0), default=-1)


def logged_buffers(text: str, endpoints: Sequence[str] = (), part: str = "main") -> dict[str, DeviceBuffers]:
    """Per-device buffer sizes of a ``-lv 4`` load log (after any --fit dry run): the model's (``part`` "main")
    or, with ``-md`` or draft-mtp, the draft's (``"draft"``: the lines after one of :data:`DRAFT_MARKS`)."""
    names = rpc_names_from_log(real_load(text)) or rpc_names_from_log(text) or rpc_names_from_endpoints(endpoints)
    load = real_load(text)
    cut = _draft_cut(load)
    if part == "draft":
        return device_buffers(buffer_sizes(load[cut:]), names) if cut >= 0 else {}
    return device_buffers(buffer_sizes(load[:cut] if cut >= 0 else load), names)
