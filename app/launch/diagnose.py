"""Explain a failed llama-server run in plain words, from its output and exit status.

Each rule keys on a message llama.cpp prints (paths are in the llama.cpp tree
of llama-cpp-python 0.3.36), most specific first:

=====================  ====================================================================
kind                   message
=====================  ====================================================================
invalid_argument       ``error: invalid argument: X`` (``common/arg.cpp``),
                       ``error while handling argument "X": ...`` for a bad or missing value, and
                       llama-bench's ``error: invalid parameter for argument: X``
unknown_buffer_type    ``Available buffer types:`` + ``unknown buffer type`` (``-ot`` target,
                       ``common/arg.cpp`` ``parse_tensor_buffer_overrides``; llama-bench:
                       ``error: unrecognized buffer type 'X'``)
rpc_unreachable        ``Failed to connect to host:port`` (``ggml-rpc.cpp`` ``GGML_ABORT``)
rpc_failed             ``RPC handshake failed for``, ``RPC server version mismatch``,
                       ``Remote RPC server crashed or returned malformed response``
port_in_use            ``couldn't bind HTTP server socket, hostname: H, port: P``
                       (``tools/server/server-http.cpp``)
model_missing          ``failed to open GGUF file 'PATH' (REASON)`` (``ggml/src/gguf.cpp``)
model_corrupt          ``data is not within the file bounds``, ``unexpectedly reached end of
                       file``, ``invalid magic characters``, ``failed to read ...``
unsupported_arch       ``unknown model architecture: 'X'`` (``src/llama-model.cpp``)
out_of_memory          ``allocating X MiB on device N: cudaMalloc failed: out of memory``
                       (``ggml-cuda.cu``), ``failed to allocate B buffer of size N``
                       (``ggml-alloc.c``), ``unable to allocate B buffer`` (``llama-model.cpp``),
                       ``failed to allocate buffer for kv cache``, ``failed to allocate compute
                       pp buffers``, ``ggml_aligned_malloc: insufficient memory``, ``failed to
                       allocate Metal buffer``, ``CUDA error: out of memory``
model_load             any other ``error loading model: ...``
crash                  exit by SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE (or a Windows crash code),
                       with ``GGML_ASSERT``/``GGML_ABORT`` lines when there are some
killed                 exit by SIGKILL, SIGTERM, SIGINT or SIGHUP that Layerdeck did not send
exited                 exit status 0 without being asked to stop
timeout                the server did not become ready in time (set by the process manager)
not_started            the program could not be found or run (set by the process manager)
unknown                any other non-zero exit
=====================  ====================================================================
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..command.argv import MODEL_FLAGS, flag_value
from ..lanes import StrEnum
from .buffers import describe_buffer_type


class DiagnosisKind(StrEnum):
    """Values of :attr:`Diagnosis.kind`: what went wrong (see the table above)."""

    INVALID_ARGUMENT = "invalid_argument"
    UNKNOWN_BUFFER_TYPE = "unknown_buffer_type"
    RPC_UNREACHABLE = "rpc_unreachable"
    RPC_FAILED = "rpc_failed"
    PORT_IN_USE = "port_in_use"
    MODEL_MISSING = "model_missing"
    MODEL_CORRUPT = "model_corrupt"
    UNSUPPORTED_ARCH = "unsupported_arch"
    OUT_OF_MEMORY = "out_of_memory"
    MODEL_LOAD = "model_load"
    CRASH = "crash"
    KILLED = "killed"
    EXITED = "exited"
    TIMEOUT = "timeout"
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Diagnosis:
    kind: DiagnosisKind
    title: str
    explanation: str
    suggestion: str
    lines: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DiagnosisKind):
            object.__setattr__(self, "kind", DiagnosisKind(self.kind))  # ValueError for an unknown kind

    def __str__(self) -> str:
        return f"{self.title}: {self.explanation} {self.suggestion}".strip()


#: Flags older or newer llama.cpp builds spell differently: flag -> (replacement, why).
RENAMES: dict[str, tuple[str, str]] = {
    "--no-mmap": ("--load-mode none", "--no-mmap was removed; loading is now chosen with -lm/--load-mode"),
    "--mmap": ("--load-mode mmap", "--mmap was removed; loading is now chosen with -lm/--load-mode"),
    "--mlock": ("--load-mode mlock", "--mlock was removed; use --load-mode mlock (or mmap+mlock)"),
    "-dio": ("--load-mode dio", "direct I/O is now a loading mode"),
    "--direct-io": ("--load-mode dio", "direct I/O is now a loading mode"),
    "--no-direct-io": ("--load-mode mmap", "direct I/O is now a loading mode"),
    "-fa": ("-fa on", "-fa takes a value now: on, off or auto"),
    "--flash-attn": ("--flash-attn on", "--flash-attn takes a value now: on, off or auto"),
    "--rpc-servers": ("--rpc", "the RPC flag is --rpc host:port,host:port"),
    "--load-mode": ("--no-mmap or --mlock", "this llama.cpp is older than --load-mode"),
    "-lm": ("--no-mmap or --mlock", "this llama.cpp is older than --load-mode"),
    "--fit": ("(leave it out)", "this llama.cpp is older than --fit, so it never changes the placement itself"),
    "-fit": ("(leave it out)", "this llama.cpp is older than --fit, so it never changes the placement itself"),
    "-ot": ("(update llama.cpp)", "this llama.cpp is too old for tensor overrides"),
    "--override-tensor": ("(update llama.cpp)", "this llama.cpp is too old for tensor overrides"),
    "-ncmoe": ("-ot with an exps=CPU pattern", "this llama.cpp is older than --n-cpu-moe"),
    "--n-cpu-moe": ("-ot with an exps=CPU pattern", "this llama.cpp is older than --n-cpu-moe"),
    "-cmoe": ("-ot '\\.ffn_(up|down|gate)_exps=CPU'", "this llama.cpp is older than --cpu-moe"),
    "--cpu-moe": ("-ot '\\.ffn_(up|down|gate)_exps=CPU'", "this llama.cpp is older than --cpu-moe"),
    "-kvu": ("(leave it out)", "this llama.cpp is older than the unified KV cache switch"),
    "-lv": ("-v", "this llama.cpp is older than -lv; -v shows the buffer sizes too"),
}

_SIGNAL_CRASH = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP", "SIGSYS"}
_SIGNAL_KILL = {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"}
# Windows NTSTATUS exit codes of a crashed process; 3 is what the C runtime's abort() exits with.
_WINDOWS_CRASH = {
    0xC0000005: "an access violation",
    0xC0000409: "a fast-fail abort (stack buffer overrun or abort())",
    0xC000001D: "an illegal instruction (the build uses CPU features this CPU lacks)",
    0xC00000FD: "a stack overflow",
    0xC0000374: "heap corruption",
    3: "abort()",
}


def _text_lines(log: str | Iterable[Any]) -> list[str]:
    if isinstance(log, str):
        return log.splitlines()
    return [getattr(item, "text", item) for item in log]


def _find(lines: Sequence[str], pattern: str | re.Pattern, flags: int = 0) -> tuple[re.Match | None, str | None]:
    rx = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
    for line in lines:
        m = rx.search(line)
        if m:
            return m, line
    return None, None


def _grep(lines: Sequence[str], *patterns: str, limit: int = 12) -> tuple[str, ...]:
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    out = [line for line in lines if rx.search(line)]
    return tuple(dict.fromkeys(out))[:limit]


def signal_name(returncode: int | None) -> str | None:
    """``SIGKILL`` for a POSIX returncode of -9, None when the process was not ended by a signal."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    sig = signal_name(returncode)
    if sig:
        return f"ended by {sig}"
    code = returncode & 0xFFFFFFFF
    if code in _WINDOWS_CRASH and code > 255:
        return f"crashed with {_WINDOWS_CRASH[code]} (0x{code:08X})"
    return f"exit status {returncode}"


