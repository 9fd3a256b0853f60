"""The accuracy matrix on Vulkan0 (Mesa's lavapipe): our estimate vs the Vulkan build's llama-fit-params.

Every full-size case of tests/memory/accuracy.py, on one device (``-ts`` dropped), with the device as
Layerdeck detects it (``--list-devices`` plus the Vulkan loader's limits). Printed per case: the figures that
do not floor to llama.cpp's printed MiB; then comparisons, misses and the worst error per quantity and
device. The estimate replays the backend's graph reordering (``ggml_vk_graph_optimize``, docs/memory-model.md,
Backends); ``--in-order`` sets ``GGML_VK_DISABLE_GRAPH_OPTIMIZE=1`` on llama.cpp's side only, so its misses show
what the reordering moves. ``--behind-rpc`` runs the same matrix with the device behind RPC: a Vulkan
``ggml-rpc-server`` on loopback serves lavapipe's Vulkan0 and the CPU build is its client (to llama.cpp the device
is then ``RPC0``, an RPC backend: not reordered, the server's buffer limits).

Needs glslc, Mesa's Vulkan drivers and (on Debian 12) newer Vulkan headers: see .ci/run.

    python benchmarks/bench_vulkan_accuracy.py [--in-order | --behind-rpc] [case-substring ...]
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.command.parse import settings_from_args  # noqa: E402
from app.devices.detect import detect  # noqa: E402
from app.errors import EstimateError  # noqa: E402
from app.llamacpp.build import ensure_built  # noqa: E402
from app.llamacpp.fit_print import FitPrintError, run_fit_print  # noqa: E402
from app.memory.device_adapter import from_detected  # noqa: E402
from app.memory.estimator import estimate  # noqa: E402
from app.model import open_model  # noqa: E402
from tests import gguf_factory as gf  # noqa: E402
from tests.memory.accuracy import CASES, single_device_args  # noqa: E402

MiB = 1 << 20
VULKAN_ENV = {"GGML_VK_VISIBLE_DEVICES": "0"}


def _same_abort(theirs: str, ours: str) -> bool:
    """The estimate names the tensor llama.cpp aborts on, or llama.cpp's own reason."""
    m = re.search(r"pre-allocated tensor \(([^)]+)\)", theirs)
    if m:
        return f"({m.group(1)})" in ours
    return any(q in theirs and q in ours for q in ("invalid value for main_gpu",))


def _rpc_server(vulkan_bin: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """A Vulkan ggml-rpc-server on a free loopback port (lavapipe as its Vulkan0) and its endpoint."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([str(vulkan_bin / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"127.0.0.1:{port}"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the Vulkan ggml-rpc-server did not start on port {port}")


def main(argv: list[str]) -> int:
    in_order = "--in-order" in argv
    behind_rpc = "--behind-rpc" in argv
    wanted = [a for a in argv if a not in ("--in-order", "--behind-rpc")]
    vulkan_bin = ensure_built(backend="vulkan")
    env = {**os.environ, **VULKAN_ENV}
    server = None
    rpc: list[str] = []
    bin_dir = vulkan_bin
    if behind_rpc:
        server, endpoint = _rpc_server(vulkan_bin, env)
        rpc, bin_dir = ["--rpc", endpoint], ensure_built()  # the CPU build as the client
    try:
        lanes = from_detected(detect(bin_dir, rpc=rpc[1:], env=env, cuda_probe=None, amd=False).devices)
        print(f"devices: {[(d.name, d.total // MiB, d.max_tensor_bytes) for d in lanes]}")
        mode = "behind RPC (a Vulkan ggml-rpc-server)" if behind_rpc else "in order" if in_order else None
        return _run(wanted, bin_dir, lanes, {**env, "GGML_VK_DISABLE_GRAPH_OPTIMIZE": "1"} if in_order else env,
                    rpc, mode or "graph reordering on")
    finally:
        if server is not None:
            server.kill()
            server.wait()


def _run(wanted: list[str], bin_dir, lanes, llama_env: dict[str, str], rpc: list[str], mode: str) -> int:
    comparisons = misses = 0
    aborted: list[str] = []
    worst: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if case.model.startswith("tiny:") or (wanted and not any(w in case.id for w in wanted)):
                continue
            path = Path(tmp) / f"{case.model}.gguf"
            if not path.exists():
                gf.write_sparse_model(case.model, path)
            args = single_device_args(case.args)
            try:
                theirs = run_fit_print(path, rpc + args, llama_dir=bin_dir, env=llama_env, timeout=600)
            except FitPrintError as exc:  # llama.cpp itself stops on this case: does the estimate say so?
                reason = next((ln for ln in str(exc).splitlines() if "ggml" in ln or "error" in ln), str(exc))
                aborted.append(case.id)
                try:
                    estimate(open_model(path), lanes, settings_from_args(args, tool="fit-params"))
                    said = "MISS: the estimate gives figures"
                except (EstimateError, ValueError) as ours_exc:
                    said = "the estimate says so too" if _same_abort(str(exc), str(ours_exc)) else f"MISS: {ours_exc}"
                misses += said.startswith("MISS")
                comparisons += 1
                print(f"{case.id:28} llama.cpp aborts: {reason.strip()[-120:]}; {said[:160]}", flush=True)
                continue
            try:
                ours = estimate(open_model(path), lanes, settings_from_args(args, tool="fit-params"))
            except (EstimateError, ValueError) as exc:
                misses += 1
                print(f"{case.id:28} MISS: llama.cpp runs it, the estimate says {exc}", flush=True)
                continue
            bad = []
            for row in theirs:
                mine = ours.device(row.name)
                for q, got, want in (
                    ("model", mine.model, row.model),
                    ("context", mine.context, row.context),
                    ("compute", mine.compute, row.compute),
                ):
                    comparisons += 1
                    err = got / MiB - want
                    key = (row.name, q)
                    worst[key] = max(worst.get(key, 0.0), abs(err) if got // MiB != want else 0.0)
                    if got // MiB != want:
                        misses += 1
                        bad.append(f"{row.name} {q} {want} vs {got / MiB:.2f}")
            print(f"{case.id:28} {'exact' if not bad else 'MISS ' + '; '.join(bad)}", flush=True)
    print(f"\n{comparisons} comparisons, {misses} misses ({mode})"
          + (f"; {len(aborted)} cases llama.cpp aborts on (each one comparison: does the estimate say "
             f"so?): {', '.join(aborted)}" if aborted else ""))
    for (dev, q), w in sorted(worst.items()):
        print(f"  worst {dev:8} {q:8} {w:8.2f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
