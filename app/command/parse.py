"""Read a llama.cpp command line into :class:`LlamaSettings` (the flags that change memory and placement).

Driven by the flag table (:mod:`app.command.flags`): a flag's row says how
many values follow it, how its value is read (with llama.cpp's limits) and
which setting it fills. Flags Layerdeck does not read (``passthrough``: port,
sampling, templates, ...) are skipped with their values and listed in
``ignored``; flags the table does not know are reported in ``unknown`` so the
caller can warn. ``-ot``, ``-cmoe``, ``-ncmoe`` and ``-ncffn`` append to one
override list in command-line order, as llama.cpp does.

Layerdeck is more lenient than llama.cpp in two ways: ``--flag=value`` is
read as ``--flag value`` (llama.cpp refuses it), and a flag the chosen tool
does not accept is skipped (listed in ``not_for_tool``), not refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..memory.settings import NGL_AUTO, LlamaSettings
from .flags import FLAGS, NONE, Flag, lookup
from .values import (
    FALSE,
    FFN_DENSE_REGEX,
    FFN_EXPS_REGEX,
    TRUE,
    ArgsError,
    boolean,
    check_settings,
    n_cpu_ffn_patterns,
    n_cpu_moe_patterns,
    parse_overrides,
)

__all__ = [
    "ArgsError",
    "ParsedArgs",
    "parse_llama_args",
    "settings_from_args",
    "env_to_args",
    "FFN_EXPS_REGEX",
    "FFN_DENSE_REGEX",
    "n_cpu_moe_patterns",
    "n_cpu_ffn_patterns",
    "parse_overrides",
]


def env_to_args(env: Mapping[str, str]) -> list[str]:
    """``LLAMA_ARG_*`` variables as the flags they stand for; llama.cpp applies them before the command line.

    In the table's (llama.cpp's) option order. A valued flag's variable holds its value (``-ot``'s may hold
    several comma-joined overrides); a switch's counts only when truthy; a yes/no option's variable gives
    the flag when truthy and its negative when falsey (anything else: :class:`ArgsError`, as llama.cpp
    refuses it), and ``LLAMA_ARG_NO_*`` set to anything means the negative.
    """
    out: list[str] = []
    for flag in FLAGS:
        if flag.env is None or flag.removed or flag.legacy:
            continue
        kind = flag.env_kind
        value = env.get(flag.env)
        if kind == "bool":
            no_var = flag.env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1)
            if no_var != flag.env and no_var in env:
                value = "0"
            if value is None:
                continue
            out.append(flag.name if boolean(value, flag.env) else flag.negative[0])
        elif value is None:
            continue
        elif kind == "switch":
            if value in TRUE:
                out.append(flag.name)
        else:
            out += [flag.name, value]
    return out


@dataclass
class ParsedArgs:
    settings: LlamaSettings
    model: str | None = None
    rpc: list[str] = field(default_factory=list)
    fit: str | None = None  # "on" / "off" as given (None: llama.cpp's default, on)
    load_mode: str | None = None
    ignored: list[str] = field(default_factory=list)  # known flags Layerdeck does not read (passthrough)
    unknown: list[str] = field(default_factory=list)  # flags the table does not know
    not_for_tool: list[str] = field(default_factory=list)  # known flags the chosen tool does not accept
    removed: list[str] = field(default_factory=list)  # flags llama.cpp has removed (it refuses them)
    program: str | None = None

    @property
    def unmodelled(self) -> list[str]:
        """Ignored flags that do change llama.cpp's memory or placement (Layerdeck does not model them)."""
        out = []
        for spelling in self.ignored:
            hit = lookup(spelling)
            if hit and hit[0].effect is not NONE:
                out.append(spelling)
        return out

    @property
    def warnings(self) -> list[str]:
        w = [f"unknown flag {u} was ignored" for u in self.unknown]
        for r in self.removed:
            hit = lookup(r)
            w.append(f"{r} was removed from llama.cpp ({hit[0].removed if hit else 'see its --help'}); it was ignored")
        if self.fit in (None, "on") and (
            self.settings.n_gpu_layers not in (None, NGL_AUTO) or self.settings.tensor_split or self.settings.overrides
        ):
            w.append(
                "--fit is on (llama.cpp's default) but -ngl/-ts/-ot are set, so llama.cpp will not fit; "
                "pass --fit off to make that explicit"
            )
        return w


