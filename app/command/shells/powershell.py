"""PowerShell (Windows PowerShell 5.1 and PowerShell 7.x): quote an argument list, read a pasted command back.

``quote_powershell``
``& 'C:\\path\\llama-server.exe' -m 'C:\\my models\\m.gguf' ...``: the
call operator and a single-quoted program; flags (``-x``/``--x-y``),
small canonical integers and plain identifiers/paths bare; everything
else single-quoted with every single-quote character doubled (PowerShell
also treats the typographic quotes U+2018..U+201B as single quotes, so
those are doubled too). Inside single quotes nothing is expanded
(``$``, backtick, ``%`` are literal). A string with newlines or tabs
(control characters that Windows PowerShell 5.1 has escapes for) is
written ``"a`nb"`` instead, so the command stays on one line.

How PowerShell hands those strings to a native program differs:

* ``legacy=False`` (default): PowerShell 7.3+ in ``Standard`` mode, and
  in ``Windows`` mode (the 7.3+ default on Windows) for ``.exe`` files.
  PowerShell passes each string as one argv element, building a correct
  Windows command line itself. What you see is what the program gets.
* ``legacy=True``: Windows PowerShell 5.1, PowerShell 7.0-7.2, or
  ``$PSNativeCommandArgumentPassing = 'Legacy'``. PowerShell builds the
  command line by pasting each string, wrapped in ``"..."`` only when it
  has whitespace outside ``"`` pairs, without escaping embedded ``"``;
  empty strings are dropped entirely; 5.1 does not double trailing
  backslashes before its closing quote. So for an argument that contains
  ``"``, or is empty, or has whitespace and ends in ``\\``, we emit the
  already-escaped Windows form inside the single quotes (for example
  ``a "b" c`` becomes ``'"a \\"b\\" c"'`` and the empty string becomes
  ``'""'``); PowerShell then passes it unchanged (its ``NeedQuotes`` check
  sees no whitespace outside quotes) and the program's C runtime decodes
  it. Other arguments are emitted exactly as in ``Standard`` mode. The
  legacy text must NOT be run in ``Standard`` mode (the program would see
  the backslashes and quotes), and vice versa. This relies on
  ``NeedQuotes`` ignoring a ``"`` that directly follows a backslash, as
  the binder does in every open-source release (6.0 onwards, forked from
  5.1); 5.1 itself could not be run here.
* PowerShell 7.3+ ``Windows`` mode still uses the legacy rules for
  ``.bat``/``.cmd``/``.js``/``.vbs``/``.wsf`` files and a few programs
  (cmd.exe, cscript, wscript, msiexec, find, sqlcmd); use ``legacy=True``
  for those.

The single argument ``--%`` cannot be passed as a plain string (the
binder drops any argument equal to it, quoted or not); it is emitted as
``@('--%')``, an array PowerShell enumerates, which is not dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from .common import CommandSyntaxError, QuoteError, check_argv, check_env, option_lines, surrogates
from .windows import msvcrt_quote, parse_windows_cmdline

__all__ = ["quote_powershell", "quote_powershell_word", "parse_powershell_command", "powershell_legacy_cmdline"]


_PS_SQ = "'\u2018\u2019\u201a\u201b"
_PS_DQ = '"\u201c\u201d\u201e'
_PS_BARE = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*|0|[1-9][0-9]{0,8}|[A-Za-z_][A-Za-z0-9_./\\:-]*", re.ASCII)


def _dotnet_space(c: str) -> bool:
    """``char.IsWhiteSpace``: PowerShell's legacy binder quotes an argument with such a character outside quotes."""
    return c in "\t\n\v\f\r\x85\xa0" or unicodedata.category(c) in ("Zs", "Zl", "Zp")


def _ps_need_quotes(s: str) -> bool:
    """PowerShell's ``NativeCommandParameterBinder.NeedQuotes`` (legacy native argument passing)."""
    need, following_backslash, quotes = False, False, 0
    for c in s:
        if c == '"' and not following_backslash:
            quotes += 1
        elif _dotnet_space(c) and quotes % 2 == 0:
            need = True
        following_backslash = c == "\\"
    return need


