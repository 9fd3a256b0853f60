"""Download and install llama.cpp releases from a local release server (127.0.0.1) that answers like the
GitHub releases API and serves real archives packed from the real test build (``llama_bin``).

The release JSON of each test is built from a recorded asset list of a real llama.cpp release
(``tests/data/releases``): the asset the choice picks is served as a real archive of the test build's
``llama-server`` and ``llama-fit-params`` (packed the way that platform's archives are: zip for Windows,
tar.gz elsewhere); every other asset gets a few bytes with their own digest. The test build's binaries
are Linux ones, so a "Windows" or "macOS" install here exercises the choice, the zip/tar reading, the
runtime archive and the checks, and then runs the host's ``llama-server`` from the unpacked folder.

After every failure the tests check the same three things: nothing half-installed (no staging folder,
no new version folder, no leftover archive unless it is a resumable ``.part``), the previous build still
current, and one clear message.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.llamacpp import install, releases, store
from app.llamacpp.find import probe
from tests.llama_fixtures import free_port

DATA = Path(__file__).resolve().parents[1] / "data" / "releases"
TOOLS = ("llama-server", "llama-fit-params")


def recorded(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# --------------------------------------------------------------------------- the local release server


class ReleaseServer:
    """``GET /repos/ggml-org/llama.cpp/releases/latest`` -> the release JSON; ``GET /download/NAME`` -> bytes.

    Answers ``Range: bytes=N-`` with 206. Knobs: ``drop_after[name] = n`` (close the connection after n
    bytes, once), ``delay`` (seconds per 64 KiB block), ``fail[path] = (status, headers)``,
    ``on_serve(name)`` (called before the body), ``requests`` (path, Range header) of every request.
    """

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.release: dict | bytes | None = None
        self.drop_after: dict[str, int] = {}
        self.fail: dict[str, tuple[int, dict]] = {}
        self.delay = 0.0
        self.on_serve = None
        self.requests: list[tuple[str, str | None]] = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                srv.requests.append((self.path, self.headers.get("Range")))
                if self.path in srv.fail:
                    code, headers = srv.fail[self.path]
                    self.send_response(code)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    body = json.dumps({"message": "API rate limit exceeded" if code == 403 else "Not Found"}).encode()
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path.endswith("/releases/latest"):
                    body = srv.release if isinstance(srv.release, bytes) else json.dumps(srv.release).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                name = self.path.rsplit("/", 1)[-1]
                data = srv.files.get(name)
                if data is None or not self.path.startswith("/download/"):
                    self.send_error(404)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if srv.on_serve is not None:
                    srv.on_serve(name)
                drop = srv.drop_after.pop(name, None)
                body = data[start:]
                pos = 0
                while pos < len(body):
                    if drop is not None and pos >= drop:
                        self.close_connection = True
                        return  # the connection ends early: the client sees fewer bytes than Content-Length
                    block = body[pos:pos + (64 << 10)]
                    try:
                        self.wfile.write(block)
                    except (BrokenPipeError, ConnectionResetError):
                        return
                    pos += len(block)
                    if srv.delay:
                        time.sleep(srv.delay)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def release_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/repos/ggml-org/llama.cpp/releases/latest"

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/download/{name}"

    def publish(self, tag: str, assets: dict[str, bytes], digests: dict[str, str | None] | None = None) -> None:
        """Serve ``assets`` as release ``tag``; ``digests`` overrides (None: no digest field) per asset."""
        self.files = dict(assets)
        out = []
        for name, data in assets.items():
            a = {"name": name, "browser_download_url": self.url(name), "size": len(data),
                 "digest": "sha256:" + hashlib.sha256(data).hexdigest()}
            if digests and name in digests:
                if digests[name] is None:
                    del a["digest"]
                else:
                    a["digest"] = digests[name]
            out.append(a)
        self.release = {"tag_name": tag, "assets": out}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def release_server():
    srv = ReleaseServer()
    yield srv
    srv.close()


# --------------------------------------------------------------------------- real archives of the test build


def _pack_tar(llama_bin: Path, prefix: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for t in TOOLS:
            tar.add(llama_bin / t, arcname=f"{prefix}{t}")
        info = tarfile.TarInfo(f"{prefix}LICENSE")
        text = b"MIT License (test archive packed from the pinned llama.cpp build)\n"
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return buf.getvalue()


def _pack_zip(llama_bin: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for t in TOOLS:
            info = zipfile.ZipInfo(t)
            info.external_attr = (0o100755 << 16)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (llama_bin / t).read_bytes())
    return buf.getvalue()


def _runtime_zip() -> bytes:
    """A stand-in for NVIDIA's CUDA runtime archive: three DLL names, not the real DLLs."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n in ("cudart64_13.dll", "cublas64_13.dll", "cublasLt64_13.dll"):
            zf.writestr(n, b"stand-in for the CUDA runtime (not a real DLL)\n")
    return buf.getvalue()


