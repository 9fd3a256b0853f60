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
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    "llama-batched-bench": "llama-batched-bench",
}

ENV_DIR = "LAYERDECK_LLAMA_CPP_DIR"

#: The backends :func:`plan` can build, in the order a user is offered them.
BACKENDS = ("cpu", "vulkan", "cuda", "rocm", "metal")

#: Backends the builder can add to the CPU and RPC backends, with their CMake switches (the option names
#: of the pinned ``ggml/CMakeLists.txt``: ``option(GGML_VULKAN ...)``, ``option(GGML_CUDA ...)``,
#: ``option(GGML_HIP ...)``, ``option(GGML_METAL ...)``, ``option(GGML_METAL_EMBED_LIBRARY ...)``). Every
#: build also holds the CPU backend. lavapipe (Mesa's CPU Vulkan driver) shows as ``Vulkan0`` only with
#: ``GGML_VK_VISIBLE_DEVICES=0`` (ggml-vulkan.cpp skips CPU-type devices otherwise). The GPU architectures
#: (CUDA compute capability, HIP gfx targets) are read from this machine by :func:`plan` and join the key.
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "cpu": (),
    "vulkan": ("-DGGML_VULKAN=ON",),
    "cuda": ("-DGGML_CUDA=ON",),
    "rocm": ("-DGGML_HIP=ON",),
    # the shaders embedded in the binary: no separate default.metallib to ship beside llama-server
    "metal": ("-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"),
}

#: A folder of Vulkan headers newer than the system's (Debian 12's 1.3.239 are too old for the pinned
#: llama.cpp): its ``include`` folder is passed to CMake and the compilers. Machine-specific, so not
#: part of the build key.
VULKAN_HEADERS_ENV = "LAYERDECK_VULKAN_HEADERS"

#: Per-backend override of the tools folder (``LAYERDECK_LLAMA_CPP_DIR`` is the CPU one).
BACKEND_ENV_DIRS = {
    "cpu": ENV_DIR,
    "vulkan": "LAYERDECK_LLAMA_CPP_VULKAN_DIR",
    "cuda": "LAYERDECK_LLAMA_CPP_CUDA_DIR",
    "rocm": "LAYERDECK_LLAMA_CPP_ROCM_DIR",
    "metal": "LAYERDECK_LLAMA_CPP_METAL_DIR",
}

#: CUDA compute capabilities to build for instead of the GPUs NVML reports (``8.6`` or ``86``; several
#: separated by commas), e.g. to build on a machine without the GPU. HIP: the gfx targets (``gfx1100``).
CUDA_ARCH_ENV = "LAYERDECK_CUDA_ARCHITECTURES"
HIP_TARGETS_ENV = "LAYERDECK_HIP_TARGETS"

#: Minutes the build takes per CPU core, measured on this project's 2-core VMs: the CPU build of the four
#: tools 12-15 min (28 core-minutes), the Vulkan build 37 min (shader generation and ggml-vulkan.cpp). CUDA
#: and HIP compile ggml-cuda's ~150 kernel files for one architecture; not measured here (no GPU toolkit
#: that links): a rough factor of 3 over the CPU build, said so in :meth:`BuildPlan.estimate_text`.
CORE_MINUTES = {"cpu": 28.0, "vulkan": 74.0, "cuda": 84.0, "rocm": 84.0, "metal": 28.0}
MEASURED = {"cpu": True, "vulkan": True, "cuda": False, "rocm": False, "metal": False}


class BuildError(ToolError, RuntimeError):
    """The llama.cpp build could not be completed."""


class BuildCancelled(BuildError):
    """The user cancelled the build; what was compiled so far is kept and the next build resumes from it."""


class ToolchainMissing(BuildError):
    """A backend's compiler or SDK is not on this machine; ``hint`` says how to get it."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", base)
    return Path(base) / "layerdeck"


def _options(backend: str, arch: tuple[str, ...] = ()) -> tuple[str, ...]:
    try:
        return CMAKE_OPTIONS + BACKEND_OPTIONS[backend] + arch
    except KeyError:
        raise BuildError(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_OPTIONS)}") from None


def build_key(version: str = PINNED_VERSION, backend: str = "cpu", arch: tuple[str, ...] = ()) -> str:
    """The cache folder name: the CPU key is unchanged by the backend table (existing caches stay valid).

    ``arch`` is the GPU-architecture option of a CUDA or HIP build (:func:`plan` reads it from the GPUs): a
    build for one compute capability does not run on another, so each gets its own folder.
    """
    digest = hashlib.sha256("\n".join(_options(backend, arch)).encode()).hexdigest()[:10]
    return f"llama.cpp-{version}-{digest}" if backend == "cpu" else f"llama.cpp-{version}-{backend}-{digest}"


# --------------------------------------------------------------------------- toolchains


def _which(name: str, extra: list[Path] | None = None) -> Path | None:
    found = shutil.which(name)
    if found:
        return Path(found)
    for folder in extra or []:
        p = folder / exe_name(name)
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def cuda_wheel_dir() -> Path:
    """Where :func:`install_cuda_wheels` puts NVIDIA's CUDA toolkit wheels (a private folder, no system install)."""
    return cache_root() / "cuda-toolkit"


