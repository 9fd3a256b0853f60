"""Which flags a llama.cpp build accepts, and in which spelling: the flag table against its ``--help``.

:mod:`app.llamacpp.capabilities` reads (and caches) the raw set of
spellings a binary's ``--help`` lists; this module answers for a table row,
so every spelling of an option counts (``-ngl``, ``--gpu-layers``,
``--n-gpu-layers``) and the builder writes the first one the build knows.
With :data:`~app.llamacpp.capabilities.UNKNOWN` (no binary known) every
flag is accepted in its canonical spelling.
"""

from __future__ import annotations

from ..llamacpp.capabilities import Capabilities
from .flags import get, spellings
from .spec import InexpressibleError

__all__ = ["accepts", "spelling", "need"]


def spelling(caps: Capabilities, name: str) -> str | None:
    """``name`` if this build accepts it, else the first other spelling of its option it accepts, or None."""
    get(name)  # a typo in Layerdeck's own flag names fails loudly
    for s in (name, *(x for x in spellings(name) if x != name)):
        if caps.has(s):
            return s
    return None


def accepts(caps: Capabilities, name: str) -> bool:
    return spelling(caps, name) is not None


def need(caps: Capabilities, name: str) -> str:
    """:func:`spelling`, or :class:`InexpressibleError` when the build lacks the option."""
    got = spelling(caps, name)
    if got is None:
        raise InexpressibleError(
            f"this llama.cpp build does not accept {name}, which this placement needs; update llama.cpp."
        )
    return got
