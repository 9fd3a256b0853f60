"""cmd.exe (the prompt, or a ``.bat``/``.cmd`` file): quote an argument list, read a pasted command back.

``quote_cmd``
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
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .common import CommandSyntaxError, QuoteError, check_argv, check_env, is_option, surrogates
from .windows import parse_windows_cmdline

__all__ = ["quote_cmd", "parse_cmd_command"]


_CMD_META = frozenset("^&|<>()")
_CMD_BARE_PROGRAM = re.compile(r"[A-Za-z0-9_.\\:+-]+", re.ASCII)


def _cmd_check(s: str, what: str) -> None:
    for bad, name in (("\n", "a newline"), ("\r", "a carriage return"), ("\x1a", "Ctrl-Z")):
        if bad in s:
            raise QuoteError(f"cmd.exe cannot pass {what} {s!r}: it contains {name}; rename it or use PowerShell")
    if surrogates(s):
        raise QuoteError(
            f"cmd.exe cannot pass {what} {s!r}: it contains bytes that are not UTF-8 (a name from another system)"
        )


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


def _cmd_encode(
    seq: list[tuple[str, str | None]], *, batch: bool, break_at: set[int] | frozenset[int] = frozenset()
) -> str:
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


def quote_cmd(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    batch_file: bool = False,
    delayed_expansion: bool = False,
    multiline: bool = False,
) -> str:
    """``argv`` as a cmd.exe command line (``batch_file=True``: a line of a .bat/.cmd file); see the module docstring.

    Raises :class:`QuoteError` (a ValueError) for what cmd.exe cannot carry: newlines, carriage
    returns and Ctrl-Z anywhere; ``"`` in the program; ``%`` in a program
    path with spaces at the interactive prompt; ``!`` in the program with
    delayed expansion; an empty environment value (``set NAME=`` deletes).
    """
    argv = check_argv(argv)
    env_items = check_env(env)
    for a in argv:
        _cmd_check(a, "argument")
    prog = argv[0]
    if '"' in prog:
        raise QuoteError(f"program {prog!r} contains '\"', which a Windows path cannot")
    if delayed_expansion and "!" in prog:
        raise QuoteError(f"program {prog!r} contains '!', which delayed expansion would eat")
    lines = []
    for name, value in env_items:
        _cmd_check(value, f"the value of {name}")
        if value == "":
            raise QuoteError(f"cmd.exe cannot set {name} to an empty string (set {name}= deletes it)")
        token = f"{name}={value}"
        delayed = delayed_expansion and "!" in token
        chars: list[tuple[str, str | None]] = [(c, None) for c in token]
        if delayed:
            chars = [(x, None) for c in token for x in (("^", c) if c in "^!" else (c,))]
        lines.append("set " + _cmd_encode(chars, batch=batch_file))
    seq: list[tuple[str, str | None]]
    if _CMD_BARE_PROGRAM.fullmatch(prog) and not prog.startswith("-"):
        seq = [(c, None) for c in prog]
    else:
        if not batch_file and "%" in prog:
            if any(c.isspace() or c in ",;=" for c in prog):
                raise QuoteError(
                    f"program {prog!r} has '%' and spaces: cmd.exe's prompt cannot quote that (use batch_file=True)"
                )
            seq = [(c, None) for c in prog]
        else:
            seq = [('"', "open"), *((c, None) for c in prog), ('"', "close")]
    delayed = delayed_expansion and any("!" in a for a in argv[1:])
    break_at: set[int] = set()
    for a in argv[1:]:
        if multiline and (is_option(a) or len(break_at) == 0):
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
            raise CommandSyntaxError(f"batch argument reference {line[i : i + 2]!r} at offset {i} is not supported")
        j = line.find("%", i + 1)
        if j < 0:
            if batch and lookup is not None:
                i += 1  # a lone % is dropped in a batch file
                continue
            out.append(line[i:])
            break
        var = line[i + 1 : j].split(":", 1)[0]
        if lookup is not None and var and var.upper() in lookup:
            out.append(lookup[var.upper()])  # (substring/replace modifiers are not modelled)
            i = j + 1
        elif batch:
            if lookup is None:
                out.append(line[i : j + 1])  # unknown environment: keep the reference as typed
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
                out.append(lookup.get(token[i + 1 : j].upper(), ""))
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


def parse_cmd_command(
    text: str, *, batch_file: bool = False, delayed_expansion: bool = False, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """``(env, argv)`` of a pasted cmd.exe command (or batch-file lines with ``batch_file=True``).

    Models cmd's phases: percent expansion per physical line (``%%`` -> ``%``
    in a batch file; ``%NAME%`` is replaced only when ``environ`` is given
    and has NAME, otherwise kept as typed); carets, quotes, ``^``-newline
    continuations and ``&``/``&&``/newline command separators; delayed
    expansion of ``!`` (only with ``delayed_expansion=True``); then
    ``set NAME=value`` / ``set "NAME=value"`` commands go to ``env`` (note:
    ``set A=1 && prog`` gives A the value ``"1 "``, as cmd does) and the one
    other command is split with :func:`parse_windows_cmdline`. ``setlocal`` (with
    ``EnableDelayedExpansion`` or ``DisableDelayedExpansion``, which switch the
    expansion of ``!`` for what follows), ``endlocal`` and ``echo off`` lines are
    read as a batch file's header.
    """
    text = text.replace("\r\n", "\n").replace("\r", "")
    expanded = "\n".join(_cmd_percent(line, batch=batch_file, environ=environ) for line in text.split("\n"))
    env: dict[str, str] = {}
    argv: list[str] | None = None
    for cmd in _cmd_phase2(expanded):
        cmd = cmd.lstrip(" \t,;=@")
        if not cmd.strip():
            continue
        local = re.fullmatch(r"(setlocal|endlocal|echo[ \t]+(?:on|off))((?:[ \t]+\w+)*)[ \t]*", cmd, re.I)
        if local:  # a batch file's header (see app.command.formats.cmd_batch_file)
            words = {w.lower() for w in local.group(2).split()}
            if local.group(1).lower() == "setlocal":
                if "enabledelayedexpansion" in words:
                    delayed_expansion = True
                elif "disabledelayedexpansion" in words:
                    delayed_expansion = False
            continue
        m = re.match(r"set(?:[ \t]+|(?=\"))", cmd, re.I)
        if m:
            rest = cmd[m.end() :]
            if delayed_expansion:
                rest = _cmd_delayed(rest, environ)
            if rest.startswith("/"):
                raise CommandSyntaxError(f"'set {rest[:2]}' is not supported")
            if rest.startswith('"'):
                rest = rest[1 : rest.rfind('"')] if rest.count('"') > 1 else rest[1:]
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
