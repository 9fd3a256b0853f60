"""What the subcommands share: the model, the devices, one-line errors, JSON and byte formatting.

Every subcommand reports an error the same way: one ``layerdeck: MESSAGE``
line on stderr and exit status :data:`EXIT_USAGE` (2), for any
:class:`app.errors.LayerdeckError` (:data:`ERRORS`).  Results go to stdout,
as text or as a JSON document (:func:`print_json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from ..command.parse import ArgsError
from ..errors import LayerdeckError
from ..memory.device_adapter import from_detected, parse_device_spec
from ..model import Model, open_model
from ..units import MiB, fmt_bytes

__all__ = [
    "ERRORS",
    "EXIT_USAGE",
    "fail",
    "load_model",
    "devices",
    "detection_problems",
    "device_options",
    "llama_args",
    "print_json",
    "fmt_bytes",
    "fmt_mib",
    "MiB",
]

#: Exit status when the input cannot be used (the message on stderr says why).
EXIT_USAGE = 2

#: What a subcommand reports as one line instead of a traceback.  ``ArgsError`` is named until it
#: derives from :class:`app.errors.CommandError` (then ``LayerdeckError`` alone covers it).
ERRORS: tuple[type[Exception], ...] = (LayerdeckError, ArgsError)


def fail(error: Exception | str, status: int = EXIT_USAGE) -> int:
    """Print ``layerdeck: MESSAGE`` (and the error's hint, if any) to stderr; return ``status``."""
    if isinstance(error, LayerdeckError):
        text = error.message + (f" {error.hint}" if error.hint else "")
    else:
        text = str(error)
    print(f"layerdeck: {text}", file=sys.stderr)
    return status


def load_model(path: str) -> Model:
    """The GGUF model at ``path`` (any shard of a split set); raises a :class:`app.errors.ReadError`."""
    return open_model(path)


def devices(spec: str | None, rpc: list[str], llama_dir: str | None):
    """``(lanes, detection)``: the ``--devices`` spec when given, else what detection finds (with ``--rpc``).

    ``detection`` is the :class:`app.devices.model.DetectionResult`, or None for a typed spec.
    """
    if spec:
        return parse_device_spec(spec), None
    from ..devices.detect import detect  # detection starts llama.cpp; only when asked

    result = detect(llama_dir=llama_dir, rpc=rpc)
    return from_detected(result.devices), result


def detection_problems(result) -> list[str]:
    """``source: message`` for each detection source that failed as a whole (none for a typed spec)."""
    return [f"{e.source}: {e.message}" for e in getattr(result, "errors", None) or []]


def device_options() -> argparse.ArgumentParser:
    """The ``--devices`` / ``--llama-dir`` options of the placement subcommands, as an argparse parent."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--devices", metavar="NAME=MiB,...", help="declare devices by hand (planning)")
    p.add_argument("--llama-dir", help="llama.cpp binaries folder")
    return p


def llama_args(values: list[str]) -> list[str]:
    """The llama.cpp arguments given after ``--`` (argparse's REMAINDER keeps the ``--``)."""
    return values[1:] if values and values[0] == "--" else list(values)


def print_json(doc, out: TextIO | None = None, indent: int = 1) -> None:
    """Write ``doc`` as JSON and a newline to ``out`` (stdout)."""
    out = out or sys.stdout
    json.dump(doc, out, indent=indent)
    out.write("\n")


def fmt_mib(nbytes: float, width: int = 0) -> str:
    """``"1234 MiB"``, the number rounded and right-aligned in ``width`` characters."""
    return f"{nbytes / MiB:{width}.0f} MiB"
