"""Where Layerdeck keeps settings, data (bench history, calibration, autosave) and caches, per platform.

``LAYERDECK_CONFIG_DIR`` / ``LAYERDECK_DATA_DIR`` override them (tests point both at a temporary folder).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _base(kind: str) -> Path:
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Layerdeck"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Layerdeck"
    xdg = {"config": "XDG_CONFIG_HOME", "data": "XDG_DATA_HOME"}[kind]
    default = {"config": home / ".config", "data": home / ".local" / "share"}[kind]
    return Path(os.environ.get(xdg) or default) / "layerdeck"


def config_dir() -> Path:
    return Path(os.environ.get("LAYERDECK_CONFIG_DIR") or _base("config"))


def data_dir() -> Path:
    return Path(os.environ.get("LAYERDECK_DATA_DIR") or _base("data"))
