"""Quote an argument list for bash/zsh, PowerShell or cmd.exe, and read pasted commands back.

Every ``quote_*`` function returns text that, pasted into that shell, starts
the program with exactly ``argv`` (checked against a real bash in the tests;
PowerShell and cmd.exe are checked against models of their documented
parsers, in this module, because neither runs here). Every ``parse_*``
function reads such text (or a command a person wrote) back into
``(env, argv)``.

Summary of what each quoter emits
---------------------------------
``quote_posix``  (bash, zsh)
    Safe words bare (``[A-Za-z0-9_@%+=:,./-]``, not starting with ``=``,
    which zsh expands); otherwise ``'single quoted'``; a word that contains
    ``'`` but none of ``$ ` \\ " !`` is ``"double quoted"``; other words with
    ``'`` are spliced as ``'it'\\''s'``; a word with control characters
    (newline, tab, ...) becomes ANSI-C ``$'a\\nb'`` so the command stays on
    one line (survives pasting into an interactive shell, where a literal tab
    would trigger completion and history expansion is active). ``!`` is only
    ever emitted inside single quotes or ``$'...'``, where interactive
    bash's history expansion does not touch it. The program word is also
    quoted if it contains ``=`` (else bash reads ``NAME=value`` as an
    assignment) or is a reserved word.

``quote_powershell``  (Windows PowerShell 5.1 and PowerShell 7.x)
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

``quote_cmd``  (cmd.exe prompt, or a ``.bat``/``.cmd`` file with ``batch_file=True``)
    Each argument gets the C runtime quoting (``windows_argv_to_cmdline``
    rules; arguments with cmd metacharacters ``^ & | < > ( )`` or
    whitespace are put in double quotes). Then the cmd layer: cmd toggles its
    own "in quotes" state at every ``"`` (including the ``\\"`` escapes the C
    runtime needs); wherever cmd is outside quotes, metacharacters get a
    ``^``. ``%``: in a batch file every ``%`` becomes ``%%``. At the
    interactive prompt ``%`` cannot be escaped inside quotes and ``%%`` does
    not work; an undefined variable is left alone there, so each ``%`` is
    emitted outside cmd's quotes and immediately followed by a ``^`` (either
    ``%^x``, the caret escaping the next character, or ``%^%``/``%^&``):
    every possible ``%name%`` then starts with ``^``, no such variable
    exists, percent expansion leaves the text alone, and the caret is removed
    afterwards. An argument containing ``%`` is therefore never inside cmd
    quotes; its ``"`` are written ``^"`` (literal for cmd, still a quote for
    the program). With ``delayed_expansion=True`` (``cmd /V:ON`` or
    ``setlocal EnableDelayedExpansion``) and any ``!`` among the arguments,
    every ``!`` and ``^`` in the arguments gets one more caret for the
    delayed-expansion pass (which strips carets even inside quotes), as in
    the known idioms ``"Hi^!"`` / ``Hi^^!``. Newlines and carriage returns
    cannot be passed through cmd at all (ValueError).

    Environment variables are emitted as ``set NAME=value`` lines before the
    command (``set`` changes the session, as ``$env:`` does in PowerShell).

    The cmd behaviour this relies on (phases as described by the dbenham/jeb
    analysis of cmd's parser: percent expansion, then carets/quotes/
    separators, then delayed expansion; an undefined ``%var%`` left alone at
    the prompt; cmd passing the argument text to the program with quotes
    kept and carets removed) is modelled by :func:`parse_cmd_command` and the
    tests round-trip through that model with every possible ``%name%`` and
    ``!name!`` defined; cmd.exe itself could not be run here. The one
    assumption beyond it: no environment variable name starts with ``^``.

Windows argument parsing (``parse_windows_cmdline``) follows the Microsoft C
runtime 2008+ rules (``"`` toggles quoting, ``""`` inside quotes is a literal
``"`` and stays in quotes, ``2n`` backslashes + ``"`` -> ``n`` backslashes and
a quote toggle, ``2n+1`` backslashes + ``"`` -> ``n`` backslashes and a
literal ``"``, other backslashes literal, only space and tab separate). The
program name (``first_is_program=True``) uses the simpler rule of
CreateProcess/the CRT: quotes toggle, no escapes.

Parser limits (all raise :class:`CommandSyntaxError` unless said otherwise):
pipelines, redirections, command/sub-expression substitution and more than
one command are rejected. Variable references are not expanded:
``$HOME``/``~``/globs in POSIX text and ``%NAME%`` in cmd text are kept as
typed (as the prompt does for an undefined variable); ``$var`` inside
PowerShell double quotes or bare words is rejected.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CommandSyntaxError",
    "quote_posix",
    "quote_posix_word",
    "split_posix",
    "parse_posix_command",
    "quote_powershell",
    "quote_powershell_word",
    "parse_powershell_command",
    "powershell_legacy_cmdline",
    "quote_cmd",
    "parse_cmd_command",
    "windows_quote_arg",
    "windows_argv_to_cmdline",
    "parse_windows_cmdline",
]


class CommandSyntaxError(ValueError):
    """Pasted text is not one plain command this module can read (the message says what and where)."""


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _check_argv(argv: Sequence[str]) -> list[str]:
    argv = list(argv)
    if not argv:
        raise ValueError("argv is empty: it needs at least the program")
    for a in argv:
        if not isinstance(a, str):
            raise TypeError(f"argv elements must be str, got {type(a).__name__}: {a!r}")
        if "\0" in a:
            raise ValueError(f"argument {a!r} contains a NUL character, which no program can receive")
    return argv


def _check_env(env: Mapping[str, str] | None) -> list[tuple[str, str]]:
    items = list((env or {}).items())
    for name, value in items:
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"environment variable name {name!r} is not [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(value, str):
            raise TypeError(f"environment value for {name} must be str, got {type(value).__name__}")
        if "\0" in value:
            raise ValueError(f"environment value for {name} contains a NUL character")
    return items


def _is_option(a: str) -> bool:
    return len(a) > 1 and a[0] == "-" and (a[1].isalpha() or a[1] == "-")


def _groups(words: list[str], raw: list[str]) -> list[list[str]]:
    """Split quoted words into lines for a multi-line layout: the program, then one line per option and its values."""
    lines: list[list[str]] = [[words[0]]]
    for w, a in zip(words[1:], raw[1:], strict=True):
        if _is_option(a) or len(lines) == 1:
            lines.append([w])
        else:
            lines[-1].append(w)
    return lines


# --------------------------------------------------------------------------- POSIX (bash, zsh)

_POSIX_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+", re.ASCII)
_POSIX_RESERVED = frozenset(
    "! case coproc do done elif else esac fi for function if in select then until while { } time [[ ]] "
    "foreach end repeat nocorrect noglob builtin command exec - declare export local readonly typeset".split()
)
_ANSI_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def _has_control(s: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in s)


def _ansi_c_quote(s: str) -> str:
    out = ["$'"]
    for c in s:
        if c in _ANSI_NAMED:
            out.append(_ANSI_NAMED[c])
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\x{ord(c):02x}")  # bash and zsh read at most two hex digits
        else:
            out.append(c)
    out.append("'")
    return "".join(out)


def quote_posix_word(s: str, *, command: bool = False) -> str:
    """One word for bash/zsh. ``command=True`` for the program word (assignment-like and reserved words get quoted)."""
    if "\0" in s:
        raise ValueError(f"{s!r} contains a NUL character")
    if s == "":
        return "''"
    if _POSIX_SAFE.fullmatch(s) and s[0] != "=" and not (command and ("=" in s or s in _POSIX_RESERVED)):
        return s
    if _has_control(s):
        return _ansi_c_quote(s)
    if "'" not in s:
        return f"'{s}'"
    if not any(c in s for c in "$`\\\"!"):
        return f'"{s}"'
    return "\\'".join(f"'{part}'" if part else "" for part in s.split("'"))


def quote_posix(argv: Sequence[str], *, env: Mapping[str, str] | None = None, multiline: bool = False) -> str:
    """``argv`` (and optional ``NAME=value`` prefixes) as one bash/zsh command line.

    ``multiline=True`` puts each option and its values on its own line, joined
    with `` \\`` + newline (a line continuation bash and zsh remove).
    """
    argv = _check_argv(argv)
    env_items = _check_env(env)
    prefix = [f"{name}={quote_posix_word(value)}" for name, value in env_items]
    words = [quote_posix_word(argv[0], command=True)] + [quote_posix_word(a) for a in argv[1:]]
    if not multiline:
        return " ".join(prefix + words)
    lines = _groups(words, argv)
    lines[0] = prefix + lines[0]
    return " \\\n  ".join(" ".join(line) for line in lines)


@dataclass
class _Word:
    text: str
    lit: int  # how many leading characters came from plain (unquoted, unescaped) input


_ANSI_C_ESC = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
               "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _read_ansi_c(text: str, i: int) -> tuple[str, int]:
    """Body of ``$'...'`` starting at ``i`` (just after the opening quote); returns (value, index after the closing quote)."""
    out = []
    n = len(text)
    while True:
        if i >= n:
            raise CommandSyntaxError("unterminated $'...' string")
        c = text[i]
        if c == "'":
            return "".join(out), i + 1
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise CommandSyntaxError("unterminated $'...' string")
        e = text[i + 1]
        i += 2
        if e in _ANSI_C_ESC:
            out.append(_ANSI_C_ESC[e])
        elif e in "01234567":
            m = re.match(r"[0-7]{0,2}", text[i:])
            out.append(chr(int(e + m.group(0), 8) & 0xFF))
            i += m.end()
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            m = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", text[i:])
            if not m:
                out.append("\\" + e)
            else:
                out.append(chr(int(m.group(0), 16)))
                i += m.end()
        elif e == "c" and i < n:
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)


def _posix_tokens(text: str) -> list[_Word | str]:
    """Words and the separators ``;``, ``&&`` and newline, as bash reads them (no expansions)."""
    out: list[_Word | str] = []
    buf: list[str] = []
    lit: int | None = None
    in_word = False
    i, n = 0, len(text)

    def quoted() -> None:
        nonlocal lit, in_word
        if lit is None:
            lit = len(buf)
        in_word = True

    def end_word() -> None:
        nonlocal buf, lit, in_word
        if in_word:
            s = "".join(buf)
            out.append(_Word(s, len(s) if lit is None else lit))
        buf, lit, in_word = [], None, False

    while i < n:
        c = text[i]
        if c == "\\":
            if text.startswith("\n", i + 1):
                i += 2
                continue
            if text.startswith("\r\n", i + 1):
                i += 3
                continue
            quoted()
            if i + 1 >= n:
                buf.append("\\")
                i += 1
            else:
                buf.append(text[i + 1])
                i += 2
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        if c == "\r" and text.startswith("\n", i + 1):
            i += 1
            continue
        if c == "\n":
            end_word()
            out.append("\n")
            i += 1
            continue
        if c == "#" and not in_word:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise CommandSyntaxError(f"unterminated single quote at offset {i}")
            quoted()
            buf.append(text[i + 1:j])
            i = j + 1
            continue
        if c == "$" and text.startswith("'", i + 1):
            quoted()
            value, i = _read_ansi_c(text, i + 2)
            buf.append(value)
            continue
        if c == "$" and text.startswith('"', i + 1):
            i += 1  # $"..." (locale translation) reads like "..."
            continue
        if c == "$" and text.startswith("(", i + 1):
            raise CommandSyntaxError(f"command substitution $( ... ) at offset {i} is not supported")
        if c == "`":
            raise CommandSyntaxError(f"command substitution `...` at offset {i} is not supported")
        if c == '"':
            quoted()
            i += 1
            while True:
                if i >= n:
                    raise CommandSyntaxError("unterminated double quote")
                d = text[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        buf.append(text[i + 1])
                    i += 2
                    continue
                if d == "`" or (d == "$" and text.startswith("(", i + 1)):
                    raise CommandSyntaxError(f"command substitution at offset {i} is not supported")
                buf.append(d)
                i += 1
            continue
        if c in ";&|<>()":
            end_word()
            if text.startswith("&&", i):
                out.append("&&")
                i += 2
                continue
            if c == ";" and not text.startswith(";;", i):
                out.append(";")
                i += 1
                continue
            op = text[i:i + 2] if text[i:i + 2] in ("||", ">>", "<<", ">&", "<&", "&>") else c
            raise CommandSyntaxError(f"shell operator {op!r} at offset {i} is not supported (one plain command only)")
        if c == "{":
            m = re.match(r"\{[^\s{}'\"]*(?:,|\.\.)[^\s{}'\"]*\}", text[i:])
            if m:
                raise CommandSyntaxError(f"brace expansion {m.group(0)!r} at offset {i} is not supported; quote it")
        buf.append(c)
        in_word = True
        i += 1
    end_word()
    return out


def split_posix(text: str) -> list[str]:
    """Words of one bash/zsh command (like ``shlex.split(text, posix=True)``), plus ``\\``-newline continuations.

    Also reads ``$'...'`` strings. Unquoted newlines count as spaces here;
    ``;``, ``&&``, pipes and redirections raise :class:`CommandSyntaxError`.
    Expansions (``$VAR``, ``~``, globs) are not performed: the text is kept.
    """
    words = []
    for tok in _posix_tokens(text):
        if isinstance(tok, _Word):
            words.append(tok.text)
        elif tok != "\n":
            raise CommandSyntaxError(f"{tok!r} separates two commands; split_posix reads one")
    return words


def _assignment(w: _Word) -> tuple[str, str] | None:
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", w.text, re.ASCII)
    if m and m.end() <= w.lit:
        return m.group(1), w.text[m.end():]
    return None


def parse_posix_command(text: str) -> tuple[dict[str, str], list[str]]:
    """``(env, argv)`` of one pasted bash/zsh command.

    ``env`` collects ``NAME=value`` prefixes of the command, ``env NAME=value
    prog ...``, and ``export NAME=value`` statements before it (separated by
    ``;``, ``&&`` or newlines). A plain ``NAME=value`` statement sets an
    unexported shell variable the program does not see, so it is skipped.
    """
    statements: list[list[_Word]] = [[]]
    for tok in _posix_tokens(text):
        if isinstance(tok, _Word):
            statements[-1].append(tok)
        else:
            statements.append([])
    env: dict[str, str] = {}
    argv: list[str] | None = None
    for words in statements:
        if not words:
            continue
        if argv is not None:
            raise CommandSyntaxError(f"more than one command: {' '.join(w.text for w in words)!r} follows the program")
        if words[0].text == "export" and words[0].lit == 6:
            for w in words[1:]:
                a = _assignment(w)
                if a:
                    env[a[0]] = a[1]
                elif not _ENV_NAME.fullmatch(w.text):
                    raise CommandSyntaxError(f"export {w.text!r} is not NAME=value")
            continue
        k = 0
        local: dict[str, str] = {}
        while k < len(words) and (a := _assignment(words[k])):
            local[a[0]] = a[1]
            k += 1
        if k == len(words):
            continue  # shell variables only: not exported to the program
        rest = words[k:]
        if rest[0].text in ("env", "/usr/bin/env", "/bin/env") and rest[0].lit == len(rest[0].text):
            m = 1
            while m < len(rest) and (a := _assignment(rest[m])):
                local[a[0]] = a[1]
                m += 1
            if m < len(rest) and rest[m].text.startswith("-"):
                raise CommandSyntaxError(f"env option {rest[m].text!r} is not supported")
            rest = rest[m:]
            if not rest:
                raise CommandSyntaxError("env without a program")
        env.update(local)
        argv = [w.text for w in rest]
    if argv is None:
        raise CommandSyntaxError("no command found")
    return env, argv


# --------------------------------------------------------------------------- Windows C runtime rules


def windows_quote_arg(arg: str) -> str:
    """One argument quoted for the Microsoft C runtime / CommandLineToArgvW (same text as ``subprocess.list2cmdline``)."""
    return _msvcrt_quote(arg, wrap=arg == "" or " " in arg or "\t" in arg)


def _msvcrt_quote(arg: str, *, wrap: bool) -> str:
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
    return " ".join(windows_quote_arg(a) for a in _check_argv(argv))


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


# --------------------------------------------------------------------------- PowerShell

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


_PS_DQ_ESC = {"\a": "`a", "\b": "`b", "\f": "`f", "\n": "`n", "\r": "`r", "\t": "`t", "\v": "`v",
              "`": "``", "$": "`$", **{q: "`" + q for q in _PS_DQ}}


def quote_powershell_word(s: str) -> str:
    """One PowerShell argument-mode token whose string value is ``s`` (bare when that is unambiguous).

    Single-quoted, except that a string with newlines, tabs and the other
    control characters Windows PowerShell 5.1 has backtick escapes for is
    written ``"double quoted"`` with `` `n `` etc., to stay on one line.
    """
    if "\0" in s:
        raise ValueError(f"{s!r} contains a NUL character")
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
        return _msvcrt_quote(a, wrap=spaced)
    return a


def quote_powershell(argv: Sequence[str], *, env: Mapping[str, str] | None = None, legacy: bool = False,
                     multiline: bool = False) -> str:
    """``argv`` as a PowerShell command: ``& 'program' args``; see the module docstring for ``legacy``.

    ``env`` becomes ``$env:NAME = 'value';`` statements first (they stay set
    in the session). ``multiline=True`` breaks lines with a trailing backtick.
    """
    argv = _check_argv(argv)
    env_items = _check_env(env)
    stmts = []
    for name, value in env_items:
        if value == "":
            raise ValueError(f"PowerShell cannot set {name} to an empty string ($env:{name} = '' deletes it)")
        stmts.append(f"$env:{name} = {_ps_literal(value)}")
    words = ["& " + _ps_literal(argv[0])]
    for a in argv[1:]:
        if a == "--%":
            words.append("@('--%')")
        else:
            words.append(quote_powershell_word(_ps_legacy_value(a) if legacy else a))
    if multiline:
        body = " `\n  ".join(" ".join(line) for line in _groups(words, argv))
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
                m = re.match(r"`[ \t]*\r?\n", self.t[self.i:])
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
            m = re.match(r"`u\{([0-9A-Fa-f]{1,6})\}", self.t[self.i:])
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
                if re.match(r"`[ \t]*\r?\n", self.t[self.i:]):
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
        if self.t.startswith("--%", self.i) and (self.i + 3 >= len(self.t) or _ps_space(self.t[self.i + 3])
                                                  or self.t[self.i + 3] in "\r\n;"):
            raise self.error("the stop-parsing token --%")
        return [self.bare()]

    def array(self) -> list[str]:
        self.i += 2
        items = []
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
        m = re.match(r"\$(?:env:([A-Za-z_][A-Za-z0-9_]*)|\{env:([A-Za-z_][A-Za-z0-9_]*)\})", self.t[self.i:], re.I)
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
            m = re.match(r"[0-9]+(?![^\s;])", self.t[self.i:])
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


