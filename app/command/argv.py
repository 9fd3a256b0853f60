"""Read a llama.cpp argument list without a shell: where a flag is, and its value.

llama.cpp's parser (``common/arg.cpp`` ``common_params_parse_ex``) takes each
flag as its own argv item followed by its value; ``--flag=value`` is not
accepted. These helpers work on that form only and never re-split or quote.

Every name stands for all spellings of its option in the flag table
(:func:`app.command.flags.spellings`: ``--rpc`` also finds llama-bench's
``-rpc``, ``-m`` finds ``--model``), and the walk skips flag values, so a
value that looks like a flag (``--alias --port``) is not taken for one.
When a flag is given more than once the **last** occurrence counts, as in
llama.cpp (each occurrence overwrites the value; it warns "only last value
will be used").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from .flags import FLAGS, lookup, spellings

__all__ = [
    "HOST_FLAGS",
    "PORT_FLAGS",
    "RPC_FLAGS",
    "MODEL_FLAGS",
    "API_KEY_FLAGS",
    "VERBOSITY_FLAGS",
    "VERBOSE_SWITCHES",
    "METRICS_FLAGS",
    "flag_index",
    "has_flag",
    "flag_value",
    "rpc_endpoints",
    "model_path",
    "MASK",
    "SECRET_ENV",
    "mask_secrets",
    "mask_env",
]

HOST_FLAGS = spellings("--host")
PORT_FLAGS = spellings("--port")
RPC_FLAGS = spellings("--rpc")
MODEL_FLAGS = spellings("-m")
API_KEY_FLAGS = spellings("--api-key")
VERBOSITY_FLAGS = spellings("-lv")
VERBOSE_SWITCHES = spellings("-v")
METRICS_FLAGS = spellings("--metrics")
#: What a secret value is shown as.
MASK = "***"
#: Variables whose value is a credential: the secret flags' variables (the table's ``secret`` rows), and
#: ``LLAMA_ARG_API_KEY`` (llama.cpp reads ``LLAMA_API_KEY``; the ``LLAMA_ARG_`` spelling is masked too).
SECRET_ENV = frozenset({f.env for f in FLAGS if f.secret and f.env} | {"LLAMA_ARG_API_KEY"})


def _flags(argv: Sequence[str], tool: str) -> Iterator[int]:
    """Indices of the items that are flags (not values of a flag), program name skipped."""
    i = 0
    while i < len(argv):
        hit = lookup(argv[i])
        if hit is None:
            if argv[i].startswith("-"):
                yield i
            i += 1
            continue
        yield i
        flag = hit[0]
        n = flag.takes(tool)
        if flag.bare is not None:
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            n = 1 if nxt.lower() in (flag.choices or ()) else 0
        i += 1 + n


def flag_index(argv: Sequence[str], *names: str, tool: str = "server") -> int | None:
    """Index of the last occurrence of any spelling of ``names`` (llama.cpp keeps the last value)."""
    wanted = set(spellings(*names))
    found = None
    for i in _flags(argv, tool):
        if argv[i] in wanted:
            found = i
    return found


def has_flag(argv: Sequence[str], *names: str, tool: str = "server") -> bool:
    return flag_index(argv, *names, tool=tool) is not None


def flag_value(argv: Sequence[str], *names: str, tool: str = "server") -> str | None:
    """The value after the last occurrence of one of ``names``, or None."""
    i = flag_index(argv, *names, tool=tool)
    if i is None or i + 1 >= len(argv):
        return None
    return argv[i + 1]


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


def mask_secrets(argv: Sequence[str], tool: str = "server") -> list[str]:
    """``argv`` with the value of every secret flag (the table's ``secret`` rows: ``--api-key``, ``--hf-token``)
    replaced by :data:`MASK`, for logs and displays. ``--api-key=KEY`` is masked too; nothing else changes
    (``--api-key-file`` and ``--ssl-key-file`` are paths, shown as they are)."""
    out = list(argv)
    flags = set(_flags(out, tool))
    for i, a in enumerate(out):
        if a.startswith("--") and "=" in a:
            hit = lookup(a.partition("=")[0])
            if hit is not None and hit[0].secret:
                out[i] = a.partition("=")[0] + "=" + MASK
            continue
        if i not in flags:
            continue
        hit = lookup(a)
        if hit is not None and hit[0].secret and hit[0].nargs and i + 1 < len(out):
            out[i + 1] = MASK
    return out


def mask_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` with the value of every :data:`SECRET_ENV` variable replaced by :data:`MASK`."""
    return {k: (MASK if k in SECRET_ENV else v) for k, v in (env or {}).items()}
