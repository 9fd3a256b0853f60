"""Build llama.cpp's tools from the sources vendored in the llama-cpp-python sdist.

PyPI is the only registry this project may rely on, and the llama-cpp-python
source distribution carries a complete llama.cpp tree (``vendor/llama.cpp``).
This module downloads that sdist with pip, configures CMake with the RPC
backend enabled and the web UI download disabled, builds only the tools
Layerdeck drives, and caches the result per version and build options in the
user cache directory, so a machine builds once.

Run ``python -m app.llamacpp.build`` to build (or find) the tools and print
the directory.  ``LAYERDECK_LLAMA_CPP_DIR`` short-cuts all of this.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ..errors import ToolError

#: The llama-cpp-python release whose vendored llama.cpp we build and test against.
PINNED_VERSION = "0.3.36"

#: Executables Layerdeck needs, and the CMake targets that produce them.
TARGETS = {
    "llama-server": "llama-server",
    "llama-fit-params": "llama-fit-params",
    "llama-bench": "llama-bench",
    "ggml-rpc-server": "ggml-rpc-server",
}

CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_RPC=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_OPENMP=OFF",
    # A portable x86-64-v3 build instead of -march=native: the native build on
    # Sapphire Rapids compiles the AMX kernels, which crash (SIGILL/SIGSEGV at
    # ldtilecfg) on quantized mat-muls in the VMs we test on. AVX2 is what
    # every CPU that matters for Layerdeck's users and CI has.
    "-DGGML_NATIVE=OFF",
    *(
        ("-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON")
        if platform.machine().lower() in ("x86_64", "amd64")
        else ()
    ),
)

#: Tools built only when something asks for one (:func:`ensure_tool`), into the same ``bin/`` from the same
#: kept sources and options: they are not part of :func:`complete` or :func:`build_key`, so adding one
#: never invalidates or rebuilds an existing cache.
ON_DEMAND_TARGETS = {
    "llama-quantize": "llama-quantize",
}

ENV_DIR = "LAYERDECK_LLAMA_CPP_DIR"

#: Backends the builder can add to the CPU and RPC backends, with their CMake switches. A Vulkan build
#: also holds the CPU backend; lavapipe (Mesa's CPU Vulkan driver) shows as ``Vulkan0`` only with
#: ``GGML_VK_VISIBLE_DEVICES=0`` (ggml-vulkan.cpp skips CPU-type devices otherwise).
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "cpu": (),
    "vulkan": ("-DGGML_VULKAN=ON",),
}

#: A folder of Vulkan headers newer than the system's (Debian 12's 1.3.239 are too old for the pinned
#: llama.cpp): its ``include`` folder is passed to CMake and the compilers. Machine-specific, so not
#: part of the build key.
VULKAN_HEADERS_ENV = "LAYERDECK_VULKAN_HEADERS"

#: Per-backend override of the tools folder (``LAYERDECK_LLAMA_CPP_DIR`` is the CPU one).
BACKEND_ENV_DIRS = {"cpu": ENV_DIR, "vulkan": "LAYERDECK_LLAMA_CPP_VULKAN_DIR"}


class BuildError(ToolError, RuntimeError):
    """The llama.cpp build could not be completed."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", base)
    return Path(base) / "layerdeck"


def _options(backend: str) -> tuple[str, ...]:
    try:
        return CMAKE_OPTIONS + BACKEND_OPTIONS[backend]
    except KeyError:
        raise BuildError(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_OPTIONS)}") from None


def build_key(version: str = PINNED_VERSION, backend: str = "cpu") -> str:
    """The cache folder name: the CPU key is unchanged by the backend table (existing caches stay valid)."""
    digest = hashlib.sha256("\n".join(_options(backend)).encode()).hexdigest()[:10]
    return f"llama.cpp-{version}-{digest}" if backend == "cpu" else f"llama.cpp-{version}-{backend}-{digest}"


