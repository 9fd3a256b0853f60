"""Text forms of a command: shells, llama-swap, environment variables, Ollama, JSON; and reading pasted text back.

All take the argument list from :func:`app.placement.command.build_command`
(program first) and never re-derive the placement, so every form means the
same command.
"""

from __future__ import annotations

import json
import shlex

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

__all__ = ["FORMATS", "to_env", "llama_swap_entry", "ollama_modelfile", "render", "parse_command_text"]

FORMATS = ("bash", "powershell", "cmd", "yaml", "env", "ollama", "argv-json")


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
    return json.dumps(s, ensure_ascii=False)  # JSON strings are valid YAML double-quoted scalars


def llama_swap_entry(argv: list[str], name: str) -> str:
    """A llama-swap ``models:`` entry; ``${PORT}`` is llama-swap's port macro (substituted before it splits)."""
    body = quote_posix(list(argv) + ["--port", "${PORT}"], multiline=True)
    return f"models:\n  {_yaml_str(name)}:\n    cmd: |\n" + "".join(f"      {line}\n" for line in body.splitlines())


def ollama_modelfile(argv: list[str], n_layers_total: int) -> str:
    """An Ollama Modelfile: ``num_gpu`` and ``num_ctx`` only, and a plain list of what Ollama cannot express."""
    lines = [f"FROM {flag_value(argv, '-m')}"]
    ngl = flag_value(argv, "-ngl")
    if ngl is not None:
        lines.append(f"PARAMETER num_gpu {ngl}")
    if flag_value(argv, "-c"):
        lines.append(f"PARAMETER num_ctx {flag_value(argv, '-c')}")
    lost = []
    if has_flag(argv, "-ot", "-ncmoe", "-cmoe"):
        lost.append(
            "tensor overrides (-ot / --n-cpu-moe / --cpu-moe): Ollama cannot place experts on the CPU "
            "while their layer is on a GPU"
        )
    if has_flag(argv, "-ts"):
        lost.append(f"the split between GPUs (-ts {flag_value(argv, '-ts')}): Ollama decides it itself")
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
                f"{what} ({flag} {flag_value(argv, flag)}): set through Ollama's server environment, not the Modelfile"
            )
    if lost:
        lines.append("")
        lines.append("# Ollama cannot express these parts of the Layerdeck placement:")
        lines += [f"#  - {x}" for x in lost]
    return "\n".join(lines) + "\n"


def render(
    argv: list[str],
    fmt: str,
    *,
    env: dict[str, str] | None = None,
    name: str = "model",
    n_layers: int = 0,
    multiline: bool = True,
) -> str:
    if fmt == "bash":
        return quote_posix(argv, env=env, multiline=multiline)
    if fmt == "powershell":
        return quote_powershell(argv, env=env, multiline=multiline)
    if fmt == "cmd":
        return quote_cmd(argv, env=env, multiline=multiline)
    if fmt == "yaml":
        return llama_swap_entry(argv, name)
    if fmt == "env":
        e, rest = to_env(argv)
        return quote_posix(rest, env={**(env or {}), **e}, multiline=multiline)
    if fmt == "ollama":
        return ollama_modelfile(argv, n_layers)
    if fmt == "argv-json":
        return json.dumps({"argv": argv, "env": env or {}}, ensure_ascii=False, indent=1)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def parse_command_text(text: str, shell: str | None = None) -> tuple[dict[str, str], list[str]]:
    """Read a pasted command (bash, PowerShell or cmd; guessed when ``shell`` is None) into (env, argv).

    Also accepts ``llama-fit-params`` output (``-c N -ngl N -ts a,b -ot "..."``) and bare argument lists.
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
    try:
        return parse_posix_command(text)
    except ValueError:
        return {}, shlex.split(text)