@pytest.fixture(scope="session")
def archives(llama_bin) -> dict[str, bytes]:
    """Real archives of the test build: Linux layout (build/bin/), macOS layout (top folder), Windows zip."""
    return {
        "tar": _pack_tar(llama_bin, "build/bin/"),
        "tar_top": _pack_tar(llama_bin, "llama-b11312/"),
        "zip": _pack_zip(llama_bin),
        "runtime_zip": _runtime_zip(),
    }


def filler(name: str) -> bytes:
    return f"not served as a build in this test: {name}\n".encode()


@pytest.fixture
def isolated(tmp_path, monkeypatch, llama_bin):
    """A fresh data folder with the test build marked current (the 'previous build' every failure keeps)."""
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    store.set_current(llama_bin)
    return tmp_path


def assert_nothing_installed(llama_bin: Path, keep_part: bool = False) -> None:
    root = store.store_root()
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".staging-")]
    assert leftovers == [], leftovers
    assert store.installed() == []
    assert [p.name for p in root.iterdir() if p.is_dir() and p.name not in ("downloads",)] == []
    dl = store.downloads_dir()
    if dl.exists():
        files = [p.name for p in dl.iterdir() if not p.name.endswith(".lock")]
        assert all(n.endswith(".part") for n in files) if keep_part else files == [], files
    assert store.current_dir() == llama_bin


def _serve_recorded(srv: ReleaseServer, record: str, builds: dict[str, bytes]) -> None:
    rec = recorded(record)
    assets = {n: builds.get(n, filler(n)) for n in rec["assets"]}
    srv.publish(rec["tag_name"], assets)


# --------------------------------------------------------------------------- choices on recorded releases


def _release(record: str) -> releases.Release:
    rec = recorded(record)
    assets = [{"name": n, "browser_download_url": releases.OFFICIAL_DOWNLOAD_PREFIX + f"{rec['tag_name']}/{n}",
               "size": 1, "digest": f"sha256:{d}" if d else None} for n, d in rec["assets"].items()]
    return releases.parse_release(json.dumps({"tag_name": rec["tag_name"], "assets": assets}),
                                  releases.OFFICIAL_RELEASE_URL)