def _model_of(argv: Sequence[str] | None, lines: Sequence[str]) -> str | None:
    m, _ = _find(lines, r"failed to load model, '(.+)'")
    if m:
        return m.group(1)
    m, _ = _find(lines, r"load_model: loading model '(.+)'")
    if m:
        return m.group(1)
    return flag_value(argv, *MODEL_FLAGS) if argv else None


# --------------------------------------------------------------------------- rules


def _invalid_argument(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"error: invalid argument: (\S+)")
    if m:
        flag = m.group(1)
        if flag in ("on", "off", "auto") and argv and "-fa" in argv:
            # An old build where -fa was a plain switch takes "on" as a stray argument.
            return Diagnosis(
                DiagnosisKind.INVALID_ARGUMENT,
                "Flag not accepted by this llama.cpp",
                f"This llama-server does not accept '{flag}' after -fa: in this older build -fa is a plain switch.",
                "Write -fa alone to turn Flash Attention on, or leave it out for off; or update llama.cpp.",
                (line or "",),
                {"flag": "-fa", "value": flag},
            )
        if flag in RENAMES:
            new, why = RENAMES[flag]
            return Diagnosis(
                DiagnosisKind.INVALID_ARGUMENT,
                f"{flag} is not a flag of this llama.cpp",
                f"llama-server stopped at the command line: {why}.",
                f"Use {new} instead of {flag}.",
                (line or "",),
                {"flag": flag, "replacement": new},
            )
        return Diagnosis(
            DiagnosisKind.INVALID_ARGUMENT,
            f"{flag} is not a flag of this llama.cpp",
            f"llama-server does not know {flag}. It may have been renamed or removed in this version, or be misspelt.",
            "Run llama-server --help to see the flags this build accepts, then fix or remove it.",
            (line or "",),
            {"flag": flag},
        )
    m, line = _find(lines, r"error: invalid parameter for argument: (\S+)")
    if m and not _find(lines, r"unrecognized buffer type")[0]:  # llama-bench (tools/llama-bench/llama-bench.cpp)
        flag = m.group(1)
        return Diagnosis(
            DiagnosisKind.INVALID_ARGUMENT,
            f"llama-bench does not accept {flag} (or its value)",
            f"llama-bench stopped at the command line on {flag}: the flag is unknown to this build or its value "
            "is not valid (llama-bench separates several values with ',' and devices/splits with '/').",
            "Run llama-bench --help and fix or remove it.",
            (line or "",),
            {"flag": flag},
        )
    m, line = _find(lines, r'error while handling argument "([^"]+)": (.*)')
    if m:
        flag, why = m.group(1), m.group(2).strip()
        if "unknown buffer type" in why:
            return None  # handled by the -ot rule
        got = re.search(r"unknown value for [-\w]+: '([^']*)'", why)
        if flag in ("-fa", "--flash-attn") and (got or "expected value" in why):
            return Diagnosis(
                DiagnosisKind.INVALID_ARGUMENT,
                f"{flag} needs a value",
                f"{flag} takes on, off or auto in this llama.cpp"
                + (f"; it read the next argument '{got.group(1)}' as its value." if got else "."),
                f"Write {flag} on (or off / auto).",
                (line or "",),
                {"flag": flag, "replacement": f"{flag} on"},
            )
        if why == "stoi" or "stoi" in why:
            return Diagnosis(
                DiagnosisKind.INVALID_ARGUMENT,
                f"{flag} needs a number",
                f"The value given to {flag} is not a number this llama.cpp accepts"
                + (
                    " (older builds take -ngl as a number only, not 'all' or 'auto')."
                    if flag in ("-ngl", "--n-gpu-layers", "--gpu-layers")
                    else "."
                ),
                "Give a whole number"
                + (" such as 999 for all layers." if flag in ("-ngl", "--n-gpu-layers", "--gpu-layers") else "."),
                (line or "",),
                {"flag": flag},
            )
        if "expected value" in why:
            return Diagnosis(
                DiagnosisKind.INVALID_ARGUMENT,
                f"{flag} needs a value",
                f"{flag} was given without its value.",
                f"Add the value after {flag} (see llama-server --help).",
                (line or "",),
                {"flag": flag},
            )
        return Diagnosis(
            DiagnosisKind.INVALID_ARGUMENT,
            f"Bad value for {flag}",
            f"llama-server rejected the value of {flag}: {why}.",
            f"Check the value of {flag} against llama-server --help.",
            (line or "",),
            {"flag": flag, "reason": why},
        )
    return None


