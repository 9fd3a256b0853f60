"""bash and zsh: quote an argument list, and read a pasted command back.

``quote_posix``  (bash, zsh)
Safe words bare (``[A-Za-z0-9_@%+=:,./-]``, not starting with ``=``,
which zsh expands); otherwise ``'single quoted'``; a word that contains
``'`` but none of ``$ ` \\ " !`` is ``"double quoted"``; other words with
``'`` are spliced as ``'it'\\''s'``; a word with control characters
(newline, tab, ...) becomes ANSI-C ``$'a\\nb'`` so the command stays on
one line (survives pasting into an interactive shell, where a literal tab
would trigger completion and history expansion is active). A file name
that is not UTF-8 (read with ``surrogateescape``: ``\\udcff`` stands for
the byte 0xFF) is written ``$'\\xff'`` too, which gives the program that
byte; any other lone surrogate cannot be written (:class:`QuoteError`). ``!`` is only
ever emitted inside single quotes or ``$'...'``, where interactive
bash's history expansion does not touch it. The program word is also
quoted if it contains ``=`` (else bash reads ``NAME=value`` as an
assignment) or is a reserved word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .common import ENV_NAME, CommandSyntaxError, QuoteError, check_argv, check_env, option_lines, surrogates

__all__ = ["quote_posix", "quote_posix_word", "split_posix", "parse_posix_command"]


_POSIX_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+", re.ASCII)
_POSIX_RESERVED = frozenset(
    "! case coproc do done elif else esac fi for function if in select then until while { } time [[ ]] "
    "foreach end repeat nocorrect noglob builtin command exec - declare export local readonly typeset".split()
)
_ANSI_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def _has_control(s: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in s)


def _ansi_c_quote(s: str) -> str:
    out = ["$'"]
    for c in s:
        if c in _ANSI_NAMED:
            out.append(_ANSI_NAMED[c])
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\x{ord(c):02x}")  # bash and zsh read at most two hex digits
        elif 0xDC80 <= ord(c) <= 0xDCFF:
            out.append(f"\\x{ord(c) - 0xDC00:02x}")  # a byte that is not UTF-8 (surrogateescape)
        else:
            out.append(c)
    out.append("'")
    return "".join(out)


def quote_posix_word(s: str, *, command: bool = False) -> str:
    """One word for bash/zsh. ``command=True`` for the program word (assignment-like and reserved words get quoted)."""
    if "\0" in s:
        raise QuoteError(f"{s!r} contains a NUL character, which no program can receive")
    bad = [c for c in surrogates(s) if not "\udc80" <= c <= "\udcff"]
    if bad:
        raise QuoteError(f"{s!r} contains {bad[0]!r}, a lone surrogate that is no character and no byte")
    if s == "":
        return "''"
    if _POSIX_SAFE.fullmatch(s) and s[0] != "=" and not (command and ("=" in s or s in _POSIX_RESERVED)):
        return s
    if _has_control(s):
        return _ansi_c_quote(s)
    if "'" not in s:
        return f"'{s}'"
    if not any(c in s for c in '$`\\"!'):
        return f'"{s}"'
    return "\\'".join(f"'{part}'" if part else "" for part in s.split("'"))


def quote_posix(argv: Sequence[str], *, env: Mapping[str, str] | None = None, multiline: bool = False) -> str:
    """``argv`` (and optional ``NAME=value`` prefixes) as one bash/zsh command line.

    ``multiline=True`` puts each option and its values on its own line, joined
    with `` \\`` + newline (a line continuation bash and zsh remove).
    """
    argv = check_argv(argv)
    env_items = check_env(env)
    prefix = [f"{name}={quote_posix_word(value)}" for name, value in env_items]
    words = [quote_posix_word(argv[0], command=True)] + [quote_posix_word(a) for a in argv[1:]]
    if not multiline:
        return " ".join(prefix + words)
    lines = option_lines(words, argv)
    lines[0] = prefix + lines[0]
    return " \\\n  ".join(" ".join(line) for line in lines)


@dataclass
class _Word:
    text: str
    lit: int  # how many leading characters came from plain (unquoted, unescaped) input


_ANSI_C_ESC = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _utf8(s: str) -> bytes:
    try:
        return s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise CommandSyntaxError(f"{s!r} is a lone surrogate, no character") from None


def _read_ansi_c(text: str, i: int) -> tuple[str, int]:
    """Body of ``$'...'`` starting at ``i`` (just after the opening quote); returns (value, index after the closing quote).

    ``\\xHH`` and octal escapes are bytes, as in bash: the value is decoded as UTF-8 with
    ``surrogateescape``, so ``$'\\xc3\\xa9'`` is ``é`` and ``$'\\xff'`` is ``\\udcff`` (what ``os.fsdecode``
    makes of the byte 0xFF).
    """
    out = bytearray()
    n = len(text)
    while True:
        if i >= n:
            raise CommandSyntaxError("unterminated $'...' string")
        c = text[i]
        if c == "'":
            return out.decode("utf-8", "surrogateescape"), i + 1
        if c != "\\":
            out += _utf8(c)
            i += 1
            continue
        if i + 1 >= n:
            raise CommandSyntaxError("unterminated $'...' string")
        e = text[i + 1]
        i += 2
        if e in _ANSI_C_ESC:
            out += _ANSI_C_ESC[e].encode()
        elif e in "01234567":
            m = re.match(r"[0-7]{0,2}", text[i:])
            assert m is not None  # matches the empty string at least
            out.append(int(e + m.group(0), 8) & 0xFF)
            i += m.end()
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            m = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", text[i:])
            if not m:
                out += _utf8("\\" + e)
            elif e == "x":
                out.append(int(m.group(0), 16))
                i += m.end()
            else:
                code = int(m.group(0), 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise CommandSyntaxError(f"\\{e}{m.group(0)} at offset {i - 2} is not a character")
                out += chr(code).encode()
                i += m.end()
        elif e == "c" and i < n:
            out.append(ord(text[i]) & 0x1F if ord(text[i]) < 128 else 0x1F)
            i += 1
        else:
            out += _utf8("\\" + e)


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
            buf.append(text[i + 1 : j])
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
            op = text[i : i + 2] if text[i : i + 2] in ("||", ">>", "<<", ">&", "<&", "&>") else c
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
        return m.group(1), w.text[m.end() :]
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
                elif not ENV_NAME.fullmatch(w.text):
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
