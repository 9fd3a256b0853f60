"""The Microsoft C runtime's argument rules: join an argv into a Windows command line and split one back.

Windows argument parsing (``parse_windows_cmdline``) follows the Microsoft C
runtime 2008+ rules (``"`` toggles quoting, ``""`` inside quotes is a literal
``"`` and stays in quotes, ``2n`` backslashes + ``"`` -> ``n`` backslashes and
a quote toggle, ``2n+1`` backslashes + ``"`` -> ``n`` backslashes and a
literal ``"``, other backslashes literal, only space and tab separate). The
program name (``first_is_program=True``) uses the simpler rule of
CreateProcess/the CRT: quotes toggle, no escapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import check_argv

__all__ = ["windows_quote_arg", "msvcrt_quote", "windows_argv_to_cmdline", "parse_windows_cmdline"]


def windows_quote_arg(arg: str) -> str:
    """One argument quoted for the Microsoft C runtime / CommandLineToArgvW (same text as ``subprocess.list2cmdline``)."""
    return msvcrt_quote(arg, wrap=arg == "" or " " in arg or "\t" in arg)


def msvcrt_quote(arg: str, *, wrap: bool) -> str:
    out = []
    bs = 0
    for c in arg:
        if c == "\\":
            bs += 1
        elif c == '"':
            out.append("\\" * (2 * bs + 1) + '"')
            bs = 0
        else:
            out.append("\\" * bs + c)
            bs = 0
    if wrap:
        return '"' + "".join(out) + "\\" * (2 * bs) + '"'
    return "".join(out) + "\\" * bs


def windows_argv_to_cmdline(argv: Sequence[str]) -> str:
    """Join ``argv`` into a Windows command line the C runtime splits back into ``argv``.

    Quotes an argument when it is empty or has a space or tab; doubles
    backslashes that precede a ``"`` (and the trailing ones when quoting);
    ``"`` becomes ``\\"``. ``argv[0]`` is quoted the same way, which matches
    the program-name rule as long as it has no ``"`` (Windows paths cannot)
    and does not end in ``\\``.
    """
    return " ".join(windows_quote_arg(a) for a in check_argv(argv))


def parse_windows_cmdline(s: str, *, first_is_program: bool = False, post2008: bool = True) -> list[str]:
    """Split a Windows command line as the Microsoft C runtime (2008+) and CommandLineToArgvW do.

    ``first_is_program=True`` reads the first word with the program-name rule
    (quotes toggle, backslashes are never escapes). ``post2008=False`` uses
    the older rule where ``""`` inside quotes gives ``"`` and *ends* the
    quoted part (pre-2008 msvcrt, older CommandLineToArgvW).
    """
    args: list[str] = []
    i, n = 0, len(s)
    if first_is_program:
        while i < n and s[i] in " \t":
            i += 1
        if i < n:
            buf, inq = [], False
            while i < n:
                c = s[i]
                if c == '"':
                    inq = not inq
                elif c in " \t" and not inq:
                    break
                else:
                    buf.append(c)
                i += 1
            args.append("".join(buf))
    while True:
        while i < n and s[i] in " \t":
            i += 1
        if i >= n:
            return args
        buf, inq = [], False
        while i < n:
            c = s[i]
            if c in " \t" and not inq:
                break
            if c == "\\":
                j = i
                while j < n and s[j] == "\\":
                    j += 1
                nb = j - i
                if j < n and s[j] == '"':
                    buf.append("\\" * (nb // 2))
                    if nb % 2:
                        buf.append('"')
                        i = j + 1
                    else:
                        i = j  # the quote is handled next, as a quote
                else:
                    buf.append("\\" * nb)
                    i = j
                continue
            if c == '"':
                if inq and i + 1 < n and s[i + 1] == '"':
                    buf.append('"')
                    i += 2
                    if not post2008:
                        inq = False
                    continue
                inq = not inq
                i += 1
                continue
            buf.append(c)
            i += 1
        args.append("".join(buf))
