"""Find the llama.cpp executables Layerdeck runs.

Search order (the same for the frozen app and a source checkout):
1. next to the running application (a frozen bundle ships them beside itself),
2. the directory the user configured,
3. ``LAYERDECK_LLAMA_CPP_DIR``,
4. the build marked current (``layerdeck llama use``, a download; :mod:`app.llamacpp.store`),
5. ``PATH``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError

log = logging.getLogger(__name__)

ENV_DIR = "LAYERDECK_LLAMA_CPP_DIR"

TOOLS = ("llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server", "llama-cli")


class LlamaCppNotFound(ToolError, FileNotFoundError):
    """A llama.cpp tool could not be found anywhere Layerdeck looks."""


@dataclass(frozen=True)
class ToolLocation:
    path: Path
    source: str  # "bundled", "configured", "environment", "current" or "PATH"


def _exe(name: str) -> str:
    return name + (".exe" if sys.platform == "win32" and not name.endswith(".exe") else "")


def _bundle_dir() -> Path | None:
    if getattr(sys, "frozen", False):
        return Path(sys.executable).resolve().parent
    return None


def search_dirs(configured: str | os.PathLike | None = None) -> list[tuple[Path, str]]:
    dirs: list[tuple[Path, str]] = []
    bundle = _bundle_dir()
    if bundle is not None:
        dirs += [(bundle, "bundled"), (bundle / "llama.cpp", "bundled")]
    if configured:
        dirs.append((Path(configured), "configured"))
    env = os.environ.get(ENV_DIR)
    if env:
        dirs.append((Path(env), "environment"))
    from .store import current_dir  # the build chosen with ``layerdeck llama use`` or installed by Layerdeck

    current = current_dir()
    if current is not None:
        dirs.append((current, "current"))
    return dirs


def find_tool(name: str, configured: str | os.PathLike | None = None) -> ToolLocation:
    """Locate tool ``name`` (e.g. ``llama-server``) or raise :class:`LlamaCppNotFound`."""
    exe = _exe(name)
    for directory, source in search_dirs(configured):
        candidate = directory / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return ToolLocation(candidate, source)
    on_path = shutil.which(exe)
    if on_path:
        return ToolLocation(Path(on_path), "PATH")
    if sys.platform == "darwin":  # apps started from the Finder do not get the shell's PATH
        for d in ("/opt/homebrew/bin", "/usr/local/bin"):
            candidate = Path(d) / exe
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return ToolLocation(candidate, "PATH")
    looked = ", ".join(str(d) for d, _ in search_dirs(configured)) or "no configured directory"
    raise LlamaCppNotFound(
        f"{name} was not found (looked in {looked} and on PATH). "
        f"Set the llama.cpp directory in Settings, or set {ENV_DIR} to the folder holding {exe}."
    )
