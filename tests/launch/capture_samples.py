"""Capture the real llama.cpp output that the parser tests read (``tests/data/launch/``).

Run ``python -m tests.launch.capture_samples`` to refresh the files with the
pinned llama.cpp build (``app.llamacpp.build``). Everything is produced by
the real binaries on tiny generated models and loopback RPC servers; nothing
is edited by hand. Paths, ports and timings differ from run to run.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from app.llamacpp import build
from tests import gguf_factory
from tests.launch.helpers import memory_limited_rpc_server, write_unknown_arch_model

OUT = Path(__file__).resolve().parents[1] / "data" / "launch"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def get(url: str, body: dict | None = None, timeout: float = 120.0) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read()


def run_fail(server: Path, args: list[str], name: str) -> None:
    r = subprocess.run([str(server), *args], capture_output=True, timeout=120)
    text = (r.stderr + r.stdout).decode("utf-8", errors="replace")
    (OUT / name).write_text(f"# exit status {r.returncode}\n" + text, encoding="utf-8")
    print(f"{name}: exit {r.returncode}, {len(text)} chars")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(build.ensure_built())
    server = bin_dir / "llama-server"
    tmp = Path(tempfile.mkdtemp(prefix="layerdeck-capture-"))
    model = gguf_factory.write_tiny_model("qwen3moe", tmp / "qwen3moe.gguf")
    rpcs = []
    try:
        ports = []
        for _ in range(2):
            port = free_port()
            rpcs.append(subprocess.Popen([str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(port)
            ports.append(port)
        endpoints = [f"127.0.0.1:{p}" for p in ports]

        # 1. a full run: load at -lv 4, completions, /metrics, /slots, long generation for n_gen/tg lines
        port = free_port()
        log_path = OUT / "server-2rpc-lv4.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(server), "-m", str(model), "--rpc", ",".join(endpoints), "-ngl", "all",
                                     "-ts", "1,1", "-c", "8192", "-np", "1", "--host", "127.0.0.1", "--port",
                                     str(port), "--metrics", "-lv", "4"], stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                get(base + "/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        (OUT / "slots-idle.json").write_bytes(get(base + "/slots"))
        (OUT / "completion.json").write_bytes(get(base + "/completion", {"prompt": "Hello there", "n_predict": 8,
                                                                          "seed": 1}))
        req = urllib.request.Request(base + "/completion", data=json.dumps(
            {"prompt": "Once upon a time", "n_predict": 6, "stream": True, "seed": 2}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            (OUT / "completion-stream.txt").write_bytes(resp.read())
        (OUT / "metrics.txt").write_bytes(get(base + "/metrics"))
        # a generation long enough (>= 100 tokens, >= 3 s) for the "n_gen = N, tg = X t/s" progress line
        get(base + "/completion", {"prompt": "A", "n_predict": 7000, "ignore_eos": True, "seed": 3}, timeout=300)
        (OUT / "slots-after.json").write_bytes(get(base + "/slots"))
        (OUT / "metrics-after.txt").write_bytes(get(base + "/metrics"))
        (OUT / "props.json").write_bytes(get(base + "/props"))
        proc.terminate()
        proc.wait(30)

        # 2. llama-bench on one RPC device
        r = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(model), "--rpc", endpoints[0], "-ngl", "-1",
                            "-p", "32", "-n", "8", "-r", "1", "-o", "json"], capture_output=True, timeout=120)
        (OUT / "bench.json").write_bytes(r.stdout)

        # 3. failures
        run_fail(server, ["-m", str(model), "--no-mmap", "--port", "0"], "fail-no-mmap.log")
        run_fail(server, ["-m", str(model), "-fa", "--port", "0"], "fail-bare-fa.log")
        run_fail(server, ["-m", str(model), "-ot", "exps=CUDA9", "--port", "0", "-lv", "4"], "fail-ot-cuda9.log")
        run_fail(server, ["-m", str(model), "--rpc", f"127.0.0.1:{free_port()}", "--port", "0", "-lv", "4"],
                 "fail-rpc-dead.log")
        half = tmp / "half.gguf"
        half.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
        run_fail(server, ["-m", str(half), "--port", "0", "-lv", "4"], "fail-truncated.log")
        run_fail(server, ["-m", str(tmp / "missing.gguf"), "--port", "0", "-lv", "4"], "fail-missing.log")
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            run_fail(server, ["-m", str(model), "--port", str(busy.getsockname()[1]), "-lv", "4"],
                     "fail-port-in-use.log")
        run_fail(server, ["-m", str(write_unknown_arch_model(tmp / "unknown.gguf")), "--port", "0", "-lv", "4"],
                 "fail-unknown-arch.log")
        sparse = gguf_factory.write_sparse_model("qwen3-30b-a3b", tmp / "q30.gguf")
        with memory_limited_rpc_server(bin_dir) as (endpoint, rpc):
            run_fail(server, ["-m", str(sparse), "--rpc", endpoint, "-ngl", "all", "--fit", "off", "-lm", "none",
                              "-c", "512", "--port", "0", "-lv", "4"], "fail-rpc-oom.log")
            rpc.terminate()
            rpc_out = rpc.communicate(timeout=10)[0].decode("utf-8", errors="replace")
        (OUT / "fail-rpc-oom.rpc-server.log").write_text(rpc_out, encoding="utf-8")
    finally:
        for p in rpcs:
            p.terminate()
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