# --------------------------------------------------------------------------- cmd.exe

_CMD_META = frozenset("^&|<>()")
_CMD_BARE_PROGRAM = re.compile(r"[A-Za-z0-9_.\\:+-]+", re.ASCII)


def _cmd_check(s: str, what: str) -> None:
    for bad, name in (("\n", "a newline"), ("\r", "a carriage return"), ("\x1a", "Ctrl-Z")):
        if bad in s:
            raise ValueError(f"cmd.exe cannot pass {what} {s!r}: it contains {name}")


def _cmd_arg_seq(a: str, delayed: bool) -> list[tuple[str, str | None]]:
    """C runtime form of one argument as (character, quote role) pairs; roles: open, close, esc (a ``\\"``)."""
    wrap = a == "" or '"' in a or any(c.isspace() or c in _CMD_META for c in a)
    seq: list[tuple[str, str | None]] = [('"', "open")] if wrap else []
    bs = 0
    for c in a:
        if c == "\\":
            bs += 1
            continue
        if c == '"':
            seq += [("\\", None)] * (2 * bs + 1) + [('"', "esc")]
        else:
            seq += [("\\", None)] * bs
            if delayed and c in "^!":
                seq.append(("^", None))  # one more caret for the delayed-expansion pass
            seq.append((c, None))
        bs = 0
    if wrap:
        seq += [("\\", None)] * (2 * bs) + [('"', "close")]
    else:
        seq += [("\\", None)] * bs
    return seq


