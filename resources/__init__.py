"""Data shipped with Layerdeck: icons, styles and the demo model description (no code)."""

from importlib import resources as _res


def path(*parts: str):
    """A traversable path to a resource file, e.g. ``path("demo", "qwen3-30b-a3b.json")``."""
    ref = _res.files(__name__)
    for p in parts:
        ref = ref / p
    return ref