def powershell_legacy_cmdline(values: Sequence[str], *, double_trailing_backslashes: bool = True) -> str:
    """The argument part of the command line PowerShell's legacy mode builds from string values.

    A model of ``AppendOneNativeArgument``: empty strings are dropped; a
    value with whitespace outside ``"`` pairs is wrapped in ``"``; 7.0+ also
    doubles its trailing backslashes (``double_trailing_backslashes``;
    Windows PowerShell 5.1 does not); nothing else is escaped.
    """
    parts = []
    for v in values:
        if v == "":
            continue
        if _ps_need_quotes(v):
            tail = len(v) - len(v.rstrip("\\")) if double_trailing_backslashes else 0
            parts.append('"' + v + "\\" * tail + '"')
        else:
            parts.append(v)
    return " ".join(parts)


def _ps_literal(s: str) -> str:
    return "'" + "".join(c + c if c in _PS_SQ else c for c in s) + "'"


_PS_DQ_ESC = {
    "\a": "`a",
    "\b": "`b",
    "\f": "`f",
    "\n": "`n",
    "\r": "`r",
    "\t": "`t",
    "\v": "`v",
    "`": "``",
    "$": "`$",
    **{q: "`" + q for q in _PS_DQ},
}


def quote_powershell_word(s: str) -> str:
    """One PowerShell argument-mode token whose string value is ``s`` (bare when that is unambiguous).

    Single-quoted, except that a string with newlines, tabs and the other
    control characters Windows PowerShell 5.1 has backtick escapes for is
    written ``"double quoted"`` with `` `n `` etc., to stay on one line.
    """
    if "\0" in s:
        raise QuoteError(f"{s!r} contains a NUL character, which no program can receive")
    if surrogates(s):
        raise QuoteError(
            f"PowerShell cannot pass {s!r}: it contains bytes that are not UTF-8 (a name from another system)"
        )
    if _PS_BARE.fullmatch(s):
        return s
    controls = {c for c in s if ord(c) < 32 or ord(c) == 127}
    if controls and controls <= set(_PS_DQ_ESC):
        return '"' + "".join(_PS_DQ_ESC.get(c, c) for c in s) + '"'
    return _ps_literal(s)


def _ps_legacy_value(a: str) -> str:
    """The string to give PowerShell's legacy binder so that the program's C runtime decodes ``a``."""
    if a == "":
        return '""'
    spaced = any(_dotnet_space(c) or c.isspace() for c in a)
    if '"' in a or (spaced and a.endswith("\\")):
        return msvcrt_quote(a, wrap=spaced)
    return a


def quote_powershell(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, legacy: bool = False, multiline: bool = False
) -> str:
    """``argv`` as a PowerShell command: ``& 'program' args``; see the module docstring for ``legacy``.

    ``env`` becomes ``$env:NAME = 'value';`` statements first (they stay set
    in the session). ``multiline=True`` breaks lines with a trailing backtick.
    """
    argv = check_argv(argv)
    env_items = check_env(env)
    for a in argv:
        if surrogates(a):
            raise QuoteError(
                f"PowerShell cannot pass {a!r}: it contains bytes that are not UTF-8 (a name from another system)"
            )
    stmts = []
    for name, value in env_items:
        if value == "":
            raise QuoteError(f"PowerShell cannot set {name} to an empty string ($env:{name} = '' deletes it)")
        if surrogates(value):
            raise QuoteError(f"PowerShell cannot set {name} to {value!r}: it contains bytes that are not UTF-8")
        stmts.append(f"$env:{name} = {_ps_literal(value)}")
    words = ["& " + _ps_literal(argv[0])]
    for a in argv[1:]:
        if a == "--%":
            words.append("@('--%')")
        else:
            words.append(quote_powershell_word(_ps_legacy_value(a) if legacy else a))
    if multiline:
        body = " `\n  ".join(" ".join(line) for line in option_lines(words, argv))
        return "\n".join(stmts + [body])
    return "; ".join(stmts + [" ".join(words)])