def _cmd_encode(seq: list[tuple[str, str | None]], *, batch: bool, break_at: set[int] = frozenset()) -> str:
    """Phase-2 (and phase-1) input whose output is the characters of ``seq``; see the module docstring."""
    n = len(seq)
    pct_after = [False] * n  # for each quote: is there a % before the next quote?
    seen = False
    for k in range(n - 1, -1, -1):
        c = seq[k][0]
        if c == '"':
            pct_after[k], seen = seen, False
        elif c == "%":
            seen = True
    out: list[str] = []
    inside = False
    esc_next = False  # interactive: the character after a % must carry a caret
    for k, (c, role) in enumerate(seq):
        if c == '"':
            if inside:
                out.append('"')
                inside = False
            else:
                enter = role in ("open", "esc") and not esc_next and (batch or not pct_after[k])
                out.append('"' if enter else '^"')
                inside = enter
            esc_next = False
        elif c == "%":
            if batch:
                out.append("%%")
            else:
                assert not inside
                out.append(("^" if esc_next else "") + "%")
                esc_next = True
        elif role == "sep":
            assert not inside
            if esc_next:
                out.append("^ ")
            elif k in break_at:
                out.append(" ^\n  ")
            else:
                out.append(" ")
            esc_next = False
        elif inside:
            out.append(c)
        else:
            out.append("^" + c if c in _CMD_META or esc_next else c)
            esc_next = False
    return "".join(out)