#: NVIDIA's CUDA toolkit on PyPI, one wheel per component, all unpacking into ``nvidia/cu13/`` as one toolkit
#: tree (bin/nvcc, nvvm/bin/cicc, include, lib). Only the CUDA 13 wheels carry ``nvcc`` itself: the CUDA 12
#: ``nvidia-cuda-nvcc-cu12`` wheel (12.9.86) holds ptxas and libnvvm but no nvcc, so CUDA 12 needs a system
#: toolkit. ggml-cuda also includes CCCL (cub) and links cuBLAS and cudart. CUDA 13.0 needs an NVIDIA driver
#: that supports CUDA 13 (580 or newer).
CUDA_WHEELS = (
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
    "nvidia-cuda-cccl==13.0.*",
    "nvidia-cublas==13.0.*",
)
CUDA_WHEELS_CUDA = (13, 0)


def cuda_wheel_toolkit() -> Path:
    """The toolkit root inside :func:`cuda_wheel_dir` once :func:`install_cuda_wheels` has run."""
    return cuda_wheel_dir() / "site" / "nvidia" / "cu13"


def _cuda_candidates() -> list[Path]:
    """Folders whose ``bin/nvcc`` may be the CUDA compiler, most explicit first."""
    out = [Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME", "CUDAToolkit_ROOT") if os.environ.get(v)]
    out += [Path("/usr/local/cuda"), Path("/opt/cuda"), cuda_wheel_toolkit()]
    return out


def install_cuda_wheels(
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
    nvml: Any = None,
    wheels: tuple[str, ...] = CUDA_WHEELS,
    check_driver: bool = True,
) -> Path:
    """Install NVIDIA's CUDA toolkit wheels from PyPI into :func:`cuda_wheel_dir` (no system install); return nvcc.

    pip installs into ``site.tmp`` and the folder becomes ``site`` only once ``nvcc --version`` runs from it,
    so a half-finished install is never used. The driver must support the wheels' CUDA version (NVML).
    """
    if check_driver:
        from .releases import cuda_driver_version

        have, why = cuda_driver_version(nvml)
        need = ".".join(map(str, CUDA_WHEELS_CUDA))
        if have is None:
            raise BuildError(f"the CUDA {need} toolkit from PyPI needs an NVIDIA driver that supports it: {why}")
        if have < CUDA_WHEELS_CUDA:
            raise ToolchainMissing(
                f"the NVIDIA driver supports CUDA {have[0]}.{have[1]}, older than the CUDA {need} toolkit that "
                "PyPI has with nvcc (the CUDA 12 nvcc wheel holds no nvcc)",
                hint="update the NVIDIA driver to 580 or newer, or install a CUDA 12 toolkit from NVIDIA",
            )
    folder = cuda_wheel_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _BuildLock(folder / "install.lock"), open(folder / "install.log", "a", encoding="utf-8") as log:
        final = folder / "site"
        if (cuda_wheel_toolkit() / "bin" / exe_name("nvcc")).is_file():
            return cuda_wheel_toolkit() / "bin" / exe_name("nvcc")
        staging = folder / "site.tmp"
        if staging.exists():
            shutil.rmtree(staging)
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(staging), *wheels]
        run_streamed(cmd, log, stage="download", progress=progress, cancel=cancel)
        root = staging / "nvidia" / "cu13"
        nvcc = root / "bin" / exe_name("nvcc")
        if not nvcc.is_file():
            raise BuildError(f"the CUDA wheels were installed but hold no {nvcc.relative_to(staging)} (see {log.name})")
        if sys.platform != "win32":
            _toolkit_layout(root, log)
        run_streamed([str(nvcc), "--version"], log, stage="check", cancel=cancel)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    return cuda_wheel_toolkit() / "bin" / exe_name("nvcc")