_PS_BACKTICK = {"0": "\0", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _ps_space(c: str) -> bool:
    return c in " \t\f\v\x85\xa0" or unicodedata.category(c) == "Zs"


class _PSReader:
    """A small reader for the subset of PowerShell that a pasted native command uses."""

    def __init__(self, text: str):
        self.t = text
        self.i = 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.t[j] if j < len(self.t) else ""

    def error(self, what: str) -> CommandSyntaxError:
        return CommandSyntaxError(f"{what} at offset {self.i} is not supported")

    def skip_space(self) -> None:
        """Spaces, comments and backtick line continuations (a backtick, optional trailing blanks, newline)."""
        while self.i < len(self.t):
            c = self.t[self.i]
            if _ps_space(c):
                self.i += 1
            elif c == "`":
                m = re.match(r"`[ \t]*\r?\n", self.t[self.i :])
                if not m:
                    return
                self.i += m.end()
            elif c == "<" and self.peek(1) == "#":
                j = self.t.find("#>", self.i + 2)
                if j < 0:
                    raise CommandSyntaxError("unterminated <# comment")
                self.i = j + 2
            elif c == "#":
                m = re.compile(r"[^\r\n]*").match(self.t, self.i)
                assert m is not None  # matches the empty string at least
                self.i = m.end()
            else:
                return

    def at_end_of_statement(self) -> bool:
        return self.i >= len(self.t) or self.t[self.i] in ";\r\n"

    def single_quoted(self) -> str:
        out = []
        self.i += 1
        while True:
            if self.i >= len(self.t):
                raise CommandSyntaxError("unterminated single-quoted string")
            c = self.t[self.i]
            if c in _PS_SQ:
                if self.peek(1) and self.peek(1) in _PS_SQ:
                    out.append(self.peek(1))
                    self.i += 2
                    continue
                self.i += 1
                return "".join(out)
            out.append(c)
            self.i += 1

    def backtick(self) -> str:
        """Escape after a backtick at ``i`` (inside double quotes or a bare word)."""
        e = self.peek(1)
        if e == "":
            raise CommandSyntaxError("a backtick ends the text")
        if e == "u" and self.peek(2) == "{":
            m = re.match(r"`u\{([0-9A-Fa-f]{1,6})\}", self.t[self.i :])
            if not m:
                raise self.error("bad `u{...} escape")
            self.i += m.end()
            return chr(int(m.group(1), 16))
        self.i += 2
        return _PS_BACKTICK.get(e, e)

    def check_dollar(self) -> None:
        nxt = self.peek(1)
        if nxt and (nxt.isalnum() or nxt in "_{(:?$^"):
            raise self.error("a variable or sub-expression ($...)")

    def double_quoted(self) -> str:
        out = []
        self.i += 1
        while True:
            if self.i >= len(self.t):
                raise CommandSyntaxError("unterminated double-quoted string")
            c = self.t[self.i]
            if c in _PS_DQ:
                if self.peek(1) and self.peek(1) in _PS_DQ:
                    out.append(self.peek(1))
                    self.i += 2
                    continue
                self.i += 1
                return "".join(out)
            if c == "`":
                out.append(self.backtick())
                continue
            if c == "$":
                self.check_dollar()
            out.append(c)
            self.i += 1

    def bare(self) -> str:
        out = []
        while self.i < len(self.t):
            c = self.t[self.i]
            if _ps_space(c) or c in ";\r\n":
                break
            if c == "`":
                if re.match(r"`[ \t]*\r?\n", self.t[self.i :]):
                    break
                out.append(self.backtick())
                continue
            if c in _PS_SQ:
                out.append(self.single_quoted())
                continue
            if c in _PS_DQ:
                out.append(self.double_quoted())
                continue
            if c == "$":
                self.check_dollar()
            if c in "|&<>(){}":
                raise self.error(f"{c!r} (pipelines, redirections, sub-expressions and script blocks)")
            out.append(c)
            self.i += 1
        return "".join(out)

    def argument(self) -> list[str]:
        c = self.t[self.i]
        if c in _PS_SQ:
            return [self.single_quoted()]  # a token that starts with a quote ends at the closing quote
        if c in _PS_DQ:
            return [self.double_quoted()]
        if c == "@" and self.peek(1) == "(":
            return self.array()
        if c == "@" or c in "|&<>(){},":
            raise self.error(f"{c!r} at the start of an argument")
        if self.t.startswith("--%", self.i) and (
            self.i + 3 >= len(self.t) or _ps_space(self.t[self.i + 3]) or self.t[self.i + 3] in "\r\n;"
        ):
            raise self.error("the stop-parsing token --%")
        return [self.bare()]

    def array(self) -> list[str]:
        self.i += 2
        items: list[str] = []
        while True:
            self.skip_space()
            c = self.peek()
            if c == ")":
                self.i += 1
                return items
            if c and c in _PS_SQ:
                items.append(self.single_quoted())
            elif c and c in _PS_DQ:
                items.append(self.double_quoted())
            else:
                raise self.error("only quoted strings inside @(...)")
            self.skip_space()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != ")":
                raise self.error("expected ',' or ')' in @(...)")

    def env_assignment(self) -> tuple[str, str] | None:
        m = re.match(r"\$(?:env:([A-Za-z_][A-Za-z0-9_]*)|\{env:([A-Za-z_][A-Za-z0-9_]*)\})", self.t[self.i :], re.I)
        if not m:
            return None
        self.i += m.end()
        name = m.group(1) or m.group(2)
        self.skip_space()
        if self.peek() != "=":
            raise self.error(f"$env:{name} without '='")
        self.i += 1
        self.skip_space()
        c = self.peek()
        if c and c in _PS_SQ:
            value = self.single_quoted()
        elif c and c in _PS_DQ:
            value = self.double_quoted()
        else:
            m = re.match(r"[0-9]+(?![^\s;])", self.t[self.i :])
            if not m:
                raise self.error(f"the value of $env:{name} (use a quoted string)")
            value = m.group(0)
            self.i += m.end()
        self.skip_space()
        if not self.at_end_of_statement():
            raise self.error(f"text after $env:{name} = ...")
        return name, value


def parse_powershell_command(text: str, *, legacy: bool = False) -> tuple[dict[str, str], list[str]]:
    """``(env, argv)`` that a pasted PowerShell command gives the program.

    Reads ``$env:NAME = 'value'`` statements (``;`` or newline separated),
    then ``& 'program' args`` (``&`` optional), with single-quoted strings
    (``''`` and the typographic quotes), double-quoted strings (backtick
    escapes, ``""``), bare words with backtick escapes, ``@('...')`` arrays,
    comments and backtick line continuations (tolerating blanks after the
    backtick, which real PowerShell does not). Variables, sub-expressions,
    pipelines, redirections and ``--%`` raise :class:`CommandSyntaxError`.

    ``legacy=False``: each string value is one argv element (PowerShell 7.3+
    ``Standard``/``Windows`` mode for ``.exe``). ``legacy=True``: the values
    go through :func:`powershell_legacy_cmdline` and the C runtime's rules,
    as Windows PowerShell 5.1 and 7.0-7.2 do. Bare numbers are kept as
    typed (PowerShell itself may rewrite forms like ``0x10`` or ``1kb``).
    """
    r = _PSReader(text)
    env: dict[str, str] = {}
    argv: list[str] | None = None
    while True:
        r.skip_space()
        while r.peek() and r.peek() in ";\r\n":
            r.i += 1
            r.skip_space()
        if r.i >= len(r.t):
            break
        if argv is not None:
            raise r.error("a second statement after the command")
        a = r.env_assignment()
        if a:
            env[a[0]] = a[1]
            continue
        if r.peek() == "&" and r.peek(1) != "&":
            r.i += 1
            r.skip_space()
            if r.at_end_of_statement():
                raise r.error("'&' without a program")
        if r.peek() == "$":
            raise r.error("a variable as the program")
        program = r.argument()
        if len(program) != 1:
            raise r.error("an array as the program")
        values: list[str] = []
        while True:
            r.skip_space()
            if r.at_end_of_statement():
                break
            values.extend(r.argument())
        args = parse_windows_cmdline(powershell_legacy_cmdline(values)) if legacy else values
        argv = program + args
    if argv is None:
        raise CommandSyntaxError("no command found")
    return env, argv
