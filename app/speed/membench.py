"""A short host memory bandwidth test (numpy copies on every physical core), for the speed model's CPU lane."""

from __future__ import annotations

import threading
import time


def measure_host_bandwidth(size_mib: int = 256, repeats: int = 4, threads: int | None = None) -> float:
    """Bytes/s moved by ``threads`` simultaneous copies (default: one per physical core) of ``size_mib`` in
    all, best of ``repeats``, read and write counted.

    llama.cpp's CPU decode streams the weights on all its threads at once, and one core cannot saturate the
    memory controller, so the copies run in parallel (numpy releases the GIL while it copies); each copies
    its own slice, far larger than the caches."""
    import numpy as np

    if threads is None:
        import psutil

        threads = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    threads = max(1, min(int(threads), 256))
    n = max(size_mib * (1 << 20) // 8 // threads, 1 << 16)
    srcs = [np.ones(n, dtype=np.float64) for _ in range(threads)]
    dsts = [np.empty_like(s) for s in srcs]
    best = float("inf")
    for _ in range(repeats):
        start = threading.Barrier(threads + 1)

        def copy(i: int, barrier: threading.Barrier = start) -> None:
            barrier.wait()
            np.copyto(dsts[i], srcs[i])

        pool = [threading.Thread(target=copy, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return 2 * sum(s.nbytes for s in srcs) / best