def quote_cmd(argv: Sequence[str], *, env: Mapping[str, str] | None = None, batch_file: bool = False,
              delayed_expansion: bool = False, multiline: bool = False) -> str:
    """``argv`` as a cmd.exe command line (``batch_file=True``: a line of a .bat/.cmd file); see the module docstring.

    Raises ValueError for what cmd.exe cannot carry: newlines, carriage
    returns and Ctrl-Z anywhere; ``"`` in the program; ``%`` in a program
    path with spaces at the interactive prompt; ``!`` in the program with
    delayed expansion; an empty environment value (``set NAME=`` deletes).
    """
    argv = _check_argv(argv)
    env_items = _check_env(env)
    for a in argv:
        _cmd_check(a, "argument")
    prog = argv[0]
    if '"' in prog:
        raise ValueError(f"program {prog!r} contains '\"', which a Windows path cannot")
    if delayed_expansion and "!" in prog:
        raise ValueError(f"program {prog!r} contains '!', which delayed expansion would eat")
    lines = []
    for name, value in env_items:
        _cmd_check(value, f"the value of {name}")
        if value == "":
            raise ValueError(f"cmd.exe cannot set {name} to an empty string (set {name}= deletes it)")
        token = f"{name}={value}"
        delayed = delayed_expansion and "!" in token
        seq = [(c, None) for c in token]
        if delayed:
            seq = [(x, None) for c in token for x in (("^", c) if c in "^!" else (c,))]
        lines.append("set " + _cmd_encode(seq, batch=batch_file))
    seq: list[tuple[str, str | None]]
    if _CMD_BARE_PROGRAM.fullmatch(prog) and not prog.startswith("-"):
        seq = [(c, None) for c in prog]
    else:
        if not batch_file and "%" in prog:
            if any(c.isspace() or c in ",;=" for c in prog):
                raise ValueError(f"program {prog!r} has '%' and spaces: cmd.exe's prompt cannot quote that "
                                 "(use batch_file=True)")
            seq = [(c, None) for c in prog]
        else:
            seq = [('"', "open")] + [(c, None) for c in prog] + [('"', "close")]
    delayed = delayed_expansion and any("!" in a for a in argv[1:])
    break_at = set()
    for a in argv[1:]:
        if multiline and (_is_option(a) or len(break_at) == 0):
            break_at.add(len(seq))
        seq.append((" ", "sep"))
        seq += _cmd_arg_seq(a, delayed)
    lines.append(_cmd_encode(seq, batch=batch_file, break_at=break_at))
    return "\n".join(lines)


