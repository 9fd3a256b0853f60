"""The llama.cpp project's prebuilt releases: read one release, pick the asset for this machine, download it.

A release is the GitHub releases API's JSON for one release (``tag_name``; ``assets`` with ``name``,
``browser_download_url``, ``size`` and ``digest`` = ``"sha256:<hex>"``). The default is the official
latest release (:data:`OFFICIAL_RELEASE_URL`, HTTPS); a mirror is used only when its URL is given
explicitly, and then its assets must come from the same host. Plain HTTP is accepted only to this
machine (127.0.0.1, ``localhost``, ``::1``), for local mirrors and tests.

Asset choice (:func:`choose`) by OS, CPU architecture and GPU (:class:`Machine`, from :func:`this_machine`):

* Windows + NVIDIA: the CUDA build plus its ``cudart-*`` runtime archive, CUDA 12 or 13 by the newest
  CUDA version the driver supports (NVML ``nvmlSystemGetCudaDriverVersion``);
* AMD: ROCm/HIP where the release publishes it for this OS, else Vulkan;
* Intel: Vulkan (SYCL on request);
* Apple: the macOS build (Metal on Apple silicon);
* Linux + NVIDIA: a Linux CUDA asset where the release has one, else Vulkan (which runs on the NVIDIA
  driver), with the reason; the fastest option then is building from source (``layerdeck llama build``);
* no GPU: the CPU build.

:func:`download` resumes an interrupted download from its ``.part`` file with an HTTP Range request,
reports progress with speed and time left, can be cancelled, and checks the size and sha256 before it
returns; a wrong digest deletes the file. Nothing here unpacks or runs anything (:mod:`app.llamacpp.install`).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import http.client
import ipaddress
import json
import logging
import os
import platform
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ToolError
from ..units import fmt_bytes

log = logging.getLogger(__name__)

OFFICIAL_REPO = "ggml-org/llama.cpp"
OFFICIAL_RELEASE_URL = f"https://api.github.com/repos/{OFFICIAL_REPO}/releases/latest"
OFFICIAL_DOWNLOAD_PREFIX = f"https://github.com/{OFFICIAL_REPO}/releases/download/"
#: Where GitHub redirects an asset download (HTTPS only).
OFFICIAL_REDIRECT_HOSTS = ("github.com", "objects.githubusercontent.com", "release-assets.githubusercontent.com")

#: The largest release JSON read (a release with ~40 assets is ~60 KiB).
MAX_RELEASE_BYTES = 4 << 20
MAX_ASSETS = 2000
#: The largest archive downloaded (the CUDA runtime archive is ~0.4 GB).
MAX_ASSET_BYTES = 4 << 30
TIMEOUT_S = 30.0

BACKENDS = ("cpu", "cuda", "vulkan", "rocm", "metal", "sycl")


class ReleaseError(ToolError):
    """The release could not be read, or has nothing usable for this machine."""


class NoMatchingAsset(ReleaseError):
    """The release has no asset for this OS, architecture and backend."""


class DownloadError(ToolError):
    """Downloading an asset failed (the message says why and what to do)."""


class DigestMismatch(DownloadError):
    """The downloaded bytes are not the ones the release lists; the file was deleted."""


class DownloadCancelled(DownloadError):
    """The user cancelled; the ``.part`` file is kept so the next attempt resumes."""


class DiskFull(DownloadError):
    """There is not enough free space; the partial file was deleted."""


class Busy(DownloadError):
    """Another Layerdeck is downloading the same asset right now."""


# --------------------------------------------------------------------------- the release JSON


@dataclass(frozen=True)
class Asset:
    name: str
    url: str
    size: int
    sha256: str | None  # lower-case hex, or None when the release gives no digest


@dataclass(frozen=True)
class Release:
    tag: str
    assets: tuple[Asset, ...]
    source: str  # the URL it was read from


_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")


def parse_release(data: bytes | str | object, source: str = "") -> Release:
    """A :class:`Release` from the API's JSON (bytes, text or already decoded); :class:`ReleaseError` if unusable.

    An asset whose name could be a path, whose URL is not a string, or whose size is not a non-negative
    integer makes the whole release unusable (it is not what the API returns). A missing or malformed
    ``digest`` is kept as None: :func:`download` refuses such an asset.
    """
    where = f" from {source}" if source else ""
    if isinstance(data, (bytes, str)):
        if len(data) > MAX_RELEASE_BYTES:
            raise ReleaseError(
                f"the release JSON{where} is larger than {fmt_bytes(MAX_RELEASE_BYTES)}; it is not a release"
            )
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ReleaseError(
                f"the answer{where} is not JSON ({str(exc)[:100]}); is the URL a releases API endpoint?"
            ) from None
    else:
        obj = data
    if isinstance(obj, list):
        raise ReleaseError(f"the answer{where} is a list of releases; give the URL of one release (…/releases/latest)")
    if not isinstance(obj, dict):
        raise ReleaseError(f"the answer{where} is not a release (expected a JSON object with tag_name and assets)")
    tag = obj.get("tag_name")
    assets = obj.get("assets")
    if not isinstance(tag, str) or not _SAFE_NAME.match(tag):
        raise ReleaseError(f"the release{where} has no usable tag_name ({str(tag)[:40]!r})")
    if not isinstance(assets, list):
        raise ReleaseError(f"the release {tag}{where} has no asset list")
    if len(assets) > MAX_ASSETS:
        raise ReleaseError(f"the release {tag}{where} lists {len(assets)} assets, more than {MAX_ASSETS}")
    out = []
    for i, a in enumerate(assets):
        if not isinstance(a, dict):
            raise ReleaseError(f"asset {i} of release {tag}{where} is not an object")
        name, url, size, digest = a.get("name"), a.get("browser_download_url"), a.get("size"), a.get("digest")
        if not isinstance(name, str) or not _SAFE_NAME.match(name):
            raise ReleaseError(f"asset {i} of release {tag}{where} has an unusable name ({str(name)[:60]!r})")
        if not isinstance(url, str) or not url or len(url) > 2000:
            raise ReleaseError(f"asset {name} of release {tag}{where} has no download URL")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ReleaseError(f"asset {name} of release {tag}{where} has no valid size")
        sha = None
        if isinstance(digest, str) and digest.lower().startswith("sha256:") and _HEX64.match(digest[7:].lower()):
            sha = digest[7:].lower()
        out.append(Asset(name, url, size, sha))
    return Release(tag, tuple(out), source)


# --------------------------------------------------------------------------- asset names

_ASSET = re.compile(
    r"^(?P<cudart>cudart-)?llama-(?:(?P<tag>b\d+)-)?bin-(?P<os>ubuntu|linux|macos|win)"
    r"(?:-(?P<variant>[a-z0-9.-]+?))?-(?P<arch>x64|arm64|s390x)\.(?P<ext>zip|tar\.gz)$"
)


@dataclass(frozen=True)
class AssetKind:
    os: str  # "linux", "windows", "macos"
    arch: str  # "x64", "arm64", "s390x"
    backend: str  # "cpu", "cuda", "vulkan", "rocm", "metal", "sycl", or another variant name
    cuda: tuple[int, int] | None  # the CUDA version of a CUDA build or runtime
    runtime: bool  # a cudart-* runtime archive, not a llama.cpp build
    variant: str  # the variant as written ("cuda-12.4", "hip-radeon", "" for the plain build)


def parse_asset_name(name: str) -> AssetKind | None:
    """What an asset name says (None for source archives, the web UI, xcframework, Android...)."""
    m = _ASSET.match(name)
    if not m:
        return None
    os_ = {"ubuntu": "linux", "linux": "linux", "macos": "macos", "win": "windows"}[m["os"]]
    variant = m["variant"] or ""
    cuda = None
    if variant in ("", "cpu"):
        backend = "metal" if os_ == "macos" and m["arch"] == "arm64" else "cpu"
    elif variant.startswith("cuda"):
        backend = "cuda"
        v = re.match(r"cuda-?(\d+)\.(\d+)", variant)
        cuda = (int(v[1]), int(v[2])) if v else None
    elif variant.startswith(("rocm", "hip")):
        backend = "rocm"
    elif variant.startswith("sycl"):
        backend = "sycl"
    elif variant == "vulkan":
        backend = "vulkan"
    else:
        backend = variant.split("-")[0]
    return AssetKind(os_, m["arch"], backend, cuda, bool(m["cudart"]), variant)


# --------------------------------------------------------------------------- this machine


@dataclass(frozen=True)
class Machine:
    os: str  # "linux", "windows", "macos"
    arch: str  # "x64", "arm64", ...
    gpus: tuple[str, ...] = ()  # vendors: "nvidia", "amd", "intel", "apple"
    cuda_driver: tuple[int, int] | None = None  # newest CUDA version the NVIDIA driver supports
    notes: tuple[str, ...] = ()  # what could not be detected

    def describe(self) -> str:
        gpu = ", ".join(self.gpus) or "no GPU found"
        cuda = f", driver supports CUDA {self.cuda_driver[0]}.{self.cuda_driver[1]}" if self.cuda_driver else ""
        return f"{self.os} {self.arch}, {gpu}{cuda}"


def _arch() -> str:
    m = platform.machine().lower()
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(m, m)


def _os() -> str:
    return {"win32": "windows", "darwin": "macos"}.get(sys.platform, "linux")


def cuda_driver_version(nvml: Any = None) -> tuple[tuple[int, int] | None, str | None]:
    """(the newest CUDA version the NVIDIA driver supports, or None; why not) from NVML."""
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py

            nvml = pynvml
        except ImportError:
            return None, "nvidia-ml-py is not installed, so the driver's CUDA version is unknown"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...: no NVIDIA driver
        return None, f"NVML is not available ({exc})"
    try:
        v = int(nvml.nvmlSystemGetCudaDriverVersion())
        return (v // 1000, (v % 1000) // 10), None
    except Exception as exc:  # noqa: BLE001 - an old driver without the call
        return None, f"NVML could not say which CUDA version the driver supports ({exc})"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


_PCI_VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}


def _sysfs_gpus(root: Path = Path("/sys/class/drm")) -> list[str]:
    out: list[str] = []
    try:
        cards = sorted(p for p in root.iterdir() if re.fullmatch(r"card\d+", p.name))
    except OSError:
        return out
    for card in cards:
        try:
            vendor = (card / "device" / "vendor").read_text().strip().lower()
            cls = (card / "device" / "class").read_text().strip().lower()
        except OSError:
            continue
        if cls.startswith("0x03") and vendor in _PCI_VENDORS and _PCI_VENDORS[vendor] not in out:
            out.append(_PCI_VENDORS[vendor])
    return out


def _windows_gpus(timeout: float = 10.0) -> tuple[list[str], str | None]:
    import subprocess

    cmd = [
        "powershell",
        "-NoProfile",
        "-NonInteractive",
        "-Command",
        "Get-CimInstance Win32_VideoController | ForEach-Object { $_.AdapterCompatibility + '|' + $_.Name }",
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, errors="replace", stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"the graphics adapters could not be listed ({exc})"
    out = []
    for line in proc.stdout.lower().splitlines():
        for key, vendor in (
            ("nvidia", "nvidia"),
            ("advanced micro", "amd"),
            ("amd", "amd"),
            ("radeon", "amd"),
            ("intel", "intel"),
        ):
            if key in line and vendor not in out:
                out.append(vendor)
                break
    return out, None


def this_machine(nvml=None) -> Machine:
    """The OS, architecture and GPU vendors of this machine, with notes on what could not be read."""
    os_, arch = _os(), _arch()
    notes: list[str] = []
    if os_ == "macos":
        return Machine(os_, arch, ("apple",) if arch == "arm64" else ())
    if os_ == "windows":
        gpus, why = _windows_gpus()
        if why:
            notes.append(why)
    else:
        gpus = _sysfs_gpus()
    cuda, why = cuda_driver_version(nvml)
    if cuda is not None and "nvidia" not in gpus:
        gpus.insert(0, "nvidia")
    if "nvidia" in gpus and cuda is None and why:
        notes.append(why)
    return Machine(os_, arch, tuple(gpus), cuda, tuple(notes))


# --------------------------------------------------------------------------- choosing


@dataclass(frozen=True)
class Choice:
    release: Release
    asset: Asset
    runtime: Asset | None  # the cudart-* archive that goes with a Windows (or Linux) CUDA build
    backend: str
    reason: str
    notes: tuple[str, ...] = ()

    @property
    def assets(self) -> tuple[Asset, ...]:
        return (self.asset,) + ((self.runtime,) if self.runtime else ())

    @property
    def version(self) -> str:
        """The install folder name: tag and the asset's platform part (``b11312-ubuntu-vulkan-x64``)."""
        name = self.asset.name
        for ext in (".tar.gz", ".zip"):
            if name.endswith(ext):
                name = name[: -len(ext)]
        name = re.sub(r"^llama-(b\d+-)?bin-", "", name)
        return f"{self.release.tag}-{name}"

    @property
    def download_bytes(self) -> int:
        return sum(a.size for a in self.assets)


