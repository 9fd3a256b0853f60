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

import math
import re
import struct

from ..errors import CommandError
from ..memory.settings import CACHE_TYPES, NGL_ALL, NGL_AUTO, SPEC_TYPES, LlamaSettings

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
    "INT_MIN",
    "INT_MAX",
    "MAX_LAYERS",
    "MAX_SEQ",
    "MAX_DEVICES",
    "check_settings",
]

FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."

#: ``common_arg_utils::is_truthy`` / ``is_falsey`` / ``is_autoy``, exactly (case-sensitive).
TRUE = frozenset({"on", "enabled", "true", "1"})
FALSE = frozenset({"off", "disabled", "false", "0"})
AUTO = frozenset({"auto", "-1"})

#: ``std::stoi``'s range (a C ``int``): llama.cpp stops with "error while handling argument ...: stoi" outside it.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: ``LLAMA_MAX_LAYERS`` (``src/llama-hparams.h``): no model llama.cpp loads has more layers.
MAX_LAYERS = 512
#: ``LLAMA_MAX_SEQ`` (``src/llama-cparams.h``): "n_seq_max must be <= 256".
MAX_SEQ = 256
#: ``llama_max_devices()`` (``src/llama.cpp``): ``-ts`` takes fewer values than this.
MAX_DEVICES = 16
#: ``FLT_MAX``: ``std::stof`` refuses a larger magnitude ("stof").
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
#: Quantized cache types (``ggml_is_quantized``): a quantized V cache needs flash attention.
QUANTIZED_CACHE = frozenset(t for t in CACHE_TYPES if t not in ("f32", "f16", "bf16"))


class ArgsError(CommandError, ValueError):
    """A flag's value is not what llama.cpp accepts; the message names the flag."""


def n_cpu_moe_patterns(n: int) -> list[tuple[str, str]]:
    """``llm_add_n_cpu_ffn_overrides(n, LLM_FFN_EXPS_REGEX)``: one pattern per layer below ``n``.

    Only the first :data:`MAX_LAYERS` are made: llama.cpp makes all ``n``, but a pattern for layer 512 or
    above names a block no model it can load has, so it never matches (``-ncmoe 1000000`` is "all layers").
    """
    return [(rf"blk\.{i}{FFN_EXPS_REGEX}", "CPU") for i in range(min(n, MAX_LAYERS))]


def n_cpu_ffn_patterns(n: int) -> list[tuple[str, str]]:
    """As :func:`n_cpu_moe_patterns`, for ``-ncffn`` (``LLM_FFN_DENSE_REGEX``)."""
    return [(rf"blk\.{i}{FFN_DENSE_REGEX}", "CPU") for i in range(min(n, MAX_LAYERS))]


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