#: Settings that are not :class:`LlamaSettings` fields, or that accumulate.
def _set_model(out: ParsedArgs, v: Any) -> None:
    out.model = v


def _set_rpc(out: ParsedArgs, v: Any) -> None:
    out.rpc = list(v)


def _set_fit(out: ParsedArgs, v: Any) -> None:
    out.fit = v


def _set_load_mode(out: ParsedArgs, v: Any) -> None:
    out.load_mode = out.settings.load_mode = v


def _add_overrides(out: ParsedArgs, v: Any) -> None:
    out.settings.overrides.extend(v)


def _add_draft_overrides(out: ParsedArgs, v: Any) -> None:
    out.settings.draft_overrides.extend(v)


def _add_spec_types(out: ParsedArgs, v: Any) -> None:
    out.settings.spec_types.extend(v)  # llama.cpp appends each --spec-type's list to the default NONE


_APPLY = {
    "model": _set_model,
    "rpc": _set_rpc,
    "fit": _set_fit,
    "load_mode": _set_load_mode,
    "overrides": _add_overrides,
    "draft_overrides": _add_draft_overrides,
    "spec_types": _add_spec_types,
}


def _apply(out: ParsedArgs, flag: Flag, value: Any) -> None:
    setting = flag.setting
    assert setting is not None  # passthrough rows are skipped before
    handler = _APPLY.get(setting)
    if handler is not None:
        handler(out, value)
    else:
        setattr(out.settings, setting, value)


def parse_llama_args(argv: list[str], tool: str = "server", env: Mapping[str, str] | None = None) -> ParsedArgs:
    """Parse llama.cpp arguments (program name optional). Raises :class:`ArgsError` on bad values.

    Each value is read with llama.cpp's own limits (:mod:`app.command.values`) and the settings as a whole
    pass :func:`~app.command.values.check_settings`, so every front end refuses the same commands.

    ``env`` (e.g. the ``LLAMA_ARG_*`` prefixes of a pasted command) is applied first, as llama.cpp does,
    so flags on the command line win. ``tool`` decides the llama-bench forms (``-nkvo 1``).
    """
    s = LlamaSettings(tool=tool)
    out = ParsedArgs(settings=s)
    args = list(argv)
    if args and not args[0].startswith("-"):
        out.program = args.pop(0)
    if env:
        args = env_to_args(env) + args
    i = 0
    while i < len(args):
        raw = args[i]
        spelling, eq, inline = raw.partition("=") if raw.startswith("--") else (raw, "", "")
        hit = lookup(spelling) if eq else None
        if hit is None:
            spelling, eq, inline = raw, "", ""
            hit = lookup(raw)
        if hit is None:
            out.unknown.append(raw)
            i += 1
            continue
        flag, positive = hit
        n = flag.takes(tool)
        values: list[str] = []
        if eq:
            values = [inline]
        elif flag.bare is not None:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and nxt.lower() in (flag.choices or ()):
                values = [nxt]
                i += 1
        elif n:
            if i + n >= len(args):
                raise ArgsError(f"{spelling} needs a value.")
            values = args[i + 1 : i + 1 + n]
            i += n
        i += 1
        if tool not in flag.tools:
            out.not_for_tool.append(spelling)
        if flag.removed:
            out.removed.append(spelling)
            continue
        if flag.passthrough:
            if flag.bare is not None and values and flag.convert:
                flag.convert(values[0], spelling)  # -co/--color: still checked
            out.ignored.append(spelling)
            continue
        if flag.nargs:
            assert flag.convert is not None  # every valued row Layerdeck reads has one (F() sets text)
            given = values[0] if values else flag.bare
            assert given is not None  # no values only for a bare flag
            value = flag.convert(given, spelling)
        elif values and not eq:
            # a llama-bench 0|1 value after a switch: 1 means the switch, 0 its opposite
            on = values[0] not in FALSE
            if not on and not flag.negative and positive:
                continue  # "--no-host 0": llama.cpp's default
            value = flag.on if on == positive else flag.off
        else:
            value = flag.on if positive else flag.off
        _apply(out, flag, value)
    check_settings(out.settings)
    return out


def settings_from_args(argv: list[str], tool: str = "server") -> LlamaSettings:
    return parse_llama_args(argv, tool).settings
