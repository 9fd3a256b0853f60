"""Does llama.cpp load this file? Asked of llama.cpp itself, with its reason when it does not.

Layerdeck's reader mirrors gguf.cpp's structure rules, the metadata types llama.cpp reads and its layer
counts (``app/model``), but not the per-architecture tables in ``src/models/*.cpp`` (about 2,900
``create_tensor`` calls: which tensors each architecture requires, with which shapes, and which
hyperparameters it asserts on). A file can pass every one of Layerdeck's checks and still be refused at load
("check_tensor_dims: tensor 'blk.0.attn_norm.weight' not found"). So, where llama.cpp is on the machine, the
file is also given to it: ``llama-fit-params -m FILE -dev none -ngl 0 -c 512`` loads the model and a
context with ``no_alloc`` (nothing is allocated, no weights are read: 15 ms for a tiny model, under a second
for a 262k-token vocabulary), on the CPU only, so no GPU memory is touched.

The verdict is one of:

* ``loads``: llama.cpp built the model and a context;
* ``refused``: it stopped while loading (its own error line, an assertion, or a crash), so no plan is made;
* ``unchecked``: the question could not be asked (no llama.cpp, a timeout, another failure); the caller
  says so in its notes, never as a pass.

Verdicts are cached per build and per file (path, size, mtime, inode of every shard) in
``load-checks.json`` beside the build cache (atomic writes, a file of the wrong shape is ignored).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ReadError
from ..paths import read_json_cache, write_json_cache
from .binaries import LlamaCppNotFound, find_tool

log = logging.getLogger(__name__)

#: Seconds llama-fit-params may take for one file (a no-alloc load; the vocabulary dominates).
TIMEOUT_S = 60.0
#: Times the tool is run when it exits 1 without its error lines (its log thread lost them at exit), before the
#: --fit-print run that gives the verdict without the reason.
ATTEMPTS = 5
#: Verdicts kept in the cache (oldest dropped first).
MAX_ENTRIES = 400
MAX_CACHE_BYTES = 4 << 20
#: The arguments after ``-m FILE``: CPU only, a small context (the load, not the fit, is the question).
CHECK_ARGS = ("-dev", "none", "-ngl", "0", "-c", "512")
#: Bumped when the classification below changes, so old verdicts are asked again.
_RULES = 1

LOADS, REFUSED, UNCHECKED = "loads", "refused", "unchecked"

#: Lines that only wrap the real reason (llama-model-loader, llama.cpp's C API, common/fit.cpp, the tool).
_WRAPPERS = (
    "llama_model_load_from_file_impl: failed to load model",
    "encountered an error while trying to fit params",
    "failed to fit CLI arguments to free memory",
    "llama_model_loader: failed to load model from",
    "failed to read tensor data",
)
#: Lines that say the model or its context could not be built (as opposed to: it does not fit in memory).
_LOAD_FAILED = (
    "error loading model",
    "failed to load model",
    "failed to create context",
    "failed to initialize the context",
    "gguf_init_from",
    "GGML_ASSERT",
    "terminate called",
)
_STAMP = re.compile(r"^\s*\d+\.\d+\.\d+\.\d+\s+[EWIDT]\s+")
_ASSERT = re.compile(r"(?P<where>[^\s:]+:\d+): (?P<what>GGML_ASSERT\(.*\) failed)")


class LlamaRefusedModel(ReadError):
    """llama.cpp refuses to load the file; ``reason`` is its own line."""

    def __init__(self, path: str, reason: str, build: str) -> None:
        self.path = path
        self.reason = reason
        self.build = build
        super().__init__(
            f"llama.cpp refuses to load {Path(path).name}: {reason} (asked {build}).",
            hint="The file is damaged, incomplete or made for another llama.cpp version: download or convert it "
            "again, or update llama.cpp if the model is newer than this build.",
        )


@dataclass(frozen=True)
class LoadCheck:
    """llama.cpp's verdict on one model file (``status``: :data:`LOADS`, :data:`REFUSED`, :data:`UNCHECKED`)."""

    status: str
    reason: str = ""  # llama.cpp's reason (refused) or why it could not be asked (unchecked)
    build: str = ""  # which llama.cpp answered: the tool's path
    cached: bool = False
    seconds: float = 0.0

    @property
    def loads(self) -> bool:
        return self.status == LOADS

    @property
    def refused(self) -> bool:
        return self.status == REFUSED

    def note(self) -> str | None:
        """The sentence a caller adds to its notes, or None when llama.cpp loaded the file."""
        if self.status == UNCHECKED:
            return (
                "llama.cpp did not check that this file loads (" + self.reason + "): Layerdeck's own checks "
                "cover the GGUF structure, the metadata types and the layer counts, not each architecture's "
                "required tensors and shapes"
            )
        if self.status == REFUSED:
            return f"llama.cpp refuses to load this file: {self.reason}"
        return None

    def raise_if_refused(self, path: str | os.PathLike) -> None:
        if self.refused:
            raise LlamaRefusedModel(os.fspath(path), self.reason, self.build)

    def to_json(self) -> dict:
        return {"status": self.status, "reason": self.reason, "llama_cpp": self.build, "cached": self.cached}


def classify(returncode: int, output: str) -> tuple[str, str]:
    """``(status, reason)`` from llama-fit-params' exit status and its log (stdout and stderr together)."""
    if returncode == 0:
        return LOADS, ""
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    failed = any(any(k in ln for k in _LOAD_FAILED) for ln in lines)
    if returncode > 0 and not failed:
        if any("failed to fit params to free device memory" in ln for ln in lines):
            return LOADS, ""  # it loaded; only the fit to this machine's free memory failed (not asked here)
        return UNCHECKED, f"llama-fit-params failed (exit status {returncode}): {_last(lines)}"
    return REFUSED, reason_of(lines, returncode)


