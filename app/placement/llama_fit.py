"""What llama.cpp's own ``--fit`` would choose, as a placement we can show and compare.

``llama-fit-params`` (without ``--fit-print``) runs llama.cpp's fitting algorithm on the devices it sees
and prints the arguments it picked (``-c N -ngl N [-ts a,b] [-ot "..."]``); we read them back with the
importer, so its choice appears on the board like any other placement.
"""

from __future__ import annotations

import os
import subprocess

from ..command.formats import parse_command_text
from ..command.parse import parse_llama_args
from ..lanes import Lane
from ..llamacpp.binaries import LlamaCppNotFound, find_tool
from ..llamacpp.fit_print import FitPrintError, llama_reason
from ..memory.settings import LlamaSettings
from ..model import Model
from ..units import MiB
from .placement import Placement


def llama_fit(
    model: Model,
    model_path: str | os.PathLike,
    devices: list[Lane],
    settings: LlamaSettings,
    *,
    rpc: list[str] | None = None,
    margin: int = 1024 * MiB,
    llama_dir: str | os.PathLike | None = None,
    timeout: float = 120.0,
) -> tuple[list[str], Placement]:
    """Run llama.cpp's fit for these devices and context; return its arguments and the placement they mean."""
    try:
        tool = find_tool("llama-fit-params", llama_dir)
    except LlamaCppNotFound as exc:
        raise FitPrintError(str(exc)) from None
    argv = [str(tool.path), "-m", os.fspath(model_path)]
    if rpc:
        argv += ["--rpc", ",".join(rpc)]
    if devices:
        argv += ["-dev", ",".join(d.name for d in devices)]
    argv += [
        "-c",
        str(settings.n_ctx or 0),
        "-ctk",
        settings.type_k,
        "-ctv",
        settings.type_v,
        "--fit-target",
        str(max(0, margin // MiB)),
    ]
    if settings.flash_attn in ("on", "off"):
        argv += ["-fa", settings.flash_attn]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise FitPrintError(f"llama-fit-params did not finish within {timeout:.0f} s.") from None
    if proc.returncode != 0 or not proc.stdout.strip().startswith("-"):
        raise FitPrintError(
            f"llama-fit-params could not fit (exit status {proc.returncode}): {llama_reason(proc.stderr)}"
        )
    _env, fitted = parse_command_text(proc.stdout.strip())
    parsed = parse_llama_args(fitted, tool=settings.tool)
    placement = Placement.from_settings(model, devices, parsed.settings)
    placement.settings = settings.copy(n_ctx=parsed.settings.n_ctx or settings.n_ctx)
    return fitted, placement
