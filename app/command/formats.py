"""Text forms of a command: shells, llama-swap, environment variables, Ollama, JSON; and reading pasted text back.

All take the argument list from :func:`app.placement.command.build_command`
(program first) and never re-derive the placement, so every form means the
same command.
"""

from __future__ import annotations

import json
import re

from .argv import flag_value, has_flag
from .flags import lookup
from .shells import (
    parse_cmd_command,
    parse_posix_command,
    parse_powershell_command,
    quote_cmd,
    quote_posix,
    quote_powershell,
)
from .shells.common import QuoteError, check_argv, check_env, surrogates

__all__ = [
    "FORMATS",
    "QuoteError",
    "to_env",
    "llama_swap_entry",
    "ollama_modelfile",
    "ollama_from_value",
    "cmd_batch_file",
    "render",
    "parse_command_text",
]

#: ``cmd`` is for the prompt (paste it); ``cmd-batch`` is a ``.cmd``/``.bat`` file (``%`` doubled, delayed
#: expansion switched off so ``!`` stays literal).
FORMATS = ("bash", "powershell", "cmd", "cmd-batch", "yaml", "env", "ollama", "argv-json")


def to_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Move every flag that has a LLAMA_ARG_* variable into the environment; the rest stays as arguments.

    Values follow the variable's kind (:attr:`app.command.flags.Flag.env_kind`): a switch becomes ``1``, a
    yes/no option ``1`` or ``0`` (``-nkvo`` is ``LLAMA_ARG_KV_OFFLOAD=0``). Several ``-ot`` values join with
    commas into one variable, as llama.cpp reads it.
    """
    env: dict[str, str] = {}
    rest = [argv[0]]
    i = 1
    while i < len(argv):
        a = argv[i]
        hit = lookup(a)
        if hit is None:
            rest.append(a)
            i += 1
            continue
        flag, positive = hit
        n = flag.nargs
        if flag.bare is not None:
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            n = 1 if nxt.lower() in (flag.choices or ()) else 0
        if flag.env is None or flag.removed or flag.legacy or n > 1 or i + n >= len(argv):
            rest += argv[i : i + 1 + n]
            i += 1 + n
            continue
        var = flag.env
        if n:
            value = argv[i + 1]
            env[var] = f"{env[var]},{value}" if flag.joins and var in env else value
        elif flag.bare is not None:
            env[var] = flag.bare  # an old build's bare -fa
        elif flag.env_kind == "bool":
            env[var] = "1" if positive else "0"
        else:
            env[var] = "1"
        i += 1 + n
    return env, rest


def _yaml_str(s: str) -> str:
    return json.dumps(s)  # JSON strings (ASCII, \u escapes) are valid YAML double-quoted scalars


#: What a YAML block scalar keeps as it is: printable characters other than YAML's own line breaks
#: (NEL, LS, PS) and the byte-order mark.
_YAML_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\ufeff\ufffe\uffff]")


def _swap_check(text: str, what: str) -> None:
    """What llama-swap cannot carry through its YAML, macros and splitter (``proxy/config``)."""
    if "${" in text:
        raise QuoteError(f"llama-swap cannot pass {what} {text!r}: it reads ${{...}} as one of its macros; rename it")
    m = _YAML_UNSAFE.search(text)
    if m:
        raise QuoteError(
            f"llama-swap cannot pass {what} {text!r}: {m.group(0)!r} (a control character, a line break or bytes "
            "that are not UTF-8) does not survive its YAML file and command splitter; rename it"
        )


def llama_swap_entry(argv: list[str], name: str, env: dict[str, str] | None = None) -> str:
    """A llama-swap ``models:`` entry: ``cmd`` (``${PORT}`` is llama-swap's port macro) and ``env``.

    llama-swap substitutes its ``${...}`` macros in the text, drops ``#`` comment lines and joins lines that
    end in ``\\``, then splits the command POSIX-style (quotes and backslashes, but no ``$'...'``): an
    argument with a control character or ``${`` cannot be passed (:class:`QuoteError`).
    """
    argv = check_argv(argv)
    env_items = check_env(env)
    _swap_check(name, "the model name")
    for a in argv:
        _swap_check(a, "the argument")
    for k, v in env_items:
        _swap_check(v, f"the value of {k}")
    body = quote_posix(list(argv) + ["--port", "${PORT}"], multiline=True)
    out = f"models:\n  {_yaml_str(name)}:\n    cmd: |\n" + "".join(f"      {line}\n" for line in body.splitlines())
    if env_items:
        out += "    env:\n" + "".join(f"      - {_yaml_str(f'{k}={v}')}\n" for k, v in env_items)
    return out


def ollama_from_value(path: str) -> str:
    """The text after ``FROM`` that Ollama's Modelfile parser (``parser/parser.go``) reads back as ``path``.

    Ollama keeps spaces and tabs inside a value and trims its ends, strips one pair of ``"`` (or ``\"\"\"``)
    quotes, ends a value at a line break unless it is inside quotes, and drops every other character that
    is not printable; a leading ``~`` is a home folder there (``./`` keeps such a relative name as it is).
    So the path is written bare, in ``"..."`` or in ``\"\"\"...\"\"\"``, whichever reads back exactly; a
    path none of them can carry (a control character, bytes that are not UTF-8) is a :class:`QuoteError`.
    """
    if path == "":
        raise QuoteError("the model path is empty: Ollama needs FROM with a path")
    if surrogates(path):
        raise QuoteError(f"Ollama cannot read the model path {path!r}: it contains bytes that are not UTF-8")
    if path.startswith("~"):
        path = "./" + path
    for text in (path, f'"{path}"', f'"""{path}"""'):
        if _ollama_from(text) == path:
            return text
    bad = next((c for c in path if not c.isprintable() and c not in " \t\r\n"), None)
    why = f"{bad!r}, which Ollama's parser drops" if bad else "quotes and line breaks its parser cannot tell apart"
    raise QuoteError(f"Ollama cannot read the model path {path!r} in a Modelfile: it contains {why}; rename it")


def _ollama_unquote(s: str) -> str | None:
    """``unquote`` of Ollama's parser: one pair of triple or single double quotes (None: unterminated)."""
    if s.startswith('"""'):
        return s[3:-3] if len(s) >= 6 and s.endswith('"""') else None
    if s.startswith('"'):
        return s[1:-1] if len(s) >= 2 and s.endswith('"') else None
    return s


def _ollama_from(text: str) -> str | None:
    """What Ollama's parser reads from ``FROM <text>`` and a newline: the value (None: anything else)."""
    buf: list[str] = []
    for k, c in enumerate(text + "\n"):
        if c in "\r\n" or c in " \t":  # a transition out of the value: kept unless it ends the value
            value = _ollama_unquote("".join(buf).strip(" \t\r\n\v\f"))
            if value is None or c in " \t":
                buf.append(c)
                continue
            return value if k == len(text) else None  # the value ended before the end of the text
        if c.isprintable():
            buf.append(c)
    return None


def _comment(text: str) -> str:
    """``text`` for a ``#`` comment line: anything that is not printable written as an escape."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode() for c in text)


def ollama_modelfile(argv: list[str], n_layers_total: int, env: dict[str, str] | None = None) -> str:
    """An Ollama Modelfile: ``num_gpu`` and ``num_ctx`` only, and a plain list of what Ollama cannot express.

    ``-ngl all`` (or any number below -1) is ``num_gpu`` ``n_layers_total + 1`` (every layer and the output);
    ``-ngl auto`` and ``-c 0`` leave the parameter to Ollama. Values go into comments with anything that is
    not printable escaped, so no value can start a line of its own.
    """
    argv = check_argv(argv)
    model = flag_value(argv, "-m")
    if model is None:
        raise QuoteError("the command has no -m MODEL: an Ollama Modelfile needs FROM with a path")
    lines = [f"FROM {ollama_from_value(model)}"]
    lost = []
    ngl = flag_value(argv, "-ngl")
    if ngl is not None:
        n = -2 if ngl.strip().lower() == "all" else (-1 if ngl.strip().lower() == "auto" else _int_or_none(ngl))
        if n is None:
            lost.append(f"-ngl {_comment(ngl)}: not a number of layers")
        elif n >= 0:
            lines.append(f"PARAMETER num_gpu {n}")
        elif n < -1:
            lines.append(f"PARAMETER num_gpu {n_layers_total + 1}")
    ctx = flag_value(argv, "-c")
    if ctx is not None and _int_or_none(ctx) not in (None, 0):
        lines.append(f"PARAMETER num_ctx {_int_or_none(ctx)}")
    elif ctx is not None and _int_or_none(ctx) is None:
        lost.append(f"-c {_comment(ctx)}: not a context size")
    if has_flag(argv, "-ot", "-ncmoe", "-cmoe"):
        lost.append(
            "tensor overrides (-ot / --n-cpu-moe / --cpu-moe): Ollama cannot place experts on the CPU "
            "while their layer is on a GPU"
        )
    if has_flag(argv, "-ts"):
        lost.append(f"the split between GPUs (-ts {_comment(flag_value(argv, '-ts') or '')}): Ollama decides it itself")
    if has_flag(argv, "--rpc"):
        lost.append("RPC hosts (--rpc)")
    for flag, what in (
        ("-ctk", "K cache type"),
        ("-ctv", "V cache type"),
        ("-fa", "flash attention"),
        ("-np", "parallel slots"),
        ("-ub", "micro-batch size"),
    ):
        if has_flag(argv, flag):
            lost.append(
                f"{what} ({flag} {_comment(flag_value(argv, flag) or '')}): set through Ollama's server "
                "environment, not the Modelfile"
            )
    for k, v in check_env(env):
        lost.append(f"the environment variable {k}={_comment(v)}: set it for the Ollama server")
    if lost:
        lines.append("")
        lines.append("# Ollama cannot express these parts of the Layerdeck placement:")
        lines += [f"#  - {x}" for x in lost]
    return "\n".join(lines) + "\n"


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


#: The first line of a ``cmd-batch`` file: ``!`` stays literal whatever the machine's default expansion is.
BATCH_HEADER = "@setlocal DisableDelayedExpansion"


def cmd_batch_file(argv: list[str], env: dict[str, str] | None = None, *, multiline: bool = True) -> str:
    """A ``.cmd``/``.bat`` file that runs ``argv``: :data:`BATCH_HEADER`, then the batch-file form of
    :func:`~app.command.shells.quote_cmd` (every ``%`` doubled), ``set`` lines local to the script."""
    return BATCH_HEADER + "\n" + quote_cmd(argv, env=env, batch_file=True, multiline=multiline)


def render(
    argv: list[str],
    fmt: str,
    *,
    env: dict[str, str] | None = None,
    name: str = "model",
    n_layers: int = 0,
    multiline: bool = True,
) -> str:
    """``argv`` (and ``env``) in one of :data:`FORMATS`; :class:`QuoteError` for what that form cannot carry."""
    if fmt == "bash":
        return quote_posix(argv, env=env, multiline=multiline)
    if fmt == "powershell":
        return quote_powershell(argv, env=env, multiline=multiline)
    if fmt == "cmd":
        return quote_cmd(argv, env=env, multiline=multiline)
    if fmt == "cmd-batch":
        return cmd_batch_file(argv, env, multiline=multiline)
    if fmt == "yaml":
        return llama_swap_entry(argv, name, env)
    if fmt == "env":
        e, rest = to_env(argv)
        return quote_posix(rest, env={**(env or {}), **e}, multiline=multiline)
    if fmt == "ollama":
        return ollama_modelfile(argv, n_layers, env)
    if fmt == "argv-json":
        argv = check_argv(argv)
        env_items = check_env(env)
        # bytes that are not UTF-8 (surrogateescape) are kept as \udcXX escapes, which json.loads reads back
        plain = not any(surrogates(t) for t in [*argv, *(v for _, v in env_items)])
        return json.dumps({"argv": argv, "env": env or {}}, ensure_ascii=not plain, indent=1)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def parse_command_text(text: str, shell: str | None = None) -> tuple[dict[str, str], list[str]]:
    """Read a pasted command (bash, PowerShell or cmd; guessed when ``shell`` is None) into (env, argv).

    Also accepts ``llama-fit-params`` output (``-c N -ngl N -ts a,b -ot "..."``) and bare argument lists.
    Text that is not one plain command raises :class:`~app.command.shells.CommandSyntaxError`.
    """
    text = text.strip()
    if shell is None:
        if text.startswith("&") or "$env:" in text or "`\n" in text:
            shell = "powershell"
        elif text.lower().startswith("set ") or "^\n" in text or "^\r\n" in text:
            shell = "cmd"
        else:
            shell = "bash"
    if shell == "powershell":
        return parse_powershell_command(text)
    if shell == "cmd":
        return parse_cmd_command(text)
    return parse_posix_command(text)
