"""Models on a server: read a GGUF header (and a repository's list of quantizations) without downloading.

``hf://ORG/REPO/FILE.gguf``, ``ORG/REPO:QUANT`` (llama.cpp's ``-hf``) and http(s) URLs open as header-only
:class:`app.model.Model` objects (:func:`open_remote`); :mod:`.hub` lists a repository's GGUF files by
quantization. See ``docs/remote.md``.
"""

from .errors import (
    HeaderTooLargeError,
    NotAModelError,
    RangeNotSatisfiableError,
    RateLimitError,
    RedirectLoopError,
    RemoteAccessError,
    RemoteCancelled,
    RemoteError,
    RemoteNameError,
    RemoteNotFoundError,
    RemoteProtocolError,
    RemoteTimeoutError,
    RemoteTruncatedError,
    RemoteUnreachableError,
)
from .names import RemoteName, is_remote_name, model_arguments, parse_name
from .open import RemoteOptions, RemoteRead, open_remote, read_headers

__all__ = [
    "HeaderTooLargeError",
    "NotAModelError",
    "RangeNotSatisfiableError",
    "RateLimitError",
    "RedirectLoopError",
    "RemoteAccessError",
    "RemoteCancelled",
    "RemoteError",
    "RemoteName",
    "RemoteNameError",
    "RemoteNotFoundError",
    "RemoteOptions",
    "RemoteProtocolError",
    "RemoteRead",
    "RemoteTimeoutError",
    "RemoteTruncatedError",
    "RemoteUnreachableError",
    "is_remote_name",
    "model_arguments",
    "open_remote",
    "parse_name",
    "read_headers",
]
