"""Pytest plugin: real llama.cpp tools, RPC servers and generated GGUF models.

Fixtures
--------
``llama_bin`` (session)
    Directory holding ``llama-server``, ``llama-fit-params``, ``llama-bench``
    and ``ggml-rpc-server``, from :func:`app.llamacpp.build.ensure_built`
    (honours ``LAYERDECK_LLAMA_CPP_DIR``; otherwise builds once per version and
    caches).  Tests using it are never skipped: a failed build fails them.

``llama_quantize`` (session)
    Path of ``llama-quantize`` from the same build, built on first use (:func:`app.llamacpp.build.ensure_tool`;
    ``LAYERDECK_LLAMA_CPP_DIR`` is used when it holds one).

``rpc_servers``
    Factory ``start(n, *, memory_mib=None, threads=None) -> list[RpcServer]``
    that runs ``n`` ``ggml-rpc-server`` processes on free loopback ports and
    stops them (by PID) at teardown.  ``ggml-rpc-server`` has no flag to limit
    the memory it reports: a CPU server reports the host's physical RAM as both
    total and free (``sysconf(_SC_PHYS_PAGES)``).  ``memory_mib`` fakes that
    number with an ``LD_PRELOAD`` shim around ``sysconf`` (Linux, needs a C
    compiler); it changes only what is *reported*, not what can be allocated.

``llama_server``
    Factory ``start(model, *args, timeout=60) -> LlamaServer`` running
    ``llama-server --host 127.0.0.1 --port 0`` and waiting for ``/health``.

``tiny_models`` (session)
    ``{arch: Path}`` for every :data:`tests.gguf_factory.ARCHS`, written once.

``sparse_models`` (session)
    ``{name: Path}`` for every :data:`tests.gguf_factory.SPARSE_SPECS`.

:data:`CPU_WORKAROUND_ARGS` holds ``--no-repack`` on CPUs with AMX: there the
CPU build (``GGML_NATIVE=ON`` compiles the AMX kernels) puts quantized weights
in the AMX buffer type and crashes on the first quantized mat-mul (SIGSEGV or
SIGILL at ``ldtilecfg`` in ``ggml_backend_amx_mul_mat``) or aborts in the
scheduler for DeepSeek-V3 (``GGML_ASSERT(*cur_backend_id != -1)``).
``--no-repack`` drops the CPU extra buffer types (AMX and CPU_REPACK).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from tests import gguf_factory


#: Extra arguments every llama.cpp command in the tests carries. Empty since the test build is a portable
#: AVX2 build (app/llamacpp/build.py): the native build's AMX kernels crashed on quantized weights here.
CPU_WORKAROUND_ARGS: tuple[str, ...] = ()


def _exe(name: str) -> str:
    return name + (".exe" if sys.platform == "win32" else "")


#: The fixtures that build the real llama.cpp (or take it from ``LAYERDECK_LLAMA_CPP_DIR``). A test that uses any
#: of them, directly or through another fixture, is a ``llama`` test whatever its decorators say: the hook below
#: marks it before ``-m`` selects, so the README's fast lane (``-m "not llama and not gui"``) never builds it.
BUILD_FIXTURES = frozenset({"llama_bin", "llama_vulkan_bin", "llama_quantize"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if BUILD_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("llama") is None:
            item.add_marker(pytest.mark.llama)


# --------------------------------------------------------------------------- llama_bin


@pytest.fixture(scope="session")
def llama_bin() -> Path:
    """Directory with the four llama.cpp tools (built on first use)."""
    from app.llamacpp import build

    try:
        path = Path(build.ensure_built())
    except build.BuildError as exc:
        pytest.fail(f"llama.cpp tools are not available and could not be built: {exc}", pytrace=False)
    except OSError as exc:  # e.g. no cmake/compiler
        pytest.fail(f"llama.cpp build could not run: {exc!r}", pytrace=False)
    missing = [t for t in build.TARGETS if not (path / _exe(t)).is_file()]
    if missing:
        pytest.fail(f"llama.cpp tool directory {path} lacks {', '.join(missing)}", pytrace=False)
    return path


# --------------------------------------------------------------------------- llama_quantize


@pytest.fixture(scope="session")
def llama_quantize() -> Path:
    """The ``llama-quantize`` executable of the same pinned build (:func:`app.llamacpp.build.ensure_tool`: from
    ``LAYERDECK_LLAMA_CPP_DIR`` when it holds one, else built once into the cache's ``bin/`` beside the four
    tools, which are not rebuilt). Never skipped: a failed build fails the tests using it."""
    from app.llamacpp import build

    try:
        return Path(build.ensure_tool("llama-quantize"))
    except build.BuildError as exc:
        pytest.fail(f"llama-quantize is not available and could not be built: {exc}", pytrace=False)
    except OSError as exc:  # e.g. no cmake/compiler
        pytest.fail(f"the llama-quantize build could not run: {exc!r}", pytrace=False)


# --------------------------------------------------------------------------- llama_vulkan_bin

#: lavapipe is a CPU-type Vulkan device, which ggml-vulkan skips unless it is named in this variable.
VULKAN_ENV = {"GGML_VK_VISIBLE_DEVICES": "0"}


def _vulkan_missing() -> str | None:
    """Why the Vulkan backend cannot be built or run here (None when it can)."""
    if shutil.which("glslc") is None:
        return "glslc is not installed (Debian: apt-get install glslc; .ci/run installs it)"
    icds = [p for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d") for p in Path(d).glob("lvp_icd*.json")]
    if not icds:
        return "Mesa's lavapipe Vulkan driver is not installed (Debian: apt-get install mesa-vulkan-drivers)"
    return None


@pytest.fixture(scope="session")
def llama_vulkan_bin() -> Path:
    """The same tools built with the Vulkan backend (plus CPU and RPC), run on lavapipe. Built once and cached
    like the CPU build; skipped, with the reason, only where the system packages for it are missing."""
    from app.llamacpp import build

    if not os.environ.get(build.BACKEND_ENV_DIRS["vulkan"]):
        reason = _vulkan_missing()
        if reason:
            pytest.skip(f"Vulkan backend tests: {reason}")
    try:
        path = Path(build.ensure_built(backend="vulkan"))
    except build.BuildError as exc:
        pytest.fail(f"the Vulkan build of llama.cpp failed: {exc}", pytrace=False)
    listing = subprocess.run([str(path / _exe("llama-server")), "--list-devices"], capture_output=True, text=True,
                             timeout=120, env={**os.environ, **VULKAN_ENV})
    if "Vulkan0" not in listing.stdout + listing.stderr:
        pytest.fail(f"the Vulkan build lists no Vulkan0 with {VULKAN_ENV}:\n{listing.stdout}{listing.stderr}",
                    pytrace=False)
    return path


# --------------------------------------------------------------------------- processes


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """One SIGTERM, wait, then SIGKILL: only this process, by its PID."""
    if proc.poll() is not None:
        return
    try:
        proc.terminate()  # SIGTERM on POSIX
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def tail_lines(path: Path, n: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no output)"
    return data[-n:].decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- RPC servers

_MEM_SHIM_SRC = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
/* Report LAYERDECK_RPC_MEMORY_MIB as the physical memory size (what ggml's CPU device reports). */
long sysconf(int name) {
    static long (*real_sysconf)(int) = 0;
    if (!real_sysconf) real_sysconf = (long (*)(int)) dlsym(RTLD_NEXT, "sysconf");
    if (name == _SC_PHYS_PAGES) {
        const char *mib = getenv("LAYERDECK_RPC_MEMORY_MIB");
        if (mib && *mib) {
            long page = real_sysconf(_SC_PAGESIZE);
            return (long) (strtoll(mib, 0, 10) * 1048576LL / page);
        }
    }
    return real_sysconf(name);
}
"""