def _platform_assets(release: Release, machine: Machine) -> list[tuple[Asset, AssetKind]]:
    out = []
    for a in release.assets:
        k = parse_asset_name(a.name)
        if k is not None and k.os == machine.os and k.arch == machine.arch:
            out.append((a, k))
    return out


def _runtime_for(cands: list[tuple[Asset, AssetKind]], cuda: tuple[int, int] | None) -> Asset | None:
    return next((a for a, k in cands if k.runtime and k.cuda == cuda), None)


def _pick_cuda(cands, machine: Machine) -> tuple[Asset, Asset | None, str] | None:
    builds = sorted(
        ((a, k) for a, k in cands if k.backend == "cuda" and not k.runtime and k.cuda), key=lambda ak: ak[1].cuda
    )
    if not builds:
        return None
    drv = machine.cuda_driver
    if drv is None:
        a, k = builds[0]
        why = (
            f"CUDA {k.cuda[0]}.{k.cuda[1]}, the oldest this release has, because the driver's CUDA version "
            "could not be read (an older CUDA runs on more drivers)"
        )
    else:
        fitting = [(a, k) for a, k in builds if k.cuda <= drv]
        if not fitting:
            return None
        a, k = fitting[-1]
        why = f"CUDA {k.cuda[0]}.{k.cuda[1]}: the newest this release has that the driver (CUDA {drv[0]}.{drv[1]}) runs"
    return a, _runtime_for(cands, k.cuda), why