def _unknown_buffer_type(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, _ = _find(lines, r"unknown buffer type|unrecognized buffer type")
    if not m:
        return None
    available: list[str] = []
    for i, line in enumerate(lines):
        if line.strip() == "Available buffer types:":
            available = []
            for nxt in lines[i + 1 :]:
                if nxt.startswith("  ") and nxt.strip() and " " not in nxt.strip():
                    available.append(nxt.strip())
                else:
                    break
    asked = []
    if argv:
        for i, item in enumerate(argv):
            if item in ("-ot", "--override-tensor") and i + 1 < len(argv):
                for part in re.split(r"[,;]", argv[i + 1]):
                    if "=" in part:
                        target = part.rsplit("=", 1)[1]
                        if not available or target not in available:
                            asked.append(target)
    target = ", ".join(dict.fromkeys(asked)) or "the -ot target"
    avail = ", ".join(available) if available else "(not printed)"
    return Diagnosis(
        DiagnosisKind.UNKNOWN_BUFFER_TYPE,
        f"-ot names a buffer type this llama.cpp does not have: {target}",
        f"An -ot override moves tensors to a buffer type, and this llama-server only has: {avail}. "
        "A device that is not present (a GPU index that does not exist, an RPC server not in --rpc, "
        "a backend not compiled in) cannot be a target.",
        "Change the override to one of the available buffer types, or add the device (for RPC: its "
        "endpoint in --rpc, in the same order).",
        _grep(lines, r"unknown buffer type|unrecognized buffer type", r"Available buffer types", r"^  \S+$"),
        {"available": tuple(available), "requested": tuple(dict.fromkeys(asked))},
    )


def _rpc(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"Failed to connect to (\S+:\d+)\s*$")
    if m:
        ep = m.group(1)
        return Diagnosis(
            DiagnosisKind.RPC_UNREACHABLE,
            f"RPC server {ep} cannot be reached",
            f"llama.cpp could not open a connection to the RPC server at {ep} and aborted: one unreachable "
            "--rpc endpoint stops the whole server.",
            f"Start ggml-rpc-server on that machine (ggml-rpc-server -H <its address> -p {ep.rsplit(':', 1)[-1]}), "
            "check the address and firewall, or remove it from --rpc.",
            (line or "",),
            {"endpoint": ep},
        )
    m, line = _find(
        lines,
        r"RPC handshake failed for (\S+)|RPC server version mismatch: (\S+)|"
        r"Remote RPC server crashed or returned malformed response",
    )
    if m:
        if m.group(2):
            why = (
                f"an RPC server speaks protocol {m.group(2)}, which this llama-server does not; build both "
                "from the same llama.cpp version"
            )
        elif m.group(1):
            why = f"{m.group(1)} accepted the connection but did not complete the RPC handshake"
        else:
            why = "an RPC server closed the connection or crashed while llama-server used it"
        return Diagnosis(
            DiagnosisKind.RPC_FAILED,
            "An RPC server failed",
            f"llama.cpp stopped because {why}.",
            "Check the ggml-rpc-server output on that machine; it serves one client at a time, so stop other "
            "llama.cpp processes using it, and run the same llama.cpp version on both sides.",
            _grep(lines, r"RPC", r"Failed"),
            {},
        )
    return None


def _port(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"couldn't bind HTTP server socket, hostname: (\S+), port: (\d+)")
    if not m:
        return None
    host, port = m.group(1), int(m.group(2))
    return Diagnosis(
        DiagnosisKind.PORT_IN_USE,
        f"Port {port} is already in use",
        f"llama-server could not listen on {host}:{port}: another program (or another llama-server) holds that "
        "port, or the address does not belong to this machine.",
        "Choose another port (or leave the port empty so Layerdeck picks a free one), or stop the program using it.",
        (line or "",),
        {"host": host, "port": port},
    )


def _model_file(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"failed to open GGUF file '(.+)' \((.+)\)")
    if m:
        path, why = m.group(1), m.group(2)
        return Diagnosis(
            DiagnosisKind.MODEL_MISSING,
            f"Cannot open the model file {path}",
            f"llama-server could not open {path}: {why}.",
            "Check the path (it is read by llama-server, relative to its working directory), that the file "
            "exists and that it is readable.",
            _grep(lines, re.escape(path), r"failed to open"),
            {"path": path, "reason": why},
        )
    m, line = _find(
        lines,
        r"data is not within the file bounds|unexpectedly reached end of file|"
        r"invalid magic characters|gguf_init_from_file\w*: failed to read|bad GGUF version|"
        r"GGUFv1 is no longer supported|tensor '.+' has offset \d+, expected",
    )
    if m:
        path = _model_of(argv, lines) or "the model file"
        truncated = re.search(r"file bounds|end of file|failed to read", line or "")
        explanation = (
            f"{path} ends before all the data it describes: the download or copy is incomplete, or the file is damaged."
            if truncated
            else f"{path} is not a GGUF file this llama.cpp can read."
        )
        return Diagnosis(
            DiagnosisKind.MODEL_CORRUPT,
            f"The model file {path} is incomplete or damaged",
            explanation,
            "Download or copy the file again and compare its size (or checksum) with the source.",
            _grep(lines, r"error loading model", r"gguf_init", r"failed to load model"),
            {"path": path, "truncated": bool(truncated)},
        )
    return None


def _arch(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"unknown model architecture: '([^']*)'")
    if not m:
        return None
    arch = m.group(1)
    path = _model_of(argv, lines) or "the model"
    return Diagnosis(
        DiagnosisKind.UNSUPPORTED_ARCH,
        f"This llama.cpp does not support the '{arch}' architecture",
        f"{path} is a '{arch}' model, and this llama-server build does not know that architecture.",
        "Update llama.cpp to a version that supports it (new architectures arrive in new releases).",
        (line or "",),
        {"architecture": arch, "path": path},
    )


_OOM_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"allocating ([\d.]+) MiB on device (\d+): cudaMalloc failed: (.+)"), "cuda"),
    (re.compile(r"failed to allocate Metal buffer of (\d+) bytes"), "metal"),
    (
        re.compile(r"(?:alloc_tensor_range|ggml_gallocr_reserve_n\w*): failed to allocate (\S+) buffer of size (\d+)"),
        "generic",
    ),
    (re.compile(r"ggml_aligned_malloc: insufficient memory \(attempted to allocate\s+([\d.]+) MB\)"), "host"),
    (re.compile(r"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size (\d+)"), "host_bytes"),
    (re.compile(r"unable to allocate (\S+) buffer"), "weights"),
    (
        re.compile(
            r"failed to allocate (?:buffer for (kv cache|rs cache)|compute (?:pp|tg) buffers|compute buffers|"
            r"output buffer)"
        ),
        "phase",
    ),
    (re.compile(r"CUDA error: out of memory|ErrorOutOfDeviceMemory"), "runtime"),
]