@dataclass
class RpcServer:
    host: str
    port: int
    endpoint: str
    pid: int
    process: subprocess.Popen = field(repr=False)
    log: Path | None = None
    memory_mib: int | None = None

    def output(self) -> str:
        return tail_lines(self.log) if self.log else ""


@pytest.fixture(scope="session")
def _rpc_memory_shim(tmp_path_factory) -> Callable[[], Path]:
    built: dict[str, Path] = {}

    def get() -> Path:
        if "so" in built:
            return built["so"]
        if not sys.platform.startswith("linux"):
            pytest.fail("memory_mib needs Linux (LD_PRELOAD shim around sysconf)", pytrace=False)
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            pytest.fail("memory_mib needs a C compiler (cc/gcc/clang) to build the sysconf shim", pytrace=False)
        d = tmp_path_factory.mktemp("rpc_memshim")
        src, so = d / "memshim.c", d / "memshim.so"
        src.write_text(_MEM_SHIM_SRC)
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", str(src), "-o", str(so), "-ldl"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"building the sysconf shim failed:\n{r.stderr}", pytrace=False)
        built["so"] = so
        return so

    return get


@pytest.fixture
def rpc_servers(llama_bin, tmp_path, _rpc_memory_shim):
    """Factory: ``start(n, *, memory_mib=None, threads=None, timeout=30) -> list[RpcServer]``."""
    yield from _rpc_factory(llama_bin, tmp_path, _rpc_memory_shim, {})


