"""Read and adjust a llama.cpp argument list without a shell.

llama.cpp's parser (``common/arg.cpp`` ``common_params_parse_ex``) takes each
flag as its own argv item followed by its value; ``--flag=value`` is not
accepted. These helpers work on that form only and never re-split or quote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

HOST_FLAGS = ("--host",)
PORT_FLAGS = ("--port",)
RPC_FLAGS = ("--rpc", "-rpc")
MODEL_FLAGS = ("-m", "--model")
API_KEY_FLAGS = ("--api-key",)
VERBOSITY_FLAGS = ("-lv", "--verbosity", "--log-verbosity")
VERBOSE_SWITCHES = ("-v", "--verbose", "--log-verbose")
METRICS_FLAGS = ("--metrics",)


def flag_index(argv: Sequence[str], *names: str) -> int | None:
    """Index of the last occurrence of any of ``names`` (llama.cpp keeps the last value)."""
    found = None
    for i, item in enumerate(argv):
        if item in names:
            found = i
    return found


def has_flag(argv: Sequence[str], *names: str) -> bool:
    return flag_index(argv, *names) is not None


def flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value after the last occurrence of one of ``names``, or None."""
    i = flag_index(argv, *names)
    if i is None or i + 1 >= len(argv):
        return None
    return argv[i + 1]


def set_flag(argv: list[str], names: Sequence[str], value: str) -> list[str]:
    """Copy of ``argv`` with the flag's value replaced, or ``names[0] value`` appended."""
    out = list(argv)
    i = flag_index(out, *names)
    if i is not None and i + 1 < len(out):
        out[i + 1] = value
    else:
        out += [names[0], value]
    return out


def rpc_endpoints(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The ``--rpc`` endpoints in order (flag first, else ``LLAMA_ARG_RPC``), as llama.cpp splits them."""
    value = flag_value(argv, *RPC_FLAGS)
    if value is None and env:
        value = env.get("LLAMA_ARG_RPC")
    if not value:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def model_path(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    value = flag_value(argv, *MODEL_FLAGS)
    if value is None and env:
        value = env.get("LLAMA_ARG_MODEL")
    return value
