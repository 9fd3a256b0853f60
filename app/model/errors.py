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


class FileAccessError(NotGGUFError):
    """The path cannot be read as a file: missing, a folder, a FIFO or device, no permission, a symlink loop,
    an I/O error, or the operating system refused to map it into memory."""


class UnsupportedVersionError(GGUFError):
    """The GGUF version is one this reader does not handle."""


class TruncatedGGUFError(GGUFError):
    """The file ends before the structure it declares is complete."""


class UnsupportedArchitectureError(GGUFError):
    """``general.architecture`` names a model the pinned llama.cpp cannot build: a name it does not know, or one
    in its table without a model (``gptj``). The file may be sound; llama.cpp refuses it all the same."""


class CorruptGGUFError(GGUFError):
    """The file holds values that cannot be right (absurd counts, unknown types, duplicates)."""


class MetadataError(CorruptGGUFError):
    """A metadata value has the wrong type or an impossible value (``key``, what was ``found``, what is ``wanted``)."""

    def __init__(self, message: str, path: str | None = None, key: str = "", found: str = "", wanted: str = "") -> None:
        self.key = key
        self.found = found
        self.wanted = wanted
        super().__init__(message, path)


class LayerCountError(CorruptGGUFError):
    """``{arch}.block_count`` does not match the layers in the tensor table (llama.cpp refuses such files)."""


class MissingShardError(GGUFError):
    """A shard of a split model is missing."""
