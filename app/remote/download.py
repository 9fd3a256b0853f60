"""Download one quantization of a Hub repository: every shard, resumable, verified, with progress and cancel.

Which files ``ORG/REPO:QUANT`` means is llama.cpp's own choice (:func:`app.remote.hub.find_best_model` and
the split set's other shards), so the files are the ones ``-hf ORG/REPO:QUANT`` would fetch. Each shard is
written to ``FILE.part`` beside its final name (with ``FILE.part.json``: the size, SHA-256 and ETag it is a
part of); a broken connection, a stall, a full disk or a cancel keeps the part, and the next download asks
for the rest with ``Range: bytes=N-``. A part is discarded (and the file fetched from its start) when the
server's file is no longer the one it was a part of (another ETag, size or SHA-256), or when the server
ignores ``Range``. When every byte is there the file's size and, where the tree listing gives it (the LFS
``oid``), its SHA-256 are checked; a file that does not match is removed and the download refused. Only then
is the part renamed to its final name.

The folder is :func:`default_folder` (``models/ORG/REPO`` in Layerdeck's data folder) or the caller's; each
shard keeps its path in the repository under it. A file already there with the listed size (and SHA-256) is
kept as it is; one that differs is never overwritten.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import math
import os
import shutil
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..paths import data_dir, read_small_file
from ..units import fmt_bytes
from .errors import (
    DownloadError,
    DownloadVerifyError,
    RangeNotSatisfiableError,
    RemoteCancelled,
    RemoteNameError,
    RemoteProtocolError,
    RemoteTimeoutError,
    RemoteTruncatedError,
    RemoteUnreachableError,
)
from .http import CHUNK, Answer, Fetcher
from .hub import RepoFile, find_best_model, list_files, no_such_quant, split_files
from .names import parse_name, resolve_url

log = logging.getLogger(__name__)

__all__ = ["DownloadProgress", "DownloadResult", "default_folder", "download_quant", "download_file", "quant_files"]

#: Seconds of samples the speed is averaged over.
SPEED_WINDOW = 5.0
#: Most progress reports a second.
REPORTS_PER_S = 10
_CONTENT_RANGE_PREFIX = "bytes "


@dataclass
class DownloadProgress:
    """Where a download stands: bytes of every shard (``done`` of ``total``), the speed over the last few
    seconds (bytes/s, None until it is known), the seconds left at that speed, the shard being fetched
    (``file``, ``index`` of ``count``) and ``phase``: ``"download"``, or ``"verify"`` while a file is hashed."""

    done: int
    total: int
    speed: float | None
    eta: float | None
    file: str
    index: int
    count: int
    phase: str = "download"

    def text(self) -> str:
        """``1.2 GiB of 4.6 GiB, 38.0 MiB/s, 1 min 32 s left (part 1 of 2)``."""
        out = f"{fmt_bytes(self.done)} of {fmt_bytes(self.total)}"
        if self.phase == "verify":
            out = f"checking {PurePosixPath(self.file).name}: " + out
        elif self.speed:
            out += f", {fmt_bytes(int(self.speed))}/s"
            if self.eta is not None:
                out += f", {_duration(self.eta)} left"
        if self.count > 1:
            out += f" (part {self.index + 1} of {self.count})"
        return out


def _duration(s: float) -> str:
    s = max(0, int(round(s)))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{s} s"


@dataclass
class DownloadResult:
    """The downloaded files (in shard order), the bytes fetched now, those taken from earlier parts, and the
    files that were already complete."""

    paths: list[Path]
    fetched: int = 0
    resumed: int = 0
    already: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def default_folder(repo: str) -> Path:
    """``models/ORG/REPO`` in Layerdeck's data folder (``LAYERDECK_DATA_DIR`` overrides the data folder)."""
    org, _, name = repo.partition("/")
    return data_dir() / "models" / org / name


