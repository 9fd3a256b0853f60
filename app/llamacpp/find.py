"""Every llama.cpp on this machine, and what each one can do for Layerdeck.

Where it looks, in this order (the first folder that holds ``llama-server`` under one real path wins the
label): the folder beside the app (a frozen bundle), the Settings folder, ``LAYERDECK_LLAMA_CPP_DIR``, the
build marked current (``layerdeck llama use``), Layerdeck's own installs (:mod:`app.llamacpp.store`),
every folder on ``PATH``, ``~/llama.cpp/build/bin`` and ``~/*/llama.cpp/build/bin`` (one level),
Homebrew (``/opt/homebrew/bin``, ``/usr/local/bin``, ``/home/linuxbrew/.linuxbrew/bin``), and on Windows
winget's and scoop's package folders.

For each it runs ``llama-server --version``, ``--list-devices`` and ``--help`` (and ``llama-fit-params
--help``) with time limits, never through a shell, and keeps the answer in the user cache keyed by the
binary's path, size and modification time, so a second look costs nothing.

The oldest build Layerdeck supports is :data:`OLDEST_SUPPORTED_BUILD`; :data:`FEATURES` says what each
checked feature is for and what stops working without it. The build this project is tested against is
the one vendored in the pinned llama-cpp-python sdist (:data:`PINNED_BUILD`).
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..paths import read_json_cache, write_json_cache
from . import store
from .binaries import search_dirs
from .capabilities import capabilities

log = logging.getLogger(__name__)

#: The llama.cpp commit vendored in llama-cpp-python 0.3.36 (app.llamacpp.build.PINNED_VERSION): upstream
#: build 11312 (``b11312-0c1e57098``, 1 Oct 2026). The sdist's CMake has no git, so its own binaries print
#: "build 0, commit unknown".
PINNED_BUILD = 11312
PINNED_COMMIT = "0c1e57098"

#: The oldest build Layerdeck supports: b9284 (24 May 2026) is the oldest release known to have every
#: llama.cpp feature the core reads: ``llama-fit-params --fit-print`` (llama.cpp PR 22171, April 2026),
#: the ``-lv`` levels where 4 prints the buffer sizes and 5 the tensor assignments (PR 23282, May 2026),
#: ``-ot``, ``--n-cpu-moe``, ``--fit`` and ``--list-devices``. ``--load-mode`` came later (PR 20834,
#: July 2026); before it Layerdeck writes the older ``--no-mmap``/``--mlock`` flags (app.command.build).
OLDEST_SUPPORTED_BUILD = 9284

#: What each feature is checked by, and what stops working without it.
FEATURES: dict[str, tuple[str, str]] = {
    "list_devices": (
        "llama-server --list-devices",
        "device names are guessed from the drivers instead of read from llama.cpp",
    ),
    "override_tensor": ("-ot in --help", "placements that move single tensors cannot be exported or launched"),
    "fit": ("--fit in --help", "llama.cpp's own --fit comparison is not available"),
    "fit_print": (
        "llama-fit-params with --fit-print",
        "Verify (llama.cpp's dry run next to each lane) and the estimate check do not work",
    ),
    "verbosity": (
        "-lv in --help, build 9284 or newer",
        "the launch log's buffer sizes (-lv 4) and tensor assignments (-lv 5) are not read, so predicted vs "
        "actual memory is not shown",
    ),
    "load_mode": (
        "--load-mode in --help (or the older --no-mmap)",
        "the model cannot be loaded without mmap from Layerdeck's command",
    ),
}

TIMEOUT_S = 20.0
_PARSER = 4  # bump when the probe changes, so cached results are read again
MAX_CACHE_BYTES = 8 << 20

_VERSION_NEW = re.compile(r"version:\s*(?P<semver>\S+)\s*\(build (?P<build>\d+), commit (?P<commit>[^)\s]+)\)")
_VERSION_OLD = re.compile(r"version:\s*(?P<build>\d+)\s*\((?P<commit>[0-9a-fA-F]+)\)")
_BUILT_WITH = re.compile(r"built with (?P<what>.+)$", re.M)
_DEVICE = re.compile(r"^\s+(?P<name>\S+?): (?P<desc>.*) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")

#: Device name prefix -> backend.
_BACKEND_OF_DEVICE = {
    "CUDA": "cuda",
    "ROCm": "rocm",
    "HIP": "rocm",
    "Vulkan": "vulkan",
    "MTL": "metal",
    "Metal": "metal",
    "SYCL": "sycl",
    "RPC": "rpc",
    "BLAS": "blas",
    "OpenCL": "opencl",
    "CANN": "cann",
}
#: Backend library stems (``libggml-cuda.so``, ``ggml-vulkan.dll``) -> backend.
_BACKEND_LIBS = {
    "cuda": "cuda",
    "hip": "rocm",
    "vulkan": "vulkan",
    "metal": "metal",
    "sycl": "sycl",
    "rpc": "rpc",
    "blas": "blas",
    "opencl": "opencl",
    "cann": "cann",
}


def _exe(name: str) -> str:
    return name + (".exe" if sys.platform == "win32" else "")


@dataclass(frozen=True)
class Version:
    build: int | None  # None: not printed, or 0/1 from a source archive without git (not meaningful)
    commit: str | None
    text: str  # the "version: ..." line as printed
    built_with: str = ""
    semver: str = ""  # "0.5.0-dev" where printed


def parse_version(text: str) -> Version:
    """The build number and commit from ``--version`` output (any of the spellings llama.cpp used)."""
    line = next((ln.strip() for ln in text.splitlines() if "version:" in ln), "")
    built = _BUILT_WITH.search(text)
    m = _VERSION_NEW.search(text) or _VERSION_OLD.search(text)
    if not m:
        return Version(None, None, line, built.group("what").strip() if built else "")
    build = int(m["build"])
    commit = m["commit"] if m["commit"] not in ("unknown", "") else None
    semver = m.groupdict().get("semver") or ""
    return Version(build if build > 1 else None, commit, line, built.group("what").strip() if built else "", semver)


@dataclass(frozen=True)
class FoundDevice:
    name: str
    description: str
    total_mib: int
    free_mib: int


def parse_devices(text: str) -> tuple[list[FoundDevice], bool]:
    """(devices, whether the ``Available devices:`` header was there) from ``--list-devices`` output."""
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Available devices:")
    except StopIteration:
        return [], False
    out = []
    for ln in lines[start + 1 :]:
        m = _DEVICE.match(ln)
        if m:
            out.append(FoundDevice(m["name"], m["desc"], int(m["total"]), int(m["free"])))
    return out, True


def backend_of_device(name: str) -> str | None:
    stem = re.sub(r"\d+$", "", name)
    return _BACKEND_OF_DEVICE.get(stem)


def backends_in(folder: Path) -> set[str]:
    """Backends whose ggml library lies in ``folder`` (builds with dynamic backends)."""
    out: set[str] = set()
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return out
    for n in names:
        m = re.match(r"^(?:lib)?ggml-([a-z]+)", n)
        if m and m.group(1) in _BACKEND_LIBS and re.search(r"\.(so|dll|dylib)(\.|$)", n):
            out.add(_BACKEND_LIBS[m.group(1)])
    return out


#: Runtime libraries a statically built backend links (``NEEDED`` names in the server's ELF string table):
#: they name the backend even when it lists no device (a Vulkan build on a machine whose driver llama.cpp
#: skips, a CUDA build with no GPU).
_LINKED_BACKENDS = {
    b"libvulkan.so.1\0": "vulkan",
    b"libcudart.so": "cuda",
    b"libcublas.so": "cuda",
    b"libamdhip64.so": "rocm",
    b"libhipblas.so": "rocm",
}


def backends_linked(server: Path) -> set[str]:
    """Backends whose runtime the ELF ``server`` links (Linux builds; nothing elsewhere or when unreadable).

    The names are searched in the mapped file (tens of ms for a 40 MB tool; the probe is cached): the string
    table is near the start of a file as linked, at its end once patchelf has rewritten it."""
    try:
        with open(server, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return set()
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return {backend for lib, backend in _LINKED_BACKENDS.items() if m.find(lib) != -1}
    except (OSError, ValueError):
        return set()


@dataclass
class Build:
    """One llama.cpp folder and what was learnt about it."""

    folder: Path
    sources: list[str]  # where it was found ("configured", "installed by Layerdeck", "PATH", ...)
    server: Path | None
    version: Version | None = None
    backends: list[str] = field(default_factory=list)
    devices: list[FoundDevice] = field(default_factory=list)
    features: dict[str, bool] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what could not be learnt, or failed
    installed: str | None = None  # the store version name when it is one of Layerdeck's installs

    @property
    def usable(self) -> bool:
        """llama-server is there and answered ``--version``."""
        return self.server is not None and self.version is not None

    @property
    def build(self) -> int | None:
        return self.version.build if self.version else None

    @property
    def supported(self) -> bool:
        """Usable, not older than :data:`OLDEST_SUPPORTED_BUILD`, and has -ot and --list-devices."""
        if not self.usable:
            return False
        if self.build is not None and self.build < OLDEST_SUPPORTED_BUILD:
            return False
        return self.features.get("override_tensor", False) and self.features.get("list_devices", False)

    def missing(self) -> list[str]:
        """One sentence per missing feature: what it is and what stops working."""
        out = []
        if self.build is not None and self.build < OLDEST_SUPPORTED_BUILD:
            out.append(
                f"build {self.build} is older than b{OLDEST_SUPPORTED_BUILD}, the oldest Layerdeck supports: "
                "update it (layerdeck llama get)"
            )
        for key, (how, loss) in FEATURES.items():
            if not self.features.get(key, False):
                out.append(f"no {key.replace('_', ' ')} ({how}): {loss}")
        return out

    def label(self) -> str:
        v = self.version
        if v is None:
            return "not runnable"
        if v.build is not None:
            return f"b{v.build}" + (f" ({v.commit})" if v.commit else "")
        return f"{v.semver or 'version unknown'}, no build number (built from a source archive)"

    def to_json(self) -> dict:
        v = self.version
        return {
            "folder": str(self.folder),
            "sources": list(self.sources),
            "server": str(self.server) if self.server else None,
            "installed_version": self.installed,
            "version": None if v is None else {"build": v.build, "commit": v.commit, "text": v.text},
            "backends": list(self.backends),
            "devices": [asdict(d) for d in self.devices],
            "features": dict(self.features),
            "tools": list(self.tools),
            "usable": self.usable,
            "supported": self.supported,
            "missing": self.missing() if self.usable else [],
            "problems": list(self.problems),
        }


# --------------------------------------------------------------------------- where to look


def _home_builds(home: Path) -> list[Path]:
    out = [home / "llama.cpp" / "build" / "bin", home / "llama.cpp" / "build" / "bin" / "Release"]
    try:
        children = sorted(p for p in home.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        children = []
    for child in children[:500]:  # one level only, bounded
        b = child / "llama.cpp" / "build" / "bin"
        out += [b, b / "Release"]
    return out


def _windows_package_dirs(home: Path) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    local = Path(os.environ.get("LOCALAPPDATA", home / "AppData" / "Local"))
    packages = local / "Microsoft" / "WinGet" / "Packages"
    try:
        for p in sorted(packages.glob("ggml.llamacpp*"))[:20]:
            out.append((p, "winget"))
    except OSError:
        pass
    out.append((local / "Microsoft" / "WinGet" / "Links", "winget"))
    scoop = Path(os.environ.get("SCOOP", home / "scoop"))
    out.append((scoop / "apps" / "llama.cpp" / "current", "scoop"))
    out.append((scoop / "shims", "scoop"))
    return out


def candidate_dirs(configured: str | os.PathLike | None = None, home: Path | None = None) -> list[tuple[Path, str]]:
    """Every folder to look in, with the label of why, in search order (duplicates are merged later)."""
    home = Path.home() if home is None else home
    dirs: list[tuple[Path, str]] = []
    labels = {"bundled": "beside the app", "current": "current"}
    for d, source in search_dirs(configured):  # beside the app, Settings, environment, current
        dirs.append((d, labels.get(source, source)))
    for inst in store.installed():
        dirs.append((inst.bin_dir, "installed by Layerdeck"))
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry:
            dirs.append((Path(entry), "PATH"))
    dirs += [(d, "built under home") for d in _home_builds(home)]
    dirs += [(Path(d), "Homebrew") for d in ("/opt/homebrew/bin", "/usr/local/bin", "/home/linuxbrew/.linuxbrew/bin")]
    if sys.platform == "win32":
        dirs += _windows_package_dirs(home)
    return dirs


def _server_in(folder: Path) -> Path | None:
    p = folder / _exe("llama-server")
    try:
        if p.is_file() and os.access(p, os.X_OK):
            return p
    except OSError:
        return None
    return None


# --------------------------------------------------------------------------- probing


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[str, str | None]:
    """(stdout + stderr, None) or ("", why it failed)."""
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
        )
    except subprocess.TimeoutExpired:
        return "", f"{Path(cmd[0]).name} {' '.join(cmd[1:])} did not finish within {timeout:g} s"
    except OSError as exc:
        return "", f"{Path(cmd[0]).name} could not run: {exc}"
    out = (proc.stdout or "") + "\n" + (proc.stderr or "")
    if proc.returncode != 0:
        return out, f"{Path(cmd[0]).name} {' '.join(cmd[1:])} exited with status {proc.returncode}"
    return out, None


def _cache_file() -> Path:
    from .build import cache_root

    return cache_root() / "llama-builds.json"


#: Variables that change which devices a build lists: part of the cache key.
VISIBILITY_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GGML_VK_VISIBLE_DEVICES",
    "ONEAPI_DEVICE_SELECTOR",
)


def _key(server: Path, env: dict[str, str] | None = None) -> str | None:
    merged = {**os.environ, **(env or {})}
    visible = "|".join(f"{k}={merged.get(k, '')}" for k in VISIBILITY_ENV)
    try:
        st = server.stat()
        fit = server.with_name(_exe("llama-fit-params"))
        fst = fit.stat() if fit.is_file() else None
    except OSError:
        return None
    extra = f"|{fst.st_size}|{fst.st_mtime_ns}" if fst else "|-"
    text = f"{_PARSER}|{server.resolve()}|{st.st_size}|{st.st_mtime_ns}{extra}|{visible}"
    return hashlib.sha1(text.encode()).hexdigest()


def _load_cache() -> dict:
    return read_json_cache(_cache_file(), MAX_CACHE_BYTES, "llama.cpp build cache")


def _from_cache(entry: object, folder: Path, server: Path) -> Build | None:
    try:
        assert isinstance(entry, dict)
        v = entry["version"]
        build = Build(
            folder=folder,
            sources=[],
            server=server,
            version=None
            if v is None
            else Version(v["build"], v["commit"], v["text"], v.get("built_with", ""), v.get("semver", "")),
            backends=[str(b) for b in entry["backends"]],
            devices=[
                FoundDevice(str(d["name"]), str(d["description"]), int(d["total_mib"]), int(d["free_mib"]))
                for d in entry["devices"]
            ],
            features={str(k): bool(x) for k, x in entry["features"].items()},
            tools=[str(t) for t in entry["tools"]],
            problems=[str(p) for p in entry["problems"]],
        )
    except (AssertionError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return build


def _store_cache(key: str, build: Build) -> None:
    cache = _load_cache()
    v = build.version
    cache[key] = {
        "version": None if v is None else asdict(v),
        "backends": build.backends,
        "devices": [asdict(d) for d in build.devices],
        "features": build.features,
        "tools": build.tools,
        "problems": build.problems,
        "probed_at": time.time(),
    }
    write_json_cache(_cache_file(), cache, "llama.cpp build cache")


def probe(folder: Path, timeout: float = TIMEOUT_S, env: dict[str, str] | None = None, use_cache: bool = True) -> Build:
    """What the llama.cpp in ``folder`` is: version, backends, devices, features.

    Cached per binary (path, size, modification time, also of llama-fit-params) and the device-visibility
    variables (:data:`VISIBILITY_ENV`); ``env`` adds variables for the runs (``GGML_VK_VISIBLE_DEVICES=0``
    makes lavapipe visible). The devices' free memory is as it was at the probe.
    """
    folder = Path(folder)
    server = _server_in(folder)
    build = Build(folder=folder, sources=[], server=server)
    build.tools = [
        t
        for t in ("llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server", "llama-cli")
        if (folder / _exe(t)).is_file()
    ]
    if server is None:
        build.problems.append(f"no runnable {_exe('llama-server')} in {folder}")
        return build
    key = _key(server, env) if use_cache else None
    if key is not None:
        hit = _from_cache(_load_cache().get(key), folder, server)
        if hit is not None:
            hit.tools = build.tools
            return hit
    out, err = _run([str(server), "--version"], timeout, env)
    if err and not out.strip():
        build.problems.append(err)
        return build
    version = parse_version(out)
    if not version.text and err:
        build.problems.append(err)
        return build
    build.version = version
    listing, err = _run([str(server), "--list-devices"], timeout, env)
    devices, header = parse_devices(listing)
    if err or not header:
        build.problems.append(err or "--list-devices printed no 'Available devices:' list")
    build.devices = devices
    caps = capabilities(server, timeout=timeout)
    if not caps.known:
        build.problems.append(f"{server.name} --help could not be read: its flags are unknown")
    backends = {"cpu"} | backends_in(folder) | backends_linked(server)
    backends |= {b for b in (backend_of_device(d.name) for d in devices) if b}
    if caps.has("--rpc") and caps.known:
        backends.add("rpc")
    build.backends = sorted(backends)
    fit_print = False
    fit_tool = folder / _exe("llama-fit-params")
    if fit_tool.is_file():
        fcaps = capabilities(fit_tool, timeout=timeout)
        fit_print = fcaps.known and fcaps.has("--fit-print")
    new_enough = version.build is None or version.build >= OLDEST_SUPPORTED_BUILD
    build.features = {
        "list_devices": header,
        "override_tensor": caps.known and caps.has("-ot"),
        "fit": caps.known and caps.has("--fit"),
        "fit_print": fit_print,
        "verbosity": caps.known and caps.has("-lv") and new_enough,
        "load_mode": caps.known and (caps.has("--load-mode") or caps.has("--no-mmap")),
    }
    if key is not None:
        _store_cache(key, build)
    return build


def _real(p: Path) -> str:
    try:
        return os.path.normcase(str(p.resolve()))
    except OSError:
        return os.path.normcase(str(p.absolute()))


def find_all(
    configured: str | os.PathLike | None = None,
    timeout: float = TIMEOUT_S,
    home: Path | None = None,
    extra: Iterable[tuple[Path, str]] = (),
    run: bool = True,
) -> list[Build]:
    """Every folder with a ``llama-server``, once per real folder, probed (``run=False``: only located)."""
    seen: dict[str, Build] = {}
    installs = {_real(i.bin_dir): i.version for i in store.installed()}
    for folder, source in [*candidate_dirs(configured, home), *extra]:
        if _server_in(folder) is None:
            continue
        real = _real(folder)
        if real in seen:
            if source not in seen[real].sources:
                seen[real].sources.append(source)
            continue
        b = probe(folder, timeout) if run else Build(folder=folder, sources=[], server=_server_in(folder))
        b.sources = [source]
        b.installed = installs.get(real)
        seen[real] = b
    return list(seen.values())


def current_folder(configured: str | os.PathLike | None = None) -> Path | None:
    """The folder Layerdeck runs llama-server from now (the same search as every command), or None."""
    from .binaries import LlamaCppNotFound, find_tool

    try:
        return find_tool("llama-server", configured).path.parent
    except LlamaCppNotFound:
        return None


def is_current(build: Build, current: Path | None) -> bool:
    return current is not None and _real(build.folder) == _real(current)
