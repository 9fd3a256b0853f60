"""Typed errors for GGUF files, each with a message a user can act on."""

from __future__ import annotations

from ..errors import ReadError


class GGUFError(ReadError, ValueError):
    """Base class: the file cannot be used as a GGUF model."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        self.path = path
        self.offset = offset
        super().__init__(message)


class NotGGUFError(GGUFError):
    """The file is not a GGUF file at all (wrong magic, another format)."""


class UnsupportedVersionError(GGUFError):
    """The GGUF version is one this reader does not handle."""


class TruncatedGGUFError(GGUFError):
    """The file ends before the structure it declares is complete."""


class CorruptGGUFError(GGUFError):
    """The file holds values that cannot be right (absurd counts, unknown types, duplicates)."""


class MissingShardError(GGUFError):
    """A shard of a split model is missing."""
