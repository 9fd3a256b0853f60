"""Where Layerdeck keeps its data (bench history, calibration, autosave), per platform, and how it writes them.

``LAYERDECK_DATA_DIR`` overrides it (tests point it at a temporary folder). Settings live in
``QSettings``, which the UI places itself.

The small files Layerdeck writes (plans, the autosave, the speed calibration, the capabilities cache)
are written with :func:`atomic_write_text`, so a crash or a full disk never leaves half a file; they are
read with :func:`read_small_file`, which refuses folders, pipes and devices (a FIFO would block ``open``
forever) and files larger than the caller's limit without reading them; and one that cannot be used is
kept under another name by :func:`set_aside` rather than deleted.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
import time
from pathlib import Path

__all__ = [
    "data_dir",
    "atomic_write_text",
    "read_small_file",
    "set_aside",
    "NotARegularFile",
    "FileTooLarge",
]


def _base() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Layerdeck"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Layerdeck"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "layerdeck"


def data_dir() -> Path:
    return Path(os.environ.get("LAYERDECK_DATA_DIR") or _base())


class NotARegularFile(OSError):
    """The path is a pipe, socket or device (or a folder), not a file that can be read to its end."""


class FileTooLarge(OSError):
    """The file is larger than the caller reads; ``size`` and ``limit`` are in bytes."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(errno.EFBIG, f"{size} bytes, more than the {limit} read", path)
        self.size = size
        self.limit = limit


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` in one step: a temporary file in the same folder, fsync, ``os.replace``.

    Readers see the old content or the new, never a part. The folder must exist. On any error the
    temporary file is removed and the error (an ``OSError``, or ``UnicodeEncodeError``) propagates.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    data = text.encode(encoding)
    # O_EXCL: never write through a file (or link) someone else put there; the mode follows the umask
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sys.platform != "win32":  # make the rename itself durable; best effort
        try:
            dfd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)


def read_small_file(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, reading at most ``limit`` of them.

    Raises ``FileNotFoundError``, ``IsADirectoryError``, :class:`NotARegularFile` (a FIFO, socket or
    device: checked before opening, and again on the open file, which is opened non-blocking so that a
    FIFO swapped in meanwhile cannot block), :class:`FileTooLarge`, or another ``OSError``.
    """
    path = os.fspath(path)
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder", path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(errno.EINVAL, "not a regular file", path)
    if st.st_size > limit:
        raise FileTooLarge(path, st.st_size, limit)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file", path)
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew after the stat
        raise FileTooLarge(path, len(data), limit)
    return data


def set_aside(path: str | os.PathLike, tag: str = "corrupt", *, keep_extension: bool = False) -> Path:
    """Rename ``path`` next to itself, never over another file, and return the new path.

    ``NAME.EXT.TAG-YYYYmmdd-HHMMSS`` (``autosave.layerdeck.json.corrupt-20260101-120000``), or with
    ``keep_extension`` ``NAME.TAG-YYYYmmdd-HHMMSS.EXT`` (still openable as what it was). For a file
    Layerdeck cannot use but must not delete: the user may want it back. Raises ``OSError``.
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base, dot, ext = path.name.partition(".")

    def name(n: int) -> str:
        mark = f"{tag}-{stamp}" + (f"-{n}" if n > 1 else "")
        return f"{base}.{mark}{dot}{ext}" if keep_extension else f"{path.name}.{mark}"

    n = 1
    while path.with_name(name(n)).exists():
        n += 1
    target = path.with_name(name(n))
    os.replace(path, target)
    return target


def read_json_cache(path: str | os.PathLike, limit: int, what: str) -> dict:
    """The JSON object cached at ``path``, or ``{}`` when there is none or it cannot be used (too large, not
    JSON, not an object, unreadable: logged with ``what`` naming the cache, never raised)."""
    import json
    import logging

    try:
        data = json.loads(read_small_file(path, limit).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        logging.getLogger(__name__).warning("the %s cannot be used (%s); it is made again", what, exc)
        return {}
    return data if isinstance(data, dict) else {}


def write_json_cache(path: str | os.PathLike, data: dict, what: str) -> None:
    """Replace the cache at ``path`` with ``data`` in one step (:func:`atomic_write_text`); a failure is logged."""
    import json
    import logging

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data))
    except OSError as exc:
        logging.getLogger(__name__).warning("could not write the %s %s: %s", what, path, exc)