CHOICES = [
    # (record, machine, main asset, runtime asset, words the reason must hold)
    ("b10107.json", releases.Machine("windows", "x64", ("nvidia",), (12, 8)),
     "llama-b10107-bin-win-cuda-12.4-x64.zip", "cudart-llama-bin-win-cuda-12.4-x64.zip", "CUDA 12.4"),
    ("b10107.json", releases.Machine("windows", "x64", ("nvidia",), (13, 4)),
     "llama-b10107-bin-win-cuda-13.3-x64.zip", "cudart-llama-bin-win-cuda-13.3-x64.zip", "CUDA 13.3"),
    ("b10990-windows.json", releases.Machine("windows", "x64", ("nvidia",), (13, 4)),
     "llama-b10990-bin-win-cuda-13.4-x64.zip", "cudart-llama-bin-win-cuda-13.4-x64.zip", "CUDA 13.4"),
    ("b10990-windows.json", releases.Machine("windows", "x64", ("nvidia",), None),
     "llama-b10990-bin-win-cuda-12.4-x64.zip", "cudart-llama-bin-win-cuda-12.4-x64.zip", "could not be read"),
    ("b10107.json", releases.Machine("windows", "x64", ("amd",)), "llama-b10107-bin-win-hip-radeon-x64.zip", None,
     "ROCm/HIP"),
    ("b10621.json", releases.Machine("windows", "x64", ("amd",)), "llama-b10621-bin-win-rocm-7.14-x64.zip", None,
     "ROCm/HIP"),
    ("b10107.json", releases.Machine("windows", "x64", ("intel",)), "llama-b10107-bin-win-vulkan-x64.zip", None,
     "Vulkan"),
    ("b10107.json", releases.Machine("windows", "x64", ()), "llama-b10107-bin-win-cpu-x64.zip", None, "CPU"),
    ("b10107.json", releases.Machine("windows", "arm64", ()), "llama-b10107-bin-win-cpu-arm64.zip", None, "CPU"),
    ("b10107.json", releases.Machine("macos", "arm64", ("apple",)), "llama-b10107-bin-macos-arm64.tar.gz", None,
     "Metal"),
    ("b10107.json", releases.Machine("macos", "x64", ()), "llama-b10107-bin-macos-x64.tar.gz", None, "macOS"),
    ("b10107.json", releases.Machine("linux", "x64", ("nvidia",), (13, 0)),
     "llama-b10107-bin-ubuntu-vulkan-x64.tar.gz", None, "no Linux CUDA build"),
    ("b11010-linux-cuda.json", releases.Machine("linux", "x64", ("nvidia",), (12, 9)),
     "llama-b11010-bin-ubuntu-cuda-12.8-x64.tar.gz", "cudart-llama-b11010-bin-ubuntu-cuda-12.8-x64.tar.gz",
     "CUDA 12.8"),
    ("b11010-linux-cuda.json", releases.Machine("linux", "x64", ("nvidia",), (13, 4)),
     "llama-b11010-bin-ubuntu-cuda-13.3-x64.tar.gz", "cudart-llama-b11010-bin-ubuntu-cuda-13.3-x64.tar.gz",
     "CUDA 13.3"),
    ("b11010-linux-cuda.json", releases.Machine("linux", "x64", ("nvidia",), (11, 8)),
     "llama-b11010-bin-ubuntu-vulkan-x64.tar.gz", None, "update the NVIDIA driver"),
    ("b10107.json", releases.Machine("linux", "x64", ("amd",)), "llama-b10107-bin-ubuntu-rocm-7.2-x64.tar.gz", None,
     "ROCm/HIP"),
    ("b11010-linux-cuda.json", releases.Machine("linux", "x64", ("amd",)),
     "llama-b11010-bin-ubuntu-vulkan-x64.tar.gz", None, "no ROCm/HIP build"),
    ("b10107.json", releases.Machine("linux", "x64", ("intel",)), "llama-b10107-bin-ubuntu-vulkan-x64.tar.gz", None,
     "Intel"),
    ("b10107.json", releases.Machine("linux", "x64", ()), "llama-b10107-bin-ubuntu-x64.tar.gz", None, "no GPU"),
    ("b10107.json", releases.Machine("linux", "arm64", ()), "llama-b10107-bin-ubuntu-arm64.tar.gz", None, "no GPU"),
    ("b10107.json", releases.Machine("linux", "x64", ("nvidia", "intel"), (12, 4)),
     "llama-b10107-bin-ubuntu-vulkan-x64.tar.gz", None, "NVIDIA"),
]


@pytest.mark.parametrize("record, machine, main, runtime, why", CHOICES,
                         ids=[f"{c[0].split('.')[0]}-{c[1].os}-{c[1].arch}-{'+'.join(c[1].gpus) or 'cpu'}-"
                              f"{c[1].cuda_driver}" for c in CHOICES])
def test_choice_for_each_platform(record, machine, main, runtime, why):
    c = releases.choose(_release(record), machine)
    assert c.asset.name == main
    assert (c.runtime.name if c.runtime else None) == runtime
    assert why in c.reason, c.reason


