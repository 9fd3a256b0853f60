"""Layerdeck's GUI-free core: GGUF reading, blocks, devices, memory, placement.

Nothing in this package imports Qt, pyqtgraph or :mod:`ui` (checked by the
import-linter contract in ``pyproject.toml`` and ``tests/test_architecture.py``).
"""

__version__ = "0.1.0"