def _cmd_percent(line: str, *, batch: bool, environ: Mapping[str, str] | None) -> str:
    """Phase 1 (percent expansion) of one physical line."""
    lookup = {k.upper(): v for k, v in environ.items()} if environ is not None else None
    out = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if batch and line.startswith("%", i + 1):
            out.append("%")
            i += 2
            continue
        if batch and i + 1 < n and (line[i + 1].isdigit() or line[i + 1] in "*~"):
            raise CommandSyntaxError(f"batch argument reference {line[i:i + 2]!r} at offset {i} is not supported")
        j = line.find("%", i + 1)
        if j < 0:
            if batch and lookup is not None:
                i += 1  # a lone % is dropped in a batch file
                continue
            out.append(line[i:])
            break
        var = line[i + 1:j].split(":", 1)[0]
        if lookup is not None and var and var.upper() in lookup:
            out.append(lookup[var.upper()])  # (substring/replace modifiers are not modelled)
            i = j + 1
        elif batch:
            if lookup is None:
                out.append(line[i:j + 1])  # unknown environment: keep the reference as typed
            i = j + 1
        else:
            out.append("%")  # the prompt leaves an undefined variable alone; rescan after this %
            i += 1
    return "".join(out)


def _cmd_delayed(token: str, environ: Mapping[str, str] | None) -> str:
    """Phase 5 (delayed expansion) of one token: only when it contains '!'; carets escape even inside quotes."""
    if "!" not in token:
        return token
    lookup = {k.upper(): v for k, v in (environ or {}).items()}
    out = []
    i, n = 0, len(token)
    while i < n:
        c = token[i]
        if c == "^":
            if i + 1 < n:
                out.append(token[i + 1])
            i += 2
        elif c == "!":
            j = token.find("!", i + 1)
            if j < 0:
                i += 1  # a lone ! is removed
            else:
                out.append(lookup.get(token[i + 1:j].upper(), ""))
                i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _cmd_phase2(text: str) -> list[str]:
    """Caret, quote and separator handling: the commands of the text (carets removed, quotes kept)."""
    cmds: list[str] = []
    buf: list[str] = []
    inside = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            cmds.append("".join(buf))
            buf, inside = [], False
            i += 1
            continue
        if inside:
            if c == '"':
                inside = False
            buf.append(c)
            i += 1
            continue
        if c == "^":
            if i + 1 >= n:
                i += 1
                continue
            if text[i + 1] == "\n":  # continuation: the next line's first character is taken literally
                if i + 2 < n:
                    buf.append(text[i + 2])
                i += 3
                continue
            buf.append(text[i + 1])
            i += 2
            continue
        if c == '"':
            inside = True
            buf.append(c)
            i += 1
            continue
        if c == "&":
            cmds.append("".join(buf))
            buf = []
            i += 2 if text.startswith("&&", i) else 1
            continue
        if c in "|<>":
            raise CommandSyntaxError(f"{c!r} at offset {i} (pipes and redirections) is not supported")
        buf.append(c)
        i += 1
    cmds.append("".join(buf))
    return cmds


