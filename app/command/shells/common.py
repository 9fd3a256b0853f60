"""What the shell modules share: the error for unreadable pasted text, argv/env checks, multi-line layout."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ...errors import CommandError

__all__ = [
    "CommandSyntaxError",
    "QuoteError",
    "ENV_NAME",
    "check_argv",
    "check_env",
    "is_option",
    "option_lines",
    "surrogates",
]


class CommandSyntaxError(CommandError, ValueError):
    """Pasted text is not one plain command this module can read (the message says what and where)."""


class QuoteError(CommandError, ValueError):
    """An argument (or variable) cannot be written for this shell or file format; the message says which and why."""


def surrogates(s: str) -> list[str]:
    """The lone surrogates in ``s``: ``\udc80``..``\udcff`` stand for bytes that are not UTF-8 (a file name
    read with ``surrogateescape``); others cannot be written anywhere."""
    return [c for c in s if "\ud800" <= c <= "\udfff"]


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def check_argv(argv: Sequence[str]) -> list[str]:
    argv = list(argv)
    if not argv:
        raise QuoteError("argv is empty: it needs at least the program")
    for a in argv:
        if not isinstance(a, str):
            raise TypeError(f"argv elements must be str, got {type(a).__name__}: {a!r}")
        if "\0" in a:
            raise QuoteError(f"argument {a!r} contains a NUL character, which no program can receive")
    return argv


def check_env(env: Mapping[str, str] | None) -> list[tuple[str, str]]:
    items = list((env or {}).items())
    for name, value in items:
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise QuoteError(f"environment variable name {name!r} is not [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(value, str):
            raise TypeError(f"environment value for {name} must be str, got {type(value).__name__}")
        if "\0" in value:
            raise QuoteError(f"environment value for {name} contains a NUL character")
    return items


def is_option(a: str) -> bool:
    return len(a) > 1 and a[0] == "-" and (a[1].isalpha() or a[1] == "-")


def option_lines(words: list[str], raw: list[str]) -> list[list[str]]:
    """Split quoted words into lines for a multi-line layout: the program, then one line per option and its values."""
    lines: list[list[str]] = [[words[0]]]
    for w, a in zip(words[1:], raw[1:], strict=True):
        if is_option(a) or len(lines) == 1:
            lines.append([w])
        else:
            lines[-1].append(w)
    return lines
