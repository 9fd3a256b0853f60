"""Time a full estimate for a 94-layer, 128-expert model (Qwen3-235B-A22B-shaped) with 40 override patterns.

Target (issue "Memory model"): under 5 ms, so the board can re-estimate on every drag movement.

    python benchmarks/bench_estimator.py [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.memory.args import parse_llama_args  # noqa: E402
from app.memory.estimator import estimate  # noqa: E402
from app.memory.layout import EstDevice  # noqa: E402
from app.model import open_model  # noqa: E402
from app.placement import CPU  # noqa: E402
from app.placement.presets import all_on_gpus  # noqa: E402
from tests.gguf_factory import write_sparse_model  # noqa: E402

GiB = 1 << 30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = open_model(write_sparse_model("qwen3-235b-a22b", Path(tmp) / "q235.gguf"))
    devices = [EstDevice(f"CUDA{i}", f"CUDA{i}", 24 * GiB, 24 * GiB) for i in range(3)]
    # 40 patterns: experts of 40 scattered layers, alternating CPU and CUDA2
    ot = []
    for k, il in enumerate(range(2, 94, 2)[:40]):
        ot += ["-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps={'CPU' if k % 2 else 'CUDA2'}"]
    settings = parse_llama_args(["-ngl", "all", "-ts", "1,1,1", "-c", "32768", *ot], tool="server").settings
    assert len(settings.overrides) == 40
    print(f"model: {model.params.arch}, {model.params.n_layer} layers, {model.params.n_expert} experts, "
          f"{len(model.tensors)} tensors; 3 devices; {len(settings.overrides)} -ot patterns")

    def timed(fn, runs):
        fn()  # warm caches (compiled patterns, per-model indexes)
        t = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1000)
        return statistics.median(t), max(t)

    med, worst = timed(lambda: estimate(model, devices, settings), args.runs)
    print(f"estimate from llama.cpp arguments (40 patterns): median {med:.2f} ms, worst {worst:.2f} ms")
    p = all_on_gpus(model, devices, settings.copy(overrides=[]))
    for il in range(10, 50):
        p.assign(f"{il}:experts", CPU)
    med, worst = timed(lambda: estimate(model, p.devices, p.settings, p.weight_placement()), args.runs)
    print(f"estimate from a board placement (40 moved blocks):  median {med:.2f} ms, worst {worst:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