def parse_cmd_command(text: str, *, batch_file: bool = False, delayed_expansion: bool = False,
                      environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """``(env, argv)`` of a pasted cmd.exe command (or batch-file lines with ``batch_file=True``).

    Models cmd's phases: percent expansion per physical line (``%%`` -> ``%``
    in a batch file; ``%NAME%`` is replaced only when ``environ`` is given
    and has NAME, otherwise kept as typed); carets, quotes, ``^``-newline
    continuations and ``&``/``&&``/newline command separators; delayed
    expansion of ``!`` (only with ``delayed_expansion=True``); then
    ``set NAME=value`` / ``set "NAME=value"`` commands go to ``env`` (note:
    ``set A=1 && prog`` gives A the value ``"1 "``, as cmd does) and the one
    other command is split with :func:`parse_windows_cmdline`.
    """
    text = text.replace("\r\n", "\n").replace("\r", "")
    expanded = "\n".join(_cmd_percent(line, batch=batch_file, environ=environ) for line in text.split("\n"))
    env: dict[str, str] = {}
    argv: list[str] | None = None
    for cmd in _cmd_phase2(expanded):
        cmd = cmd.lstrip(" \t,;=@")
        if not cmd.strip():
            continue
        m = re.match(r"set(?:[ \t]+|(?=\"))", cmd, re.I)
        if m:
            rest = cmd[m.end():]
            if delayed_expansion:
                rest = _cmd_delayed(rest, environ)
            if rest.startswith("/"):
                raise CommandSyntaxError(f"'set {rest[:2]}' is not supported")
            if rest.startswith('"'):
                rest = rest[1:rest.rfind('"')] if rest.count('"') > 1 else rest[1:]
            if "=" not in rest:
                raise CommandSyntaxError(f"'set {rest}' does not set a variable")
            name, value = rest.split("=", 1)
            if value == "":
                env.pop(name, None)
            else:
                env[name] = value
            continue
        if argv is not None:
            raise CommandSyntaxError(f"more than one command: {cmd!r} follows the program")
        # the command token ends at the first blank outside quotes
        inside, k = False, 0
        while k < len(cmd) and (inside or cmd[k] not in " \t"):
            if cmd[k] == '"':
                inside = not inside
            k += 1
        head, tail = cmd[:k], cmd[k:]
        if delayed_expansion:
            head, tail = _cmd_delayed(head, environ), _cmd_delayed(tail, environ)
        argv = parse_windows_cmdline(head + tail, first_is_program=True)
    if argv is None:
        raise CommandSyntaxError("no command found")
    return env, argv