def choose(release: Release, machine: Machine, backend: str | None = None) -> Choice:
    """The asset (and CUDA runtime) for ``machine``; ``backend`` forces one. :class:`NoMatchingAsset` if none."""
    cands = _platform_assets(release, machine)
    plat = f"{machine.os} {machine.arch}"
    if not cands:
        others = sorted({f"{k.os} {k.arch}" for k in map(parse_asset_name, (a.name for a in release.assets)) if k})
        raise NoMatchingAsset(
            f"release {release.tag} has no llama.cpp build for {plat}"
            + (f" (it has builds for {', '.join(others)})" if others else " (it has no prebuilt builds at all)")
            + ". Build from source instead: layerdeck llama build",
        )
    by_backend: dict[str, list[tuple[Asset, AssetKind]]] = {}
    for a, k in cands:
        if not k.runtime:
            by_backend.setdefault(k.backend, []).append((a, k))
    have = ", ".join(sorted(by_backend)) or "none"
    notes = list(machine.notes)

    def one(b: str) -> tuple[Asset, AssetKind] | None:
        items = by_backend.get(b, [])
        return items[0] if items else None

    def make(b: str, reason: str) -> Choice:
        if b == "cuda":
            picked = _pick_cuda(cands, machine)
            if picked is None:
                drv = machine.cuda_driver
                raise NoMatchingAsset(
                    f"release {release.tag} has no CUDA build for {plat} that the driver (CUDA "
                    f"{drv[0]}.{drv[1]}) runs; update the NVIDIA driver or choose --backend vulkan"
                    if drv
                    else f"release {release.tag} has no CUDA build for {plat}"
                )
            a, rt, why = picked
            if rt is None and machine.os == "windows":
                notes.append(
                    f"release {release.tag} has no cudart runtime archive for this CUDA build: the CUDA "
                    "DLLs must come from an installed CUDA toolkit"
                )
            return Choice(release, a, rt, "cuda", f"{reason}; {why}", tuple(notes))
        hit = one(b)
        if hit is None:
            raise NoMatchingAsset(f"release {release.tag} has no {b} build for {plat} (it has: {have})")
        return Choice(release, hit[0], None, b, reason, tuple(notes))

    if backend is not None:
        if backend not in BACKENDS:
            raise NoMatchingAsset(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        return make(backend, f"{backend} build, as asked")
    gpus = machine.gpus
    if machine.os == "macos":
        b = "metal" if "metal" in by_backend else "cpu"
        return make(b, "the macOS build" + (" (Metal runs on Apple silicon)" if b == "metal" else ""))
    if "nvidia" in gpus:
        try:
            return make("cuda", "NVIDIA GPU: the CUDA build")
        except NoMatchingAsset as exc:
            if "vulkan" not in by_backend:
                raise
            if machine.os == "linux" and "cuda" not in by_backend:
                why = (
                    f"release {release.tag} has no Linux CUDA build, so the Vulkan build (it runs on the NVIDIA "
                    "driver; CUDA is usually faster: build it from source with layerdeck llama build --backend cuda)"
                )
            else:
                why = f"{exc}; the Vulkan build runs on the NVIDIA driver"
            return make("vulkan", f"NVIDIA GPU: {why}")
    if "amd" in gpus:
        if "rocm" in by_backend:
            return make("rocm", "AMD GPU: the ROCm/HIP build")
        if "vulkan" in by_backend:
            return make("vulkan", f"AMD GPU: release {release.tag} has no ROCm/HIP build for {plat}, so Vulkan")
    if "intel" in gpus and "vulkan" in by_backend:
        return make("vulkan", "Intel GPU: the Vulkan build")
    if gpus and "vulkan" in by_backend:
        return make("vulkan", f"{', '.join(gpus)} GPU: the Vulkan build")
    if "cpu" not in by_backend:
        raise NoMatchingAsset(f"release {release.tag} has no CPU build for {plat} (it has: {have})")
    return make("cpu", "no GPU found: the CPU build")


# --------------------------------------------------------------------------- network policy


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> urllib.parse.SplitResult:
    """HTTPS anywhere, or HTTP to this machine only; raises :class:`ReleaseError` otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return parts
    if parts.scheme == "http" and _loopback(parts.hostname):
        return parts
    raise ReleaseError(f"{what} {url!r} is not an HTTPS URL (plain HTTP is accepted only to 127.0.0.1/localhost)")


def check_asset_url(release: Release, asset: Asset) -> None:
    """An asset of the official release must come from the official download path; a mirror's from its own host."""
    parts = check_url(asset.url, f"the download URL of {asset.name}")
    if release.source == OFFICIAL_RELEASE_URL or not release.source:
        if not asset.url.startswith(OFFICIAL_DOWNLOAD_PREFIX):
            raise ReleaseError(
                f"{asset.name} would be downloaded from {parts.hostname}, not from {OFFICIAL_REPO}'s "
                "releases on github.com; refusing it"
            )
        return
    src = urllib.parse.urlsplit(release.source)
    if (parts.scheme, parts.hostname, parts.port) != (src.scheme, src.hostname, src.port):
        raise ReleaseError(
            f"{asset.name} would be downloaded from {parts.hostname}, not from the mirror "
            f"{src.hostname} the release came from; refusing it"
        )


class _SafeRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects only to HTTPS (or from loopback to loopback)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old = urllib.parse.urlsplit(req.full_url)
        new = urllib.parse.urlsplit(newurl)
        if new.scheme != "https" and not (_loopback(old.hostname) and _loopback(new.hostname)):
            raise DownloadError(f"the server redirected {req.full_url} to {newurl}, which is not HTTPS; refusing it")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_SafeRedirects)


