"""Build the Linux installers with packaging/build.py, install the .deb into a scratch root and run it.

One module-scoped build (PyInstaller bundle, .tar.gz, .deb: about a minute on 2 cores) feeds
every test. The installed copy is unpacked with ``dpkg-deb -x`` (nothing touches the system)
and run from there: ``--version``, ``inspect`` on a tiny GGUF, the GUI offscreen on the
built-in demo (``--smoke-test``), and the llama.cpp search order of the frozen app.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app import __version__
from tests.gguf_factory import write_tiny_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds the Linux bundle and .deb"),
]

ROOT = Path(__file__).resolve().parents[2]
MAX_BUNDLE_BYTES = 200 * 10**6
#: The llama.cpp the bundle ships (the pinned CPU+RPC+Vulkan build: 4 static tools and the Vulkan loader, 157 MB).
MAX_LLAMA_BYTES = 170 * 10**6
DESKTOP_PACKAGES = {"libxcb-cursor0", "libxkbcommon-x11-0", "libegl1", "libgl1", "libfontconfig1", "libdbus-1-3",
                    "libxcb-icccm4", "libxcb-keysyms1", "libxcb1"}


def _build_module():
    spec = importlib.util.spec_from_file_location("layerdeck_build", ROOT / "packaging" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The user's environment minus Python's and Qt's overrides, with settings in ``home``."""
    dropped = ("DISPLAY", "WAYLAND_DISPLAY", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "QT_", "LAYERDECK_")) and k not in dropped}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CACHE_HOME=str(home / ".cache"), LAYERDECK_CONFIG_DIR=str(home / "config"),
               LAYERDECK_DATA_DIR=str(home / "data"))
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def shipped_llama(llama_bin) -> Path:
    """The llama.cpp build the installers carry: the CPU+RPC+Vulkan one where it can be built here, else the CPU
    build (which the Vulkan-only checks then skip)."""
    from app.llamacpp import build

    try:
        return Path(build.ensure_built(backend="vulkan"))
    except (build.BuildError, OSError):
        return llama_bin


