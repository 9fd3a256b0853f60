"""What a llama.cpp binary supports, read from its ``--help`` (cached per binary and modification time).

Builds differ: ``--no-mmap`` became ``--load-mode none``, ``-fa`` grew a
required value, ``--fit`` and ``-ot`` appeared at different times. The
command builder asks :class:`Capabilities` which spelling to emit instead of
assuming the version Layerdeck was tested with. This module only reads the
spellings a ``--help`` lists; which option a spelling belongs to (so that
``--gpu-layers`` counts for ``-ngl``) is the flag table's business
(:mod:`app.command.accepts`).
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

from ..paths import atomic_write_text, read_small_file

log = logging.getLogger(__name__)

_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?)")
#: Flag lines start near the left margin; description lines are indented further (and may mention flags).
_MAX_INDENT = 8


@dataclass(frozen=True)
class Capabilities:
    """The set of flags a binary accepts. ``ALL`` (no binary known) accepts everything current llama.cpp does."""

    flags: frozenset[str] = field(default_factory=frozenset)
    known: bool = True
    fa_value: bool = True  # -fa takes on|off|auto (builds before mid-2025 had a bare -fa switch)

    def has(self, flag: str) -> bool:
        """Whether ``--help`` lists this exact spelling (always, when no binary is known)."""
        return (not self.known) or flag in self.flags


UNKNOWN = Capabilities(frozenset(), known=False)
_PARSER = 4  # bump when parse_help changes, so cached results are read again


def parse_help(text: str) -> Capabilities:
    flags = set()
    fa_value = True
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped.startswith("-") or len(line) - len(stripped) > _MAX_INDENT:
            continue
        # the flag list ends at the first wide gap that does not follow a comma ("-fit,  --fit [on|off]   desc")
        head = re.split(r"(?<=[^,\s])\s{2,}", stripped, maxsplit=1)[0]
        found = {m.group(1) for m in _FLAG.finditer(head)}
        if "--flash-attn" in found:
            fa_value = "[" in head or "FA" in head or "on|off" in head
        flags |= found
    return Capabilities(frozenset(flags), known=bool(flags), fa_value=fa_value)


def _cache_file() -> Path:
    from .build import cache_root

    return cache_root() / "capabilities.json"


#: The largest cache file read (a few KiB per llama.cpp build seen).
MAX_CACHE_BYTES = 4 << 20


def _note(notes: list[str] | None, text: str) -> None:
    log.warning("%s", text)
    if notes is not None:
        notes.append(text)


def _read_cache(path: Path, notes: list[str] | None) -> dict:
    """The cache as a dict; empty (with a note) when it is unreadable or not a JSON object."""
    try:
        data = json.loads(read_small_file(path, MAX_CACHE_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        _note(notes, f"the capabilities cache {path} cannot be used ({str(exc)[:120]}); it will be rebuilt")
        return {}
    if not isinstance(data, dict):
        _note(notes, f"the capabilities cache {path} has the wrong shape; it will be rebuilt")
        return {}
    return data


def _cached(entry: object) -> Capabilities | None:
    """A cache entry as :class:`Capabilities`, or None when it is not ``{"flags": [str...], "fa_value": bool}``."""
    if not isinstance(entry, dict):
        return None
    flags, fa_value = entry.get("flags"), entry.get("fa_value")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags) or not isinstance(fa_value, bool):
        return None
    return Capabilities(frozenset(flags), fa_value=fa_value)


def capabilities(binary: str | os.PathLike, timeout: float = 20.0, notes: list[str] | None = None) -> Capabilities:
    """Flags of ``binary --help``; cached by path, size and mtime. Returns ``UNKNOWN`` if it cannot run.

    A cache file or entry of the wrong shape is ignored (logged, and appended to ``notes`` when given)
    and rewritten; the cache is written in one step, so a crash never leaves half of it.
    """
    path = Path(binary)
    try:
        st = path.stat()
    except OSError:
        return UNKNOWN
    key = hashlib.sha1(f"{_PARSER}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    cache_path = _cache_file()
    cache = _read_cache(cache_path, notes)
    if key in cache:
        hit = _cached(cache[key])
        if hit is not None:
            return hit
        _note(notes, f"the capabilities cache entry for {path} has the wrong shape; reading --help again")
    try:
        proc = subprocess.run(
            [str(path), "--help"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("could not read %s --help: %s", path, exc)
        return UNKNOWN
    caps = parse_help(proc.stdout + "\n" + proc.stderr)
    if caps.known:
        cache[key] = {"flags": sorted(caps.flags), "fa_value": caps.fa_value}
        try:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(cache_path, json.dumps(cache))
        except OSError as exc:
            log.warning("could not write the capabilities cache %s: %s", cache_path, exc)
    return caps