def _oom(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    hits: dict[str, tuple[re.Match, str]] = {}
    for rx, tag in _OOM_RULES:
        for line in lines:
            m = rx.search(line)
            if m:
                hits.setdefault(tag, (m, line))
                break
    if not hits:
        return None
    device = buft = None
    mib: float | None = None
    if "cuda" in hits:
        m = hits["cuda"][0]
        mib, device = float(m.group(1)), f"CUDA{m.group(2)}"
        where = f"GPU {device}"
    elif "generic" in hits:
        m = hits["generic"][0]
        buft, mib = m.group(1), int(m.group(2)) / 2**20
        where = describe_buffer_type(buft)
    elif "metal" in hits:
        mib, where, device = int(hits["metal"][0].group(1)) / 2**20, "the Metal GPU", "MTL0"
    elif "weights" in hits:
        buft = hits["weights"][0].group(1)
        where = describe_buffer_type(buft)
    elif "host" in hits or "host_bytes" in hits:
        where = "host RAM"
    else:
        where = "a device"
    if mib is None and "host" in hits:
        mib = float(hits["host"][0].group(1))
    elif mib is None and "host_bytes" in hits:
        mib = int(hits["host_bytes"][0].group(1)) / 2**20
    remote = ""
    if buft and buft.startswith("RPC") and ("host" in hits or "host_bytes" in hits):
        remote = " (the RPC server reported it)"
    phase = "the model weights" if "weights" in hits else None
    if "phase" in hits:
        what = hits["phase"][0].group(0)
        phase = (
            "the KV cache"
            if "kv cache" in what
            else "the recurrent state"
            if "rs cache" in what
            else "the output (logits) buffer"
            if "output" in what
            else "the compute buffers"
        )
    if phase is None and "generic" in hits:
        phase = "the compute buffers" if "gallocr" in hits["generic"][1] else "the model weights"
    amount = (
        f"{mib:,.0f} MiB"
        if mib is not None and mib >= 10
        else (f"{mib:.2f} MiB" if mib is not None else "more memory than is free")
    )
    suggestion = {
        "the model weights": f"Put fewer layers or tensors on {where}: lower its -ts share or -ngl, or move "
        "experts to the CPU (-ncmoe / -ot exps=CPU).",
        "the KV cache": "Use a smaller context (-c), fewer slots (-np), or a quantized KV cache "
        "(-ctk q8_0 -ctv q8_0); or move layers (and their KV cache) off this device.",
        "the compute buffers": "Use a smaller micro-batch (-ub 256 or 128), or leave more free memory on "
        "this device by moving a layer off it.",
    }.get(phase or "", f"Free memory on {where} (close other programs using it), or place less on it.")
    lines_out = _grep(
        lines,
        r"cudaMalloc failed",
        r"failed to allocate",
        r"unable to allocate",
        r"insufficient memory",
        r"out of memory",
        r"ErrorOutOfDeviceMemory",
        r"error loading model",
    )
    return Diagnosis(
        DiagnosisKind.OUT_OF_MEMORY,
        f"Out of memory on {where}",
        f"llama.cpp tried to allocate {amount} on {where}{remote}"
        + (f" for {phase}" if phase else "")
        + " and the allocation failed.",
        suggestion,
        lines_out,
        {"device": device, "buffer_type": buft, "mib": mib, "phase": phase, "where": where},
    )


def _model_load(lines: Sequence[str], argv: Sequence[str] | None) -> Diagnosis | None:
    m, line = _find(lines, r"error loading model: (.+)")
    if not m:
        return None
    path = _model_of(argv, lines) or "the model"
    return Diagnosis(
        DiagnosisKind.MODEL_LOAD,
        f"llama.cpp could not load {path}",
        f"The loader reported: {m.group(1).strip()}.",
        "If the file is fine, it may need a newer llama.cpp; otherwise download it again.",
        _grep(lines, r"error loading model", r"failed to load model", r" E "),
        {"path": path, "reason": m.group(1)},
    )


def _abort_lines(lines: Sequence[str]) -> tuple[str, ...]:
    return _grep(lines, r"GGML_ASSERT", r"\.(?:c|cpp|cu|h|m):\d+: ", r"terminate called", r"what\(\):", r" E ", limit=8)


# --------------------------------------------------------------------------- entry point

_RULES = (_invalid_argument, _unknown_buffer_type, _rpc, _port, _model_file, _arch, _oom, _model_load)


def diagnose(
    log: str | Iterable[Any],
    returncode: int | None,
    *,
    signals_sent: Iterable[int] = (),
    stop_requested: bool = False,
    argv: Sequence[str] | None = None,
) -> Diagnosis | None:
    """What went wrong, or None for a clean stop that Layerdeck asked for.

    Args:
        log: the run's output (text, lines, or :class:`~app.launch.logbuffer.LogLine` items).
        returncode: ``Popen.returncode`` (negative: the POSIX signal that ended it).
        signals_sent: signals Layerdeck sent; an exit by one of them is never "killed from outside".
        stop_requested: Layerdeck asked the server to stop: judged by what it sent, not the exit
            status (a second SIGTERM can abort llama-server in its shutdown path, in the
            ``stream_session_manager`` destructor of ``tools/server/server-stream.cpp``).
        argv: the command, to name the model file and -ot targets.
    """
    if stop_requested:
        return None
    lines = _text_lines(log)
    for rule in _RULES:
        found = rule(lines, argv)
        if found is not None:
            return found
    sent = {int(s) for s in signals_sent}
    sig = signal_name(returncode)
    exit_text = describe_exit(returncode)
    if sig in _SIGNAL_KILL and returncode is not None and -returncode not in sent:
        oom_killer = (
            " On Linux, the kernel's out-of-memory killer also ends processes with SIGKILL when host RAM "
            "runs out: check 'dmesg' or 'journalctl -k' for 'Out of memory: Killed process'."
            if sig == "SIGKILL"
            else ""
        )
        return Diagnosis(
            DiagnosisKind.KILLED,
            "llama-server was killed from outside",
            f"The server was {exit_text}, and Layerdeck did not send that signal: another program, a user "
            f"(kill, a task manager) or the system ended it.{oom_killer}",
            "Start it again; if it keeps happening, look for what is stopping it."
            + (" If host RAM ran out, place fewer weights in host memory or reduce the context." if oom_killer else ""),
            tuple(lines[-5:]),
            {"signal": sig, "returncode": returncode},
        )
    windows_crash = returncode is not None and returncode > 255  # NTSTATUS codes such as 0xC0000005
    if (sig and sig not in _SIGNAL_KILL) or windows_crash:
        ab = _abort_lines(lines)
        detail = ""
        if ab:
            detail = f" Its last words: {ab[0].strip()}"
        return Diagnosis(
            DiagnosisKind.CRASH,
            "llama-server crashed",
            f"The server {exit_text}.{detail}",
            "This is a llama.cpp failure rather than a placement problem: try again with fewer options (for "
            "example without -ot or with -fa off) to find the trigger, and report it to llama.cpp with the log.",
            ab or tuple(lines[-8:]),
            {"signal": sig, "returncode": returncode},
        )
    if returncode == 0:
        return Diagnosis(
            DiagnosisKind.EXITED,
            "llama-server exited on its own",
            "The server ended with exit status 0 without being asked to stop.",
            "Check the log for the reason.",
            tuple(lines[-5:]),
            {"returncode": 0},
        )
    errors = tuple(ln for ln in lines if re.search(r" E |^error|failed", ln))[-8:]
    return Diagnosis(
        DiagnosisKind.UNKNOWN,
        "llama-server stopped with an error",
        f"The server {exit_text}" + (f"; its last error: {errors[-1].strip()}" if errors else "") + ".",
        "Read the log lines below; run the exported command in a terminal to reproduce it.",
        errors or tuple(lines[-8:]),
        {"returncode": returncode},
    )


def timeout_diagnosis(seconds: float, lines: Sequence[str], endpoints: Sequence[str] = ()) -> Diagnosis:
    """The server was still not ready after ``seconds``: Layerdeck stopped it."""
    rpc = (
        ""
        if not endpoints
        else " It uses RPC servers: a ggml-rpc-server serves one client at a time, so one "
        "that is busy with another llama.cpp accepts the connection and never answers."
    )
    return Diagnosis(
        DiagnosisKind.TIMEOUT,
        "llama-server did not become ready in time",
        f"The server was not ready after {seconds:.0f} s, so Layerdeck stopped it.{rpc}",
        "Allow more time for large models, or check that every RPC server is free.",
        tuple(_text_lines(lines)[-8:]),
        {"seconds": seconds, "endpoints": tuple(endpoints)},
    )


def preflight_rpc_diagnosis(problems: Sequence[tuple[str, str]]) -> Diagnosis:
    """The per-host messages of a failed reachability check (before launching)."""
    hosts = ", ".join(ep for ep, _ in problems)
    return Diagnosis(
        DiagnosisKind.RPC_UNREACHABLE,
        f"RPC server{'s' if len(problems) > 1 else ''} not reachable: {hosts}",
        "llama.cpp aborts when any --rpc endpoint cannot be reached, so Layerdeck checked each one first: "
        + "; ".join(f"{ep}: {msg}" for ep, msg in problems)
        + ".",
        "Start ggml-rpc-server on each listed host (or fix the address), or remove it from the placement.",
        tuple(f"{ep}: {msg}" for ep, msg in problems),
        {"hosts": tuple(ep for ep, _ in problems)},
    )
