"""Parse what llama-server logs about placement and memory (``-lv 4`` for sizes, ``-lv 5`` for per-tensor lines).

Line formats: ``src/llama-model.cpp`` (``layer %3d assigned to device``),
``src/llama-model-loader.cpp`` (``buffer type overridden to``), and the
``... buffer size = X MiB`` lines of ``load_tensors`` (``src/llama-model.cpp``),
``llama_context`` and ``sched_reserve`` (``src/llama-context.cpp``) and
``llama_kv_cache`` (``src/llama-kv-cache.cpp``) and ``llama_dsv4_comp_state`` (``llama-kv-cache-dsv4.cpp``).
Everything after
``common_fit_params: fitting params ... took`` is the real load; fit dry runs
before it log the same lines with zero sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ASSIGNED = re.compile(r"load_tensors: layer\s+(\d+) assigned to device (\S+?),")
_OVERRIDDEN = re.compile(r"tensor (\S+) \([^)]*\) buffer type overridden to (\S+)")
_BUFFER = re.compile(
    r"(load_tensors|llama_context|llama_kv_cache|llama_memory_recurrent|sched_reserve|llama_dsv4_comp_state):\s+"
    r"(\S+)\s+(model|output|KV|RS|compute|DSV4 \w+ state) buffer size =\s+([\d.]+) MiB"
)
_FIT_DONE = re.compile(r"fitting params to (?:free )?(?:device )?memory took")


def real_load(text: str) -> str:
    """The part of a log after any --fit dry runs."""
    last = None
    for m in _FIT_DONE.finditer(text):
        last = m
    return text[last.end() :] if last else text


def layer_devices(text: str) -> dict[int, str]:
    """Layer index -> device name (``CPU``, ``RPC0``, ``CUDA1``) from ``-lv 5`` lines; the output layer is n_layer."""
    out: dict[int, str] = {}
    for m in _ASSIGNED.finditer(real_load(text)):
        out[int(m.group(1))] = m.group(2)
    return out


def overridden(text: str) -> dict[str, str]:
    """Tensor name -> buffer type for every tensor an override moved (``-lv 5``)."""
    return {m.group(1): m.group(2) for m in _OVERRIDDEN.finditer(real_load(text))}


@dataclass(frozen=True)
class BufferLine:
    phase: str  # load_tensors, llama_context, llama_kv_cache, sched_reserve
    buft: str  # CPU, CPU_Mapped, CUDA0, RPC0[127.0.0.1:50052] ...
    kind: str  # model, output, KV, RS, compute
    mib: float


def buffer_sizes(text: str) -> list[BufferLine]:
    """The buffer lines of the real load. DeepSeek-V4's compressor states (``llama_dsv4_comp_state``: "DSV4 csa
    state buffer size") are part of its KV cache (``llama_kv_cache_dsv4``), as ``--fit-print`` counts them."""
    return [
        BufferLine(m.group(1), m.group(2), "KV" if m.group(3).startswith("DSV4") else m.group(3), float(m.group(4)))
        for m in _BUFFER.finditer(real_load(text))
    ]
