"""llama.cpp's own memory estimate: ``llama-fit-params --fit-print on``.

It loads the model with ``no_alloc`` (a dry run: nothing is allocated, no
weights are read) and prints one line per device, ``NAME model context
compute`` in MiB, then ``Host ...`` (``common_fit_print`` in
``common/fit.cpp``). Layerdeck shows these numbers next to its own.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from dataclasses import dataclass

from ..errors import ToolError
from ..lanes import CPU, from_llama_name
from .binaries import LlamaCppNotFound, find_tool

log = logging.getLogger(__name__)

_LINE = re.compile(r"^(?P<name>\S+) (?P<model>\d+) (?P<context>\d+) (?P<compute>\d+)\s*$")


class FitPrintError(ToolError, RuntimeError):
    """The dry run could not be done; the message says why and what to do."""


@dataclass(frozen=True)
class FitRow:
    name: str  # device name as llama.cpp prints it; its "Host" row is read as CPU
    model: int  # MiB (floored, as llama.cpp prints)
    context: int
    compute: int


def parse_fit_print(stdout: str) -> list[FitRow]:
    rows = []
    for line in stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            rows.append(FitRow(from_llama_name(m["name"]), int(m["model"]), int(m["context"]), int(m["compute"])))
    return rows


def tail_lines(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def run_fit_print(
    model: str | os.PathLike,
    args: list[str],
    *,
    llama_dir: str | os.PathLike | None = None,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> list[FitRow]:
    """Run the dry run for ``-m model`` plus ``args`` (llama.cpp flags, no ``-m``) and return its rows."""
    try:
        tool = find_tool("llama-fit-params", llama_dir)
    except LlamaCppNotFound as exc:
        raise FitPrintError(str(exc)) from None
    argv = [str(tool.path), "-m", os.fspath(model), *args, "--fit-print", "on"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env if env is not None else dict(os.environ),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise FitPrintError(
            f"llama-fit-params did not finish within {timeout:.0f} s (an unreachable RPC host "
            "can cause this); check the RPC hosts and try again."
        ) from None
    except OSError as exc:
        raise FitPrintError(f"could not run {tool.path}: {exc}") from None
    if "invalid argument: --fit-print" in proc.stderr or "invalid argument: -fitp" in proc.stderr:
        raise FitPrintError(
            f"{tool.path} is too old for --fit-print (added in late 2025): update llama.cpp to get its exact estimate."
        )
    rows = parse_fit_print(proc.stdout)
    if proc.returncode != 0 or not rows or rows[-1].name != CPU:
        raise FitPrintError(f"llama-fit-params failed (exit status {proc.returncode}): {llama_reason(proc.stderr)}")
    return rows


def llama_reason(stderr: str, n: int = 6) -> str:
    """llama.cpp's own reason ("invalid device: CUDA0") first, then its last lines, never its usage text."""
    text = stderr.split("\nusage:", 1)[0]
    said = [
        ln.strip()
        for ln in text.splitlines()
        if ("error" in ln.lower() or "invalid" in ln.lower())
        and not ln.startswith("terminate called")  # the C++ runtime's "std::runtime_error" line, not a reason
    ]
    head = said[-1] if said else "no reason given"
    tail = tail_lines(text, n)
    return head if not tail or tail.strip() == head else f"{head}\n{tail}"