def reason_of(lines: list[str], returncode: int) -> str:
    """llama.cpp's own reason: an assertion, the first error line that is not a wrapper, or its last words."""
    for ln in lines:
        m = _ASSERT.search(ln)
        if m:
            return f"{m['what']} ({Path(m['where']).name})"
    errors = [_STAMP.sub("", ln) for ln in lines if _STAMP.match(ln) and re.match(r"^\s*[\d.]+\s+E\s", ln)]
    real = [e for e in errors if not any(w in e for w in _WRAPPERS)]
    for e in real or errors:
        e = e.split("error loading model: ", 1)[-1]
        return e.strip()
    for i, ln in enumerate(lines):
        if ln.startswith("terminate called") and i + 1 < len(lines) and "what():" in lines[i + 1]:
            return lines[i + 1].split("what():", 1)[1].strip()
    if returncode < 0:
        return f"llama-fit-params crashed (signal {-returncode}) while loading it: {_last(lines)}"
    return _last(lines)


def _lost(status: str, proc: subprocess.CompletedProcess) -> bool:
    """Whether a run said nothing of why it exited 1 (its log thread lost the lines)."""
    said = (proc.stdout + proc.stderr).lower()
    return status == UNCHECKED and proc.returncode == 1 and " e " not in said and "error" not in said


def _last(lines: list[str]) -> str:
    return _STAMP.sub("", lines[-1]).strip() if lines else "no output"


# --------------------------------------------------------------------------- cache


def _cache_file() -> Path:
    from .build import cache_root

    return cache_root() / "load-checks.json"


def _file_key(paths: list[Path], tool: Path) -> str | None:
    parts = [str(_RULES)]
    try:
        for p in [tool, *paths]:
            st = p.stat()
            parts.append(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}")
    except OSError:
        return None
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def _load_cache() -> dict:
    return read_json_cache(_cache_file(), MAX_CACHE_BYTES, "load-check cache")


def _cached(key: str) -> tuple[str, str] | None:
    entry = _load_cache().get(key)
    if isinstance(entry, dict) and entry.get("status") in (LOADS, REFUSED) and isinstance(entry.get("reason"), str):
        return entry["status"], entry["reason"]
    return None


def _store(key: str, status: str, reason: str) -> None:
    cache = _load_cache()
    cache.pop(key, None)
    cache[key] = {"status": status, "reason": reason[:2000], "at": time.time()}
    while len(cache) > MAX_ENTRIES:
        cache.pop(next(iter(cache)))
    write_json_cache(_cache_file(), cache, "load-check cache")


# --------------------------------------------------------------------------- the check


def check_load(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    llama_dir: str | os.PathLike | None = None,
    *,
    timeout: float = TIMEOUT_S,
    use_cache: bool = True,
) -> LoadCheck:
    """llama.cpp's verdict on the model whose shards are ``paths`` (the first is given to llama.cpp, which
    finds the others by their split names). Never raises for a missing or failing tool: that is
    :data:`UNCHECKED`, with the reason."""
    files = [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    try:
        tool = find_tool("llama-fit-params", llama_dir).path
    except LlamaCppNotFound:
        return LoadCheck(UNCHECKED, "no llama-fit-params found; get llama.cpp with `layerdeck llama install`")
    key = _file_key(files, tool) if use_cache else None
    if key is not None:
        hit = _cached(key)
        if hit is not None:
            return LoadCheck(hit[0], hit[1], str(tool), cached=True)
    argv = [str(tool), "-m", os.fspath(files[0]), *CHECK_ARGS]
    env = {**os.environ, "GGML_NO_BACKTRACE": "1"}  # an assertion prints its line, not a gdb session
    t0 = time.perf_counter()

    def run(args: list[str]):
        try:
            proc = subprocess.run(
                args,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return LoadCheck(UNCHECKED, f"llama-fit-params did not finish within {timeout:.0f} s", str(tool))
        except OSError as exc:
            return LoadCheck(UNCHECKED, f"could not run {tool}: {exc}", str(tool))
        return proc

    for _ in range(ATTEMPTS):
        proc = run(argv)
        if isinstance(proc, LoadCheck):
            return proc
        status, reason = classify(proc.returncode, proc.stdout + "\n" + proc.stderr)
        # llama.cpp logs from a thread of its own and its logger is never flushed at exit (common/log.cpp,
        # common_log_main): exit(1) can lose every line, more often on a busy machine. Then ask again.
        if not _lost(status, proc):
            break
    else:
        # still nothing said: --fit-print lets the loader's exception end the process through std::terminate,
        # whose message is written directly, so the verdict is known even when the reason was lost
        proc = run([str(tool), "-m", os.fspath(files[0]), *CHECK_ARGS, "--fit-print", "on"])
        if isinstance(proc, LoadCheck):
            return proc
        status, reason = classify(proc.returncode, proc.stdout + "\n" + proc.stderr)
        if status == REFUSED:
            reason += f" (llama.cpp lost its own reason at exit; `llama-server -m {files[0].name}` prints it)"
    seconds = time.perf_counter() - t0
    if key is not None and status != UNCHECKED:
        _store(key, status, reason)
    return LoadCheck(status, reason, str(tool), seconds=seconds)