@pytest.fixture
def vulkan_rpc_servers(llama_vulkan_bin, tmp_path, _rpc_memory_shim):
    """As ``rpc_servers``, from the Vulkan build with lavapipe visible: each serves a remote ``Vulkan0``
    (``memory_mib`` has no effect on it: the Vulkan device reports the driver's heap, not ``sysconf``)."""
    yield from _rpc_factory(llama_vulkan_bin, tmp_path, _rpc_memory_shim, VULKAN_ENV)


def _rpc_factory(bin_dir: Path, tmp_path: Path, _rpc_memory_shim, extra_env: dict[str, str]):
    started: list[RpcServer] = []
    exe = bin_dir / _exe("ggml-rpc-server")

    def start_one(index: int, memory_mib: int | None, threads: int | None, timeout: float) -> RpcServer:
        env = {**os.environ, **extra_env}
        if memory_mib is not None:
            env["LD_PRELOAD"] = str(_rpc_memory_shim()) + (
                (" " + env["LD_PRELOAD"]) if env.get("LD_PRELOAD") else "")
            env["LAYERDECK_RPC_MEMORY_MIB"] = str(int(memory_mib))
        last_error = ""
        for attempt in range(5):
            port = free_port()
            log = tmp_path / f"rpc-{index}-{port}.log"
            args = [str(exe), "-H", "127.0.0.1", "-p", str(port)]
            if threads:
                args += ["-t", str(threads)]
            with open(log, "wb") as out:
                proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env)
            server = RpcServer("127.0.0.1", port, f"127.0.0.1:{port}", proc.pid, proc, log, memory_mib)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                if _port_open("127.0.0.1", port):
                    started.append(server)
                    return server
                time.sleep(0.05)
            if proc.poll() is None:  # still running but never listened
                stop_process(proc)
                raise RuntimeError(f"ggml-rpc-server on port {port} did not accept connections within "
                                   f"{timeout:.0f} s; output:\n{tail_lines(log)}")
            last_error = f"exit status {proc.returncode}; output:\n{tail_lines(log)}"
            if "Failed to create server socket" not in tail_lines(log):
                break  # not a port race: do not retry
        raise RuntimeError(f"ggml-rpc-server {exe} died at start ({last_error})")

    def start(n: int, *, memory_mib: int | list[int] | None = None, threads: int | None = None,
              timeout: float = 30.0) -> list[RpcServer]:
        mems = list(memory_mib) if isinstance(memory_mib, (list, tuple)) else [memory_mib] * n
        if len(mems) != n:
            raise ValueError("memory_mib list must have n entries")
        return [start_one(len(started), mems[i], threads, timeout) for i in range(n)]

    yield start
    for server in reversed(started):
        stop_process(server.process)


# --------------------------------------------------------------------------- llama-server

_LISTEN_RE = re.compile(r"listening on http://([^:/\s]+):(\d+)")


