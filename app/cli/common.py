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
from ..errors import DetectError, EstimateError, LayerdeckError
from ..lanes import DeviceKind, Lane
from ..llamacpp.load_check import LoadCheck
from ..memory.device_adapter import from_detected, parse_device_spec
from ..memory.layout import model_devices
from ..memory.settings import NGL_AUTO, LlamaSettings
from ..model import Model, open_model
from ..units import MiB, fmt_bytes

__all__ = [
    "ERRORS",
    "EXIT_USAGE",
    "fail",
    "load_model",
    "check_notes",
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


def load_model(path: str, llama_dir: str | None = None, check: bool = True) -> tuple[Model, LoadCheck | None]:
    """``(model, check)``: the GGUF model at ``path`` (any shard of a split set), or the header-only model a
    remote name names (``hf://ORG/REPO/FILE.gguf``, ``ORG/REPO:QUANT``, an http(s) URL: :mod:`app.remote`,
    only the header is read), and llama.cpp's verdict on loading it (:mod:`app.llamacpp.load_check`; None
    when ``check`` is false).

    Raises a :class:`app.errors.ReadError`: Layerdeck's own checks failed, or llama.cpp refuses the file
    (:class:`~app.llamacpp.load_check.LlamaRefusedModel`, with llama.cpp's reason). A check that could not
    be made is returned as ``unchecked``; :func:`check_notes` turns it into the caller's note.
    """
    from ..llamacpp.load_check import check_load
    from ..remote.names import parse_name

    if parse_name(path) is None:
        model = open_model(path)
        verdict = check_load(model.paths, llama_dir) if check else None
    else:
        from ..remote import RemoteOptions, open_remote
        from ..remote.load_check import check_remote

        def progress(done: int, total: int) -> None:
            print(f"\rreading the header of {path}: {done / MiB:.1f} MiB", end="", file=sys.stderr, flush=True)

        model, read = open_remote(path, RemoteOptions(progress=progress if sys.stderr.isatty() else None))
        if sys.stderr.isatty():
            print(file=sys.stderr)
        verdict = check_remote(read, llama_dir) if check else None
    if verdict is not None:
        verdict.raise_if_refused(path)
    return model, verdict


def check_notes(verdict: LoadCheck | None) -> list[str]:
    """The note a subcommand shows for llama.cpp's load verdict (none when llama.cpp loaded the file)."""
    note = verdict.note() if verdict is not None else None
    return [note] if note else []


def devices(
    spec: str | None,
    rpc: list[str],
    llama_dir: str | None,
    settings: LlamaSettings | None = None,
    fit: str | None = None,
):
    """``(lanes, detection)``: the ``--devices`` spec when given, else what detection finds (with ``--rpc``).

    ``detection`` is the :class:`app.devices.records.DetectionResult`, or None for a typed spec.

    An ``--rpc`` host whose devices llama.cpp did not list (llama-server missing, the host down) stands for
    one RPC device of unknown memory (:data:`app.devices.rpc.ASSUMED`, said in the detection's errors). That
    answer is kept only where it does not depend on the memory: ``settings`` (the command's, ``fit`` its
    ``--fit``) split the layers with ``-ts`` or put them on one device. Otherwise (or with no ``settings``:
    the caller needs capacities), and for an ``--rpc`` entry that is not ``host:port`` or names the same
    server twice, a :class:`app.errors.DetectError` stops with what is missing and how to fix it.
    """
    if spec:
        return parse_device_spec(spec), None
    from ..devices.detect import detect  # detection starts llama.cpp; only when asked

    result = detect(llama_dir=llama_dir, rpc=rpc)
    seen: set[str] = set()
    for h in result.rpc_hosts:
        text = h.endpoint.strip()
        if h.status == "invalid" or (h.status == "duplicate" and text not in seen):
            raise DetectError(f"--rpc: {h.error}. Give each RPC server once, as host:port, separated by commas.")
        seen.add(text)
    lanes = from_detected(result.devices)
    unknown = [d for d in lanes if d.kind is DeviceKind.RPC and not d.capacity]
    if unknown:
        used = {d.name for d in _model_devices(lanes, settings)} if settings is not None else None
        unknown = [d for d in unknown if used is None or d.name in used]
    if unknown and (settings is None or _needs_capacity(lanes, settings, fit)):
        status = {h.endpoint.strip(): h.status for h in result.rpc_hosts}
        why = ", ".join(
            f"{d.name} = {d.endpoint}: "
            + (
                "llama-server not found"
                if status.get(d.endpoint or "") == "not probed"
                else status.get(d.endpoint or "", "?")
            )
            for d in unknown
        )
        fix = "split the layers yourself with -ngl N -ts A,B,..., or " if settings is not None else ""
        raise DetectError(
            f"the placement depends on the memory of RPC devices llama.cpp did not list ({why}). "
            f"To fix it, {fix}start ggml-rpc-server on those hosts and make llama-server available "
            "(--llama-dir or LAYERDECK_LLAMA_CPP_DIR)."
        )
    return lanes, result


def _model_devices(lanes: list[Lane], settings: LlamaSettings) -> list[Lane]:
    try:
        return model_devices(lanes, settings)
    except EstimateError:  # a -dev name that is not there: the placement reports it
        return []


def _needs_capacity(lanes: list[Lane], settings: LlamaSettings, fit: str | None) -> bool:
    """Whether llama.cpp's layer placement for ``settings`` depends on the devices' memory.

    It does when ``--fit`` is on and nothing pins the layers (llama.cpp fits them to the free memory), and
    when the layers go to two or more devices without ``-ts`` (split by free memory, ``load_tensors``).
    """
    devs = _model_devices(lanes, settings)
    ngl = settings.n_gpu_layers
    if not devs or ngl == 0:
        return False
    ts = settings.tensor_split
    if fit in (None, "on") and ngl in (None, NGL_AUTO) and not ts and not settings.overrides:
        return True
    return len(devs) > 1 and not (ts and any(x != 0 for x in ts[: len(devs)]))


def detection_problems(result) -> list[str]:
    """``source: message`` for each detection source that failed or was assumed (none for a typed spec).

    The lines every placement subcommand shows as notes (text, JSON ``notes``): llama.cpp or NVML missing,
    device names guessed, RPC devices assumed.
    """
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
