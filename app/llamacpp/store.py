"""Layerdeck's own llama.cpp installs: where they live, which one is current.

Layout under the user data folder (:func:`app.paths.data_dir`)::

    llama.cpp/
      current.json                  {"schema": "layerdeck.llama-current/1", "path": "/abs/folder/with/llama-server"}
      b11312-vulkan/                one folder per installed version, side by side
        layerdeck-build.json        the manifest: release tag, backend, assets with their sha256, "bin"
        ...                         the archive's files (llama-server under "bin")
      downloads/NAME.part           an interrupted download, resumed with an HTTP Range request
      .staging-XXXX/                an install being unpacked and checked (renamed into place when it passes)

``current.json`` may point at any folder (``layerdeck llama use PATH``), not only at an install here.
:mod:`app.llamacpp.binaries` looks there after the Settings folder and ``LAYERDECK_LLAMA_CPP_DIR``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..paths import atomic_write_text, data_dir, read_small_file

log = logging.getLogger(__name__)

CURRENT_SCHEMA = "layerdeck.llama-current/1"
MANIFEST_SCHEMA = "layerdeck.llama-build/1"
MANIFEST = "layerdeck-build.json"
#: The largest manifest or current.json read.
MAX_SMALL_FILE = 1 << 20
#: A version folder name: the release tag and the backend ("b11312-vulkan"); nothing that could be a path.
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,79}$")


def store_root() -> Path:
    return data_dir() / "llama.cpp"


def downloads_dir() -> Path:
    return store_root() / "downloads"


@dataclass(frozen=True)
class Installed:
    """One install in the store (its manifest was read and is well formed)."""

    version: str  # the folder name, e.g. "b11312-vulkan"
    folder: Path
    bin_dir: Path  # the folder holding llama-server
    tag: str
    backend: str
    assets: tuple[str, ...]
    installed_at: str


def _read_json(path: Path) -> object:
    return json.loads(read_small_file(path, MAX_SMALL_FILE).decode("utf-8"))


def read_manifest(folder: Path) -> Installed:
    """The manifest of an install folder; raises ``ValueError``/``OSError`` saying what is wrong."""
    data = _read_json(folder / MANIFEST)
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        raise ValueError(f"{folder / MANIFEST} is not a {MANIFEST_SCHEMA} manifest")
    rel = data.get("bin")
    tag, backend = data.get("tag"), data.get("backend")
    assets = data.get("assets")
    if not isinstance(rel, str) or not isinstance(tag, str) or not isinstance(backend, str):
        raise ValueError(f"{folder / MANIFEST} lacks bin, tag or backend")
    if not isinstance(assets, list) or not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in assets):
        raise ValueError(f"{folder / MANIFEST} has no asset list")
    bin_dir = (folder / rel).resolve()
    root = folder.resolve()
    if bin_dir != root and root not in bin_dir.parents:
        raise ValueError(f"{folder / MANIFEST}: bin {rel!r} leaves the install folder")
    return Installed(
        version=folder.name,
        folder=folder,
        bin_dir=bin_dir,
        tag=tag,
        backend=backend,
        assets=tuple(a["name"] for a in assets),
        installed_at=str(data.get("installed_at", "")),
    )


def installed(notes: list[str] | None = None) -> list[Installed]:
    """Every install in the store, newest folder name last; an unreadable one is skipped with a note."""
    root = store_root()
    try:
        entries = sorted(
            p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "downloads"
        )
    except OSError:
        return []
    out = []
    for folder in entries:
        try:
            out.append(read_manifest(folder))
        except (OSError, ValueError, RecursionError) as exc:
            text = f"{folder} is not a usable Layerdeck install ({str(exc)[:160]}); remove it or install again"
            log.warning("%s", text)
            if notes is not None:
                notes.append(text)
    return out


def find_installed(version: str) -> Installed | None:
    return next((i for i in installed() if i.version == version), None)


def current_dir(notes: list[str] | None = None) -> Path | None:
    """The folder chosen with ``layerdeck llama use`` (or an install), or None when none was chosen."""
    path = store_root() / "current.json"
    try:
        data = _read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        text = f"{path} cannot be read ({str(exc)[:120]}); no llama.cpp build is marked current"
        log.warning("%s", text)
        if notes is not None:
            notes.append(text)
        return None
    if not isinstance(data, dict) or data.get("schema") != CURRENT_SCHEMA or not isinstance(data.get("path"), str):
        if notes is not None:
            notes.append(f"{path} has the wrong shape; no llama.cpp build is marked current")
        return None
    return Path(data["path"])


def set_current(folder: Path | None) -> None:
    """Mark ``folder`` current (written in one step), or clear the mark with None."""
    path = store_root() / "current.json"
    if folder is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"schema": CURRENT_SCHEMA, "path": os.fspath(Path(folder).absolute())}))