def test_forced_backend_and_what_is_missing():
    rel = _release("b10107.json")
    linux = releases.Machine("linux", "x64", ("nvidia",), (13, 0))
    assert releases.choose(rel, linux, "cpu").asset.name == "llama-b10107-bin-ubuntu-x64.tar.gz"
    assert releases.choose(rel, linux, "sycl").asset.name == "llama-b10107-bin-ubuntu-sycl-fp16-x64.tar.gz"
    with pytest.raises(releases.NoMatchingAsset, match=r"no CUDA build for linux x64"):
        releases.choose(rel, linux, "cuda")
    with pytest.raises(releases.NoMatchingAsset, match=r"no metal build for linux x64 \(it has: cpu, openvino, rocm, sycl, vulkan\)"):
        releases.choose(rel, linux, "metal")


def test_asset_names_of_recorded_releases_parse():
    names = [n for r in DATA.glob("*.json") for n in recorded(r.name)["assets"]]
    kinds = {n: releases.parse_asset_name(n) for n in names}
    unknown = sorted(n for n, k in kinds.items() if k is None)
    assert unknown == ["llama-b10107-bin-android-arm64.tar.gz", "llama-b10107-ui.tar.gz",
                       "llama-b10107-xcframework.zip"]
    k = kinds["cudart-llama-b11010-bin-ubuntu-cuda-13.3-x64.tar.gz"]
    assert (k.os, k.backend, k.cuda, k.runtime) == ("linux", "cuda", (13, 3), True)
    assert kinds["llama-b10107-bin-ubuntu-s390x.tar.gz"].arch == "s390x"


def test_url_policy():
    with pytest.raises(releases.ReleaseError, match="not an HTTPS URL"):
        releases.check_url("http://example.com/releases/latest", "the release URL")
    releases.check_url("http://127.0.0.1:9/x", "the release URL")
    official = releases.parse_release(json.dumps({"tag_name": "b1", "assets": [
        {"name": "llama-b1-bin-ubuntu-x64.tar.gz", "browser_download_url": "https://evil.example/x.tar.gz",
         "size": 1, "digest": "sha256:" + "0" * 64}]}), releases.OFFICIAL_RELEASE_URL)
    with pytest.raises(releases.ReleaseError, match="not from ggml-org/llama.cpp's releases"):
        releases.check_asset_url(official, official.assets[0])
    mirror = releases.parse_release(json.dumps({"tag_name": "b1", "assets": [
        {"name": "llama-b1-bin-ubuntu-x64.tar.gz", "browser_download_url": "https://other.example/x.tar.gz",
         "size": 1, "digest": "sha256:" + "0" * 64}]}), "https://mirror.example/releases/latest")
    with pytest.raises(releases.ReleaseError, match="not from the mirror mirror.example"):
        releases.check_asset_url(mirror, mirror.assets[0])


# --------------------------------------------------------------------------- happy paths


def _install_from(srv: ReleaseServer, machine: releases.Machine, **kw) -> install.InstallResult:
    rel = releases.fetch_release(srv.release_url)
    return install.install(releases.choose(rel, machine), **kw)


HAPPY = [
    ("b10107.json", releases.Machine("linux", "x64", ()), {"llama-b10107-bin-ubuntu-x64.tar.gz": "tar"}),
    ("b10107.json", releases.Machine("linux", "x64", ("intel",)),
     {"llama-b10107-bin-ubuntu-vulkan-x64.tar.gz": "tar"}),
    ("b11010-linux-cuda.json", releases.Machine("linux", "x64", ("nvidia",), (12, 9)),
     {"llama-b11010-bin-ubuntu-cuda-12.8-x64.tar.gz": "tar",
      "cudart-llama-b11010-bin-ubuntu-cuda-12.8-x64.tar.gz": "runtime_zip"}),
    ("b10990-windows.json", releases.Machine("windows", "x64", ("nvidia",), (13, 4)),
     {"llama-b10990-bin-win-cuda-13.4-x64.zip": "zip", "cudart-llama-bin-win-cuda-13.4-x64.zip": "runtime_zip"}),
    ("b10107.json", releases.Machine("macos", "arm64", ("apple",)),
     {"llama-b10107-bin-macos-arm64.tar.gz": "tar_top"}),
]