def _toolkit_layout(root: Path, log) -> None:
    """Give the wheels' tree the layout FindCUDAToolkit looks for: the linker names (``libcudart.so`` beside
    ``libcudart.so.13``: the wheels ship only the versioned ones), lib64, targets/<arch>-linux/{include,lib}."""
    lib = root / "lib"
    for versioned in sorted(lib.glob("lib*.so.*")):
        plain = lib / (versioned.name.split(".so.")[0] + ".so")
        if not plain.exists():
            plain.symlink_to(versioned.name)
            log.write(f"# {plain} -> {versioned.name}\n")
    if not (root / "lib64").exists():
        (root / "lib64").symlink_to("lib")
    tdir = root / "targets" / f"{platform.machine()}-linux"
    tdir.mkdir(parents=True, exist_ok=True)
    for name in ("include", "lib"):
        if not (tdir / name).exists():
            (tdir / name).symlink_to(Path("..") / ".." / name)
    _link_driver_library(root / "lib" / "stubs", log)


def _link_driver_library(stubs: Path, log) -> None:
    """The toolkit's ``lib/stubs/libcuda.so`` (ggml-cuda links ``CUDA::cuda_driver``): the wheels have no stub, so
    it points at the driver's ``libcuda.so.1`` when one is installed."""
    import ctypes.util

    found = ctypes.util.find_library("cuda")
    candidates = [
        Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1")
    ]
    target = next((p for p in candidates if p.is_file()), None)
    if target is None and found:
        target = Path(found) if Path(found).is_absolute() else None
    if target is None:
        log.write("# no libcuda.so.1 (the NVIDIA driver's library) found: CMake must find libcuda itself\n")
        return
    stubs.mkdir(parents=True, exist_ok=True)
    link = stubs / "libcuda.so"
    if not link.exists():
        link.symlink_to(target)
    log.write(f"# {link} -> {target}\n")


