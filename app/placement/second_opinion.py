"""llama.cpp's own dry run for a placement, next to our estimate.

Builds the ``llama-fit-params`` arguments for the placement (the same
``-dev/-ngl/-ts/-ot`` the export writes, plus the memory settings that tool
accepts: it rejects server-only flags such as ``-kvu``), runs it and maps its
rows back to our device names. Runs in a worker thread in the GUI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..llamacpp.fit_print import FitPrintError, FitRow, run_fit_print
from ..memory.estimator import Estimate
from ..units import MiB
from .export import placement_args
from .placement import Placement


@dataclass
class Opinion:
    rows: list[FitRow]
    argv: list[str]
    notes: list[str]

    def row(self, name: str) -> FitRow | None:
        return next((r for r in self.rows if r.name == name), None)


def fit_params_args(p: Placement, rpc: list[str] | None = None) -> tuple[list[str], list[str]]:
    pa = placement_args(p)
    s = p.settings
    notes = []
    argv: list[str] = []
    if rpc:
        argv += ["--rpc", ",".join(rpc)]
    argv += ["-dev", ",".join(pa.devices) if pa.devices else "none", "-ngl", str(pa.n_gpu_layers)]
    if pa.tensor_split:
        argv += ["-ts", ",".join(map(str, pa.tensor_split))]
    for pat, buft in pa.overrides:
        argv += ["-ot", f"{pat}={buft}"]
    if pa.n_cpu_moe:
        argv += ["-ncmoe", str(pa.n_cpu_moe)]
    if pa.cpu_moe:
        argv.append("-cmoe")
    argv += ["-c", str(s.n_ctx or 0), "-ctk", s.type_k, "-ctv", s.type_v, "-b", str(s.n_batch), "-ub", str(s.n_ubatch)]
    if s.flash_attn in ("on", "off"):
        argv += ["-fa", s.flash_attn]
    n_par = s.eff_n_parallel
    if n_par > 1 and not s.eff_kv_unified:
        argv += ["-np", str(n_par)]
    elif n_par > 1:
        notes.append(
            "llama-fit-params has no unified-KV flag: it sizes the cache for one stream, as a unified "
            "server cache is sized; its output buffer is reserved for a full batch (compute on the "
            "output device is larger than the server's)"
        )
    if s.swa_full:
        argv.append("--swa-full")
    if s.no_kv_offload:
        argv.append("-nkvo")
    if not s.repack:
        argv.append("--no-repack")
    return argv, notes


def second_opinion(
    p: Placement,
    model_path: str | os.PathLike,
    *,
    rpc: list[str] | None = None,
    llama_dir: str | os.PathLike | None = None,
    timeout: float = 60.0,
) -> Opinion:
    """Run the dry run; raises :class:`FitPrintError` with a clear message when it cannot."""
    if p.model.is_demo:
        raise FitPrintError("the demo model has no file for llama.cpp to read: open a real GGUF to verify.")
    if p.model.source:  # a header read over HTTP (app.remote)
        raise FitPrintError(
            f"only the header of {p.model.source} was read: llama.cpp's dry run needs the file; download it and "
            "open it to verify."
        )
    argv, notes = fit_params_args(p, rpc)
    rows = run_fit_print(model_path, argv, llama_dir=llama_dir, timeout=timeout)
    return Opinion(rows, argv, notes)


def compare(est: Estimate, op: Opinion) -> list[tuple[str, str, float, float]]:
    """(device, quantity, ours MiB, llama.cpp MiB) for every row of the dry run."""
    out = []
    for r in op.rows:
        try:
            d = est.device(r.name)
        except KeyError:
            continue
        out += [
            (r.name, "model", d.model / MiB, float(r.model)),
            (r.name, "context", d.context / MiB, float(r.context)),
            (r.name, "compute", d.compute / MiB, float(r.compute)),
        ]
    return out