@pytest.mark.parametrize("record, machine, served", HAPPY, ids=[f"{h[1].os}-{'+'.join(h[1].gpus) or 'cpu'}" for h in HAPPY])
def test_install_happy_path(release_server, archives, isolated, llama_bin, record, machine, served):
    _serve_recorded(release_server, record, {n: archives[k] for n, k in served.items()})
    seen: list[releases.Progress] = []
    t0 = time.monotonic()
    result = _install_from(release_server, machine, progress=seen.append)
    elapsed = time.monotonic() - t0
    inst = result.installed
    assert sorted(inst.assets) == sorted(served)
    assert store.current_dir() == inst.bin_dir  # the new build is current only now
    assert (inst.bin_dir / "llama-server").is_file()
    out = subprocess.run([str(inst.bin_dir / "llama-server"), "--version"], capture_output=True, text=True, timeout=30)
    assert "version:" in out.stdout + out.stderr
    b = probe(inst.bin_dir)
    assert b.usable and b.features["fit_print"] and "cpu" in b.backends
    if any(k == "runtime_zip" for k in served.values()):
        assert (inst.bin_dir / "cudart64_13.dll").is_file()  # the runtime lies beside llama-server
    assert [p.name for p in store.store_root().iterdir() if p.name.startswith(".staging-")] == []
    assert [p.name for p in store.downloads_dir().iterdir() if not p.name.endswith(".lock")] == []
    assert seen and seen[-1].done == seen[-1].total and "of" in seen[-1].text()
    total = sum(len(archives[k]) for k in served.values())
    print(f"installed {inst.version}: {total / 2**20:.1f} MiB in {elapsed:.2f} s")


def test_versions_side_by_side_use_and_remove(release_server, archives, isolated, llama_bin):
    _serve_recorded(release_server, "b10107.json", {"llama-b10107-bin-ubuntu-x64.tar.gz": archives["tar"],
                                                    "llama-b10107-bin-ubuntu-vulkan-x64.tar.gz": archives["tar"]})
    cpu = _install_from(release_server, releases.Machine("linux", "x64", ())).installed
    vk = _install_from(release_server, releases.Machine("linux", "x64", ("intel",))).installed
    assert (cpu.version, vk.version) == ("b10107-ubuntu-x64", "b10107-ubuntu-vulkan-x64")
    assert {i.version for i in store.installed()} == {cpu.version, vk.version}
    assert store.current_dir() == vk.bin_dir
    with pytest.raises(install.InstallError, match="is the current llama.cpp build; switch to another first"):
        install.remove(vk.version)
    install.use(cpu.version)
    assert store.current_dir() == cpu.bin_dir
    install.remove(vk.version)
    assert [i.version for i in store.installed()] == [cpu.version]
    with pytest.raises(install.InstallError, match="is not a Layerdeck install"):
        install.remove("../etc")
    again = _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert again.already and store.current_dir() == cpu.bin_dir


# --------------------------------------------------------------------------- failures


def _linux_cpu(srv, archives, digests=None, data=None):
    name = "llama-b10107-bin-ubuntu-x64.tar.gz"
    rec = recorded("b10107.json")
    assets = {n: filler(n) for n in rec["assets"]}
    assets[name] = archives["tar"] if data is None else data
    srv.publish("b10107", assets, digests)
    return name


def test_digest_mismatch(release_server, archives, isolated, llama_bin):
    name = _linux_cpu(release_server, archives, digests={"llama-b10107-bin-ubuntu-x64.tar.gz": "sha256:" + "ab" * 32})
    with pytest.raises(releases.DigestMismatch, match=r"does not match the release's sha256 digest .*deleted and nothing was unpacked") as e:
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert str(e.value).count("\n") == 0
    assert any(p.endswith(name) for p, _ in release_server.requests)
    assert_nothing_installed(llama_bin)