@pytest.fixture(scope="module")
def built(tmp_path_factory, shipped_llama) -> Path:
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "pyinstaller"], check=True)
    if not shutil.which("dpkg-deb"):
        pytest.skip("dpkg-deb is not installed")
    out = tmp_path_factory.mktemp("dist")
    work = tmp_path_factory.mktemp("work")
    res = subprocess.run([sys.executable, str(ROOT / "packaging" / "build.py"), "--out", str(out), "--work", str(work),
                          "--llama-cpp", str(shipped_llama)],
                         cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, f"build.py failed:\n{res.stdout[-6000:]}\n{res.stderr[-6000:]}"
    assert "Artefacts:" in res.stdout
    return out


@pytest.fixture(scope="module")
def deb(built) -> Path:
    debs = list(built.glob("layerdeck_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


@pytest.fixture(scope="module")
def installed(deb, tmp_path_factory) -> Path:
    """The .deb unpacked into a scratch root (what dpkg would put under /)."""
    root = tmp_path_factory.mktemp("root")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def exe(installed, tmp_path_factory) -> Path:
    """A stand-in for /usr/bin/layerdeck: a symlink to the installed executable (so the frozen app
    must resolve its own folder through a link, as it does when started from the menu or a shell)."""
    link = tmp_path_factory.mktemp("bin") / "layerdeck"
    target = os.readlink(installed / "usr" / "bin" / "layerdeck")
    assert target == "/opt/layerdeck/layerdeck"
    link.symlink_to(installed / target.lstrip("/"))
    return link


def run_app(exe: Path, *args: str, home: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          env=_clean_env(home, **env), cwd=home)


# ------------------------------------------------------------------------------------------ bundle


def test_bundle_is_small_and_complete(built):
    bundle = built / "layerdeck"
    size = sum(p.lstat().st_size for p in bundle.rglob("*")
               if p.is_file() and not p.is_symlink() and "llama.cpp" not in p.relative_to(bundle).parts)
    assert size < MAX_BUNDLE_BYTES, f"bundle is {size / 1e6:.0f} MB unpacked without llama.cpp (limit 200 MB)"
    llama = sum(p.stat().st_size for p in (bundle / "llama.cpp").rglob("*") if p.is_file())
    assert 0 < llama < MAX_LLAMA_BYTES, f"the shipped llama.cpp is {llama / 1e6:.0f} MB"
    internal = bundle / "_internal"
    assert (internal / "resources" / "demo" / "qwen3-30b-a3b.json").is_file()
    assert (internal / "resources" / "icons" / "layerdeck.svg").is_file()
    assert list((internal / "PySide6" / "Qt" / "plugins" / "platforms").glob("libqxcb.so"))
    assert list((internal / "PySide6" / "Qt" / "plugins" / "platforms").glob("libqoffscreen.so"))
    # what the spec leaves out stays out
    for unwanted in ("libQt6Network.so.6", "libQt6Qml.so.6", "libQt6Quick.so.6", "libQt6Pdf.so.6",
                     "libQt6WebEngineCore.so.6", "libQt6Multimedia.so.6"):
        assert not list(bundle.rglob(unwanted)), unwanted
    for unwanted in ("tkinter", "matplotlib", "scipy", "cryptography", "PySide6/QtNetwork.abi3.so"):
        assert not (internal / unwanted).exists(), unwanted
    assert not [p for p in bundle.rglob("*") if p.is_symlink() and not p.exists()], "dangling symlinks"


def test_tarball_holds_a_runnable_bundle(built, tmp_path):
    (tgz,) = built.glob(f"layerdeck-{__version__}-linux-*.tar.gz")
    with tarfile.open(tgz) as tar:
        names = set(tar.getnames())
        top = f"layerdeck-{__version__}"
        assert f"{top}/layerdeck" in names
        assert f"{top}/share/applications/layerdeck.desktop" in names
        assert f"{top}/share/icons/hicolor/256x256/apps/layerdeck.png" in names
        tar.extractall(tmp_path, filter="tar") if hasattr(tarfile, "tar_filter") else tar.extractall(tmp_path)
    res = run_app(tmp_path / top / "layerdeck", "--version", home=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == f"layerdeck {__version__}", res.stderr


# ------------------------------------------------------------------------------------------ .deb


def test_deb_metadata(deb):
    def field(name: str) -> str:
        return subprocess.run(["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True,
                              check=True).stdout.strip()

    assert field("Package") == "layerdeck"
    assert field("Version") == _build_module().deb_version(__version__)
    assert field("Architecture") == subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                                                   text=True).stdout.strip()
    depends = {d.strip().split(" ")[0] for d in field("Depends").split(",")}
    assert DESKTOP_PACKAGES <= depends, DESKTOP_PACKAGES - depends
    assert re.search(r"libc6 \(>= 2\.\d+\)", field("Depends"))
    assert int(field("Installed-Size")) * 1024 < MAX_BUNDLE_BYTES + MAX_LLAMA_BYTES + 5 * 10**6
    recommends = set(field("Recommends").replace(",", " ").split())
    assert {"libwayland-client0", "libwayland-cursor0", "libwayland-egl1"} <= recommends


def test_deb_maintainer_scripts_are_valid_shell(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-e", str(deb), str(tmp_path / "DEBIAN")], check=True)
    for script in ("postinst", "postrm"):
        path = tmp_path / "DEBIAN" / script
        assert os.access(path, os.X_OK), script
        subprocess.run(["sh", "-n", str(path)], check=True)
        # with none of the cache tools on PATH they do nothing and succeed
        res = subprocess.run(["/bin/sh", str(path), "configure" if script == "postinst" else "remove"],
                             env={"PATH": str(tmp_path)}, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


def test_deb_files_and_desktop_integration(installed):
    assert os.access(installed / "opt" / "layerdeck" / "layerdeck", os.X_OK)
    desktop = installed / "usr" / "share" / "applications" / "layerdeck.desktop"
    text = desktop.read_text(encoding="utf-8")
    assert "Exec=layerdeck %f" in text and "Icon=layerdeck" in text and "MimeType=application/x-gguf;" in text
    if shutil.which("desktop-file-validate"):
        res = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
        assert res.returncode == 0 and "error" not in res.stdout, res.stdout
    mime = ET.parse(installed / "usr" / "share" / "mime" / "packages" / "layerdeck.xml").getroot()
    ns = {"m": "http://www.freedesktop.org/standards/shared-mime-info"}
    mtype = mime.find("m:mime-type", ns)
    assert mtype.get("type") == "application/x-gguf"
    assert mtype.find("m:glob", ns).get("pattern") == "*.gguf"
    for size in (16, 32, 48, 64, 128, 256, 512):
        assert (installed / f"usr/share/icons/hicolor/{size}x{size}/apps/layerdeck.png").is_file(), size
    assert (installed / "usr/share/icons/hicolor/scalable/apps/layerdeck.svg").is_file()


# ------------------------------------------------------------------------------------------ installed app


def test_installed_version(exe, tmp_path):
    res = run_app(exe, "--version", home=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == f"layerdeck {__version__}", res.stdout + res.stderr


def test_installed_inspect(exe, tmp_path):
    model = write_tiny_model("qwen3moe", tmp_path / "tiny.gguf")
    res = run_app(exe, "inspect", str(model), home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "qwen3moe" in res.stdout and "8 routed, 2 used" in res.stdout
    doc = json.loads(run_app(exe, "inspect", "--json", str(model), home=tmp_path).stdout)
    assert doc["architecture"] == "qwen3moe"


def test_installed_gui_smoke_test_offscreen(exe, tmp_path):
    res = run_app(exe, "--smoke-test", home=tmp_path, timeout=180, QT_QPA_PLATFORM="offscreen")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "Could not load the Qt platform plugin" not in res.stderr


def _xcb_ready() -> bool:
    ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if not shutil.which("Xvfb") or not ldconfig:
        return False
    libs = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    return all(lib in libs for lib in ("libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-cursor.so.0"))


@pytest.mark.skipif(not _xcb_ready(), reason="needs Xvfb and the xcb libraries the .deb depends on")
def test_installed_gui_smoke_test_on_x11(exe, tmp_path):
    """The real xcb platform plugin, with the system libraries the .deb depends on."""
    display = f":{90 + os.getpid() % 100}"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        res = run_app(exe, "--smoke-test", home=tmp_path, timeout=180, QT_QPA_PLATFORM="xcb", DISPLAY=display)
    finally:
        xvfb.terminate()
        xvfb.wait(10)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_installed_app_runs_the_llama_cpp_it_ships(installed, exe, tmp_path, shipped_llama, tiny_models):
    """The .deb carries the pinned llama.cpp in /opt/layerdeck/llama.cpp, found first with no settings at all;
    the Vulkan build brings its loader (RUNPATH $ORIGIN/lib), lists lavapipe as Vulkan0 when it is made visible,
    still starts with no Vulkan driver at all (the CPU device), and answers a prompt."""
    folder = installed / "opt" / "layerdeck" / "llama.cpp"
    tools = {p.name for p in folder.iterdir()}
    assert {"llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server", "README.txt"} <= tools, tools
    res = run_app(exe, "llama", "list", "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    builds = json.loads(res.stdout)["builds"]
    first = builds[0]
    assert Path(first["folder"]) == folder and first["current"] and "beside the app" in first["sources"], first
    vulkan = (shipped_llama / "llama-server").is_file() and "vulkan" in first["backends"]
    if vulkan:
        assert (folder / "lib" / "libvulkan.so.1").is_file()
        assert "$ORIGIN/lib" in subprocess.run(["objdump", "-p", str(folder / "llama-server")], capture_output=True,
                                               text=True).stdout
        res = run_app(exe, "devices", "--json", home=tmp_path, GGML_VK_VISIBLE_DEVICES="0")
        names = [d["name"] for d in json.loads(res.stdout)["devices"]]
        assert names[0] == "Vulkan0", names
        bare = subprocess.run([str(folder / "llama-server"), "--list-devices"], capture_output=True, text=True,
                              timeout=60, env=_clean_env(tmp_path, VK_ICD_FILENAMES="/nonexistent.json",
                                                         VK_DRIVER_FILES="/nonexistent.json"))
        assert bare.returncode == 0 and "(none)" in bare.stdout, bare.stdout + bare.stderr
    # the shipped server answers a prompt (on the CPU)
    port = _free_port()
    proc = subprocess.Popen([str(folder / "llama-server"), "-m", str(tiny_models["llama"]), "--port", str(port),
                             "--host", "127.0.0.1", "-ngl", "0", "-c", "256"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_clean_env(tmp_path))
    try:
        import urllib.request

        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", method="POST",
                                             data=json.dumps({"prompt": "a", "n_predict": 4}).encode(),
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    body = json.loads(r.read())
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
        assert body["tokens_predicted"] >= 1, body
    finally:
        proc.terminate()
        proc.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fake_llama_server(folder: Path) -> Path:
    """A llama-server that records its environment and lists no devices."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "llama-server"
    tool.write_text(f'#!/bin/sh\nenv > "{folder}/env.txt"\necho "Available devices:"\n')
    tool.chmod(0o755)
    return tool


def test_installed_app_finds_llama_cpp_beside_itself_first(installed, exe, tmp_path):
    shipped = installed / "opt" / "layerdeck" / "llama.cpp"
    if shipped.exists():  # the real build goes aside for this test: fakes that record their environment stand in
        shipped.rename(tmp_path / "shipped")
    bundled = _fake_llama_server(installed / "opt" / "layerdeck" / "llama.cpp")
    configured = _fake_llama_server(tmp_path / "configured")
    on_path = _fake_llama_server(tmp_path / "on-path")
    path = f"{on_path.parent}{os.pathsep}{os.environ.get('PATH', '')}"

    def server(*args: str) -> str:
        res = run_app(exe, "devices", "--json", "--timeout", "20", *args, home=tmp_path, PATH=path,
                      LD_LIBRARY_PATH="/user/lib")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["llama_cpp"]["server"]

    try:
        assert server("--llama-dir", str(configured.parent)) == str(bundled)
        # a child process gets the user's library path back, not the bundle's _internal folder
        env = (bundled.parent / "env.txt").read_text().splitlines()
        assert [v for v in env if v.startswith("LD_LIBRARY_PATH=")] == ["LD_LIBRARY_PATH=/user/lib"]
        shutil.rmtree(bundled.parent)
        assert server("--llama-dir", str(configured.parent)) == str(configured)
        assert server() == str(on_path)
    finally:
        shutil.rmtree(bundled.parent, ignore_errors=True)
        if (tmp_path / "shipped").exists():
            (tmp_path / "shipped").rename(shipped)


# ------------------------------------------------------------------------------------------ clean Debian root

CHROOT_SCRIPT = r"""
set -e
echo LAYERDECK-HOOK-START
apt-get install -y -q /tmp/layerdeck.deb > /tmp/install.log 2>&1 || { tail -30 /tmp/install.log; exit 1; }
test "$(readlink /usr/bin/layerdeck)" = /opt/layerdeck/layerdeck
export HOME=/tmp/home && mkdir -p "$HOME"
layerdeck --version
layerdeck inspect /tmp/tiny.gguf
QT_QPA_PLATFORM=offscreen layerdeck --smoke-test
test -f /usr/share/mime/application/x-gguf.xml
if apt-get install -y -q xvfb xauth > /tmp/xvfb.log 2>&1; then
    xvfb-run -a env QT_QPA_PLATFORM=xcb layerdeck --smoke-test
    echo LAYERDECK-XCB-OK
else
    tail -5 /tmp/xvfb.log  # a mirror hiccup: the X11 run is also covered on the host when Xvfb is there
fi
apt-get remove -y -q layerdeck > /tmp/remove.log 2>&1
test ! -e /usr/bin/layerdeck && test ! -e /opt/layerdeck
echo LAYERDECK-CHROOT-OK
"""


@pytest.mark.skipif(not shutil.which("mmdebstrap") or os.geteuid() != 0,
                    reason="needs mmdebstrap (apt install mmdebstrap) and root")
def test_deb_installs_and_runs_in_a_clean_debian_root(deb, tmp_path):
    """apt installs the .deb into a fresh minimal Debian 12 root, pulling exactly what Depends names;
    the app then runs offscreen and on X11 (Xvfb), and removal leaves nothing behind."""
    write_tiny_model("qwen3moe", tmp_path / "tiny.gguf")
    shutil.copyfile(deb, tmp_path / "layerdeck.deb")
    (tmp_path / "check.sh").write_text(CHROOT_SCRIPT)
    res = subprocess.run(
        ["mmdebstrap", "--variant=apt", "--format=null", "--include=shared-mime-info",
         f"--customize-hook=copy-in {tmp_path}/layerdeck.deb {tmp_path}/tiny.gguf {tmp_path}/check.sh /tmp",
         '--customize-hook=chroot "$1" sh /tmp/check.sh', "bookworm", "/dev/null"],
        capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    if "LAYERDECK-HOOK-START" not in out:
        pytest.skip(f"could not bootstrap a Debian root (no mirror?): {out[-1500:]}")
    assert res.returncode == 0 and "LAYERDECK-CHROOT-OK" in out, out[-6000:]
    assert f"layerdeck {__version__}" in out and "qwen3moe" in out
