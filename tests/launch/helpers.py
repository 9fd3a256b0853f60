"""Helpers shared by the launch tests and the sample capture script."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psutil

DATA = Path(__file__).resolve().parents[1] / "data" / "launch"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def write_unknown_arch_model(path: Path, arch: str = "layerdeck-nonexistent") -> Path:
    """A valid GGUF whose architecture no llama.cpp knows."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((8, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def truncated_copy(model: Path, path: Path) -> Path:
    path.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    return path


@contextmanager
def memory_limited_rpc_server(bin_dir: Path, limit_mib: int = 1024):
    """A ggml-rpc-server whose address space is capped (RLIMIT_AS): large allocations on it fail for real.

    Yields its endpoint. The server reports the host's RAM as free memory, so
    llama.cpp plans the load and then fails to allocate the weight buffer.
    """
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib << 20, limit_mib << 20))

    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen([str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=limit)
        deadline = time.monotonic() + 20
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    up = True
                    break
            except OSError:
                time.sleep(0.05)
        if up:
            break
        proc.kill()
        proc.wait()
    else:
        raise RuntimeError("could not start a memory-limited ggml-rpc-server")
    try:
        yield f"127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()


def child_env() -> dict[str, str]:
    """Environment for a child Python that imports ``app`` and ``tests`` from this checkout."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