def test_missing_digest(release_server, archives, isolated, llama_bin):
    name = _linux_cpu(release_server, archives, digests={"llama-b10107-bin-ubuntu-x64.tar.gz": None})
    store.downloads_dir().mkdir(parents=True)
    (store.downloads_dir() / (name + ".part")).write_bytes(b"left from an earlier try")
    with pytest.raises(releases.DigestMismatch, match="gives no sha256 digest .* refusing it"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert not any(p.endswith(name) for p, _ in release_server.requests)  # nothing was even downloaded
    assert_nothing_installed(llama_bin)


def test_dropped_connection_resumes(release_server, archives, isolated, llama_bin):
    name = _linux_cpu(release_server, archives)
    release_server.drop_after[name] = len(archives["tar"]) // 3
    result = _install_from(release_server, releases.Machine("linux", "x64", ()))
    ranges = [r for p, r in release_server.requests if p.endswith(name)]
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")
    assert int(ranges[1][6:].rstrip("-")) > 0
    assert store.current_dir() == result.installed.bin_dir


def test_rate_limit_403(release_server, archives, isolated, llama_bin):
    _linux_cpu(release_server, archives)
    reset = int(time.time()) + 1800
    release_server.fail["/repos/ggml-org/llama.cpp/releases/latest"] = (
        403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    with pytest.raises(releases.ReleaseError, match=r"rate limit is used up \(HTTP 403\).*try again after \d\d:\d\d"):
        releases.fetch_release(release_server.release_url)
    assert_nothing_installed(llama_bin)


def test_rate_limit_on_the_asset(release_server, archives, isolated, llama_bin):
    name = _linux_cpu(release_server, archives)
    release_server.fail[f"/download/{name}"] = (403, {"X-RateLimit-Remaining": "0"})
    with pytest.raises(releases.DownloadError, match="rate limit is used up"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert_nothing_installed(llama_bin)


def test_404(release_server, isolated, llama_bin):
    release_server.release = {"tag_name": "b1", "assets": []}
    with pytest.raises(releases.ReleaseError, match=r"nothing at .* \(HTTP 404\)"):
        releases.fetch_release(release_server.release_url.replace("latest", "tags/b0"))
    assert_nothing_installed(llama_bin)


def test_no_network(isolated, llama_bin):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(releases.ReleaseError, match="cannot reach 127.0.0.1 .*check the network connection"):
        releases.fetch_release(f"http://127.0.0.1:{port}/repos/ggml-org/llama.cpp/releases/latest", timeout=5)
    assert time.monotonic() - t0 < 5
    assert_nothing_installed(llama_bin)


def test_only_foreign_platform_assets(release_server, isolated, llama_bin):
    rec = recorded("b10990-windows.json")
    release_server.publish(rec["tag_name"], {n: filler(n) for n in rec["assets"]})
    rel = releases.fetch_release(release_server.release_url)
    with pytest.raises(releases.NoMatchingAsset, match=r"has no llama.cpp build for linux x64 \(it has builds for windows x64\). Build from source"):
        releases.choose(rel, releases.Machine("linux", "x64", ("nvidia",), (13, 0)))
    assert_nothing_installed(llama_bin)


def test_not_a_release(release_server, isolated, llama_bin):
    release_server.release = b"<html>a login page</html>"
    with pytest.raises(releases.ReleaseError, match="is not JSON"):
        releases.fetch_release(release_server.release_url)
    release_server.release = [{"tag_name": "b1"}]
    with pytest.raises(releases.ReleaseError, match="list of releases"):
        releases.fetch_release(release_server.release_url)


@pytest.fixture
def small_disk(tmp_path, monkeypatch, llama_bin, archives):
    """The data folder on a tmpfs a little larger than the archive (the previous build stays current)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    size = len(archives["tar"]) + (3 << 20)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here (needs root): {proc.stderr.strip()}")
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(mnt / "data"))
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    store.set_current(llama_bin)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_disk_fills_up_while_unpacking(release_server, archives, small_disk, llama_bin):
    _linux_cpu(release_server, archives)
    with pytest.raises(install.InstallError, match="the disk filled up while unpacking .*nothing was installed"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert_nothing_installed(llama_bin)
    assert shutil.disk_usage(small_disk).used < (1 << 20)  # the partial unpack and the archive are gone


def test_disk_fills_up_while_downloading(release_server, archives, small_disk, llama_bin):
    name = _linux_cpu(release_server, archives)

    def another_program_fills_the_disk(served):
        if served == name:
            with open(small_disk / "someone-else.bin", "wb") as f:
                f.write(b"\0" * (shutil.disk_usage(small_disk).free - (256 << 10)))

    release_server.on_serve = another_program_fills_the_disk
    with pytest.raises(releases.DiskFull, match="the disk filled up while downloading .*partial file was deleted"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    (small_disk / "someone-else.bin").unlink()
    assert_nothing_installed(llama_bin)


def test_not_enough_space_before_downloading(release_server, archives, small_disk, llama_bin):
    name = _linux_cpu(release_server, archives)
    with open(small_disk / "big.bin", "wb") as f:
        f.write(b"\0" * (shutil.disk_usage(small_disk).free - (1 << 20)))
    with pytest.raises(releases.DiskFull, match="not enough free space .* it needs"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert not any(p.endswith(name) for p, _ in release_server.requests)
    assert_nothing_installed(llama_bin)


def test_two_downloads_of_the_same_build_at_once(release_server, archives, isolated, llama_bin):
    _linux_cpu(release_server, archives)
    release_server.delay = 0.002
    rel = releases.fetch_release(release_server.release_url)
    choice = releases.choose(rel, releases.Machine("linux", "x64", ()))
    results: list[object] = []

    def go():
        try:
            results.append(install.install(choice))
        except Exception as exc:  # noqa: BLE001 - recorded and checked below
            results.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ok = [r for r in results if isinstance(r, install.InstallResult)]
    busy = [r for r in results if isinstance(r, releases.Busy)]
    assert len(ok) == 1 and len(busy) == 1, results
    assert "being downloaded by another Layerdeck right now" in str(busy[0])
    assert [i.version for i in store.installed()] == [choice.version]
    assert store.current_dir() == ok[0].installed.bin_dir


def test_two_different_downloads_at_once(release_server, archives, isolated, llama_bin):
    _serve_recorded(release_server, "b10107.json", {"llama-b10107-bin-ubuntu-x64.tar.gz": archives["tar"],
                                                    "llama-b10107-bin-ubuntu-vulkan-x64.tar.gz": archives["tar"]})
    rel = releases.fetch_release(release_server.release_url)
    choices = [releases.choose(rel, releases.Machine("linux", "x64", ())),
               releases.choose(rel, releases.Machine("linux", "x64", ("intel",)))]
    errors: list[Exception] = []

    def go(c):
        try:
            install.install(c)
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(c,)) for c in choices]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert {i.version for i in store.installed()} == {c.version for c in choices}
    assert store.current_dir() in {i.bin_dir for i in store.installed()}


def test_cancel_mid_way_then_resume(release_server, archives, isolated, llama_bin):
    name = _linux_cpu(release_server, archives)
    release_server.delay = 0.003
    cancel = threading.Event()

    def progress(p):
        if p.done > len(archives["tar"]) // 4:
            cancel.set()

    with pytest.raises(releases.DownloadCancelled, match="was cancelled .* kept; it resumes from there next time"):
        _install_from(release_server, releases.Machine("linux", "x64", ()), progress=progress, cancel=cancel)
    assert_nothing_installed(llama_bin, keep_part=True)
    part = store.downloads_dir() / (name + ".part")
    kept = part.stat().st_size
    assert 0 < kept < len(archives["tar"])
    release_server.delay = 0
    result = _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert release_server.requests[-1][1] == f"bytes={kept}-"
    assert store.current_dir() == result.installed.bin_dir and not part.exists()


# --------------------------------------------------------------------------- hostile archives


def _tar(members: list[tuple[str, str, bytes | str]]) -> bytes:
    """(kind, name, data-or-link-target) with kind file|sym|hard|dir|fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for kind, name, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                assert isinstance(data, bytes)
                info.size = len(data)
                info.mode = 0o755
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "dir": tarfile.DIRTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = str(data)
            tar.addfile(info)
    return buf.getvalue()


def _zip(members: list[tuple[str, str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for kind, name, data in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = ((0o120777 if kind == "sym" else 0o100644) << 16)
            zf.writestr(info, data)
    return buf.getvalue()


HOSTILE = {
    "tar-traversal": (lambda: _tar([("file", "../../evil.txt", b"x")]), "climbs out of its folder"),
    "tar-absolute": (lambda: _tar([("file", "/tmp/layerdeck-evil.txt", b"x")]), "absolute path"),
    "tar-symlink-out": (lambda: _tar([("sym", "build/bin/lib", "../../../../etc")]), "points out of the folder"),
    "tar-symlink-absolute": (lambda: _tar([("sym", "lib", "/etc/passwd")]), "points to an absolute path"),
    "tar-write-through-link": (lambda: _tar([("sym", "a", "."), ("file", "a/b.txt", b"x")]), "through a link"),
    "tar-hardlink-out": (lambda: _tar([("hard", "passwd", "../../etc/passwd")]), "climbs out of its folder"),
    "tar-fifo": (lambda: _tar([("fifo", "pipe", "")]), "device or pipe"),
    "tar-huge": (lambda: _tar([("file", "build/bin/zeros", b"\0" * (40 << 20))]), "expands to more than"),
    "tar-many-parts-huge": (lambda: _tar([("file", f"part{i}", b"\0" * (5 << 20)) for i in range(5)]),
                            "expands to more than"),
    "zip-traversal": (lambda: _zip([("file", "../evil.txt", b"x")]), "climbs out of its folder"),
    "zip-absolute": (lambda: _zip([("file", "/evil.txt", b"x")]), "absolute path"),
    "zip-backslash": (lambda: _zip([("file", "..\\..\\evil.txt", b"x")]), "climbs out of its folder"),
    "zip-symlink-out": (lambda: _zip([("sym", "lib", b"../../etc")]), "points out of the folder"),
    "zip-huge": (lambda: _zip([("file", "zeros", b"\0" * (40 << 20))]), "expands to more than"),
    "not-an-archive": (lambda: b"this is not an archive at all\n" * 100, "neither a zip nor a tar"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_archive(release_server, archives, isolated, llama_bin, kind):
    make, message = HOSTILE[kind]
    data = make()
    ext = ".zip" if kind.startswith("zip") else ".tar.gz"
    name = "llama-b10107-bin-ubuntu-x64" + ext
    release_server.publish("b10107", {name: data})
    outside_before = sorted(os.listdir(isolated))
    with pytest.raises(install.InstallError, match=message) as e:
        _install_from(release_server, releases.Machine("linux", "x64", ()), max_bytes=16 << 20)
    assert "\n" not in str(e.value)
    assert_nothing_installed(llama_bin)
    assert sorted(os.listdir(isolated)) == outside_before
    assert not Path("/tmp/layerdeck-evil.txt").exists()


def test_archive_without_llama_server(release_server, isolated, llama_bin):
    release_server.publish("b10107", {"llama-b10107-bin-ubuntu-x64.tar.gz": _tar([("file", "README.md", b"hi")])})
    with pytest.raises(install.InstallError, match="holds no llama-server; nothing was installed"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert_nothing_installed(llama_bin)


def test_unpacked_server_that_does_not_run(release_server, isolated, llama_bin):
    release_server.publish("b10107", {"llama-b10107-bin-ubuntu-x64.tar.gz": _tar([
        ("file", "build/bin/llama-server", b"\x7fELF not really a program")])})
    with pytest.raises(install.InstallError, match="does not run on this machine"):
        _install_from(release_server, releases.Machine("linux", "x64", ()))
    assert_nothing_installed(llama_bin)


def test_use_refuses_a_folder_without_a_build(isolated, llama_bin, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(install.InstallError, match="cannot be used: no runnable llama-server"):
        install.use(str(tmp_path / "empty"))
    with pytest.raises(install.InstallError, match="neither an installed version"):
        install.use(str(tmp_path / "missing"))
    assert store.current_dir() == llama_bin
