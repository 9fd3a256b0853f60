"""Run ``llama-server --list-devices`` and parse what it prints.

The format comes from ``common_print_available_devices`` in
``common/arg.cpp``::

    Available devices:
      CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23700 MiB free)
      RPC0: 192.168.1.20:50052 (24105 MiB, 24105 MiB free)

CPU devices are never printed; a build with nothing else prints ``  (none)``.
BLAS shows ``(0 MiB, 0 MiB free)``.  RPC devices are described by the
endpoint exactly as passed to ``--rpc``.  The CUDA description is the CUDA
device name (``prop.name``), with `` (dev pN/vM)`` appended when
``GGML_CUDA_DEVICES`` emulates virtual devices; no PCI id is printed here.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.devices.records import MiB
from app.errors import DetectError

log = logging.getLogger(__name__)

HEADER = "Available devices:"
_LINE = re.compile(r"^\s+(?P<name>\S+?): (?P<desc>.*) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")
_NONE = re.compile(r"^\s+\(none\)\s*$")
# "NVIDIA GeForce RTX 4090 (dev p0/v1)": GGML_CUDA_DEVICES virtual devices (ggml-cuda.cu).
VIRTUAL_SUFFIX = re.compile(r"^(?P<name>.*) \(dev p(?P<phys>\d+)/v(?P<virt>\d+)\)$")

DEFAULT_TIMEOUT_S = 60.0


class ListingParseError(DetectError, ValueError):
    """The text is not ``--list-devices`` output."""


class ListingError(DetectError, RuntimeError):
    """``llama-server --list-devices`` failed; the message says why."""

    def __init__(self, message: str, stderr: str = "", returncode: int | None = None, timed_out: bool = False):
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode
        self.timed_out = timed_out


@dataclass(frozen=True)
class ListedDevice:
    """One ``  NAME: DESC (TOTAL MiB, FREE MiB free)`` line."""

    name: str
    description: str
    total_mib: int
    free_mib: int

    @property
    def total_bytes(self) -> int:
        return self.total_mib * MiB

    @property
    def free_bytes(self) -> int:
        return self.free_mib * MiB

    @property
    def backend(self) -> str:
        """The name without its index: ``CUDA0`` -> ``CUDA``, ``BLAS`` -> ``BLAS``."""
        return re.sub(r"\d+$", "", self.name)


@dataclass(frozen=True)
class Listing:
    devices: tuple[ListedDevice, ...]
    none: bool = False  # the build printed "(none)": CPU only
    unparsed: tuple[str, ...] = ()  # lines after the header that did not match
    stderr: str = ""
    command: tuple[str, ...] = field(default=())


def parse_list_devices(text: str) -> Listing:
    """Parse ``--list-devices`` stdout; lines before the header are ignored.

    Raises :class:`ListingParseError` when there is no ``Available devices:``
    header (an old build without the flag, or not llama.cpp at all).
    """
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == HEADER)
    except StopIteration:
        raise ListingParseError(
            "no 'Available devices:' line in the output: this llama.cpp build may be too old for --list-devices"
        ) from None
    devices: list[ListedDevice] = []
    unparsed: list[str] = []
    none = False
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        if _NONE.match(line):
            none = True
            continue
        m = _LINE.match(line)
        if m:
            devices.append(ListedDevice(m["name"], m["desc"], int(m["total"]), int(m["free"])))
        else:
            unparsed.append(line)
    return Listing(tuple(devices), none=none, unparsed=tuple(unparsed))


def list_devices_command(server: str | Path, rpc: Sequence[str] = ()) -> list[str]:
    """The argument list; ``--rpc`` must come before ``--list-devices`` (that flag exits at once)."""
    cmd = [str(server)]
    if rpc:
        cmd += ["--rpc", ",".join(rpc)]
    cmd.append("--list-devices")
    return cmd


def listing_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for a listing run: ``LLAMA_ARG_RPC`` is removed so only ``--rpc`` decides."""
    out = dict(env)
    out.pop("LLAMA_ARG_RPC", None)
    return out


def run_list_devices(
    server: str | Path,
    rpc: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Listing:
    """Run ``llama-server [--rpc a,b] --list-devices`` (no shell) and parse it.

    Raises :class:`ListingError` when the program cannot start, times out,
    exits non-zero (an unreachable RPC endpoint aborts it) or prints no list.
    """
    cmd = list_devices_command(server, rpc)
    run_env = listing_env(os.environ if env is None else env)
    kwargs: dict[str, Any] = {}  # extra subprocess.run keywords (creationflags on Windows)
    if sys.platform == "win32":
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
    log.debug("running %s", cmd)
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=run_env,
            timeout=timeout,
            **kwargs,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = _decode(exc.stderr)
        raise ListingError(
            f"{Path(server).name} --list-devices did not finish within {timeout:g} s", stderr, None, True
        ) from None
    except OSError as exc:
        raise ListingError(f"cannot run {server}: {exc.strerror or exc}") from None
    stdout, stderr = _decode(proc.stdout), _decode(proc.stderr)
    if proc.returncode != 0:
        raise ListingError(
            f"{Path(server).name} --list-devices failed ({_describe_exit(proc.returncode)}): "
            f"{last_error_line(stderr) or 'no error message'}",
            stderr,
            proc.returncode,
        )
    try:
        listing = parse_list_devices(stdout)
    except ListingParseError as exc:
        raise ListingError(str(exc), stderr, proc.returncode) from None
    return Listing(listing.devices, listing.none, listing.unparsed, stderr, tuple(cmd))


def last_error_line(stderr: str) -> str:
    """The most telling line of a failed run's stderr (abort messages come before the backtrace)."""
    # Skip the gdb backtrace ggml_abort may print ("#2 0x... in ggml_abort ()", "[New LWP ...]").
    lines = [
        line.strip()
        for line in stderr.splitlines()
        if line.strip() and not re.match(r"\s*(#\d|0x[0-9a-f]|\[|\d+\s)", line)
    ]
    for pattern in (r"error|failed|cannot|invalid|mismatch|crashed", r"abort"):
        for line in lines:
            if re.search(pattern, line, re.IGNORECASE):
                return line
    return lines[-1] if lines else ""


def _describe_exit(code: int) -> str:
    if code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")