def _backend_configure_args(backend: str) -> list[str]:
    """Machine-specific CMake arguments (not in the key): where newer Vulkan headers live."""
    if backend != "vulkan":
        return []
    if shutil.which("glslc") is None:
        raise BuildError("the Vulkan build needs glslc (Debian: apt-get install glslc)")
    headers = os.environ.get(VULKAN_HEADERS_ENV)
    if not headers:
        return []
    include = Path(headers) / "include"
    if not (include / "vulkan" / "vulkan.h").is_file():
        raise BuildError(f"{VULKAN_HEADERS_ENV}={headers} has no include/vulkan/vulkan.h")
    flag = f"-I{include}"
    return [f"-DVulkan_INCLUDE_DIR={include}", f"-DCMAKE_C_FLAGS={flag}", f"-DCMAKE_CXX_FLAGS={flag}"]


def exe_name(tool: str) -> str:
    return tool + (".exe" if sys.platform == "win32" else "")


def complete(bin_dir: Path) -> bool:
    return all((bin_dir / exe_name(t)).is_file() for t in TARGETS)


def _run(cmd: list[str], log, cwd: Path | None = None) -> None:
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise BuildError(f"command failed with exit code {proc.returncode}: {' '.join(cmd)} (see {log.name})")


def ensure_built(version: str = PINNED_VERSION, jobs: int | None = None, log_stream=None, backend: str = "cpu") -> Path:
    """Return a directory holding all tools for ``backend``, building them if needed."""
    env = BACKEND_ENV_DIRS.get(backend, ENV_DIR)
    override = os.environ.get(env)
    if override:
        path = Path(override)
        missing = [t for t in TARGETS if not (path / exe_name(t)).is_file()]
        if missing:
            raise BuildError(f"{env}={override} lacks {', '.join(missing)}")
        return path
    root = cache_root() / build_key(version, backend)
    bin_dir = root / "bin"
    if complete(bin_dir):
        return bin_dir
    root.mkdir(parents=True, exist_ok=True)
    with _BuildLock(root / "build.lock"):
        if complete(bin_dir):  # another process finished the build while we waited
            return bin_dir
        return _build(version, root, bin_dir, jobs or os.cpu_count() or 2, backend)


def ensure_tool(tool: str, version: str = PINNED_VERSION, jobs: int | None = None, backend: str = "cpu") -> Path:
    """Return the path of an on-demand tool (:data:`ON_DEMAND_TARGETS`), building only that target if needed.

    ``LAYERDECK_LLAMA_CPP_DIR`` (or the backend's variable) is used when it holds the tool. Otherwise the
    cache folder's kept ``src/`` is configured with the same options into a temporary build folder, the one
    target is built, and its executable is copied into the cache's ``bin/`` under the build lock; the four
    tools of :data:`TARGETS` are neither rebuilt nor touched (the whole build runs first only when the cache
    has no sources yet).
    """
    if tool not in ON_DEMAND_TARGETS:
        raise BuildError(f"unknown on-demand tool {tool!r}: choose one of {', '.join(ON_DEMAND_TARGETS)}")
    override = os.environ.get(BACKEND_ENV_DIRS.get(backend, ENV_DIR))
    if override and (Path(override) / exe_name(tool)).is_file():
        return Path(override) / exe_name(tool)
    root = cache_root() / build_key(version, backend)
    bin_dir = root / "bin"
    exe = bin_dir / exe_name(tool)
    if exe.is_file():
        return exe
    root.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 2
    with _BuildLock(root / "build.lock"):
        if exe.is_file():  # another process built it while we waited
            return exe
        if not ((root / "src" / "CMakeLists.txt").is_file() and complete(bin_dir)):
            _build(version, root, bin_dir, jobs, backend)
        return _build_one(root, bin_dir, tool, jobs, backend)