#: What ``std::stoi`` reads (leading blanks, a sign, decimal digits); Layerdeck refuses trailing text too.
_STOI = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+", re.ASCII)
#: What ``std::stof`` reads as a decimal number (hex floats are refused here).
_STOF = re.compile(r"[ \t\n\v\f\r]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_STOF_WORD = re.compile(r"[ \t\n\v\f\r]*[+-]?(?:inf|infinity|nan(?:\([0-9A-Za-z_]*\))?)", re.ASCII | re.IGNORECASE)


def _short(v: str) -> str:
    """The value for a message (at most 40 characters)."""
    return repr(v) if len(v) <= 40 else repr(v[:37] + "...")


def whole(v: str, flag: str) -> int:
    """An ``int`` option, as llama.cpp's ``std::stoi`` reads it (ASCII digits, a 32-bit ``int``).

    Layerdeck does not accept trailing text (``std::stoi`` ignores it) nor Python's ``1_000``.
    """
    if not _STOI.fullmatch(v):
        raise ArgsError(f"{flag} expects a whole number, got {_short(v)}.")
    if len(v) > 40 or not INT_MIN <= int(v) <= INT_MAX:
        raise ArgsError(
            f"{flag} {_short(v.strip())}: out of range: llama.cpp reads a 32-bit number "
            f'({INT_MIN} to {INT_MAX}) and stops with "error while handling argument {flag}: stoi".'
        )
    return int(v)


def count(v: str, flag: str) -> int:
    """A whole number that may not be negative (``-ncmoe``, ``-ncffn``: llama.cpp's "invalid value")."""
    n = whole(v, flag)
    if n < 0:
        raise ArgsError(f"{flag} {v.strip()}: invalid value (a number of layers, 0 or more).")
    return n


def non_negative(v: str, flag: str) -> int:
    """A whole number, 0 or more (``-c``: 0 is the model's own context; a negative one wraps around in
    llama.cpp's unsigned context size and cannot be allocated)."""
    n = whole(v, flag)
    if n < 0:
        raise ArgsError(f"{flag} {v.strip()}: must be 0 or more (llama.cpp reads it as an unsigned size).")
    return n


def positive(v: str, flag: str) -> int:
    """A whole number, 1 or more (``-b``: a batch of 0 or fewer tokens cannot run)."""
    n = whole(v, flag)
    if n < 1:
        raise ArgsError(f"{flag} {v.strip()}: must be 1 or more (a number of tokens).")
    return n


def n_parallel(v: str, flag: str) -> int:
    """``-np``: a 32-bit number; -1 (or any negative) is the server's auto, 0 is refused, at most
    :data:`MAX_SEQ` (the tool-specific rules are in :func:`check_settings`)."""
    n = whole(v, flag)
    if n > MAX_SEQ:
        raise ArgsError(
            f"{flag} {v.strip()}: llama.cpp allows at most {MAX_SEQ} parallel sequences "
            f'("n_seq_max must be <= {MAX_SEQ}").'
        )
    return n


def n_gpu_layers(v: str, flag: str) -> int:
    """``-ngl N|auto|all`` (auto = -1, all = -2; llama.cpp reads any number below -1 as all too)."""
    low = v.lower()
    if low == "auto":
        return NGL_AUTO
    if low == "all":
        return NGL_ALL
    n = whole(v, flag)
    return NGL_ALL if n < NGL_AUTO else n


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tensor_split(v: str, flag: str) -> list[float]:
    """``-ts 3,1`` or ``3/1``, as llama.cpp reads it: split on runs of ',' and '/', each part a ``float``.

    Refused as llama.cpp refuses them: an empty first part (``std::stof("")``), 16 parts or more ("got N
    input configs, but system only has 16 devices"), a magnitude above ``FLT_MAX`` ("stof"). Refused because
    llama.cpp's split points would not rise (its ``std::upper_bound`` then picks devices arbitrarily or
    past the last one): a negative part, ``nan``, ``inf``, or parts whose sum overflows a ``float``.
    Values are rounded to ``float``, as llama.cpp stores them (so ``1e-50`` is 0).
    """
    parts = re.split(r"[,/]+", v)
    if parts and parts[-1] == "":
        parts.pop()  # std::sregex_token_iterator drops an empty last part, not an empty first one
    if len(parts) >= MAX_DEVICES:
        raise ArgsError(
            f"{flag}: got {len(parts)} input configs, but system only has {MAX_DEVICES} devices "
            f"(llama.cpp takes at most {MAX_DEVICES - 1} proportions)."
        )
    out = []
    for part in parts:
        if _STOF_WORD.fullmatch(part):
            raise ArgsError(f"{flag} {_short(v)}: {part.strip()} is not a proportion; use numbers like 3,1.")
        if not _STOF.fullmatch(part):
            raise ArgsError(f"{flag} expects proportions like 3,1, got {_short(v)}.")
        x = float(part)
        if not abs(x) <= FLT_MAX:
            raise ArgsError(
                f"{flag} {_short(v)}: {part.strip()} is out of range for llama.cpp (a float, at most {FLT_MAX:.6g})."
            )
        if x < 0:
            raise ArgsError(f"{flag} {_short(v)}: proportions must be 0 or more, got {part.strip()}.")
        out.append(_f32(x))
    acc = 0.0
    for x in out:
        acc = _f32(acc + x) if math.isfinite(acc + x) and abs(acc + x) <= FLT_MAX else math.inf
    if math.isinf(acc):
        raise ArgsError(f"{flag} {_short(v)}: the proportions add up to more than a float holds; use smaller numbers.")
    return out


def csv(v: str, flag: str) -> list[str]:
    """A comma-separated list (``-dev``, ``--rpc``), empty items dropped."""
    return [x for x in v.split(",") if x]


def rpc_list(v: str, flag: str) -> list[str]:
    """``--rpc``: llama.cpp splits on every comma and aborts on an empty entry (``Failed to parse endpoint``)."""
    parts = v.split(",")
    if any(not x.strip() for x in parts):
        raise ArgsError(
            f"{flag} {v!r} has an empty entry (nothing, or an extra comma): llama.cpp aborts on it. "
            "Give host:port entries separated by single commas."
        )
    return parts


def _cache_type_error(flag: str, v: str) -> ArgsError:
    return ArgsError(f"{flag} {_short(v)}: Unsupported cache type: {v} (allowed: {', '.join(CACHE_TYPES)}).")


def cache_type(v: str, flag: str) -> str:
    """``-ctk``/``-ctv``: one of llama.cpp's ``kv_cache_types`` (Layerdeck also accepts upper case)."""
    low = v.lower()
    if low not in CACHE_TYPES:
        raise _cache_type_error(flag, v)
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


def spec_types(v: str, flag: str) -> list[str]:
    """``--spec-type a,b``: each name one of llama.cpp's (``common_speculative_types_from_names``: an unknown
    name is refused; ``none`` anywhere in the list makes this value add nothing)."""
    names = v.split(",")
    for name in names:
        if name not in SPEC_TYPES:
            raise ArgsError(
                f"{flag} {_short(v)}: unknown speculative type: {name[:40]} (allowed: {', '.join(SPEC_TYPES)})."
            )
    return [] if "none" in names else names


def boolean(v: str, flag: str) -> bool:
    """llama.cpp's ``parse_bool_value`` (yes/no options set through their environment variable)."""
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise ArgsError(f"{flag}={v!r}: invalid boolean value (use on/off, true/false, 1/0 or enabled/disabled).")


# --------------------------------------------------------------------------- the settings as a whole


def check_settings(s: LlamaSettings) -> LlamaSettings:
    """Refuse settings llama.cpp refuses, with its messages; returns ``s``.

    The one check of a :class:`~app.memory.settings.LlamaSettings`, wherever it comes from: the parser
    applies it to every parsed command (``import``, ``estimate``, ``canonical``, the window's paste), and a
    plan or a settings edit can call it too. The per-flag converters above check each value as it is read;
    this checks what only the whole can say (and the values again, for settings that were not parsed).
    What depends on the model (MLA's equal K and V types) is checked by the estimate
    (:func:`app.memory.kv.context_shape`).
    """
    for name, t in (("-ctk", s.type_k), ("-ctv", s.type_v), ("-ctkd", s.draft_type_k), ("-ctvd", s.draft_type_v)):
        if t not in CACHE_TYPES:
            raise _cache_type_error(name, str(t))
    for flag, tv in (("-ctv", s.type_v), ("-ctvd", s.draft_type_v)):
        if tv in QUANTIZED_CACHE and s.flash_attn == "off" and (flag == "-ctv" or s.draft_model):
            what = tv if flag == "-ctv" else f"the draft's, {flag} {tv}"
            raise ArgsError(
                f"a quantized V cache ({what}) needs flash attention: use -fa on or {flag} f16 "
                '(llama.cpp: "quantized V cache requires flash_attn to be enabled").'
            )
    bad_types = [t for t in s.spec_types if t not in SPEC_TYPES or t == "none"]
    if bad_types:
        raise ArgsError(f"--spec-type: unknown speculative type: {bad_types[0]} (allowed: {', '.join(SPEC_TYPES)}).")
    if not isinstance(s.spec_draft_n_max, int) or not 0 <= s.spec_draft_n_max <= INT_MAX:
        raise ArgsError(f"--spec-draft-n-max {s.spec_draft_n_max}: must be a whole number from 0 to {INT_MAX}.")
    for name, value, lo in (("-c", s.n_ctx, 0), ("-b", s.n_batch, 1), ("-ub", s.n_ubatch, 0)):
        if not isinstance(value, int) or not lo <= value <= INT_MAX:
            raise ArgsError(f"{name} {value}: must be a whole number from {lo} to {INT_MAX}.")
    if not isinstance(s.n_parallel, int) or not INT_MIN <= s.n_parallel <= MAX_SEQ:
        raise ArgsError(f"-np {s.n_parallel}: llama.cpp allows at most {MAX_SEQ} parallel sequences.")
    if s.tool == "server" and s.n_parallel == 0:
        raise ArgsError("-np 0: invalid value for n_parallel (use -np -1 for auto, or a number of slots).")
    if s.tool != "server" and s.n_parallel < -1:
        raise ArgsError(
            f"-np {s.n_parallel}: llama-{s.tool} reads it as an unsigned number of sequences, far above "
            f"llama.cpp's {MAX_SEQ}; give 1 to {MAX_SEQ}."
        )
    ts = s.tensor_split
    if ts is not None:
        if len(ts) >= MAX_DEVICES:
            raise ArgsError(f"-ts: got {len(ts)} input configs, but system only has {MAX_DEVICES} devices.")
        if not all(isinstance(x, (int, float)) and math.isfinite(x) and 0 <= x <= FLT_MAX for x in ts):
            raise ArgsError(f"-ts {','.join(map(str, ts))}: proportions must be finite numbers, 0 or more.")
        if not math.isfinite(sum(_f32(float(x)) for x in ts)) or sum(_f32(float(x)) for x in ts) > FLT_MAX:
            raise ArgsError("-ts: the proportions add up to more than a float holds; use smaller numbers.")
    return s
