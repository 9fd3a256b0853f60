"""The error hierarchy: one base per area, each carrying the user-facing message.

Every error the core raises on purpose derives from :class:`LayerdeckError`
through exactly one area base below, so the edges (the CLI, the dialogs) can
catch an area -- or everything -- without catching a bare ``ValueError`` that
might be a programming mistake.  Classes that subclassed ``ValueError``,
``RuntimeError`` or ``OSError`` before keep those as additional bases, so
older ``except ValueError`` callers keep working.

This module imports nothing from the package.
"""

from __future__ import annotations

__all__ = [
    "LayerdeckError",
    "ReadError",
    "EstimateError",
    "ExportError",
    "CommandError",
    "LaunchError",
    "DetectError",
    "ToolError",
]


class LayerdeckError(Exception):
    """Base of every error Layerdeck raises on purpose.

    ``message`` is the sentence to show the user (``str(self)`` unless a
    subclass overrides it); ``hint`` is an optional follow-up ("try ...").
    Subclasses with their own ``__init__`` need not pass ``hint``.
    """

    hint: str | None = None

    def __init__(self, *args: object, hint: str | None = None) -> None:
        super().__init__(*args)
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self)


class ReadError(LayerdeckError):
    """Reading a model, a GGUF file or a plan from disk failed."""


class EstimateError(LayerdeckError):
    """The memory estimate or its settings are invalid."""


class ExportError(LayerdeckError):
    """A placement cannot become llama.cpp arguments, a plan file, or a fit."""


class CommandError(LayerdeckError):
    """A llama.cpp command line cannot be parsed or quoted."""


class LaunchError(LayerdeckError):
    """Running llama-server or llama-bench failed."""


class DetectError(LayerdeckError):
    """Device detection failed."""


class ToolError(LayerdeckError):
    """Finding, building or running a llama.cpp tool failed."""
