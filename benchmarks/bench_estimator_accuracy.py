"""Print the full accuracy table: our estimate vs llama-fit-params --fit-print, per case, device and quantity.

Builds (or finds) the llama.cpp tools, starts three ggml-rpc-server processes on loopback, writes the test
models, runs every case of tests/memory/accuracy.py and prints ours / llama.cpp / error, then the matrix:
cases and comparisons per architecture and backend (CPU = the Host row, RPC = the RPC devices), and the worst
error per column and backend. A comparison is a MISS unless ours floors to llama.cpp's printed MiB (cases
with a documented compute difference are marked KNOWN instead).

    python benchmarks/bench_estimator_accuracy.py [case-substring ...]
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.llamacpp.build import ensure_built  # noqa: E402
from app.model import open_model  # noqa: E402
from tests import gguf_factory as gf  # noqa: E402
from tests.memory.accuracy import CASES, errors, run_case  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    only = sys.argv[1:]
    bin_dir = ensure_built()
    procs, endpoints = [], []
    for _ in range(3):
        port = free_port()
        procs.append(subprocess.Popen([str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        endpoints.append(f"127.0.0.1:{port}")
    time.sleep(0.5)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            print(f"{'case':24} {'device':6} {'quantity':8} {'ours MiB':>10} {'llama.cpp':>10} {'error':>8}")
            for case in CASES:
                if only and not any(o in case.id for o in only):
                    continue
                if case.model not in paths:
                    if case.model.startswith("tiny:"):
                        paths[case.model] = gf.write_tiny_model(case.model[5:], Path(tmp) / f"{case.model[5:]}.gguf")
                    else:
                        paths[case.model] = gf.write_sparse_model(case.model, Path(tmp) / f"{case.model}.gguf")
                res = run_case(case, paths[case.model], bin_dir, endpoints)
                arch = open_model(paths[case.model]).params.arch
                for dev, q, ours, theirs, ok in errors(res):
                    err = ours - theirs
                    known = not ok and q == "compute" and bool(case.compute_off)
                    rows.append((case.id, dev, q, ours, theirs, err, ok or known, arch))
                    flag = "" if ok else ("  KNOWN" if known else "  MISS")
                    print(f"{case.id:24} {dev:6} {q:8} {ours:10.1f} {theirs:10.0f} {err:+8.1f}{flag}")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    print()
    misses = [r for r in rows if not r[6]]
    print(f"{len(rows)} comparisons over {len({r[0] for r in rows})} cases, {len(misses)} outside the floor window")
    print()
    print(f"{'architecture':16} {'cases':>5} {'CPU cmp':>8} {'RPC cmp':>8} {'misses':>6}")
    for arch in sorted({r[7] for r in rows}):
        sel = [r for r in rows if r[7] == arch]
        cpu = sum(1 for r in sel if r[1] == "CPU")
        print(f"{arch:16} {len({r[0] for r in sel}):5} {cpu:8} {len(sel) - cpu:8} {sum(1 for r in sel if not r[6]):6}")
    print()
    for backend, pick in (("CPU", lambda r: r[1] == "CPU"), ("RPC", lambda r: r[1] != "CPU")):
        for q in ("model", "context", "compute"):
            sel = [r for r in rows if r[2] == q and pick(r) and r[4] > 0]
            if sel:
                # llama.cpp floors to whole MiB: the error beyond the floor window
                worst = max(sel, key=lambda r: max(r[3] - r[4] - 1, r[4] - r[3], 0))
                rel = abs(worst[5]) / worst[4] * 100
                print(f"worst {backend} {q:8}: {worst[0]} {worst[1]}: ours {worst[3]:.2f} MiB vs {worst[4]:.0f} MiB "
                      f"({worst[5]:+.2f} MiB, {rel:.2f}%)")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