def find_nvcc() -> Path | None:
    """The CUDA compiler: CUDA_PATH/CUDA_HOME/CUDAToolkit_ROOT, PATH, /usr/local/cuda, /opt/cuda, then the
    private wheel toolkit (:func:`install_cuda_wheels`)."""
    candidates = _cuda_candidates()
    named = [Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME", "CUDAToolkit_ROOT") if os.environ.get(v)]
    for root in named:
        p = root / "bin" / exe_name("nvcc")
        if p.is_file():
            return p
    return _which("nvcc", [r / "bin" for r in candidates[len(named) :]])


def cuda_toolkit_root(nvcc: Path, run=subprocess.run) -> Path:
    """The toolkit folder of ``nvcc``: its parent's parent when that holds ``include/cuda_runtime.h``; else (a
    wrapper script on PATH, like ``/usr/local/bin/nvcc`` running ``/usr/local/cuda-13.0/bin/nvcc``) the ``TOP``
    that ``nvcc --dryrun`` prints."""
    here = nvcc.resolve().parent.parent
    if (here / "include" / "cuda_runtime.h").is_file():
        return here
    try:
        proc = run([str(nvcc), "--dryrun", "-c", "x.cu"], capture_output=True, text=True, timeout=60, errors="replace")
        m = re.search(r"^#\$ TOP=(.+)$", (proc.stdout or "") + (proc.stderr or ""), re.MULTILINE)
    except (OSError, subprocess.TimeoutExpired):
        m = None
    if m:
        top = Path(m.group(1).strip()).resolve()
        if (top / "include" / "cuda_runtime.h").is_file():
            return top
    raise ToolchainMissing(
        f"{nvcc} was found, but not the CUDA toolkit it belongs to (no include/cuda_runtime.h beside it)",
        hint="set CUDA_PATH to the CUDA toolkit folder (the one with bin/nvcc and include/cuda_runtime.h)",
    )


def _cuda_missing_hint() -> str:
    return (
        "Install NVIDIA's CUDA toolkit (https://developer.nvidia.com/cuda-downloads; Debian/Ubuntu: "
        "apt-get install nvidia-cuda-toolkit) and put nvcc on PATH or set CUDA_PATH, or let Layerdeck put "
        f"NVIDIA's CUDA {CUDA_WHEELS_CUDA[0]}.{CUDA_WHEELS_CUDA[1]} toolkit wheels from PyPI (nvcc, runtime, CCCL, "
        f"cuBLAS; about 1 GB, needs driver 580 or newer) into {cuda_wheel_dir()}: "
        "layerdeck llama build --backend cuda --cuda-from-pypi"
    )


def cuda_architectures(nvml: Any = None) -> tuple[list[str], str | None]:
    """The compute capabilities of this machine's NVIDIA GPUs as CMake CUDA architectures (``8.6`` -> ``86``).

    ``LAYERDECK_CUDA_ARCHITECTURES`` overrides them. NVML (nvidia-ml-py's ``pynvml``, injectable as
    ``nvml``) gives ``nvmlDeviceGetCudaComputeCapability``; the second value says why none could be read.
    """
    env = os.environ.get(CUDA_ARCH_ENV)
    if env:
        out = []
        for part in env.replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            if not re.fullmatch(r"\d+(\.\d)?", part):
                raise BuildError(f"{CUDA_ARCH_ENV}={env}: {part!r} is not a compute capability like 8.6 or 86")
            arch = part.replace(".", "")
            if arch not in out:
                out.append(arch)
        return out, None
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py

            nvml = pynvml
        except ImportError:
            return [], "nvidia-ml-py is not installed, so the GPUs' compute capability is unknown"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded: no NVIDIA driver
        return [], f"NVML is not available ({exc})"
    try:
        archs: list[str] = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(nvml.nvmlDeviceGetHandleByIndex(i))
            arch = f"{int(major)}{int(minor)}"
            if arch not in archs:
                archs.append(arch)
        return archs, (None if archs else "NVML sees no NVIDIA GPU")
    except Exception as exc:  # noqa: BLE001 - a lost GPU, an old driver
        return [], f"NVML could not read the GPUs' compute capability ({exc})"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def hip_targets(run=subprocess.run) -> tuple[list[str], str | None]:
    """The gfx targets of this machine's AMD GPUs (``rocminfo``), or ``LAYERDECK_HIP_TARGETS``."""
    env = os.environ.get(HIP_TARGETS_ENV)
    if env:
        return [t.strip() for t in env.replace(";", ",").split(",") if t.strip()], None
    rocminfo = _which("rocminfo", [Path("/opt/rocm/bin")])
    if rocminfo is None:
        return [], "rocminfo (ROCm) is not installed, so the AMD GPUs' gfx targets are unknown"
    try:
        proc = run([str(rocminfo)], capture_output=True, text=True, timeout=30, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"rocminfo failed ({exc})"
    targets: list[str] = []
    for m in re.finditer(r"^\s*Name:\s*(gfx[0-9a-f]+)\s*$", proc.stdout, re.MULTILINE):
        if m.group(1) not in targets:
            targets.append(m.group(1))
    return targets, (None if targets else "rocminfo lists no AMD GPU agent (gfx...)")


@dataclass(frozen=True)
class BuildPlan:
    """What one build will do: its backend, cache folder, CMake arguments, extra environment and tools found."""

    backend: str
    version: str
    arch: tuple[str, ...]  # the GPU-architecture option, part of the key
    machine_args: tuple[str, ...]  # machine-specific CMake arguments, not part of the key
    env: dict[str, str] = field(default_factory=dict)  # variables added to the build's environment
    tools: dict[str, str] = field(default_factory=dict)  # what was found, for the log and the user
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return build_key(self.version, self.backend, self.arch)

    @property
    def root(self) -> Path:
        return cache_root() / self.key

    def configure_args(self, src: Path, build: Path) -> list[str]:
        return ["cmake", "-S", str(src), "-B", str(build), *_options(self.backend, self.arch), *self.machine_args]

    def estimate_minutes(self, cores: int | None = None) -> int:
        return estimate_minutes(self.backend, cores)

    def estimate_text(self, cores: int | None = None) -> str:
        return estimate_text(self.backend, cores)


def estimate_minutes(backend: str = "cpu", cores: int | None = None) -> int:
    """About how long a full build takes with ``cores`` CPU cores (see :data:`CORE_MINUTES`)."""
    cores = cores or os.cpu_count() or 2
    return max(3, round(CORE_MINUTES.get(backend, CORE_MINUTES["cpu"]) / cores))


def estimate_text(backend: str = "cpu", cores: int | None = None) -> str:
    cores = cores or os.cpu_count() or 2
    how = "measured on 2 cores, scaled" if MEASURED.get(backend) else "a rough guess, not measured"
    return f"about {estimate_minutes(backend, cores)} min on {cores} CPU core{'s' if cores != 1 else ''} ({how})"


def plan(backend: str = "cpu", version: str = PINNED_VERSION, nvml: Any = None, run=subprocess.run) -> BuildPlan:
    """Check that ``backend``'s toolchain is here and read the GPU architectures; raise :class:`ToolchainMissing`.

    Needs CMake and a C++ compiler for every backend; Vulkan also ``glslc`` and Vulkan headers (newer ones
    from ``LAYERDECK_VULKAN_HEADERS``); CUDA ``nvcc`` (:func:`find_nvcc`) and the GPUs' compute capability
    (NVML, or ``LAYERDECK_CUDA_ARCHITECTURES``) as the only CUDA architectures; ROCm ``hipcc``/``hipconfig``
    and the gfx targets; Metal macOS with the Xcode command line tools.
    """
    if backend not in BACKEND_OPTIONS:
        raise BuildError(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_OPTIONS)}")
    tools: dict[str, str] = {}
    cmake = _which("cmake")
    if cmake is None:
        raise ToolchainMissing(
            "building llama.cpp needs CMake, which is not on PATH",
            hint="Install it (Debian/Ubuntu: apt-get install cmake; macOS: brew install cmake; or pip install cmake).",
        )
    tools["cmake"] = str(cmake)
    if sys.platform != "win32":
        cxx = next((p for p in (_which(c) for c in ("c++", "g++", "clang++")) if p), None)
        if cxx is None:
            raise ToolchainMissing(
                "building llama.cpp needs a C++ compiler (c++, g++ or clang++), and none is on PATH",
                hint="Debian/Ubuntu: apt-get install build-essential; macOS: xcode-select --install",
            )
        tools["c++"] = str(cxx)
    arch: tuple[str, ...] = ()
    args: list[str] = []
    env: dict[str, str] = {}
    notes: list[str] = []
    if backend == "vulkan":
        glslc = _which("glslc")
        if glslc is None:
            raise ToolchainMissing(
                "the Vulkan build needs glslc (the GLSL-to-SPIR-V compiler), which is not on PATH",
                hint="Debian/Ubuntu: apt-get install glslc libvulkan-dev; or install the LunarG Vulkan SDK",
            )
        tools["glslc"] = str(glslc)
        args += _vulkan_header_args()
        if not args and not _vulkan_headers_present():
            raise ToolchainMissing(
                "the Vulkan build needs the Vulkan headers (vulkan/vulkan.h), which are not installed",
                hint=f"Debian/Ubuntu: apt-get install libvulkan-dev; or set {VULKAN_HEADERS_ENV} to a folder "
                "holding include/vulkan/vulkan.h (scripts/vulkan-headers.sh fetches newer ones)",
            )
    elif backend == "cuda":
        nvcc = find_nvcc()
        if nvcc is None:
            raise ToolchainMissing(
                "the CUDA build needs NVIDIA's CUDA compiler nvcc, which was not found (looked on PATH, in "
                "CUDA_PATH/CUDA_HOME, /usr/local/cuda, /opt/cuda and " + str(cuda_wheel_toolkit()) + ")",
                hint=_cuda_missing_hint(),
            )
        tools["nvcc"] = str(nvcc)
        arch = gpu_arch(backend, nvml, run)
        wheel_root = cuda_wheel_toolkit()
        if nvcc.parent == wheel_root / "bin":
            _toolkit_layout(wheel_root, io.StringIO())  # the driver may have been installed since the wheels
            if not (wheel_root / "lib" / "stubs" / "libcuda.so").exists():
                raise ToolchainMissing(
                    "the CUDA build links the NVIDIA driver's library libcuda.so.1, which is not installed "
                    "(the PyPI toolkit has no stub of it)",
                    hint="install the NVIDIA driver (580 or newer for the CUDA 13 wheels)",
                )
        toolkit = cuda_toolkit_root(nvcc, run)
        nvcc = toolkit / "bin" / exe_name("nvcc") if (toolkit / "bin" / exe_name("nvcc")).is_file() else nvcc
        args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
        args.append(f"-DCUDAToolkit_ROOT={toolkit}")
        env["PATH"] = str(nvcc.parent) + os.pathsep + os.environ.get("PATH", "")
    elif backend == "rocm":
        hipconfig = _which("hipconfig", [Path("/opt/rocm/bin")])
        hipcc = _which("hipcc", [Path("/opt/rocm/bin")])
        if hipcc is None or hipconfig is None:
            raise ToolchainMissing(
                "the ROCm (HIP) build needs AMD's hipcc and hipconfig, which were not found (PATH, /opt/rocm/bin)",
                hint="Install ROCm with its HIP SDK and hipBLAS/rocBLAS (https://rocm.docs.amd.com; Ubuntu: "
                "amdgpu-install --usecase=rocm,hiplibsdk), or use the Vulkan build, which runs on AMD GPUs too",
            )
        tools["hipcc"], tools["hipconfig"] = str(hipcc), str(hipconfig)
        arch = gpu_arch(backend, nvml, run)
        try:
            llvm = run([str(hipconfig), "-l"], capture_output=True, text=True, timeout=30).stdout.strip()
            rocm = run([str(hipconfig), "-R"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"hipconfig failed: {exc}") from exc
        if not llvm or not rocm:
            raise BuildError(f"hipconfig did not name ROCm's clang folder (-l: {llvm!r}) and root (-R: {rocm!r})")
        env["HIPCXX"] = str(Path(llvm) / "clang")
        env["HIP_PATH"] = rocm
    elif backend == "metal":
        if sys.platform != "darwin":
            raise ToolchainMissing(
                "the Metal backend exists only on macOS",
                hint="on Linux and Windows build the Vulkan (or CUDA/ROCm) backend instead",
            )
        xcrun = _which("xcrun")
        if xcrun is None:
            raise ToolchainMissing(
                "the Metal build needs the Xcode command line tools (xcrun), which are not installed",
                hint="run: xcode-select --install",
            )
        tools["xcrun"] = str(xcrun)
    return BuildPlan(backend, version, arch, tuple(args), env, tools, tuple(notes))


def _vulkan_headers_present() -> bool:
    for inc in (
        "/usr/include",
        "/usr/local/include",
        os.path.join(os.environ.get("VULKAN_SDK", "/nonexistent"), "include"),
    ):
        if os.path.isfile(os.path.join(inc, "vulkan", "vulkan.h")):
            return True
    return False


def _vulkan_header_args() -> list[str]:
    """Machine-specific CMake arguments (not in the key): where newer Vulkan headers live."""
    headers = os.environ.get(VULKAN_HEADERS_ENV)
    if not headers:
        return []
    include = Path(headers) / "include"
    if not (include / "vulkan" / "vulkan.h").is_file():
        raise BuildError(f"{VULKAN_HEADERS_ENV}={headers} has no include/vulkan/vulkan.h")
    flag = f"-I{include}"
    return [f"-DVulkan_INCLUDE_DIR={include}", f"-DCMAKE_C_FLAGS={flag}", f"-DCMAKE_CXX_FLAGS={flag}"]


# --------------------------------------------------------------------------- progress and running


_MAKE_PROGRESS = re.compile(r"^\[\s*(\d{1,3})%\]")
_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


def parse_progress(line: str) -> float | None:
    """The fraction done that a CMake build line shows: Makefiles' ``[ 42%]``, Ninja's ``[12/345]``; else None."""
    m = _MAKE_PROGRESS.match(line)
    if m:
        return min(int(m.group(1)), 100) / 100.0
    m = _NINJA_PROGRESS.match(line)
    if m and int(m.group(2)) > 0:
        return min(int(m.group(1)) / int(m.group(2)), 1.0)
    return None


@dataclass(frozen=True)
class BuildProgress:
    """One step of a build, for a progress bar: ``fraction`` of the current step (None: not known)."""

    stage: str  # "download", "configure", "compile", "copy"
    fraction: float | None
    line: str
    elapsed_s: float
    log_path: Path | None = None
    step: int = 1  # which ``cmake --build`` target of ``steps`` (Makefiles count each target from 0%)
    steps: int = 1

    def text(self) -> str:
        pct = f" {100 * self.fraction:.0f}%" if self.fraction is not None else ""
        mins, secs = divmod(int(self.elapsed_s), 60)
        return f"{self.stage}{pct} ({mins}:{secs:02d}) {self.line.strip()[:80]}"


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End ``proc`` and everything it started (it leads its own process group / session)."""
    if proc.poll() is not None:
        return
    if sys.platform == "win32":
        subprocess.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)], capture_output=True)
    else:
        import signal

        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass


def run_streamed(
    cmd: list[str],
    log,
    stage: str = "compile",
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    t0: float | None = None,
    step: int = 1,
    steps: int = 1,
) -> None:
    """Run ``cmd`` in a process group of its own, its output into ``log`` line by line and parsed for progress.

    ``cancel`` set (or Ctrl+C / any exception here) ends the whole process tree: :class:`BuildCancelled`
    (KeyboardInterrupt is re-raised after the kill). A non-zero exit raises :class:`BuildError` naming the log.
    """
    t0 = time.monotonic() if t0 is None else t0
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    log_path = Path(log.name) if isinstance(getattr(log, "name", None), str) else None
    full_env = dict(os.environ, **(env or {}))
    kw: dict[str, Any] = {}
    if sys.platform == "win32":
        kw["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    else:
        kw["start_new_session"] = True  # Ctrl+C at the terminal reaches us, not the compilers: we end them
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            **kw,
        )
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc}") from exc
    stop = threading.Event()
    cancelled = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            if cancel is not None and cancel.is_set():
                cancelled.set()
                _kill_group(proc)
                return

    watcher = threading.Thread(target=watch, name="build-cancel", daemon=True)
    watcher.start()
    try:
        assert proc.stdout is not None
        fraction: float | None = None
        for line in proc.stdout:
            log.write(line)
            log.flush()  # the log is readable while the build runs ("Build log" in the GUI follows it)
            f = parse_progress(line)
            if f is not None:
                # parallel jobs (-j 2) print their "[ 18%]" and "[  9%]" lines out of order: a bar never goes back
                fraction = f if fraction is None else max(fraction, f)
            if progress is not None:
                progress(BuildProgress(stage, fraction, line, time.monotonic() - t0, log_path, step, steps))
        proc.wait()
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        stop.set()
        watcher.join(timeout=10)
        log.flush()
    if cancelled.is_set():
        raise BuildCancelled("the build was cancelled")
    if proc.returncode != 0:
        tail = f" (see {log_path})" if log_path else ""
        raise BuildError(f"command failed with exit code {proc.returncode}: {' '.join(cmd)}{tail}")


def exe_name(tool: str) -> str:
    return tool + (".exe" if sys.platform == "win32" else "")


def complete(bin_dir: Path) -> bool:
    return all((bin_dir / exe_name(t)).is_file() for t in TARGETS)


def log_path(backend: str = "cpu", version: str = PINNED_VERSION, nvml: Any = None) -> Path:
    """The build log of ``backend`` (every run appends to it)."""
    return cache_root() / build_key(version, backend, gpu_arch(backend, nvml)) / "build.log"


def gpu_arch(backend: str, nvml: Any = None, run=subprocess.run) -> tuple[str, ...]:
    """The GPU-architecture CMake option of a CUDA or HIP build (part of the key); () for the others."""
    if backend == "cuda":
        archs, why = cuda_architectures(nvml)
        if not archs:
            raise BuildError(
                f"the CUDA build is made for this machine's GPUs, but their compute capability is unknown: {why}",
                hint=f"set {CUDA_ARCH_ENV} (e.g. 8.6 for an RTX 3090, 8.9 for an RTX 4090) to build without the GPU",
            )
        return (f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}",)
    if backend == "rocm":
        targets, why = hip_targets(run)
        if not targets:
            raise BuildError(
                f"the ROCm build is made for this machine's GPUs, but their gfx targets are unknown: {why}",
                hint=f"set {HIP_TARGETS_ENV} (e.g. gfx1100 for an RX 7900 XTX) to build without the GPU",
            )
        return (f"-DGPU_TARGETS={';'.join(targets)}",)
    return ()


def key_arch(backend: str, version: str, nvml: Any) -> tuple[str, ...]:
    """:func:`gpu_arch`, but when the architecture cannot be read and the toolchain is missing too, the missing
    toolchain is what is said (it is the first thing to fix)."""
    try:
        return gpu_arch(backend, nvml)
    except BuildError:
        plan(backend, version, nvml)  # raises ToolchainMissing when a compiler is missing
        raise


def _run(cmd: list[str], log, cwd: Path | None = None, **kw: Any) -> None:
    run_streamed(cmd, log, cwd=cwd, **kw)


def ensure_built(
    version: str = PINNED_VERSION,
    jobs: int | None = None,
    log_stream=None,
    backend: str = "cpu",
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
    nvml: Any = None,
) -> Path:
    """Return a directory holding all tools for ``backend``, building them if needed.

    ``progress`` gets a :class:`BuildProgress` per output line; ``cancel`` set ends the build's process tree
    and raises :class:`BuildCancelled` (the partial ``build/`` folder is kept: the next call resumes it).
    """
    if backend not in BACKEND_OPTIONS:
        raise BuildError(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_OPTIONS)}")
    env = BACKEND_ENV_DIRS.get(backend, ENV_DIR)
    override = os.environ.get(env)
    if override:
        path = Path(override)
        missing = [t for t in TARGETS if not (path / exe_name(t)).is_file()]
        if missing:
            raise BuildError(f"{env}={override} lacks {', '.join(missing)}")
        return path
    root = cache_root() / build_key(version, backend, key_arch(backend, version, nvml))
    bin_dir = root / "bin"
    if complete(bin_dir):
        return bin_dir
    the_plan = plan(backend, version, nvml)
    root.mkdir(parents=True, exist_ok=True)
    with _BuildLock(root / "build.lock"):
        if complete(bin_dir):  # another process finished the build while we waited
            return bin_dir
        return _build(version, root, bin_dir, jobs or os.cpu_count() or 2, backend, the_plan, progress, cancel)


def ensure_tool(
    tool: str,
    version: str = PINNED_VERSION,
    jobs: int | None = None,
    backend: str = "cpu",
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
    nvml: Any = None,
) -> Path:
    """Return the path of an on-demand tool (:data:`ON_DEMAND_TARGETS`), building only that target if needed.

    ``LAYERDECK_LLAMA_CPP_DIR`` (or the backend's variable) is used when it holds the tool. Otherwise the
    cache folder's kept ``src/`` is configured with the same options into ``build-tools/`` (kept, so the next
    on-demand tool, or a cancelled one, builds incrementally), the one target is built, and its executable is
    copied into the cache's ``bin/`` under the build lock; the four tools of :data:`TARGETS` are neither rebuilt
    nor touched (the whole build runs first only when the cache has no sources yet).
    """
    if tool not in ON_DEMAND_TARGETS:
        raise BuildError(f"unknown on-demand tool {tool!r}: choose one of {', '.join(ON_DEMAND_TARGETS)}")
    override = os.environ.get(BACKEND_ENV_DIRS.get(backend, ENV_DIR))
    if override and (Path(override) / exe_name(tool)).is_file():
        return Path(override) / exe_name(tool)
    root = cache_root() / build_key(version, backend, key_arch(backend, version, nvml))
    bin_dir = root / "bin"
    exe = bin_dir / exe_name(tool)
    if exe.is_file():
        return exe
    the_plan = plan(backend, version, nvml)
    root.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 2
    with _BuildLock(root / "build.lock"):
        if exe.is_file():  # another process built it while we waited
            return exe
        if not ((root / "src" / "CMakeLists.txt").is_file() and complete(bin_dir)):
            _build(version, root, bin_dir, jobs, backend, the_plan, progress, cancel)
        return _build_one(root, bin_dir, tool, jobs, backend, the_plan, progress, cancel)


def _cancelled_text(build: Path) -> str:
    return (
        f"the build was cancelled; what was compiled so far is kept in {build} and the next build resumes from it "
        "(delete that folder to start over)"
    )


#: The folder ``ensure_tool`` builds on-demand targets in, kept between calls.
TOOLS_BUILD_DIR = "build-tools"


def _build_one(
    root: Path,
    bin_dir: Path,
    tool: str,
    jobs: int,
    backend: str,
    the_plan: BuildPlan | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Configure the kept sources into ``build-tools/``, build ``tool``'s target and copy it into ``bin_dir``."""
    the_plan = the_plan or plan(backend)
    log_path = root / "build.log"
    t0 = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
        build = root / TOOLS_BUILD_DIR
        kw: dict[str, Any] = {"progress": progress, "cancel": cancel, "env": the_plan.env, "t0": t0}
        cmd = [
            "cmake",
            "--build",
            str(build),
            "--config",
            "Release",
            "-j",
            str(jobs),
            "--target",
            ON_DEMAND_TARGETS[tool],
        ]
        try:
            _run(the_plan.configure_args(root / "src", build), log, stage="configure", **kw)
            _run(cmd, log, stage="compile", **kw)
        except BuildCancelled:
            log.write(f"# cancelled after {time.monotonic() - t0:.0f} s; {build} kept\n")
            raise BuildCancelled(_cancelled_text(build)) from None
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


def _build(
    version: str,
    root: Path,
    bin_dir: Path,
    jobs: int,
    backend: str = "cpu",
    the_plan: BuildPlan | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    the_plan = the_plan or plan(backend, version)
    log_path = root / "build.log"
    t0 = time.monotonic()
    kw: dict[str, Any] = {"progress": progress, "cancel": cancel, "t0": t0}
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(
            f"# {time.strftime('%Y-%m-%d %H:%M:%S')} building {backend} ({', '.join(f'{k}={v}' for k, v in the_plan.tools.items())})\n"
        )
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
                    stage="download",
                    **kw,
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
        try:
            _run(the_plan.configure_args(src, build), log, stage="configure", env=the_plan.env, **kw)
            targets = list(TARGETS.values())
            # one target per step: Makefiles count each target's percentage from 0, so the bar restarts per step
            for i, target in enumerate(targets, 1):
                cmd = ["cmake", "--build", str(build), "--config", "Release", "-j", str(jobs), "--target", target]
                _run(cmd, log, stage="compile", env=the_plan.env, step=i, steps=len(targets), **kw)
        except BuildCancelled:
            log.write(f"# cancelled after {time.monotonic() - t0:.0f} s; {build} kept\n")
            raise BuildCancelled(_cancelled_text(build)) from None
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
        log.write(f"# done in {time.monotonic() - t0:.0f} s\n")
    return bin_dir


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m app.llamacpp.build", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, default="cpu")
    parser.add_argument("--tool", choices=sorted(ON_DEMAND_TARGETS), help="also build this tool and print its path")
    args = parser.parse_args(argv)
    try:
        print(ensure_tool(args.tool, backend=args.backend) if args.tool else ensure_built(backend=args.backend))
    except BuildError as exc:
        print(f"error: {exc}" + (f" {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
