"""The header cache: a remote file's header bytes kept by URL and ETag under the user cache folder.

``LAYERDECK_CACHE_DIR`` overrides the folder (tests point it at a temporary one); otherwise it is
``headers/`` in Layerdeck's cache folder (``$XDG_CACHE_HOME/layerdeck``, ``~/.cache/layerdeck``, or
``%LOCALAPPDATA%\\layerdeck``: :func:`app.llamacpp.build.cache_root`). Each entry is two files named by the
SHA-256 of the URL: ``.json`` (URL, ETag, file size, byte count) and ``.bin`` (the header's bytes). An entry
that cannot be read or does not match is ignored (the header is read again) and said in the debug log; a
cache that cannot be written only costs the next read its bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..paths import atomic_write_text, read_small_file

log = logging.getLogger(__name__)

__all__ = ["CachedHeader", "cache_folder", "load", "store"]

_LIMIT_JSON = 64 * 1024
_LIMIT_BIN = 128 * 1024 * 1024


@dataclass(frozen=True)
class CachedHeader:
    url: str
    etag: str
    size: int
    data: bytes


def cache_folder() -> Path:
    explicit = os.environ.get("LAYERDECK_CACHE_DIR")
    if explicit:
        return Path(explicit) / "headers"
    from ..llamacpp.build import cache_root

    return cache_root() / "headers"


def _key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", errors="surrogatepass")).hexdigest()[:40]


def load(url: str) -> CachedHeader | None:
    base = cache_folder() / _key(url)
    try:
        meta = json.loads(read_small_file(base.with_suffix(".json"), _LIMIT_JSON).decode("utf-8"))
        data = read_small_file(base.with_suffix(".bin"), _LIMIT_BIN)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.debug("header cache entry %s for %s ignored: %s", base, url, exc)
        return None
    if (
        not isinstance(meta, dict)
        or meta.get("url") != url
        or not isinstance(meta.get("etag"), str)
        or not isinstance(meta.get("size"), int)
        or meta.get("length") != len(data)
    ):
        log.debug("header cache entry %s for %s ignored: it does not match", base, url)
        return None
    return CachedHeader(url, meta["etag"], meta["size"], data)


def store(url: str, etag: str, size: int, data: bytes) -> None:
    folder = cache_folder()
    base = folder / _key(url)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = base.with_name(f".{base.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, base.with_suffix(".bin"))
        atomic_write_text(
            base.with_suffix(".json"), json.dumps({"url": url, "etag": etag, "size": size, "length": len(data)})
        )
    except OSError as exc:
        log.debug("header cache for %s not written: %s", url, exc)
