"""Typed values of llama.cpp flags, read with llama.cpp's own rules and limits (``common/arg.cpp``).

Every converter takes ``(text, spelling)`` (the spelling as typed, so the
message names what the user wrote) and returns the typed value or raises
:class:`ArgsError`. The flag table (:mod:`app.command.flags`) names a
converter per flag; :mod:`app.command.parse` applies it.

``-ot``, ``-cmoe``, ``-ncmoe`` and ``-ncffn`` all become entries of one
override list, as in llama.cpp (``LLM_FFN_EXPS_REGEX``,
``llm_add_n_cpu_ffn_overrides`` in ``common/common.h``).
"""

from __future__ import annotations

import re

from ..errors import CommandError
from ..memory.settings import CACHE_TYPES, NGL_ALL, NGL_AUTO

__all__ = [
    "ArgsError",
    "FFN_EXPS_REGEX",
    "FFN_DENSE_REGEX",
    "TRUE",
    "FALSE",
    "AUTO",
    "n_cpu_moe_patterns",
    "n_cpu_ffn_patterns",
    "parse_overrides",
]

FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."

#: ``common_arg_utils::is_truthy`` / ``is_falsey`` / ``is_autoy``, exactly (case-sensitive).
TRUE = frozenset({"on", "enabled", "true", "1"})
FALSE = frozenset({"off", "disabled", "false", "0"})
AUTO = frozenset({"auto", "-1"})


class ArgsError(CommandError, ValueError):
    """A flag's value is not what llama.cpp accepts; the message names the flag."""


def n_cpu_moe_patterns(n: int) -> list[tuple[str, str]]:
    return [(rf"blk\.{i}{FFN_EXPS_REGEX}", "CPU") for i in range(n)]


def n_cpu_ffn_patterns(n: int) -> list[tuple[str, str]]:
    return [(rf"blk\.{i}{FFN_DENSE_REGEX}", "CPU") for i in range(n)]


def parse_overrides(value: str) -> list[tuple[str, str]]:
    """``-ot`` value: split on ',' then each item at its first '=' (``parse_tensor_buffer_overrides``)."""
    out = []
    for item in value.split(","):
        if not item:
            continue
        if "=" not in item:
            raise ArgsError(f"-ot item {item!r} has no '=BUFFER_TYPE' part (expected PATTERN=CPU or PATTERN=CUDA0).")
        pattern, buft = item.split("=", 1)
        out.append((pattern, buft))
    return out


# --------------------------------------------------------------------------- converters (text, spelling) -> value


def text(v: str, flag: str) -> str:
    return v


def whole(v: str, flag: str) -> int:
    """An ``int`` option (llama.cpp's ``std::stoi``; Layerdeck does not accept trailing text)."""
    try:
        return int(v)
    except ValueError:
        raise ArgsError(f"{flag} expects a whole number, got {v!r}.") from None


def count(v: str, flag: str) -> int:
    """A whole number that may not be negative (``-ncmoe``, ``-ncffn``: llama.cpp's "invalid value")."""
    n = whole(v, flag)
    if n < 0:
        raise ArgsError(f"{flag} {v}: invalid value (a number of layers, 0 or more).")
    return n


def n_parallel(v: str, flag: str) -> int:
    n = whole(v, flag)
    if n == 0:
        raise ArgsError("-np 0 is not valid: use -np -1 (auto) or a number of slots.")
    return n


def n_gpu_layers(v: str, flag: str) -> int:
    """``-ngl N|auto|all`` (auto = -1, all = -2)."""
    low = v.lower()
    if low == "auto":
        return NGL_AUTO
    if low == "all":
        return NGL_ALL
    return whole(v, flag)


def tensor_split(v: str, flag: str) -> list[float]:
    """``-ts 3,1`` or ``3/1``: llama.cpp splits on runs of ',' and '/'."""
    try:
        return [float(x) for x in re.split(r"[,/]+", v) if x]
    except ValueError:
        raise ArgsError(f"-ts expects numbers like 3,1, got {v!r}.") from None


def csv(v: str, flag: str) -> list[str]:
    """A comma-separated list (``-dev``, ``--rpc``), empty items dropped."""
    return [x for x in v.split(",") if x]


def cache_type(v: str, flag: str) -> str:
    """``-ctk``/``-ctv``: one of llama.cpp's ``kv_cache_types`` (Layerdeck also accepts upper case)."""
    low = v.lower()
    if low not in CACHE_TYPES:
        raise ArgsError(f"{flag} {v}: Unsupported cache type (allowed: {', '.join(CACHE_TYPES)}).")
    return low


def choice(*allowed: str, what: str = ""):
    """A converter accepting exactly ``allowed`` (llama.cpp's "invalid value" for anything else)."""

    def convert(v: str, flag: str) -> str:
        if v not in allowed:
            names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}" if len(allowed) > 1 else allowed[0]
            raise ArgsError(f"{flag} must be {names}, got {v!r}.")
        return v

    convert.choices = frozenset(allowed)  # type: ignore[attr-defined]
    return convert


split_mode = choice("none", "layer", "row", "tensor")
load_mode = choice("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")


def on_off(v: str, flag: str) -> str:
    """``--fit on|off`` (and llama.cpp's other truthy/falsey words) as ``"on"``/``"off"``."""
    if v in TRUE:
        return "on"
    if v in FALSE:
        return "off"
    raise ArgsError(f"{flag}: unknown value {v!r} (use on or off).")


def on_off_auto(v: str, flag: str) -> str:
    """``-fa on|off|auto`` (also 1/0/-1, true/false, enabled/disabled; Layerdeck accepts any case)."""
    low = v.lower()
    if low in TRUE:
        return "on"
    if low in FALSE:
        return "off"
    if low in AUTO:
        return "auto"
    raise ArgsError(f"{flag}: unknown value {v!r} (use on, off or auto).")


on_off_auto.choices = TRUE | FALSE | AUTO  # type: ignore[attr-defined]


def overrides(v: str, flag: str) -> list[tuple[str, str]]:
    return parse_overrides(v)


def cpu_moe_layers(v: str, flag: str) -> list[tuple[str, str]]:
    return n_cpu_moe_patterns(count(v, flag))


def cpu_ffn_layers(v: str, flag: str) -> list[tuple[str, str]]:
    return n_cpu_ffn_patterns(count(v, flag))


def boolean(v: str, flag: str) -> bool:
    """llama.cpp's ``parse_bool_value`` (yes/no options set through their environment variable)."""
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise ArgsError(f"{flag}={v!r}: invalid boolean value (use on/off, true/false, 1/0 or enabled/disabled).")