def _user_agent() -> str:
    from .. import __version__

    return f"Layerdeck/{__version__}"


def _http_error(exc: urllib.error.HTTPError, url: str, what: str, cls: type[ToolError]) -> ToolError:
    hdr = exc.headers
    if exc.code in (403, 429) and (hdr.get("X-RateLimit-Remaining") == "0" or exc.code == 429):
        reset = hdr.get("X-RateLimit-Reset")
        when = ""
        if reset and reset.isdigit():
            when = " after " + time.strftime("%H:%M", time.localtime(int(reset)))
        return cls(
            f"{what}: the server's rate limit is used up (HTTP {exc.code}) at {url}; try again{when}, "
            "or download from a mirror with --release-url"
        )
    if exc.code == 404:
        return cls(
            f"{what}: nothing at {url} (HTTP 404); check the URL (a releases API endpoint for one release, "
            "e.g. …/releases/latest or …/releases/tags/b11312)"
        )
    return cls(f"{what}: the server answered HTTP {exc.code} {exc.reason} at {url}; try again later")


def _net_error(exc: BaseException, url: str, what: str, cls: type[ToolError]) -> ToolError:
    reason = getattr(exc, "reason", exc)
    host = urllib.parse.urlsplit(url).hostname
    return cls(
        f"{what}: cannot reach {host} ({reason}); check the network connection, or give a mirror with --release-url"
    )


