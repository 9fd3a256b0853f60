"""Typed errors for models read over HTTP, each naming what went wrong and what to do."""

from __future__ import annotations

from ..errors import ReadError

__all__ = [
    "RemoteError",
    "RemoteNameError",
    "RemoteNotFoundError",
    "RemoteAccessError",
    "RateLimitError",
    "NotAModelError",
    "RemoteTruncatedError",
    "RemoteTimeoutError",
    "RemoteUnreachableError",
    "RedirectLoopError",
    "RangeNotSatisfiableError",
    "RemoteProtocolError",
    "HeaderTooLargeError",
    "RemoteCancelled",
    "DownloadError",
    "DownloadVerifyError",
]


class RemoteError(ReadError):
    """Reading a model's header over HTTP failed; ``url`` is what was asked for, ``status`` the HTTP status."""

    def __init__(self, message: str, url: str = "", status: int | None = None, hint: str | None = None) -> None:
        self.url = url
        self.status = status
        super().__init__(message, hint=hint)


class RemoteNameError(RemoteError):
    """The name is neither ``hf://ORG/REPO/FILE.gguf``, ``ORG/REPO[:QUANT]`` nor an http(s) URL."""


class RemoteNotFoundError(RemoteError):
    """404: no such repository, file or quantization (a typo?)."""


class RemoteAccessError(RemoteError):
    """401/403: the repository is gated or private, or the token is refused."""


class RateLimitError(RemoteError):
    """429: too many requests; ``retry_after`` is the number of seconds the server asks to wait (or None)."""

    def __init__(self, message: str, url: str = "", retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, url, 429)


class NotAModelError(RemoteError):
    """The server sent something that is not a GGUF file: an HTML page, JSON, a safetensors file..."""


class RemoteTruncatedError(RemoteError):
    """The file (or the server's answer) ends before the header does."""


class RemoteTimeoutError(RemoteError):
    """The server did not answer, or answered too slowly, within the time allowed."""


class RemoteUnreachableError(RemoteError):
    """The server cannot be reached (name not found, connection refused, TLS failure)."""


class RedirectLoopError(RemoteError):
    """Redirects that come back to a URL already visited, or more of them than any real server sends."""


class RangeNotSatisfiableError(RemoteError):
    """416: the server refused the byte range asked for."""


class RemoteProtocolError(RemoteError):
    """An answer that contradicts itself or the request (a wrong Content-Range, sizes that disagree)."""


class HeaderTooLargeError(RemoteError):
    """The header claims more bytes than any real model's header has: Layerdeck stops reading."""


class RemoteCancelled(RemoteError):
    """The user cancelled the read."""


class DownloadError(RemoteError):
    """A download cannot go on: no room on the disk, a file in the way, a folder that cannot be written."""


class DownloadVerifyError(DownloadError):
    """A downloaded file is not the one the repository lists: its size or its SHA-256 differs."""
