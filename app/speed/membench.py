"""A short host memory bandwidth test (numpy copies), for the speed model's CPU lane."""

from __future__ import annotations

import time


def measure_host_bandwidth(size_mib: int = 256, repeats: int = 4) -> float:
    """Bytes/s moved by the best of ``repeats`` copies of a ``size_mib`` array (read + write counted).

    A copy reads and writes every byte, as a matmul over weights in RAM mostly reads; this measures the
    sustained rate llama.cpp's CPU backend can hope for (one thread pool's worth, not the theoretical peak).
    """
    import numpy as np

    n = size_mib * (1 << 20) // 8
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best