def fetch_release(url: str = OFFICIAL_RELEASE_URL, timeout: float = TIMEOUT_S) -> Release:
    """Read one release from a releases API URL; :class:`ReleaseError` with what went wrong and what to do."""
    check_url(url, "the release URL")
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.github+json", "User-Agent": _user_agent()})
    what = "could not read the llama.cpp release"
    try:
        with _opener().open(req, timeout=timeout) as resp:
            data = resp.read(MAX_RELEASE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise _http_error(exc, url, what, ReleaseError) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise _net_error(exc, url, what, ReleaseError) from None
    return parse_release(data, url)


# --------------------------------------------------------------------------- downloading


@dataclass
class Progress:
    """What a download has done; ``speed`` in bytes/s (smoothed), ``eta`` in seconds (None: not known yet)."""

    what: str
    done: int
    total: int
    speed: float = 0.0
    eta: float | None = None

    def text(self) -> str:
        pct = f"{100 * self.done / self.total:.0f}% " if self.total else ""
        speed = f" at {fmt_bytes(int(self.speed))}/s" if self.speed else ""
        eta = ""
        if self.eta is not None:
            m, s = divmod(int(self.eta + 0.5), 60)
            eta = f", {m} min {s:02d} s left" if m else f", {s} s left"
        return f"{self.what}: {pct}{fmt_bytes(self.done)} of {fmt_bytes(self.total)}{speed}{eta}"


class _Meter:
    def __init__(self, what: str, total: int, start: int, report: Callable[[Progress], None] | None):
        self.p = Progress(what, start, total)
        self.report = report
        self.t0 = self.t_last = time.monotonic()
        self.last_done = start

    def add(self, n: int, force: bool = False) -> None:
        self.p.done += n
        now = time.monotonic()
        dt = now - self.t_last
        if self.report is None or (dt < 0.1 and not force):
            return
        inst = (self.p.done - self.last_done) / dt if dt > 0 else 0.0
        self.p.speed = inst if not self.p.speed else 0.7 * self.p.speed + 0.3 * inst
        self.p.eta = (self.p.total - self.p.done) / self.p.speed if self.p.speed > 0 else None
        self.t_last, self.last_done = now, self.p.done
        self.report(dataclasses.replace(self.p))  # a copy: the GUI reads it later, on its own thread


class _Lock:
    """A non-blocking exclusive lock file: a second download of the same file gets :class:`Busy`."""

    def __init__(self, path: Path, what: str):
        self.path, self.what, self.fh = path, what, None

    def __enter__(self):
        self.fh = open(self.path, "a+")
        try:
            if sys.platform == "win32":
                import msvcrt

                msvcrt.locking(self.fh.fileno(), msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.close()
            raise Busy(
                f"{self.what} is being downloaded by another Layerdeck right now; wait for it to finish"
            ) from None
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _disk_full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)


def download(
    release: Release,
    asset: Asset,
    folder: Path,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    retries: int = 4,
    timeout: float = TIMEOUT_S,
    chunk: int = 256 << 10,
) -> Path:
    """Download ``asset`` into ``folder`` and return the verified file (``NAME``; ``NAME.part`` while it runs).

    Refuses an asset without a sha256 digest (deleting any partial file), or too large, or from a URL the
    policy does not allow. An interrupted connection is resumed with ``Range`` up to ``retries`` times; a
    cancel keeps the ``.part`` for the next attempt. A wrong size or digest deletes the file
    (:class:`DigestMismatch`); a full disk deletes it too (:class:`DiskFull`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / (asset.name + ".part")
    final = folder / asset.name
    if asset.sha256 is None:
        part.unlink(missing_ok=True)
        raise DigestMismatch(
            f"release {release.tag} gives no sha256 digest for {asset.name}, so it cannot be "
            "checked; refusing it (nothing was unpacked or run)"
        )
    if asset.size > MAX_ASSET_BYTES:
        raise DownloadError(
            f"{asset.name} is {fmt_bytes(asset.size)}, more than the {fmt_bytes(MAX_ASSET_BYTES)} "
            "Layerdeck downloads; refusing it"
        )
    check_asset_url(release, asset)
    with _Lock(folder / (asset.name + ".lock"), asset.name):
        final.unlink(missing_ok=True)  # never trust a file left from before: only what is checked now
        have = part.stat().st_size if part.exists() else 0
        if have > asset.size:
            part.unlink()
            have = 0
        free = shutil.disk_usage(folder).free
        if free < asset.size - have:
            part.unlink(missing_ok=True)
            raise DiskFull(
                f"not enough free space in {folder} for {asset.name}: it needs "
                f"{fmt_bytes(asset.size - have)}, {fmt_bytes(free)} is free"
            )
        meter = _Meter(asset.name, asset.size, have, progress)
        attempt = 0
        while have < asset.size:
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(
                    f"the download of {asset.name} was cancelled ({fmt_bytes(have)} kept; it "
                    "resumes from there next time)"
                )
            try:
                have = _fetch(asset, part, have, meter, cancel, timeout, chunk)
            except DownloadCancelled:
                raise
            except urllib.error.HTTPError as exc:
                if exc.code == 416 and have:  # the part is not a prefix the server knows: start again
                    part.unlink(missing_ok=True)
                    have, meter.p.done = 0, 0
                    continue
                raise _http_error(exc, asset.url, f"could not download {asset.name}", DownloadError) from None
            except OSError as exc:
                if _disk_full(exc):
                    part.unlink(missing_ok=True)
                    raise DiskFull(
                        f"the disk filled up while downloading {asset.name} into {folder} ({exc.strerror}); "
                        "the partial file was deleted. Free some space and try again"
                    ) from None
                have = part.stat().st_size if part.exists() else 0
                attempt += 1
                if attempt > retries:
                    raise _net_error(
                        exc,
                        asset.url,
                        f"could not download {asset.name} ({fmt_bytes(have)} of "
                        f"{fmt_bytes(asset.size)} kept; it resumes next time)",
                        DownloadError,
                    ) from None
                log.info("download of %s interrupted at %d bytes (%s); resuming", asset.name, have, exc)
                time.sleep(min(0.2 * attempt, 2.0))
            except http.client.HTTPException as exc:
                have = part.stat().st_size if part.exists() else 0
                attempt += 1
                if attempt > retries:
                    raise _net_error(exc, asset.url, f"could not download {asset.name}", DownloadError) from None
        meter.add(0, force=True)
        if have != asset.size:
            part.unlink(missing_ok=True)
            raise DigestMismatch(f"{asset.name}: got {have} bytes, the release says {asset.size}; the file was deleted")
        got = _sha256_of(part)
        if got != asset.sha256:
            part.unlink(missing_ok=True)
            raise DigestMismatch(
                f"{asset.name} does not match the release's sha256 digest (expected "
                f"{asset.sha256[:16]}…, got {got[:16]}…); the file was deleted and nothing was "
                "unpacked. Try again; if it repeats, the download is being altered"
            )
        os.replace(part, final)
    return final


def _fetch(asset: Asset, part: Path, have: int, meter: _Meter, cancel, timeout: float, chunk: int) -> int:
    headers = {"User-Agent": _user_agent(), "Accept": "application/octet-stream"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(asset.url, headers=headers)
    with _opener().open(req, timeout=timeout) as resp:
        status = getattr(resp, "status", 200)
        if have and status == 200:  # the server ignored the range: start from the beginning
            mode, have = "wb", 0
            meter.p.done = 0
        elif have and status == 206:
            rng = resp.headers.get("Content-Range", "")
            m = re.match(r"bytes (\d+)-", rng)
            if not m or int(m.group(1)) != have:
                raise DownloadError(f"the server resumed {asset.name} at the wrong place ({rng!r}); try again")
            mode = "ab"
        else:
            mode = "wb" if not have else "ab"
        with open(part, mode) as f:
            while True:
                if cancel is not None and cancel.is_set():
                    f.flush()
                    raise DownloadCancelled(
                        f"the download of {asset.name} was cancelled ({fmt_bytes(have)} kept; "
                        "it resumes from there next time)"
                    )
                block = resp.read(min(chunk, asset.size - have + 1))
                if not block:
                    break
                if have + len(block) > asset.size:
                    raise DigestMismatch(f"{asset.name} is larger than the {asset.size} bytes the release says")
                f.write(block)
                have += len(block)
                meter.add(len(block))
    if have < asset.size:
        raise ConnectionResetError(errno.ECONNRESET, f"the connection ended after {have} of {asset.size} bytes")
    return have


__all__ = [
    "Asset",
    "Release",
    "Machine",
    "Choice",
    "Progress",
    "parse_release",
    "parse_asset_name",
    "choose",
    "this_machine",
    "fetch_release",
    "download",
    "check_url",
    "ReleaseError",
    "NoMatchingAsset",
    "DownloadError",
    "DigestMismatch",
    "DownloadCancelled",
    "DiskFull",
    "Busy",
    "OFFICIAL_RELEASE_URL",
    "BACKENDS",
]
