"""What a llama.cpp binary supports, read from its ``--help`` (cached per binary and modification time).

Builds differ: ``--no-mmap`` became ``--load-mode none``, ``-fa`` grew a
required value, ``--fit`` and ``-ot`` appeared at different times. The
command builder asks :class:`Capabilities` which spelling to emit instead of
assuming the version Layerdeck was tested with.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")


@dataclass(frozen=True)
class Capabilities:
    """The set of flags a binary accepts. ``ALL`` (no binary known) accepts everything current llama.cpp does."""

    flags: frozenset[str] = field(default_factory=frozenset)
    known: bool = True

    def has(self, flag: str) -> bool:
        return (not self.known) or flag in self.flags

    def first(self, *spellings: str) -> str | None:
        """The first spelling this build accepts, or None."""
        for s in spellings:
            if self.has(s):
                return s
        return None

    @property
    def fa_takes_value(self) -> bool:
        return True  # every build with -ot also has the on/off/auto form


UNKNOWN = Capabilities(frozenset(), known=False)


def parse_help(text: str) -> Capabilities:
    flags = set()
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped.startswith("-"):
            continue
        head = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
        flags.update(m.group(1) for m in _FLAG.finditer(head))
    return Capabilities(frozenset(flags), known=bool(flags))


def _cache_file() -> Path:
    from .build import cache_root

    return cache_root() / "capabilities.json"


def capabilities(binary: str | os.PathLike, timeout: float = 20.0) -> Capabilities:
    """Flags of ``binary --help``; cached by path, size and mtime. Returns ``UNKNOWN`` if it cannot run."""
    path = Path(binary)
    try:
        st = path.stat()
    except OSError:
        return UNKNOWN
    key = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    cache_path = _cache_file()
    cache: dict = {}
    try:
        cache = json.loads(cache_path.read_text())
        if key in cache:
            return Capabilities(frozenset(cache[key]))
    except (OSError, ValueError):
        cache = {}
    try:
        proc = subprocess.run([str(path), "--help"], capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("could not read %s --help: %s", path, exc)
        return UNKNOWN
    caps = parse_help(proc.stdout + "\n" + proc.stderr)
    if caps.known:
        cache[key] = sorted(caps.flags)
        try:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            cache_path.write_text(json.dumps(cache))
        except OSError:
            pass
    return caps
