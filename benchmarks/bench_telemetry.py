"""Time one telemetry sample (the GUI takes one every 500 ms).

Watches a small process tree (a parent with two children, like llama-server
with helpers) and reads whatever GPUs this machine has through NVML and AMD
sysfs.  ``--fake-gpus N`` adds N GPUs from the test suite's fake NVML to see
Layerdeck's own per-GPU overhead on a machine without NVIDIA GPUs (real NVML
calls cost more: each one is a driver ioctl).

    python benchmarks/bench_telemetry.py [--samples 400] [--fake-gpus 0]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.devices.telemetry import TelemetrySampler  # noqa: E402

TREE = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']) for _ in range(2)]\n"
    "time.sleep(600)\n"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--fake-gpus", type=int, default=0, help="use the tests' fake NVML with this many GPUs")
    args = ap.parse_args()

    nvml = None
    if args.fake_gpus:
        from tests.devices.fake_nvml import FakeNvml, rtx4090

        nvml = FakeNvml([rtx4090(f"{i + 1:02x}", f"GPU-{i:08x}-0000-0000-0000-000000000000") for i in range(args.fake_gpus)])

    parent = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        time.sleep(1.0)  # let the children start
        with TelemetrySampler(nvml=nvml, pid=parent.pid) as sampler:
            first = sampler.sample()
            times = []
            for _ in range(args.samples):
                t0 = time.perf_counter()
                sample = sampler.sample()
                times.append((time.perf_counter() - t0) * 1000)
    finally:
        import psutil

        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()

    gpus = ", ".join(f"{d.vendor} {d.key}" + (f" ({d.error})" if d.error else "") for d in sample.devices) or "none"
    print(f"GPUs read: {gpus}")
    if first.errors:
        print(f"sources that failed: {'; '.join(first.errors)}")
    print(f"processes watched: {len(sample.processes)}")
    times.sort()
    print(
        f"per sample over {len(times)} samples: mean {statistics.fmean(times):.3f} ms, "
        f"median {times[len(times) // 2]:.3f} ms, p95 {times[int(len(times) * 0.95)]:.3f} ms, max {times[-1]:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
