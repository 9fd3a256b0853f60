"""Install a downloaded llama.cpp release side by side with earlier ones; switch between them; remove one.

:func:`install` downloads the chosen assets (:func:`app.llamacpp.releases.download` checks each sha256
before anything is unpacked), unpacks them with :func:`safe_extract` into a temporary folder in the
store, finds ``llama-server`` there, runs its ``--version`` and ``--list-devices``, writes the manifest,
and only then renames the folder into place and marks it current. Any failure removes the temporary
folder: a half-finished install never becomes current and the previous build stays current.

:func:`safe_extract` reads ``.zip`` and ``.tar.gz`` archives and refuses absolute paths, ``..``, links that
point out of the folder (or members written through a link), device files, more than
:data:`MAX_MEMBERS` members, and archives that expand past :data:`MAX_EXPANDED_BYTES` (counted while
writing, so a size field that lies does not help).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import ToolError
from ..units import fmt_bytes
from . import store
from .find import Build, probe
from .releases import Choice, Progress, download

log = logging.getLogger(__name__)

#: The most an archive may expand to (the CUDA build and its runtime together are under 2 GiB).
MAX_EXPANDED_BYTES = 8 << 30
MAX_MEMBERS = 20000
#: How deep under the unpacked folder llama-server may be (``build/bin/llama-server`` is 2).
MAX_DEPTH = 4


class InstallError(ToolError):
    """Unpacking, checking or switching a llama.cpp build failed (nothing was made current)."""


class UnsafeArchive(InstallError):
    """The archive tries to write outside its folder, or is too large when unpacked."""


# --------------------------------------------------------------------------- safe extraction


class _Budget:
    def __init__(self, archive: str, max_bytes: int):
        self.archive, self.max_bytes, self.used = archive, max_bytes, 0

    def take(self, n: int) -> None:
        self.used += n
        if self.used > self.max_bytes:
            raise UnsafeArchive(
                f"{self.archive} expands to more than {fmt_bytes(self.max_bytes)}; refusing it "
                "(an archive this large is not a llama.cpp build)"
            )


def _member_path(dest: Path, name: str, archive: str) -> Path:
    """The path inside ``dest`` for a member name, or :class:`UnsafeArchive`."""
    raw = name.replace("\\", "/")
    if not raw or "\x00" in raw:
        raise UnsafeArchive(f"{archive} has a member with an empty or binary name; refusing it")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise UnsafeArchive(f"{archive} has a member with an absolute path ({name[:80]!r}); refusing it")
    parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"{archive} has a member that climbs out of its folder ({name[:80]!r}); refusing it")
    if not parts:
        return dest
    target = dest.joinpath(*parts)
    # never write through a link the archive made (a link to "." would let "../x" escape later)
    cur = dest
    for p in parts[:-1]:
        cur = cur / p
        if cur.is_symlink():
            raise UnsafeArchive(f"{archive} writes {name[:80]!r} through a link; refusing it")
    return target


def _check_link(dest: Path, link: Path, target: str, archive: str) -> None:
    t = target.replace("\\", "/")
    if not t or t.startswith("/") or (len(t) > 1 and t[1] == ":") or "\x00" in t:
        raise UnsafeArchive(
            f"{archive}: the link {link.name!r} points to an absolute path ({target[:80]!r}); refusing it"
        )
    resolved = os.path.normpath(os.path.join(os.path.dirname(link), t))
    root = os.path.normpath(dest)
    if resolved != root and not resolved.startswith(root + os.sep):
        raise UnsafeArchive(
            f"{archive}: the link {link.name!r} points out of the folder ({target[:80]!r}); refusing it"
        )


def _prepare(target: Path, archive: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        raise UnsafeArchive(f"{archive} has a file and a folder both named {target.name!r}; refusing it")


def _copy(src, target: Path, budget: _Budget, executable: bool, archive: str) -> None:
    _prepare(target, archive)
    fd = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o755 if executable else 0o644
    )
    with os.fdopen(fd, "wb") as out:
        while True:
            block = src.read(1 << 20)
            if not block:
                break
            budget.take(len(block))
            out.write(block)


def _extract_zip(path: Path, dest: Path, budget: _Budget, max_members: int) -> None:
    name = path.name
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise UnsafeArchive(f"{name} has {len(infos)} members, more than {max_members}; refusing it")
        if sum(i.file_size for i in infos) > budget.max_bytes:
            raise UnsafeArchive(f"{name} says it expands to more than {fmt_bytes(budget.max_bytes)}; refusing it")
        for info in infos:
            target = _member_path(dest, info.filename, name)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                if info.file_size > 4096:
                    raise UnsafeArchive(f"{name}: the link {info.filename[:80]!r} is not a link; refusing it")
                link_to = zf.read(info).decode("utf-8", errors="replace")
                _check_link(dest, target, link_to, name)
                _prepare(target, name)
                os.symlink(link_to, target)
            elif info.is_dir():
                if target.is_symlink():
                    raise UnsafeArchive(f"{name} replaces a link with a folder ({info.filename[:80]!r}); refusing it")
                target.mkdir(parents=True, exist_ok=True)
            elif stat.S_IFMT(mode) in (0, stat.S_IFREG):
                with zf.open(info) as src:
                    _copy(src, target, budget, bool(mode & 0o111) or info.filename.lower().endswith(".exe"), name)
            else:
                raise UnsafeArchive(f"{name} has a device or pipe member ({info.filename[:80]!r}); refusing it")


def _extract_tar(path: Path, dest: Path, budget: _Budget, max_members: int) -> None:
    name = path.name
    count = 0
    with tarfile.open(path, mode="r:*") as tar:
        for m in tar:
            count += 1
            if count > max_members:
                raise UnsafeArchive(f"{name} has more than {max_members} members; refusing it")
            target = _member_path(dest, m.name, name)
            if m.isdir():
                if target.is_symlink():
                    raise UnsafeArchive(f"{name} replaces a link with a folder ({m.name[:80]!r}); refusing it")
                target.mkdir(parents=True, exist_ok=True)
            elif m.issym():
                _check_link(dest, target, m.linkname, name)
                _prepare(target, name)
                os.symlink(m.linkname, target)
            elif m.islnk():
                source = _member_path(dest, m.linkname, name)
                if not source.is_file() or source.is_symlink():
                    raise UnsafeArchive(
                        f"{name}: the hard link {m.name[:80]!r} points to nothing unpacked; refusing it"
                    )
                with open(source, "rb") as src:
                    _copy(src, target, budget, bool(m.mode & 0o111), name)
            elif m.isreg():
                if m.size > budget.max_bytes:
                    raise UnsafeArchive(
                        f"{name} expands to more than {fmt_bytes(budget.max_bytes)} ({m.name[:80]!r} "
                        "alone is larger); refusing it"
                    )
                member = tar.extractfile(m)
                if member is None:
                    raise UnsafeArchive(f"{name}: {m.name[:80]!r} cannot be read")
                with member:
                    _copy(member, target, budget, bool(m.mode & 0o111), name)
            else:
                raise UnsafeArchive(f"{name} has a device or pipe member ({m.name[:80]!r}); refusing it")


def safe_extract(archive: Path, dest: Path, max_bytes: int = MAX_EXPANDED_BYTES, max_members: int = MAX_MEMBERS) -> int:
    """Unpack ``archive`` (zip or tar, gzip/xz/bz2) into the existing folder ``dest``; returns the bytes written.

    Raises :class:`UnsafeArchive` (what was wrong) or :class:`InstallError` (not an archive); the caller
    removes ``dest`` on failure.
    """
    archive, dest = Path(archive), Path(dest)
    budget = _Budget(archive.name, max_bytes)
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, dest, budget, max_members)
        elif tarfile.is_tarfile(archive):
            _extract_tar(archive, dest, budget, max_members)
        else:
            raise InstallError(f"{archive.name} is neither a zip nor a tar archive; refusing it")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, UnicodeDecodeError) as exc:
        raise InstallError(f"{archive.name} is damaged ({str(exc)[:120]}); refusing it") from None
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:  # "a" as a file and as a folder
        where = Path(exc.filename).name if exc.filename else "?"
        raise UnsafeArchive(f"{archive.name} has members whose paths clash (at {where!r}); refusing it") from None
    except OSError as exc:
        if exc.errno is not None and exc.errno in (28, 122, 27):  # ENOSPC, EDQUOT, EFBIG
            raise InstallError(
                f"the disk filled up while unpacking {archive.name} into {dest.parent} "
                f"({exc.strerror}); nothing was installed. Free some space and try again"
            ) from None
        raise
    root = os.path.realpath(dest)
    for dirpath, dirnames, filenames in os.walk(dest):  # belt and braces: no link may lead out
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                real = os.path.realpath(p)
                if real != root and not real.startswith(root + os.sep):
                    raise UnsafeArchive(f"{archive.name}: the link {n!r} leads out of the folder; refusing it")
    return budget.used


def _find_server(root: Path) -> Path | None:
    exe = "llama-server" + (".exe" if os.name == "nt" else "")
    best: Path | None = None
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        if exe in filenames:
            p = Path(dirpath) / exe
            if p.is_file() and not p.is_symlink() and (best is None or len(p.parts) < len(best.parts)):
                best = p
    return best


# --------------------------------------------------------------------------- install, use, remove


@dataclass
class InstallResult:
    installed: store.Installed
    build: Build
    already: bool = False  # the same version was installed before; it was checked and made current
    notes: list[str] = field(default_factory=list)


def _manifest(choice: Choice, bin_rel: str) -> str:
    import json

    return json.dumps(
        {
            "schema": store.MANIFEST_SCHEMA,
            "tag": choice.release.tag,
            "backend": choice.backend,
            "reason": choice.reason,
            "source": choice.release.source,
            "assets": [{"name": a.name, "sha256": a.sha256, "size": a.size, "url": a.url} for a in choice.assets],
            "bin": bin_rel,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        indent=1,
    )


def _verify(bin_dir: Path, timeout: float) -> Build:
    build = probe(bin_dir, timeout=timeout, use_cache=False)
    if not build.usable:
        raise InstallError(
            f"the unpacked llama-server does not run on this machine ({'; '.join(build.problems) or 'no version printed'}); "
            "nothing was installed. Try another backend (--backend cpu)"
        )
    if not build.features.get("list_devices"):
        raise InstallError(
            f"the unpacked llama-server could not list its devices ({'; '.join(build.problems)}); nothing was installed"
        )
    return build


def install(
    choice: Choice,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    max_bytes: int = MAX_EXPANDED_BYTES,
    timeout: float = 30.0,
    make_current: bool = True,
) -> InstallResult:
    """Download, check, unpack, verify and (then) switch to ``choice``; see the module docstring."""
    root = store.store_root()
    root.mkdir(parents=True, exist_ok=True)
    version = choice.version
    if not store.VERSION_RE.match(version):
        raise InstallError(f"{version!r} cannot name an install folder")
    target = root / version
    notes = list(choice.notes)
    if target.exists():
        try:
            inst = store.read_manifest(target)
            build = _verify(inst.bin_dir, timeout)
        except (OSError, ValueError, InstallError) as exc:
            raise InstallError(
                f"{target} exists but is not a working install ({str(exc)[:160]}); remove it with "
                f"layerdeck llama remove {version}, then download again"
            ) from None
        if make_current:
            store.set_current(inst.bin_dir)
        return InstallResult(inst, build, already=True, notes=notes)
    files = [
        download(choice.release, a, store.downloads_dir(), progress, cancel, timeout=timeout) for a in choice.assets
    ]
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        safe_extract(files[0], staging, max_bytes)
        server = _find_server(staging)
        if server is None:
            raise InstallError(f"{choice.asset.name} holds no llama-server; nothing was installed")
        bin_dir = server.parent
        left = max_bytes - sum(f.stat().st_size for f in bin_dir.iterdir() if f.is_file())
        for extra in files[1:]:  # the CUDA runtime DLLs go beside llama-server
            safe_extract(extra, bin_dir, max(left, 0))
        if cancel is not None and cancel.is_set():
            raise InstallError("the install was cancelled before it was checked; nothing was installed")
        build = _verify(bin_dir, timeout)
        bin_rel = bin_dir.relative_to(staging).as_posix() or "."
        (staging / store.MANIFEST).write_text(_manifest(choice, bin_rel), encoding="utf-8")
        try:
            os.rename(staging, target)
        except OSError:
            if target.exists():  # another download of the same version finished first: use that one
                shutil.rmtree(staging, ignore_errors=True)
                inst = store.read_manifest(target)
                if make_current:
                    store.set_current(inst.bin_dir)
                return InstallResult(inst, _verify(inst.bin_dir, timeout), already=True, notes=notes)
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if not (cancel is not None and cancel.is_set()):
            for f in files:  # checked bytes that did not install: not kept
                f.unlink(missing_ok=True)
        raise
    for f in files:
        f.unlink(missing_ok=True)
    inst = store.read_manifest(target)
    build.folder = inst.bin_dir
    build.server = inst.bin_dir / build.server.name if build.server else None
    build.installed = version
    if make_current:
        store.set_current(inst.bin_dir)
    return InstallResult(inst, build, notes=notes)


def resolve(spec: str) -> Path:
    """The llama.cpp folder for ``spec``: an installed version name, a folder, or a llama-server path."""
    inst = store.find_installed(spec) if store.VERSION_RE.match(spec) else None
    if inst is not None:
        return inst.bin_dir
    p = Path(spec).expanduser()
    if p.is_file():
        return p.parent
    if p.is_dir():
        exe = "llama-server" + (".exe" if os.name == "nt" else "")
        for cand in (p, p / "bin", p / "build" / "bin"):
            if (cand / exe).is_file():
                return cand
        return p
    names = ", ".join(i.version for i in store.installed()) or "none installed"
    raise InstallError(f"{spec!r} is neither an installed version ({names}) nor a folder holding llama-server")


def use(spec: str, timeout: float = 30.0) -> Build:
    """Check the build ``spec`` names (it must run) and mark it current; the previous one stays installed."""
    folder = resolve(spec)
    build = probe(folder, timeout=timeout)
    if not build.usable:
        raise InstallError(
            f"{folder} cannot be used: {'; '.join(build.problems) or 'llama-server did not run'}; "
            "the current build was not changed"
        )
    store.set_current(folder)
    return build


def remove(version: str, configured_current: Path | None = None) -> Path:
    """Delete the installed ``version``; refuses the current one (switch first) and anything not in the store."""
    inst = store.find_installed(version) if store.VERSION_RE.match(version) else None
    if inst is None:
        names = ", ".join(i.version for i in store.installed()) or "none"
        raise InstallError(f"{version!r} is not a Layerdeck install (installed: {names}); only those can be removed")
    current = store.current_dir()
    for cur in (current, configured_current):
        if cur is not None:
            try:
                cur_real = Path(cur).resolve()
                if cur_real == inst.folder.resolve() or inst.folder.resolve() in cur_real.parents:
                    raise InstallError(
                        f"{version} is the current llama.cpp build; switch to another first "
                        "(layerdeck llama use VERSION|PATH), then remove it"
                    )
            except OSError:
                pass
    shutil.rmtree(inst.folder)
    return inst.folder
