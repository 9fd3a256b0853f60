"""Where Layerdeck keeps its data (bench history, calibration, autosave), per platform.

``LAYERDECK_DATA_DIR`` overrides it (tests point it at a temporary folder). Settings live in
``QSettings``, which the UI places itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _base() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Layerdeck"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Layerdeck"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "layerdeck"


def data_dir() -> Path:
    return Path(os.environ.get("LAYERDECK_DATA_DIR") or _base())