@dataclass
class LlamaServer:
    process: subprocess.Popen = field(repr=False)
    log: Path
    args: list[str]
    host: str = "127.0.0.1"
    port: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def output(self) -> str:
        return tail_lines(self.log, 200_000)

    def request(self, path: str, body: Any | None = None, timeout: float = 60.0) -> tuple[int, Any]:
        """GET (body None) or POST JSON; returns (status, parsed JSON or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        text = raw.decode("utf-8", errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def stop(self) -> None:
        stop_process(self.process)


def start_llama_server(bin_dir: Path, model: Path | str, *args: str, log: Path, timeout: float = 60.0,
                       workaround: bool = True, env: dict[str, str] | None = None) -> LlamaServer:
    """Start llama-server on a free port (``--port 0``) and wait until ``/health`` answers 200."""
    cmd = [str(bin_dir / _exe("llama-server")), "-m", str(model), "--host", "127.0.0.1", "--port", "0",
           *(CPU_WORKAROUND_ARGS if workaround else ()), *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})})
    server = LlamaServer(proc, log, cmd)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with status {proc.returncode} before it was ready.\n"
                                   f"command: {' '.join(cmd)}\noutput:\n{tail_lines(log)}")
            if not server.port:
                m = _LISTEN_RE.search(tail_lines(log, 200_000))
                if m:
                    server.port = int(m.group(2))
            if server.port:
                try:
                    status, _ = server.request("/health", timeout=2.0)
                except OSError:
                    status = 0
                if status == 200:
                    return server
            time.sleep(0.05)
        raise RuntimeError(f"llama-server was not healthy within {timeout:.0f} s.\n"
                           f"command: {' '.join(cmd)}\noutput:\n{tail_lines(log)}")
    except BaseException:
        stop_process(proc)
        raise


@pytest.fixture
def llama_server(llama_bin, tmp_path):
    """Factory: ``start(model, *args, timeout=60, workaround=True) -> LlamaServer`` (stopped at teardown)."""
    started: list[LlamaServer] = []

    def start(model: Path | str, *args: str, timeout: float = 60.0, workaround: bool = True) -> LlamaServer:
        log = tmp_path / f"llama-server-{len(started)}.log"
        server = start_llama_server(llama_bin, model, *args, log=log, timeout=timeout, workaround=workaround)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


# --------------------------------------------------------------------------- models


class _LazyModels(dict):
    """``{name: Path}`` whose files are written on first access (a targeted run writes only what it uses; the
    full suite writes each once). Iteration and ``len`` see every name."""

    def __init__(self, names, write):
        super().__init__()
        self._names = tuple(names)
        self._write = write

    def __missing__(self, name):
        if name not in self._names:
            raise KeyError(name)
        path = self._write(name)
        self[name] = path
        return path

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)

    def __contains__(self, name):
        return name in self._names

    def keys(self):
        return list(self._names)

    def items(self):
        return [(n, self[n]) for n in self._names]

    def values(self):
        return [self[n] for n in self._names]


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """One tiny GGUF per architecture in :data:`tests.gguf_factory.ARCHS` (written when first used)."""
    d = tmp_path_factory.mktemp("tiny_models")
    return _LazyModels(gguf_factory.ARCHS, lambda arch: gguf_factory.write_tiny_model(arch, d / f"{arch}.gguf"))


@pytest.fixture(scope="session")
def sparse_models(tmp_path_factory) -> dict[str, Path]:
    """Full-size-shaped sparse GGUFs (header only on disk) for every SPARSE_SPECS entry (written when first used)."""
    d = tmp_path_factory.mktemp("sparse_models")
    return _LazyModels(gguf_factory.SPARSE_SPECS,
                       lambda name: gguf_factory.write_sparse_model(name, d / f"{name}.gguf"))


@pytest.fixture
def vulkan_llama_server(llama_vulkan_bin, tmp_path):
    """As ``llama_server``, from the Vulkan build with lavapipe visible as ``Vulkan0``."""
    started: list[LlamaServer] = []

    def start(model: Path | str, *args: str, timeout: float = 120.0) -> LlamaServer:
        log = tmp_path / f"vulkan-llama-server-{len(started)}.log"
        server = start_llama_server(llama_vulkan_bin, model, *args, log=log, timeout=timeout, env=VULKAN_ENV)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