def _safe_target(folder: Path, path: str) -> Path:
    """``folder/path`` for a path of the listing, refused when it would leave ``folder``."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(p in ("", ".", "..") for p in parts)
        or any(ord(c) < 32 for c in path)
        or ":" in parts[0]
    ):
        raise RemoteProtocolError(f"the listing names a file {path!r}, which is not a path inside the repository.")
    return folder.joinpath(*parts)


def quant_files(repo: str, quant: str, fetcher: Fetcher, revision: str = "main") -> list[RepoFile]:
    """The files ``-hf ORG/REPO:QUANT`` fetches: the model file llama.cpp picks and every shard of its set."""
    files = list_files(repo, fetcher, revision)
    best = find_best_model(files, quant)
    if best is None:
        raise no_such_quant(repo, quant, files)
    return split_files(files, best)


class _Meter:
    """Bytes done over time: the speed over the last :data:`SPEED_WINDOW` seconds, throttled reports."""

    def __init__(self, total: int, count: int, report: Callable[[DownloadProgress], None] | None):
        self.total, self.count, self.report = total, count, report
        self.done = 0
        self.samples: deque[tuple[float, int]] = deque()
        self.last = 0.0
        self.file, self.index = "", 0

    def add(self, n: int, *, force: bool = False, phase: str = "download") -> None:
        self.done += n
        now = time.monotonic()
        if phase == "download":
            self.samples.append((now, self.done))
            while len(self.samples) > 2 and now - self.samples[0][0] > SPEED_WINDOW:
                self.samples.popleft()
        if self.report is None or (not force and now - self.last < 1 / REPORTS_PER_S):
            return
        self.last = now
        speed = eta = None
        if len(self.samples) >= 2:
            (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
            if t1 > t0 and d1 > d0:
                speed = (d1 - d0) / (t1 - t0)
                eta = max(0, self.total - self.done) / speed
        self.report(DownloadProgress(self.done, self.total, speed, eta, self.file, self.index, self.count, phase))

    def restart_speed(self) -> None:
        self.samples.clear()


def _hash_file(path: Path, h, fetcher: Fetcher, meter: _Meter | None, what: str) -> None:
    with open(path, "rb") as f:
        while True:
            fetcher.check(what)
            chunk = f.read(4 * 1024 * 1024)
            if not chunk:
                return
            h.update(chunk)
            if meter is not None:
                meter.add(len(chunk), phase="verify")


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _read_meta(part: Path) -> dict:
    try:
        doc = json.loads(read_small_file(_meta_path(part), 64 * 1024).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _write_meta(part: Path, doc: dict) -> None:
    tmp = _meta_path(part).with_name(_meta_path(part).name + ".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, _meta_path(part))


def _discard(part: Path) -> None:
    for p in (part, _meta_path(part)):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _content_range(value: str | None) -> tuple[int, int, int | None] | None:
    if not value or not value.startswith(_CONTENT_RANGE_PREFIX):
        return None
    span, _, total = value[len(_CONTENT_RANGE_PREFIX) :].partition("/")
    first, _, last = span.partition("-")
    try:
        return int(first), int(last), (None if total.strip() == "*" else int(total))
    except ValueError:
        return None


def download_file(
    url: str,
    target: Path,
    fetcher: Fetcher,
    *,
    size: int | None,
    sha256: str | None = None,
    what: str = "",
    meter: _Meter | None = None,
) -> tuple[int, int, bool]:
    """Download ``url`` to ``target`` (resuming ``target.part``); ``(bytes fetched, bytes resumed, was there)``.

    Raises :class:`RemoteError` subclasses; a part is kept where resuming it is worth it (the message says).
    """
    what = what or target.name
    part = target.with_name(target.name + ".part")
    meter = meter or _Meter(size or 0, 1, None)
    if target.exists():
        return 0, 0, _check_existing(target, fetcher, size, sha256, what, meter)
    meta = _read_meta(part) if part.exists() else {}
    have = part.stat().st_size if part.exists() else 0
    if have and (meta.get("size") != size or meta.get("sha256") != sha256 or size is None or have > size):
        log.info("%s: the part %s is not a part of this file; starting again", what, part)
        _discard(part)
        have = 0
    free = shutil.disk_usage(target.parent).free
    if size is not None and size - have > free:
        raise DownloadError(
            f"{what}: not enough room on the disk: {fmt_bytes(size - have)} to download, {fmt_bytes(free)} free "
            f"in {target.parent}; free some space or choose another folder.",
            url,
        )
    resumed = have
    h = hashlib.sha256() if sha256 else None
    if have and h is not None:
        _hash_file(part, h, fetcher, None, what)
    meter.add(have, force=True)
    fetched = 0
    if size is None or have < size:
        fetched, have, h = _fetch(url, part, fetcher, size, sha256, meta, have, h, what, meter)
    got = part.stat().st_size
    if size is not None and got != size:
        _discard(part)
        raise DownloadVerifyError(
            f"{what}: {got:,} bytes were downloaded, the repository lists {size:,}; the file was removed. Try "
            "again; if it keeps happening, the listing and the file disagree on the server.",
            url,
        )
    if sha256 and h is not None and h.hexdigest() != sha256:
        _discard(part)
        raise DownloadVerifyError(
            f"{what}: the downloaded file's SHA-256 is {h.hexdigest()}, the repository lists {sha256}: it is "
            "corrupt (or the server sent another file) and was removed. Download it again.",
            url,
        )
    os.replace(part, target)
    _discard(part)  # the meta file
    return fetched, resumed, False


def _check_existing(target: Path, fetcher: Fetcher, size: int | None, sha256: str | None, what: str, meter) -> bool:
    got = target.stat().st_size
    if size is not None and got != size:
        raise DownloadError(
            f"{what}: {target} is already there with {got:,} bytes, the repository lists {size:,}; it is left "
            "alone: move or delete it, or choose another folder.",
            str(target),
        )
    if sha256:
        h = hashlib.sha256()
        _hash_file(target, h, fetcher, meter, what)
        if h.hexdigest() != sha256:
            raise DownloadError(
                f"{what}: {target} is already there but its SHA-256 ({h.hexdigest()}) is not the repository's "
                f"({sha256}); it is left alone: move or delete it, or choose another folder.",
                str(target),
            )
    else:
        meter.add(got, force=True)
    return True


def _fetch(url, part, fetcher: Fetcher, size, sha256, meta, have, h, what, meter):
    """Fetch the rest of the file into ``part``: ``(bytes fetched, bytes in the part, hash)``."""
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        a: Answer = fetcher.request(url, headers, what)
    except RangeNotSatisfiableError:
        if not have:
            raise
        _discard(part)  # the server's file ends before the part does: it is not a part of that file
        raise RangeNotSatisfiableError(
            f"{what}: the server's file is shorter than the {have:,} bytes already downloaded (416): it is not "
            "the file the part belongs to; the part was removed. List the repository again and download anew.",
            url,
            416,
        ) from None
    fetched = 0
    try:
        etag = a.header("x-linked-etag") or a.headers.get("etag")
        clen_s = a.headers.get("content-length")
        clen = int(clen_s) if clen_s and clen_s.isdigit() else None
        if a.status == 206:
            cr = _content_range(a.headers.get("content-range"))
            if cr is None or cr[0] != have:
                raise RemoteProtocolError(
                    f"{what}: asked for the bytes from {have:,}, the server sent "
                    f"{a.headers.get('content-range')!r}; the server is broken: try again later.",
                    url,
                )
            total = cr[2]
        elif a.status == 200:
            if have:
                log.info("%s: the server ignores Range: downloading from the start", what)
                meter.add(-have, force=True)
                have = 0
                with open(part, "wb"):
                    pass
                h = hashlib.sha256() if sha256 else None
            total = clen
        else:
            raise RemoteProtocolError(f"{what}: unexpected answer {a.status} to a download.", url)
        if size is not None and total is not None and total != size:
            _discard(part)
            raise DownloadVerifyError(
                f"{what}: the server's file is {total:,} bytes, the repository lists {size:,}: it is not the file "
                "listed (it changed while you looked?); nothing was kept. List the repository again.",
                url,
                a.status,
            )
        if size is None:
            size = total
        if size is None:
            raise RemoteProtocolError(
                f"{what}: neither the listing nor the server says how large the file is, so the download could "
                "not be checked; nothing was downloaded.",
                url,
            )
        if have and meta.get("etag") and etag and meta.get("etag") != etag:
            _discard(part)
            raise DownloadVerifyError(
                f"{what}: the file on the server changed since the part was downloaded (ETag {meta.get('etag')} "
                f"became {etag}); the part was removed: download again.",
                url,
            )
        expected = size - have
        if clen is not None and clen != expected:
            raise RemoteProtocolError(
                f"{what}: the server announces {clen:,} bytes, {expected:,} are missing; the server is broken.",
                url,
            )
        _write_meta(part, {"url": url, "size": size, "sha256": sha256, "etag": etag})
        meter.restart_speed()
        with open(part, "ab") as f:
            try:
                while have < size:
                    fetcher.check(url)
                    if a.conn.sock is not None:
                        a.conn.sock.settimeout(fetcher.timeout)
                    try:
                        chunk = a.response.read1(min(CHUNK, size - have))  # what has come: no wait for a full chunk
                    except TimeoutError:
                        raise RemoteTimeoutError(
                            f"{what}: the server stopped sending (no data within {fetcher.timeout:.0f} s).", url
                        ) from None
                    except OSError as exc:
                        raise RemoteTruncatedError(f"{what}: the connection broke ({exc!r}).", url) from None
                    except http.client.HTTPException as exc:  # IncompleteRead and other broken answers
                        partial = getattr(exc, "partial", b"") or b""
                        if partial:
                            f.write(partial)
                            have += len(partial)
                            fetched += len(partial)
                            if h is not None:
                                h.update(partial)
                        raise RemoteTruncatedError(
                            f"{what}: the connection ended after {have:,} of {size:,} bytes.", url
                        ) from None
                    if not chunk:
                        raise RemoteTruncatedError(
                            f"{what}: the connection ended after {have:,} of {size:,} bytes.", url
                        )
                    f.write(chunk)
                    have += len(chunk)
                    fetched += len(chunk)
                    if h is not None:
                        h.update(chunk)
                    fetcher.stats.bytes_read += len(chunk)
                    meter.add(len(chunk))
            except (RemoteCancelled, RemoteTimeoutError, RemoteTruncatedError, RemoteUnreachableError) as exc:
                f.flush()
                raise type(exc)(
                    f"{exc.message.rstrip('.')}. {fmt_bytes(have)} of {fmt_bytes(size)} are kept in {part}: "
                    "download again to resume from there.",
                    url,
                ) from None
            except OSError as exc:  # the disk: full, gone, read-only
                raise DownloadError(
                    f"{what}: writing {part} failed ({exc.strerror or exc}); {fmt_bytes(have)} are kept there: "
                    "free some space (or choose another folder) and download again to resume.",
                    url,
                ) from None
            f.flush()
            os.fsync(f.fileno())
        meter.add(0, force=True)
    finally:
        a.close()
    return fetched, have, h


def download_quant(
    name: str,
    folder: str | os.PathLike | None = None,
    *,
    options=None,
    progress: Callable[[DownloadProgress], None] | None = None,
) -> DownloadResult:
    """Download ``ORG/REPO:QUANT`` (or ``hf://ORG/REPO:QUANT``, ``hf://ORG/REPO/FILE.gguf``) into ``folder``
    (default :func:`default_folder`): every shard, in order. ``options``: :class:`~app.remote.open.RemoteOptions`
    (token, timeouts, cancel); its ``deadline`` does not apply (a download takes as long as it takes; a stall
    longer than ``timeout`` ends it)."""
    from .open import RemoteOptions

    text = name if name.startswith(("hf://", "http://", "https://")) else "hf://" + name
    parsed = parse_name(text)
    if parsed is None or parsed.kind not in ("quant", "file"):
        raise RemoteNameError(
            f"{name!r}: give ORG/REPO:QUANT (like Qwen/Qwen3-8B-GGUF:Q4_K_M) or hf://ORG/REPO/FILE.gguf to "
            "download; a plain URL is downloaded by llama.cpp's -mu.",
            name,
        )
    options = options or RemoteOptions()
    fetcher = options.fetcher()
    fetcher.deadline = math.inf
    if parsed.kind == "quant":
        files = quant_files(parsed.repo, parsed.quant, fetcher, parsed.revision)
    else:
        listing = list_files(parsed.repo, fetcher, parsed.revision)
        match = next((f for f in listing if f.path == parsed.file), None)
        if match is None:
            raise no_such_quant(parsed.repo, PurePosixPath(parsed.file).name, listing)
        files = split_files(listing, match)
    dest = Path(folder) if folder is not None else default_folder(parsed.repo)
    targets = [_safe_target(dest, f.path) for f in files]
    try:
        for t in targets:
            t.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(
            f"cannot make the folder {dest} ({exc.strerror or exc}); choose another folder.", str(dest)
        ) from None
    if any(f.size is None for f in files):
        log.info("%s: the listing gives no size for some files; they are checked against the server's", name)
    meter = _Meter(sum(f.size or 0 for f in files), len(files), progress)
    result = DownloadResult(targets)
    for i, (f, t) in enumerate(zip(files, targets)):
        meter.file, meter.index = f.path, i
        url = resolve_url(parsed.repo, f.path, parsed.revision)
        fetched, resumed, was = download_file(
            url, t, fetcher, size=f.size, sha256=f.sha256, what=f"hf://{parsed.repo}/{f.path}", meter=meter
        )
        result.fetched += fetched
        result.resumed += resumed
        if was:
            result.already.append(t)
        if not f.sha256:
            result.notes.append(f"{f.path}: the listing gives no SHA-256; only its size was checked")
    return result
