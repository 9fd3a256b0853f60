"""llama.cpp's load verdict for a model that is not downloaded: its headers in sparse stand-in files.

llama.cpp needs a file to load, but a ``no_alloc`` load reads only the header and checks that every tensor's
data lies inside the file. So each shard's header bytes (already read over HTTP) are written to a file of the
shard's full size whose data region is a hole (no disk space on Linux and macOS; marked sparse on Windows),
with the shard's own name so llama.cpp finds the split set, and :func:`app.llamacpp.load_check.check_load`
asks llama.cpp about them. The folder is removed afterwards.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path, PurePosixPath

from ..llamacpp.load_check import UNCHECKED, LoadCheck, check_load
from .open import RemoteRead


def _set_sparse(fd: int) -> None:
    """Mark the open file sparse on Windows (NTFS would otherwise allocate the whole size on truncate)."""
    if sys.platform != "win32":
        return
    import ctypes
    import msvcrt
    from ctypes import wintypes

    fsctl_set_sparse = 0x000900C4
    handle = msvcrt.get_osfhandle(fd)
    returned = wintypes.DWORD()
    ok = ctypes.windll.kernel32.DeviceIoControl(
        wintypes.HANDLE(handle), fsctl_set_sparse, None, 0, None, 0, ctypes.byref(returned), None
    )
    if not ok:
        raise OSError(ctypes.get_last_error(), "the file system cannot make sparse files")


def write_stand_ins(read: RemoteRead, folder: Path) -> list[Path]:
    """One sparse file per shard under ``folder``: the header bytes, then a hole up to the shard's size."""
    out = []
    for h in read.headers:
        if not h.data:
            raise OSError("the header bytes of " + h.url + " were not kept")
        name = PurePosixPath(h.header.path).name.split("?")[0].split("#")[0]
        path = folder / (name if name.endswith(".gguf") else name + ".gguf")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            _set_sparse(f.fileno())
            f.write(h.data[: h.size])
            f.truncate(h.size)
        out.append(path)
    return out


def check_remote(read: RemoteRead, llama_dir: str | os.PathLike | None = None) -> LoadCheck:
    """llama.cpp's verdict on the remote model ``read`` read (never raises: :data:`UNCHECKED` says why)."""
    with tempfile.TemporaryDirectory(prefix="layerdeck-remote-") as tmp:
        try:
            files = write_stand_ins(read, Path(tmp))
        except OSError as exc:
            return LoadCheck(UNCHECKED, f"no stand-in file for llama.cpp could be written: {exc}")
        return check_load(files, llama_dir, use_cache=False)
