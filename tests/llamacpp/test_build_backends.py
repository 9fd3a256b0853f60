"""app.llamacpp.build: the CMake arguments of each backend, the toolchain checks and their messages, the CUDA
architecture from NVML, the time estimate.

The flags are checked against the option names of the pinned sources (``ggml/CMakeLists.txt``'s
``option(GGML_CUDA ...)`` etc., read from the cached source tree the ``llama_bin`` fixture builds), so a flag
that the pinned llama.cpp does not know fails here. Toolchains that this machine lacks are stood in for by
empty executables on a private PATH: only their presence is looked at (nothing runs them); NVML is the fake
module of tests/devices with the compute-capability call added.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.llamacpp import build
from tests.devices.fake_nvml import FakeNvml, NVMLError_LibraryNotFound, rtx3090, rtx4090

ROOT = Path(__file__).resolve().parents[2]


class CcNvml(FakeNvml):
    """The fake NVML plus ``nvmlDeviceGetCudaComputeCapability`` (8.9 for an RTX 4090, 8.6 for a 3090)."""

    CC = {"NVIDIA GeForce RTX 4090": (8, 9), "NVIDIA GeForce RTX 3090": (8, 6)}

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.CC[self._gpu(h, "nvmlDeviceGetCudaComputeCapability").name]


def _exe(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        p = folder / n
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture
def toolbox(tmp_path, monkeypatch):
    """A PATH of only cmake and c++ (empty stand-ins) and no CUDA/ROCm/Vulkan anywhere the builder looks."""
    tools = _exe(tmp_path / "tools", "cmake", "c++")
    monkeypatch.setenv("PATH", str(tools))
    for v in ("CUDA_PATH", "CUDA_HOME", "CUDAToolkit_ROOT", build.CUDA_ARCH_ENV, build.HIP_TARGETS_ENV,
              build.VULKAN_HEADERS_ENV, "VULKAN_SDK"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.setattr(build, "_cuda_candidates", lambda: [tmp_path / "no-cuda"])
    monkeypatch.setattr(build, "_vulkan_headers_present", lambda: False)
    return tools


@pytest.fixture(scope="module")
def pinned_src(llama_bin):
    src = build.cache_root() / build.build_key() / "src"
    if not (src / "ggml" / "CMakeLists.txt").is_file():
        pytest.skip(f"the pinned sources are not at {src} (LAYERDECK_LLAMA_CPP_DIR named a build without them)")
    return src


def _cmake_options(path: Path) -> set[str]:
    return set(re.findall(r"^\s*option\((\w+)", path.read_text(), re.MULTILINE))


def _defines(args) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in args if a.startswith("-D"))


# ----------------------------------------------------------------------------- the flags of each backend


def test_every_backend_flag_is_an_option_of_the_pinned_sources(pinned_src):
    ggml = _cmake_options(pinned_src / "ggml" / "CMakeLists.txt")
    top = (pinned_src / "CMakeLists.txt").read_text()
    llama = _cmake_options(pinned_src / "CMakeLists.txt")
    # LLAMA_CURL is in the key of every existing cache, so it stays; the pinned sources ignore it (with a warning)
    assert "llama_option_depr(WARNING     LLAMA_CURL)" in top and "LLAMA_CURL" not in llama
    for backend, flags in build.BACKEND_OPTIONS.items():
        for name, value in _defines(build.CMAKE_OPTIONS + flags).items():
            if name in ("CMAKE_BUILD_TYPE", "BUILD_SHARED_LIBS", "LLAMA_CURL"):
                continue
            assert name in (ggml if name.startswith("GGML_") else llama), (backend, name)
            assert value in ("ON", "OFF"), (backend, name, value)
    # the architecture variables the GPU backends read (not option()s: plain cache variables)
    cuda = (pinned_src / "ggml" / "src" / "ggml-cuda" / "CMakeLists.txt").read_text()
    assert "if (NOT DEFINED CMAKE_CUDA_ARCHITECTURES)" in cuda  # ours wins over the fat default list
    hip = (pinned_src / "ggml" / "src" / "ggml-hip" / "CMakeLists.txt").read_text()
    assert "set(CMAKE_HIP_ARCHITECTURES ${GPU_TARGETS})" in hip


def test_backend_switches_are_exact():
    assert build.BACKEND_OPTIONS == {
        "cpu": (),
        "vulkan": ("-DGGML_VULKAN=ON",),
        "cuda": ("-DGGML_CUDA=ON",),
        "rocm": ("-DGGML_HIP=ON",),
        "metal": ("-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"),
    }
    assert set(build.BACKENDS) == set(build.BACKEND_OPTIONS) == set(build.BACKEND_ENV_DIRS)


def test_existing_cache_keys_are_unchanged():
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert build.build_key() == "llama.cpp-0.3.36-8730327ebf"
        assert build.build_key(backend="vulkan") == "llama.cpp-0.3.36-vulkan-dff6227886"
    # one folder per CUDA architecture: a build for 8.6 does not run on 9.0
    a = build.build_key(backend="cuda", arch=("-DCMAKE_CUDA_ARCHITECTURES=86",))
    b = build.build_key(backend="cuda", arch=("-DCMAKE_CUDA_ARCHITECTURES=90",))
    assert a != b and a.startswith("llama.cpp-0.3.36-cuda-")


def test_cpu_plan(toolbox, tmp_path):
    p = build.plan("cpu")
    args = p.configure_args(tmp_path / "src", tmp_path / "b")
    assert args == ["cmake", "-S", str(tmp_path / "src"), "-B", str(tmp_path / "b"), *build.CMAKE_OPTIONS]
    assert p.root == tmp_path / "cache" / build.build_key() and p.env == {}


def test_cuda_plan_uses_the_gpus_compute_capability_only(toolbox, tmp_path, monkeypatch):
    cuda = _toolkit(tmp_path / "cuda-12.8")
    monkeypatch.setenv("CUDA_PATH", str(cuda))
    nvml = CcNvml([rtx4090(), rtx3090(), rtx4090(bus="03", uuid="GPU-c")])
    p = build.plan("cuda", nvml=nvml)
    assert p.arch == ("-DCMAKE_CUDA_ARCHITECTURES=89;86",)  # each capability once, in GPU order
    args = p.configure_args(tmp_path / "src", tmp_path / "b")
    assert args[5:] == [
        *build.CMAKE_OPTIONS,
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=89;86",
        f"-DCMAKE_CUDA_COMPILER={cuda / 'bin' / 'nvcc'}",
        f"-DCUDAToolkit_ROOT={cuda}",
    ]
    assert p.env["PATH"].split(":")[0] == str(cuda / "bin") and p.tools["nvcc"] == str(cuda / "bin" / "nvcc")
    assert nvml.initialised == 0  # shut down again
    assert p.key == build.build_key(backend="cuda", arch=p.arch) and "-cuda-" in p.key


def _toolkit(root: Path) -> Path:
    _exe(root / "bin", "nvcc")
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    return root


def test_cuda_architecture_override(toolbox, tmp_path, monkeypatch):
    cuda = _toolkit(tmp_path / "cuda")
    monkeypatch.setenv("PATH", f"{toolbox}:{cuda / 'bin'}")  # nvcc on PATH
    monkeypatch.setenv(build.CUDA_ARCH_ENV, "8.6, 12.0,86")
    p = build.plan("cuda", nvml=CcNvml([], init_error=NVMLError_LibraryNotFound))
    assert p.arch == ("-DCMAKE_CUDA_ARCHITECTURES=86;120",) and p.tools["nvcc"] == str(cuda / "bin" / "nvcc")
    monkeypatch.setenv(build.CUDA_ARCH_ENV, "sm_86")
    with pytest.raises(build.BuildError, match="'sm_86' is not a compute capability like 8.6"):
        build.plan("cuda")


def test_rocm_plan(toolbox, tmp_path):
    _exe(toolbox, "hipcc", "hipconfig", "rocminfo")
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        out = {
            "rocminfo": "Agent 1\n  Name:                    AMD Ryzen 9\nAgent 2\n  Name:                    gfx1100\n"
            "Agent 3\n  Name:                    gfx1100\n",
            "-l": "/opt/rocm/llvm/bin\n",
            "-R": "/opt/rocm\n",
        }[Path(cmd[0]).name if len(cmd) == 1 else cmd[1]]
        return type("P", (), {"stdout": out, "returncode": 0})()

    p = build.plan("rocm", run=run)
    assert p.configure_args(tmp_path / "s", tmp_path / "b")[5:] == [
        *build.CMAKE_OPTIONS, "-DGGML_HIP=ON", "-DGPU_TARGETS=gfx1100"]
    assert p.env == {"HIPCXX": "/opt/rocm/llvm/bin/clang", "HIP_PATH": "/opt/rocm"}
    assert [Path(c[0]).name for c in calls] == ["rocminfo", "hipconfig", "hipconfig"]


def test_metal_plan(toolbox, tmp_path, monkeypatch):
    with pytest.raises(build.ToolchainMissing, match="only on macOS") if sys.platform != "darwin" else _nothing():
        build.plan("metal")
    monkeypatch.setattr(build.sys, "platform", "darwin")
    with pytest.raises(build.ToolchainMissing, match="Xcode command line tools") as e:
        build.plan("metal")
    assert "xcode-select --install" in e.value.hint
    _exe(toolbox, "xcrun")
    p = build.plan("metal")
    assert p.configure_args(tmp_path / "s", tmp_path / "b")[5:] == [
        *build.CMAKE_OPTIONS, "-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_vulkan_plan_with_private_headers(toolbox, tmp_path, monkeypatch):
    _exe(toolbox, "glslc")
    inc = tmp_path / "vk" / "include" / "vulkan"
    inc.mkdir(parents=True)
    (inc / "vulkan.h").write_text("")
    monkeypatch.setenv(build.VULKAN_HEADERS_ENV, str(tmp_path / "vk"))
    p = build.plan("vulkan")
    i = tmp_path / "vk" / "include"
    assert p.configure_args(tmp_path / "s", tmp_path / "b")[5:] == [
        *build.CMAKE_OPTIONS, "-DGGML_VULKAN=ON", f"-DVulkan_INCLUDE_DIR={i}", f"-DCMAKE_C_FLAGS=-I{i}",
        f"-DCMAKE_CXX_FLAGS=-I{i}"]


# ----------------------------------------------------------------------------- what is missing, said plainly


def test_no_cmake(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.ToolchainMissing, match="needs CMake, which is not on PATH") as e:
        build.plan("cpu")
    assert "apt-get install cmake" in e.value.hint and "pip install cmake" in e.value.hint


def test_no_compiler(tmp_path, monkeypatch):
    if sys.platform == "win32":
        pytest.skip("the C++ compiler is CMake's to find on Windows (Visual Studio)")
    monkeypatch.setenv("PATH", str(_exe(tmp_path / "t", "cmake")))
    with pytest.raises(build.ToolchainMissing, match=r"needs a C\+\+ compiler") as e:
        build.plan("cpu")
    assert "build-essential" in e.value.hint


def test_no_nvcc_names_the_pypi_toolkit(toolbox):
    with pytest.raises(build.ToolchainMissing, match="needs NVIDIA's CUDA compiler nvcc, which was not found") as e:
        build.plan("cuda", nvml=CcNvml([rtx4090()]))
    hint = e.value.hint
    assert "apt-get install nvidia-cuda-toolkit" in hint and "--cuda-from-pypi" in hint
    assert str(build.cuda_wheel_dir()) in hint and "580" in hint


def test_nvcc_wrapper_script_on_path(toolbox, tmp_path):
    """A ``nvcc`` on PATH that is a script running the real one (as /usr/local/bin/nvcc does on some machines):
    the toolkit is the TOP that ``nvcc --dryrun`` prints, and CMake is given the real compiler."""
    cuda = tmp_path / "cuda-13.0"
    (cuda / "include").mkdir(parents=True)
    (cuda / "include" / "cuda_runtime.h").write_text("")
    (cuda / "bin").mkdir()
    real = cuda / "bin" / "nvcc"
    real.write_text(f"#!/bin/sh\necho '#$ _HERE_={cuda}/bin' >&2\necho '#$ TOP={cuda}/bin/..' >&2\n")
    real.chmod(0o755)
    wrapper = toolbox / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    p = build.plan("cuda", nvml=CcNvml([rtx4090()]))
    d = _defines(p.machine_args)
    assert d == {"CMAKE_CUDA_COMPILER": str(real), "CUDAToolkit_ROOT": str(cuda)}
    real.write_text("#!/bin/sh\nexit 0\n")  # says nothing: the toolkit cannot be found
    with pytest.raises(build.ToolchainMissing, match="not the CUDA toolkit it belongs to") as e:
        build.plan("cuda", nvml=CcNvml([rtx4090()]))
    assert "CUDA_PATH" in e.value.hint


def test_nvcc_but_no_driver(toolbox):
    _exe(toolbox, "nvcc")
    with pytest.raises(build.BuildError, match="compute capability is unknown: NVML is not available") as e:
        build.plan("cuda", nvml=CcNvml([], init_error=NVMLError_LibraryNotFound))
    assert build.CUDA_ARCH_ENV in e.value.hint
    with pytest.raises(build.BuildError, match="NVML sees no NVIDIA GPU"):
        build.plan("cuda", nvml=CcNvml([]))


def test_no_glslc_no_headers(toolbox):
    with pytest.raises(build.ToolchainMissing, match="needs glslc") as e:
        build.plan("vulkan")
    assert "apt-get install glslc" in e.value.hint
    _exe(toolbox, "glslc")
    with pytest.raises(build.ToolchainMissing, match="needs the Vulkan headers") as e:
        build.plan("vulkan")
    assert build.VULKAN_HEADERS_ENV in e.value.hint and "libvulkan-dev" in e.value.hint


def test_no_hipcc_and_no_targets(toolbox):
    with pytest.raises(build.ToolchainMissing, match="needs AMD's hipcc and hipconfig") as e:
        build.plan("rocm")
    assert "Vulkan build" in e.value.hint
    _exe(toolbox, "hipcc", "hipconfig")
    with pytest.raises(build.BuildError, match="gfx targets are unknown: rocminfo .* is not installed") as e:
        build.plan("rocm")
    assert build.HIP_TARGETS_ENV in e.value.hint


def test_unknown_backend():
    with pytest.raises(build.BuildError, match="unknown backend 'opencl'"):
        build.plan("opencl")


def test_a_cached_build_is_found_without_its_toolchain(toolbox, tmp_path):
    # no glslc here: a finished Vulkan build in the cache is still returned (the toolchain is checked only to build)
    bin_dir = _exe(tmp_path / "cache" / build.build_key(backend="vulkan") / "bin", *build.TARGETS)
    assert build.ensure_built(backend="vulkan") == bin_dir


# ----------------------------------------------------------------------------- the time estimate


def test_estimate():
    assert build.estimate_minutes("cpu", 2) == 14  # 12-15 min measured for the CPU build on 2 cores
    assert build.estimate_minutes("vulkan", 2) == 37  # 37 min measured (12:02-12:39 in the cache's log)
    assert build.estimate_minutes("cpu", 16) == 3 and build.estimate_minutes("cuda", 16) == 5
    assert "measured" in build.estimate_text("cpu", 2) and "not measured" in build.estimate_text("cuda", 8)
    assert build.estimate_text("vulkan", 4) == "about 18 min on 4 CPU cores (measured on 2 cores, scaled)"


# ----------------------------------------------------------------------------- CUDA from PyPI


class DriverNvml(CcNvml):
    def __init__(self, gpus, cuda: int):
        super().__init__(gpus)
        self.cuda = cuda

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda


def test_pypi_toolkit_needs_a_cuda_13_driver(toolbox):
    with pytest.raises(build.ToolchainMissing, match="driver supports CUDA 12.4, older than the CUDA 13.0") as e:
        build.install_cuda_wheels(nvml=DriverNvml([rtx4090()], 12040))
    assert "580" in e.value.hint and "CUDA 12 toolkit" in e.value.hint
    with pytest.raises(build.BuildError, match="needs an NVIDIA driver that supports it: NVML is not available"):
        build.install_cuda_wheels(nvml=CcNvml([], init_error=NVMLError_LibraryNotFound))
    assert not build.cuda_wheel_dir().exists()  # nothing was installed


def test_toolkit_layout_of_the_wheels(tmp_path):
    """The tree the CUDA 13 wheels unpack to (nvidia/cu13: versioned libraries only) gets what FindCUDAToolkit
    looks for. (Checked for real on this machine: with it, CMake configures the pinned llama.cpp with
    GGML_CUDA=ON up to "Including CUDA backend"; only CUDA::cuda_driver is missing where no driver is installed.)"""
    import io

    root = tmp_path / "nvidia" / "cu13"
    (root / "lib").mkdir(parents=True)
    (root / "include").mkdir()
    for n in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnvvm.so.4"):
        (root / "lib" / n).write_text("")
    log = io.StringIO()
    build._toolkit_layout(root, log)
    for plain, versioned in (("libcudart.so", "libcudart.so.13"), ("libcublas.so", "libcublas.so.13"),
                             ("libnvvm.so", "libnvvm.so.4")):
        assert (root / "lib" / plain).is_symlink() and os.readlink(root / "lib" / plain) == versioned
    assert (root / "lib64").resolve() == (root / "lib").resolve()
    t = root / "targets" / f"{platform.machine()}-linux"
    assert (t / "include").resolve() == (root / "include").resolve() and (t / "lib").resolve() == (root / "lib").resolve()
    build._toolkit_layout(root, log)  # again: nothing to do, no error


def test_the_cli_says_what_is_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in build.BACKEND_ENV_DIRS.values()}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path), PYTHONPATH=str(ROOT),
               LAYERDECK_DATA_DIR=str(tmp_path / "data"), PATH="/usr/bin:/bin")
    p = subprocess.run([sys.executable, "-m", "app.cli", "llama", "build", "--backend", "rocm"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    if shutil.which("hipcc", path="/usr/bin:/bin:/opt/rocm/bin"):
        pytest.skip("this machine has ROCm")
    assert p.returncode == 2 and p.stderr.startswith("layerdeck: the ROCm (HIP) build needs AMD's hipcc"), p.stderr
    assert "Install ROCm" in p.stderr and not (tmp_path / "xdg").exists()  # nothing started
    p = subprocess.run([sys.executable, "-m", "app.cli", "llama", "build", "--backend", "metal"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    if sys.platform != "darwin":
        assert p.returncode == 2 and "the Metal backend exists only on macOS" in p.stderr, p.stderr