def _build_one(root: Path, bin_dir: Path, tool: str, jobs: int, backend: str) -> Path:
    """Configure the kept sources into a temporary folder, build ``tool``'s target and copy it into ``bin_dir``."""
    log_path = root / "build.log"
    with open(log_path, "a", encoding="utf-8") as log, tempfile.TemporaryDirectory(dir=root, prefix="build-") as tmp:
        build = Path(tmp)
        configure = [*_options(backend), *_backend_configure_args(backend)]
        _run(["cmake", "-S", str(root / "src"), "-B", str(build), *configure], log)
        _run(
            [
                "cmake",
                "--build",
                str(build),
                "--config",
                "Release",
                "-j",
                str(jobs),
                "--target",
                ON_DEMAND_TARGETS[tool],
            ],
            log,
        )
        found = next(iter(list(build.glob(f"bin/{exe_name(tool)}")) + list(build.glob(f"**/{exe_name(tool)}"))), None)
        if found is None:
            raise BuildError(f"the build finished but produced no {tool} (see {log_path})")
        staged = bin_dir / (exe_name(tool) + ".tmp")
        shutil.copy2(found, staged)
        os.replace(staged, bin_dir / exe_name(tool))
    return bin_dir / exe_name(tool)


class _BuildLock:
    """An exclusive lock file, so two test runs never build into the same folder at once."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = None

    def __enter__(self):
        self.fh = open(self.path, "a+")
        try:
            import fcntl

            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # Windows: msvcrt locks a byte range
            import msvcrt

            msvcrt.locking(self.fh.fileno(), msvcrt.LK_LOCK, 1)
        return self

    def __exit__(self, *exc):
        self.fh.close()  # closing releases the lock


def _build(version: str, root: Path, bin_dir: Path, jobs: int, backend: str = "cpu") -> Path:
    log_path = root / "build.log"
    with open(log_path, "a", encoding="utf-8") as log:
        src = root / "src"
        if not (src / "CMakeLists.txt").is_file():
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                _run(
                    [
                        sys.executable,
                        "-m",
                        "pip",
                        "download",
                        "--no-deps",
                        "--no-binary",
                        ":all:",
                        f"llama-cpp-python=={version}",
                        "-d",
                        tmp,
                    ],
                    log,
                )
                archives = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
                if not archives:
                    raise BuildError(f"pip did not fetch the llama-cpp-python {version} sdist (see {log_path})")
                prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
                with tarfile.open(archives[0]) as tar:
                    members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
                    for m in members:
                        m.name = m.name[len(prefix) :]
                    members = [m for m in members if m.name]
                    staging = Path(tmp) / "llama.cpp"
                    tar.extractall(staging, members=members, filter="data")
                if src.exists():
                    shutil.rmtree(src)
                staging.rename(src)
        build = root / "build"
        configure = [*_options(backend), *_backend_configure_args(backend)]
        _run(["cmake", "-S", str(src), "-B", str(build), *configure], log)
        _run(
            ["cmake", "--build", str(build), "--config", "Release", "-j", str(jobs), "--target", *TARGETS.values()], log
        )
        staging_bin = root / "bin.tmp"
        if staging_bin.exists():
            shutil.rmtree(staging_bin)
        staging_bin.mkdir()
        for tool in TARGETS:
            found = next(
                iter(list(build.glob(f"bin/{exe_name(tool)}")) + list(build.glob(f"**/{exe_name(tool)}"))), None
            )
            if found is None:
                raise BuildError(f"the build finished but produced no {tool} (see {log_path})")
            shutil.copy2(found, staging_bin / exe_name(tool))
        if bin_dir.exists():
            shutil.rmtree(bin_dir)
        staging_bin.rename(bin_dir)
        shutil.rmtree(build, ignore_errors=True)
    return bin_dir


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m app.llamacpp.build", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=sorted(BACKEND_OPTIONS), default="cpu")
    parser.add_argument("--tool", choices=sorted(ON_DEMAND_TARGETS), help="also build this tool and print its path")
    args = parser.parse_args(argv)
    try:
        print(ensure_tool(args.tool, backend=args.backend) if args.tool else ensure_built(backend=args.backend))
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
