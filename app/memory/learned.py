"""What the user's own llama.cpp decided, kept so that later placements on that machine agree with it.

A dry run (``llama-fit-params --fit-print``) prints, per device, the model, context and compute buffers
llama.cpp would allocate. The estimate replays llama.cpp's rules; where it cannot (a backend the rules do not
cover, such as Metal's graph reordering or CUDA's fusion dependencies),
the dry run's figure differs from it. This module keeps each printed figure under a key that names
everything that figure depends on, so that a later placement whose figure has the same key gets llama.cpp's
number instead of the estimate, and is shown as "verified by llama.cpp". Everything else stays "estimated".

What a figure depends on (the key; each also carries the llama.cpp build, the model file and the device
set, so nothing learned on one machine or build is used for another):

- **model** (weights): the exact set of tensors on the device (and, for the host, whether the CPU backend
  repacks them and which tool reports it: ``llama-fit-params`` leaves the CPU_REPACK buffer out).
  A dry run gives one total per device, not one per tensor, so a correction cannot be split between tensors
  and does not transfer to another set.
- **context** (KV cache, recurrent state): the exact set of layers whose cache is on the device and the
  cache shape and types.
- **compute**: the device's buffer is the allocator's peak over the graph, which depends on the ops the
  scheduler gives the device and on the copies at the boundaries of its splits. The key is the graph's
  global shape (context, ubatch, outputs reserved, cache types, flash attention, op offload, the tool's
  pins, pipeline parallelism, every device's limits, where the token embedding and output live) plus the
  *set* of layer neighbourhoods the device takes part in: for each layer, its own structure and where its
  tensors and cache are, with its ``hood`` neighbours either side (the same neighbourhoods
  :func:`app.memory.compute.compress.compress` relies on: a backend's peak depends on a layer's own tensors
  and the copies at its boundaries, not on how often the same neighbourhood repeats). A device that may run
  ops for others takes part in more: the CPU (graph inputs, and whatever no other backend takes) in every
  neighbourhood, a GPU with op offload (batches of 32 or more) in every neighbourhood that has host tensors
  (the ops on host weights run there, with a copy of the weight). So moving layers between two other devices, or lengthening a run of identical layers,
  keeps a device's compute key; changing its boundaries, the context or the ubatch does not.

And one check on top, so that a key that misses something is caught rather than trusted: a learned figure
is used only when this estimate's own figure for the key is, to the byte, the one it made for the dry run
(the replay, exact for the graph in llama.cpp's order, agrees that nothing it models has changed).

The store is a JSON file of at most :data:`MAX_FACTS` figures (oldest dropped first).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..lanes import CPU, DeviceKind, Lane
from ..llamacpp.binaries import LlamaCppNotFound, find_tool
from ..llamacpp.fit_print import FitPrintError, FitRow, llama_reason, parse_fit_print
from ..model import Model
from ..paths import data_dir, read_json_cache, write_json_cache
from .compute.core import graph_inputs
from .estimator import DeviceMemory, Estimate, Estimator
from .layout import WeightPlacement
from .settings import LlamaSettings

MiB = 1 << 20
KINDS = ("model", "context", "compute")
#: Why a dry run's compute figures are not llama-server's (the dry-run tool is llama-fit-params).
SERVER_COMPUTE_NOTE = (
    "compute buffers stay estimated for llama-server: llama.cpp's dry run (llama-fit-params) builds a "
    "different graph (logits reserved for a full batch instead of the slots, the per-layer norm pins dropped), "
    "so its compute figures are shown next to the lanes but not taken for the server's"
)
#: Figures kept in the store; each is about 150 bytes of JSON.
MAX_FACTS = 4000
MAX_FILE_BYTES = 4 << 20
_VERSION = 1


def store_path() -> Path:
    return data_dir() / "learned-llama.json"


# ---------------------------------------------------------------------- identities


def _digest(obj: object) -> str:
    return hashlib.sha1(repr(obj).encode("utf-8")).hexdigest()[:20]


def build_id(tool_path: str | os.PathLike) -> str:
    """Identity of one llama.cpp build: its ``llama-fit-params`` binary (resolved path, size, modification time)."""
    p = Path(tool_path).resolve()
    st = p.stat()
    return _digest(("build", str(p), st.st_size, st.st_mtime_ns))


def model_id(model: Model) -> str:
    """Identity of the model file(s): paths, sizes and modification times (the demo model has none)."""
    parts = []
    for path in model.paths:
        try:
            st = os.stat(path)
            parts.append((os.path.abspath(path), st.st_size, st.st_mtime_ns))
        except OSError:
            parts.append((os.path.abspath(path), -1, -1))
    return _digest(("model", tuple(parts), model.file_size))


def _lane_facts(d: Lane) -> tuple:
    # everything of a lane the estimate reads, but not its free memory (it changes between runs)
    return (
        d.name,
        d.kind.value,
        d.total,
        d.endpoint,
        d.max_tensor_bytes,
        d.refused_ops,
        d.alignment,
        d.max_buffer,
        d.host_alignment,
        d.host_max_buffer,
    )


def devices_id(lanes: Iterable[Lane]) -> str:
    return _digest(("devices", tuple(_lane_facts(d) for d in lanes)))


@dataclass(frozen=True)
class Machine:
    """What a learned figure is valid for: one llama.cpp build, one model file, one device set."""

    build: str
    model: str
    devices: str

    @property
    def prefix(self) -> str:
        return f"{self.build}:{self.model}:{self.devices}"


# ---------------------------------------------------------------------- keys


def figure_keys(
    estimator: Estimator, lanes: list[Lane], settings: LlamaSettings, wp: WeightPlacement, est: Estimate
) -> dict[tuple[str, str], str]:
    """``{(device, kind): key}`` for every device of ``est`` (``CPU`` for the host) and kind of :data:`KINDS`."""
    model = estimator.model
    p = model.params
    shape = est.shape
    g = graph_inputs(model, estimator.compute_facts, wp, settings, shape)
    devs, cpu, tbe, layer_be, kv_be, sigs = g.devs, g.cpu, g.tbe, g.layer_be, g.kv_be, g.sigs
    out: dict[tuple[str, str], str] = {}
    names = [d.name for d in devs] + [CPU]
    # -- model: the tensors on the device
    for i, name in enumerate(names):
        tensors = tuple(j for j, b in enumerate(tbe) if b == i and wp.tensor_device[j] != "")
        extra: tuple = ()
        if i == cpu:
            extra = (settings.repack, settings.use_host, settings.tool == "fit-params")
        dup = wp.duplicated_output == name
        out[(name, "model")] = _digest(("model", name, _digest(tensors), dup, extra, _lane_facts_of(devs, i)))
    # -- context: the layers whose cache is on the device, the cache's shape and types
    # (not ``unified``: one stream of n_ctx cells is the same cache either way)
    cache_shape = (shape.n_ctx, shape.n_ctx_seq, shape.n_stream, shape.size_swa)
    for i, name in enumerate(names):
        layers = tuple(il for il in range(p.n_layer) if kv_be[il] == i)
        out[(name, "context")] = _digest(
            ("context", name, layers, cache_shape, settings.type_k, settings.type_v, settings.swa_full)
        )
    # -- compute: the graph's global shape and the neighbourhoods the device takes part in (the inputs of
    #    app.memory.compute.core.compute_buffers, from the same function)
    common = (
        shape,
        settings.type_k,
        settings.type_v,
        settings.no_kv_offload,
        g.offload,
        g.host_weights,
        g.pin,
        g.pin_cpu,
        est.pipeline_parallel,
        tuple(_lane_facts(d) for d in devs),
        g.glob,
        wp.duplicated_output,
        layer_be[p.n_layer] if len(layer_be) > p.n_layer else None,
        settings.flash_attn == "auto",  # -fa auto: resolve_fused_ops may turn it off (core.py: _fa_auto)
    )
    common_id = _digest(common)
    hood = estimator.compute_facts["hood"]
    n = len(sigs)
    windows = [tuple(sigs[j] if 0 <= j < n else None for j in range(il - hood, il + hood + 1)) for il in range(n)]
    everywhere = _digest(("all", frozenset(windows)))
    offload_to = {i for i, d in enumerate(devs) if d.kind in (DeviceKind.GPU, DeviceKind.IGPU)} if g.offload else set()
    # a graph built with every layer (recurrent layers: their zero-size state tensors fragment the allocator
    # differently with each layer count) depends on the whole sequence, not on neighbourhoods
    uncut = bool(estimator.compute_facts.get("uncut"))
    if uncut:
        everywhere = _digest(("all-in-order", tuple(sigs)))
    for i, name in enumerate(names):
        if i == cpu or uncut:
            local = everywhere
        else:
            # with op offload a GPU also runs the big ops on host weights: every neighbourhood with host tensors
            also = cpu if i in offload_to else -1
            mine = frozenset(w for w in windows if any(s is not None and _touches(s, i, also) for s in w))
            local = _digest(("local", mine))
        out[(name, "compute")] = _digest(("compute", name, common_id, local))
    return out


def _lane_facts_of(devs: list[Lane], i: int) -> tuple:
    return _lane_facts(devs[i]) if i < len(devs) else ("CPU",)


def _touches(sig: tuple, i: int, also: int = -1) -> bool:
    _kind, kv, layer, where, _types = sig
    return kv in (i, also) or layer in (i, also) or i in where or also in where


# ---------------------------------------------------------------------- the store


@dataclass
class Fact:
    mib: int  # llama.cpp's printed figure (MiB, floored as it prints)
    est: int  # this estimate's bytes for the same key when the dry run was made
    at: float  # when (seconds since the epoch): the oldest go first


class LearnedStore:
    """Figures learned from dry runs, by key, persisted to ``path`` (None: in memory only)."""

    def __init__(self, path: str | os.PathLike | None = None, limit: int = MAX_FACTS):
        self.path = Path(path) if path is not None else None
        self.limit = limit
        self.facts: dict[str, Fact] = {}
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        data = read_json_cache(self.path, MAX_FILE_BYTES, "store of figures learned from llama.cpp")
        if data.get("version") != _VERSION:
            return
        for k, v in (data.get("facts") or {}).items():
            try:
                self.facts[str(k)] = Fact(int(v[0]), int(v[1]), float(v[2]))
            except (TypeError, ValueError, IndexError):
                continue
        self._trim()

    def save(self) -> None:
        if self.path is None:
            return
        data = {"version": _VERSION, "facts": {k: [f.mib, f.est, f.at] for k, f in self.facts.items()}}
        write_json_cache(self.path, data, "store of figures learned from llama.cpp")

    def _trim(self) -> None:
        if len(self.facts) > self.limit:
            keep = sorted(self.facts.items(), key=lambda kv: kv[1].at)[-self.limit :]
            self.facts = dict(keep)

    def get(self, key: str) -> Fact | None:
        return self.facts.get(key)

    def put(self, key: str, fact: Fact) -> None:
        self.facts.pop(key, None)
        self.facts[key] = fact
        self._trim()

    def has_machine(self, machine: Machine) -> bool:
        prefix = machine.prefix + "|"
        return any(k.startswith(prefix) for k in self.facts)

    def __len__(self) -> int:
        return len(self.facts)


def _full_key(machine: Machine, key: str) -> str:
    return f"{machine.prefix}|{key}"


def _figure(mem: DeviceMemory, kind: str) -> int:
    return {"model": mem.model, "context": mem.context, "compute": mem.compute}[kind]


# ---------------------------------------------------------------------- learning and applying


@dataclass
class DryRunCorrection:
    """What one dry run changed: per device and kind, llama.cpp's MiB minus the estimate's (floored) MiB."""

    deltas: dict[str, dict[str, int]] = field(default_factory=dict)
    at: float = 0.0

    def of(self, device: str) -> int:
        return sum(self.deltas.get(device, {}).values())


def learn(
    store: LearnedStore,
    machine: Machine,
    keys: dict[tuple[str, str], str],
    est: Estimate,
    rows: list[FitRow],
    checked: Iterable[str] | None = None,
) -> DryRunCorrection:
    """Keep the dry run's figures (``rows``) for the devices in ``checked`` (all of them by default), under the
    keys of the placement that was run (``keys``, ``est``: the estimate made with the settings the dry run
    was given, as ``llama-fit-params`` reads them)."""
    allowed = set(checked) if checked is not None else None
    now = time.time()
    corr = DryRunCorrection(at=now)
    for row in rows:
        if allowed is not None and row.name not in allowed:
            continue
        try:
            mem = est.device(row.name)
        except KeyError:
            continue
        for kind in KINDS:
            key = keys.get((row.name, kind))
            if key is None:
                continue
            theirs = getattr(row, kind)
            ours = _figure(mem, kind)
            store.put(_full_key(machine, key), Fact(theirs, ours, now))
            corr.deltas.setdefault(row.name, {})[kind] = theirs - ours // MiB
    store.save()
    return corr


@dataclass
class Verification:
    """The estimate with what llama.cpp decided put in: per device and kind, ``verified`` (llama.cpp's own
    figure, from a dry run of this placement or one whose figure has the same key) or not."""

    estimate: Estimate
    verified: dict[str, set[str]]  # device -> kinds that are llama.cpp's figures
    corrected: dict[str, int]  # device -> bytes the learned figures moved it (+: llama.cpp needs more)
    mismatched: list[str] = field(default_factory=list)  # "device kind": a key matched but the estimate moved
    note: str = ""  # why some figures cannot be llama.cpp's here (said once, next to the statuses)

    def status(self, device: str) -> str:
        """``verified`` (all three figures are llama.cpp's), ``partly`` or ``estimated``."""
        kinds = self.verified.get(device, set())
        if kinds >= set(KINDS):
            return "verified"
        return "partly" if kinds else "estimated"

    @property
    def all_verified(self) -> bool:
        return all(self.status(d.name) == "verified" for d in self.estimate.devices)

    def describe(self, device: str) -> str:
        kinds = self.verified.get(device, set())
        if kinds >= set(KINDS):
            head = "verified by llama.cpp"
        elif kinds:
            head = (
                f"{', '.join(k for k in KINDS if k in kinds)} verified by llama.cpp; "
                + ", ".join(k for k in KINDS if k not in kinds)
                + " estimated"
            )
        else:
            head = "estimated"
        moved = self.corrected.get(device, 0)
        if kinds and moved:
            head += f" (corrected by {'+' if moved > 0 else ''}{moved / MiB:.0f} MiB)"
        return head


def apply(store: LearnedStore, machine: Machine, keys: dict[tuple[str, str], str], est: Estimate) -> Verification:
    """``est`` with every figure whose key the store has (and whose estimate is the one it was learned
    next to) replaced by llama.cpp's; the figures keep the estimate's bytes below the MiB llama.cpp floors to."""
    devices = []
    verified: dict[str, set[str]] = {}
    corrected: dict[str, int] = {}
    mismatched: list[str] = []
    for mem in est.devices:
        new = replace(mem)
        for kind in KINDS:
            key = keys.get((mem.name, kind))
            fact = store.get(_full_key(machine, key)) if key is not None else None
            if fact is None:
                continue
            ours = _figure(mem, kind)
            if ours != fact.est:
                mismatched.append(f"{mem.name} {kind}")
                continue
            theirs = ours if ours // MiB == fact.mib else fact.mib * MiB + ours % MiB
            delta = theirs - ours
            if kind == "model":
                new.model += delta
            elif kind == "context":
                new.kv += delta  # llama.cpp prints KV and recurrent state as one figure
            else:
                new.compute += delta
            verified.setdefault(mem.name, set()).add(kind)
            corrected[mem.name] = corrected.get(mem.name, 0) + delta
        devices.append(new)
    out = Estimate(devices, est.shape, est.placement, est.pipeline_parallel, list(est.notes))
    return Verification(out, verified, corrected, mismatched)


# ---------------------------------------------------------------------- a dry run that can be cancelled


class Cancelled(Exception):
    """The dry run was stopped because the placement changed."""


class DryRun:
    """``llama-fit-params --fit-print on`` for ``-m model`` plus ``args``, found and run by :meth:`run` (in a
    worker thread; :class:`~app.llamacpp.fit_print.FitPrintError` says plainly when llama.cpp is not found) and
    stopped by :meth:`cancel` (from any thread): the process is killed and :meth:`run` raises
    :class:`Cancelled`."""

    def __init__(
        self,
        model: str | os.PathLike,
        args: list[str],
        *,
        llama_dir: str | os.PathLike | None = None,
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ):
        self.model = os.fspath(model)
        self.args = list(args)
        self.llama_dir = llama_dir
        self.argv: list[str] = []
        self.timeout = timeout
        self.env = env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._cancelled = False
        self.build = ""  # build_id() of the tool that ran, set by run()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGKILL) if os.name != "nt" else proc.kill()
            except OSError:
                pass

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def run(self) -> list[FitRow]:
        # finding the tool touches the file system (a configured folder may be slow): here, off the GUI thread
        try:
            tool = find_tool("llama-fit-params", self.llama_dir)
        except LlamaCppNotFound as exc:
            raise FitPrintError(str(exc)) from None
        try:
            self.build = build_id(tool.path)
        except OSError as exc:
            raise FitPrintError(f"could not read {tool.path}: {exc}") from None
        self.argv = [str(tool.path), "-m", self.model, *self.args, "--fit-print", "on"]
        with self._lock:
            if self._cancelled:
                raise Cancelled()
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    errors="replace",
                    env=self.env if self.env is not None else dict(os.environ),
                )
            except OSError as exc:
                raise FitPrintError(f"could not run {tool.path}: {exc}") from None
        proc = self._proc
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise FitPrintError(
                f"llama-fit-params did not finish within {self.timeout:.0f} s (an unreachable RPC host can cause "
                "this); check the RPC hosts and try again."
            ) from None
        if self._cancelled:
            raise Cancelled()
        rows = parse_fit_print(out)
        if proc.returncode != 0 or not rows or rows[-1].name != CPU:
            raise FitPrintError(f"llama-fit-params failed (exit status {proc.returncode}): {llama_reason(err)}")
        return rows
