"""Measure a placement with ``llama-bench`` and keep a per-model history to compare placements.

llama-bench has its own parser (``tools/llama-bench/llama-bench.cpp``), not
``common/arg.cpp``:

* ``,`` separates *alternative values* (each makes another test), so lists
  inside one value use ``/``: ``-dev RPC0/RPC1``, ``-ts 1/1``.
* ``-ot`` takes all overrides of one test in one value joined by ``;``
  (``,`` would make one test per override).
* ``-ngl`` is a number (``-1`` = all layers), ``-fa`` on/off/auto (or 1/0),
  switches are ``0|1`` values (``-nkvo 1``, ``-nopo 1``, ``--no-host 1``,
  ``--repack 0``); ``--rpc`` is comma-joined like the server's.
* ``-o json`` prints one object per test with ``n_prompt``, ``n_gen``,
  ``avg_ts``, ``stddev_ts``, ``samples_ts`` and the settings.
* An ``-ot`` buffer type it does not know is reported on stdout (``error:
  unrecognized buffer type``, ``Available buffer types:``) and then the
  benchmark runs *without* the overrides and exits 0; :func:`run_bench` treats
  that as a failure.

:func:`bench_args` turns a llama-server command into these flags, and says
what it had to leave out (context size, slots, host/port: server-only).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.errors import LaunchError
from app.llamacpp.binaries import LlamaCppNotFound, find_tool

from ..command.argv import mask_secrets, rpc_endpoints
from . import orphans
from .diagnose import Diagnosis, diagnose, preflight_rpc_diagnosis
from .preflight import check_rpc_hosts

log = logging.getLogger(__name__)

SIGKILL = getattr(signal, "SIGKILL", 9)

#: llama.cpp's --cpu-moe pattern (common/common.h LLM_FFN_EXPS_REGEX), as an explicit -ot for llama-bench.
CPU_MOE_OVERRIDE = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"

# server flag -> (bench flag, how to convert the value); None = a switch that becomes "<bench flag> <value>"
_VALUE_MAP: dict[str, tuple[str, str]] = {
    "-m": ("-m", "same"),
    "--model": ("-m", "same"),
    "--rpc": ("--rpc", "same"),
    "-rpc": ("--rpc", "same"),
    "-dev": ("-dev", "slash"),
    "--device": ("-dev", "slash"),
    "-ngl": ("-ngl", "ngl"),
    "--n-gpu-layers": ("-ngl", "ngl"),
    "--gpu-layers": ("-ngl", "ngl"),
    "-ts": ("-ts", "slash"),
    "--tensor-split": ("-ts", "slash"),
    "-sm": ("-sm", "same"),
    "--split-mode": ("-sm", "same"),
    "-mg": ("-mg", "same"),
    "--main-gpu": ("-mg", "same"),
    "-ncmoe": ("-ncmoe", "same"),
    "--n-cpu-moe": ("-ncmoe", "same"),
    "-fa": ("-fa", "same"),
    "--flash-attn": ("-fa", "same"),
    "-ctk": ("-ctk", "same"),
    "--cache-type-k": ("-ctk", "same"),
    "-ctv": ("-ctv", "same"),
    "--cache-type-v": ("-ctv", "same"),
    "-b": ("-b", "same"),
    "--batch-size": ("-b", "same"),
    "-ub": ("-ub", "same"),
    "--ubatch-size": ("-ub", "same"),
    "-t": ("-t", "same"),
    "--threads": ("-t", "same"),
    "-lm": ("-lm", "same"),
    "--load-mode": ("-lm", "same"),
    "--numa": ("--numa", "same"),
}
_SWITCH_MAP: dict[str, tuple[str, str]] = {
    "-nkvo": ("-nkvo", "1"),
    "--no-kv-offload": ("-nkvo", "1"),
    "--no-op-offload": ("-nopo", "1"),
    "--no-host": ("--no-host", "1"),
    "--no-repack": ("--repack", "0"),
    "-nr": ("--repack", "0"),
}
_OT = ("-ot", "--override-tensor")
_CMOE = ("-cmoe", "--cpu-moe")
#: Server-only flags that take a value (dropped with a note).
_SERVER_VALUE = {
    "-c",
    "--ctx-size",
    "-np",
    "--parallel",
    "--host",
    "--port",
    "-lv",
    "--verbosity",
    "--log-verbosity",
    "--fit",
    "-fit",
    "-fitt",
    "--fit-target",
    "-fitc",
    "--fit-ctx",
    "--api-key",
    "-a",
    "--alias",
    "--log-file",
    "-cram",
    "--cache-ram",
    "-ctxcp",
    "--ctx-checkpoints",
}


class BenchError(LaunchError, RuntimeError):
    def __init__(self, message: str, diagnosis: Diagnosis | None = None, output: str = ""):
        super().__init__(message)
        self.diagnosis = diagnosis
        self.output = output


class BenchCancelled(BenchError):
    """The user cancelled the benchmark; it was stopped."""


def bench_args(
    server_argv: Sequence[str],
    *,
    n_prompt: int = 512,
    n_gen: int = 128,
    repetitions: int = 5,
    extra: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """llama-bench arguments (no program) for the placement in a llama-server command, and notes.

    ``server_argv`` may start with the program (it is skipped when it does not look like a flag).
    """
    items = list(server_argv)
    if items and not items[0].startswith("-"):
        items = items[1:]
    out: list[str] = []
    overrides: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(items):
        flag = items[i]
        value = items[i + 1] if i + 1 < len(items) else None
        if flag in _VALUE_MAP and value is not None:
            bench_flag, how = _VALUE_MAP[flag]
            if how == "slash":
                value = value.replace(",", "/")
            elif how == "ngl":
                if value == "all":
                    value = "-1"
                elif value == "auto":
                    notes.append("-ngl auto: llama-bench has no automatic fit, so all layers are offloaded")
                    value = "-1"
            out += [bench_flag, value]
            i += 2
        elif flag in _OT and value is not None:
            overrides += [part for part in value.split(",") if part]
            i += 2
        elif flag in _CMOE:
            overrides.append(CPU_MOE_OVERRIDE)
            i += 1
        elif flag in _SWITCH_MAP:
            out += list(_SWITCH_MAP[flag])
            i += 1
        elif flag in _SERVER_VALUE:
            notes.append(f"{flag} {value} is not used by llama-bench")
            i += 2
        elif flag.startswith("-"):
            takes_value = value is not None and (not value.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", value))
            notes.append(
                f"{flag}{' ' + value if takes_value and value is not None else ''} is not passed to llama-bench"
            )
            i += 2 if takes_value else 1
        else:
            notes.append(f"stray argument {flag!r} ignored")
            i += 1
    for pattern in overrides:
        if ";" in pattern:
            raise ValueError(f"-ot {pattern!r} contains ';', which llama-bench uses to separate overrides")
    if overrides:
        out += ["-ot", ";".join(overrides)]
    out += ["-p", str(n_prompt), "-n", str(n_gen), "-r", str(repetitions), "-o", "json", *extra]
    return out, notes


@dataclass(frozen=True)
class BenchTest:
    n_prompt: int
    n_gen: int
    n_depth: int
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...] = ()

    @property
    def kind(self) -> str:
        if self.n_prompt and self.n_gen:
            return "pg"
        return "pp" if self.n_prompt else "tg"

    @property
    def label(self) -> str:
        name = {"pp": f"pp{self.n_prompt}", "tg": f"tg{self.n_gen}", "pg": f"pp{self.n_prompt}+tg{self.n_gen}"}
        return name[self.kind] + (f" @ d{self.n_depth}" if self.n_depth else "")


@dataclass
class BenchRun:
    model: str
    args: list[str]
    tests: list[BenchTest]
    time: str = ""  # ISO 8601, UTC
    label: str | None = None  # what the user calls this placement
    info: dict[str, Any] = field(default_factory=dict)  # build, backends, devices, model size...

    @property
    def pp_ts(self) -> float | None:
        """Prompt processing tokens/s (the first pp test)."""
        return next((t.avg_ts for t in self.tests if t.kind == "pp"), None)

    @property
    def tg_ts(self) -> float | None:
        """Generation tokens/s (the first tg test)."""
        return next((t.avg_ts for t in self.tests if t.kind == "tg"), None)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["tests"] = [asdict(t) for t in self.tests]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BenchRun:
        tests = [
            BenchTest(
                int(t["n_prompt"]),
                int(t["n_gen"]),
                int(t.get("n_depth", 0)),
                float(t["avg_ts"]),
                float(t.get("stddev_ts", 0.0)),
                tuple(float(x) for x in t.get("samples_ts", ())),
            )
            for t in d.get("tests", ())
        ]
        return cls(
            str(d["model"]),
            list(d.get("args", ())),
            tests,
            str(d.get("time", "")),
            d.get("label"),
            dict(d.get("info", {})),
        )


_INFO_KEYS = (
    "build_commit",
    "build_number",
    "backends",
    "gpu_info",
    "cpu_info",
    "model_type",
    "model_size",
    "model_n_params",
    "devices",
    "n_gpu_layers",
    "tensor_split",
    "tensor_buft_overrides",
    "flash_attn",
    "type_k",
    "type_v",
    "n_ubatch",
    "n_batch",
    "n_threads",
)


def parse_bench_json(text: str) -> tuple[list[BenchTest], dict[str, Any]]:
    """Tests and shared settings from ``llama-bench -o json`` output."""
    m = re.search(r"^\[", text, re.M)  # error lines may come first on stdout (and may contain "[")
    if not m:
        raise ValueError("llama-bench printed no JSON array")
    data = json.loads(text[m.start() :])
    tests = [
        BenchTest(
            int(o.get("n_prompt", 0)),
            int(o.get("n_gen", 0)),
            int(o.get("n_depth", 0)),
            float(o.get("avg_ts", 0.0)),
            float(o.get("stddev_ts", 0.0)),
            tuple(float(x) for x in o.get("samples_ts", ())),
        )
        for o in data
    ]
    info = {k: data[0][k] for k in _INFO_KEYS if data and k in data[0]}
    return tests, info


def run_bench(
    args: Sequence[str],
    *,
    llama_dir: str | os.PathLike | None = None,
    program: str = "llama-bench",
    env: Mapping[str, str] | None = None,
    timeout: float = 900.0,
    check_rpc: bool = True,
    guard: str = "auto",
    label: str | None = None,
    cancel: threading.Event | None = None,
    busy_rpc: Sequence[str] = (),
) -> BenchRun:
    """Run llama-bench with ``args`` (from :func:`bench_args`; ``-o json`` required) and parse it.

    Blocks until it finishes, ``timeout`` seconds pass or ``cancel`` is set (then it is killed and
    :class:`BenchCancelled` raised): call it from a worker. ``busy_rpc``: RPC hosts another process of ours
    holds (a running llama-server); an RPC server serves one client at a time, so a benchmark on them would
    wait forever, and it is refused first. Raises :class:`BenchError` with a
    :class:`~app.launch.diagnose.Diagnosis` when it fails.
    """
    args = list(args)
    if "-o" not in args and "--output" not in args:
        args += ["-o", "json"]
    try:
        exe = program if os.sep in program else str(find_tool(program, llama_dir).path)
    except LlamaCppNotFound as exc:
        raise BenchError(str(exc)) from exc
    diag: Diagnosis | None  # why it failed, where one is found
    held = [ep for ep in rpc_endpoints(args) if ep in set(busy_rpc)]
    if held:
        raise BenchError(
            f"the running llama-server holds the RPC host{'s' if len(held) > 1 else ''} {', '.join(held)}, and an "
            "RPC server serves one client at a time, so llama-bench would wait for it forever: stop the server "
            "first, then benchmark."
        )
    if check_rpc:
        problems = check_rpc_hosts(rpc_endpoints(args))
        if problems:
            diag = preflight_rpc_diagnosis(problems)
            raise BenchError(diag.explanation, diag)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    child_env.update(env or {})
    argv = [exe, *args]
    log.info("running %s", " ".join(mask_secrets(argv, tool="bench")))
    spawned = orphans.spawn(argv, child_env, guard=guard)
    stopper = _BenchStopper(spawned)
    orphans.register(stopper)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                # short waits, so a cancel is heard at once (communicate keeps what it read between calls)
                out, err = spawned.popen.communicate(timeout=max(0.01, min(0.2, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                cancelled = cancel is not None and cancel.is_set()
                if not cancelled and time.monotonic() < deadline:
                    continue
                orphans.signal_group(spawned, SIGKILL)
                out, err = spawned.popen.communicate()
                output = (out + err).decode("utf-8", errors="replace")
                if cancelled:
                    raise BenchCancelled("llama-bench was cancelled", output=output) from None
                raise BenchError(
                    f"llama-bench did not finish within {timeout:.0f} s and was stopped (an RPC host busy with "
                    "another client makes it wait)",
                    output=output,
                ) from None
    finally:
        orphans.release(spawned)
        orphans.unregister(stopper)
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    if spawned.popen.returncode != 0:
        diag = diagnose(stderr + "\n" + stdout, spawned.popen.returncode, argv=argv)
        raise BenchError(
            f"llama-bench failed: {diag.title if diag else spawned.popen.returncode}", diag, stderr + stdout
        )
    if "unrecognized buffer type" in stdout + stderr:
        # llama-bench reports a bad -ot target and then benchmarks *without* the overrides (exit status 0):
        # that result would describe another placement, so it is an error here.
        diag = diagnose(stdout + "\n" + stderr, 1, argv=argv)
        raise BenchError(
            "llama-bench ignored the tensor overrides: " + (diag.title if diag else "bad -ot"), diag, stderr + stdout
        )
    try:
        tests, info = parse_bench_json(stdout)
    except ValueError as exc:
        raise BenchError(f"could not read llama-bench's output: {exc}", output=stdout + stderr) from None
    model = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-m", "--model")), "")
    return BenchRun(
        os.path.abspath(model) if model else "",
        args,
        tests,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        label,
        info,
    )


class _BenchStopper:
    """Lets the atexit handler kill a running llama-bench."""

    def __init__(self, spawned: orphans.Spawned):
        self.spawned = spawned

    def stop(self, timeout: float = 5.0, kill_timeout: float = 2.0) -> None:
        if self.spawned.popen.poll() is None:
            orphans.signal_group(self.spawned, SIGKILL)


class BenchHistory:
    """Benchmark runs per model, one JSON file per model file under ``directory``."""

    VERSION = 1

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def path_for(self, model: str | os.PathLike) -> Path:
        full = os.path.abspath(os.fspath(model))
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(full).stem)[:60] or "model"
        digest = hashlib.sha1(full.encode("utf-8")).hexdigest()[:10]
        return self.directory / f"{stem}-{digest}.json"

    def runs(self, model: str | os.PathLike) -> list[BenchRun]:
        path = self.path_for(model)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except ValueError as exc:
            raise ValueError(
                f"the benchmark history {path} is damaged ({exc}); move it away to start a new one"
            ) from None
        return [BenchRun.from_json(r) for r in data.get("runs", ())]

    def add(self, run: BenchRun) -> Path:
        """Append ``run`` to its model's history (written atomically)."""
        path = self.path_for(run.model)
        runs = self.runs(run.model) + [run]
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = {"version": self.VERSION, "model": os.path.abspath(run.model), "runs": [r.to_json() for r in runs]}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        os.replace(tmp, path)
        return path

    def best(self, model: str | os.PathLike, by: str = "tg") -> BenchRun | None:
        """The run with the highest ``tg`` (or ``pp``) speed."""
        key = (lambda r: r.tg_ts or 0.0) if by == "tg" else (lambda r: r.pp_ts or 0.0)
        runs = self.runs(model)
        return max(runs, key=key) if runs else None
