"""Proof of the speed model: llama-bench on a placement and its alternatives, predicted next to measured.

Alternatives: the current placement, auto-fit, fastest, llama.cpp's own --fit, and a ``--n-cpu-moe``
sweep. Each is benchmarked with the same llama-bench settings; the measurements also calibrate the
speed model for this machine (:mod:`app.speed.calibrate`), and everything is kept in the model's
benchmark history.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..lanes import Lane
from ..launch.bench import BenchCancelled, BenchError, BenchHistory, bench_args, run_bench
from ..model import Model
from ..placement.command import build_command
from ..placement.placement import Placement
from ..speed.calibrate import FitReport, Measurement, fit
from ..speed.predict import SpeedParams, predict_decode, predict_prompt

log = logging.getLogger(__name__)


@dataclass
class ProofRow:
    label: str
    placement: Placement
    predicted_tg: float
    predicted_pp: float
    measured_tg: float | None = None
    measured_pp: float | None = None
    error: str | None = None


@dataclass
class ProofResult:
    rows: list[ProofRow]
    calibration: FitReport | None
    notes: list[str] = field(default_factory=list)


def run_proof(
    model: Model,
    model_path: str | os.PathLike,
    devices: list[Lane],
    candidates: list[tuple[str, Placement]],
    params: SpeedParams,
    *,
    rpc: list[str] | None = None,
    llama_dir: str | os.PathLike | None = None,
    n_prompt: int = 512,
    n_gen: int = 64,
    repetitions: int = 2,
    history: BenchHistory | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    calibrate: bool = True,
    cancel: Any = None,
) -> ProofResult:
    """Benchmark every candidate (label, placement); returns predicted and measured speeds, and a calibration.

    ``cancel`` (a ``threading.Event``): when set, the running llama-bench is stopped and BenchCancelled raised."""
    rows: list[ProofRow] = []
    notes: list[str] = []
    measurements: list[Measurement] = []
    for i, (label, p) in enumerate(candidates):
        if progress:
            progress(i, len(candidates), label)
        wp = p.weight_placement()
        n_ub = min(p.settings.n_ubatch, n_prompt)
        row = ProofRow(
            label,
            p,
            predict_decode(model, wp, params).tokens_per_s,
            predict_prompt(model, wp, params, n_ub, p.settings.op_offload).tokens_per_s,
        )
        try:
            argv = build_command(p, model_path, rpc=rpc).argv
            args, bnotes = bench_args(argv, n_prompt=n_prompt, n_gen=n_gen, repetitions=repetitions)
            run = run_bench(args, llama_dir=llama_dir, label=label, cancel=cancel)
            row.measured_tg, row.measured_pp = run.tg_ts, run.pp_ts
            notes += [f"{label}: {n}" for n in bnotes]
            if history is not None:
                history.add(run)
            measurements.append(Measurement(wp, run.tg_ts, run.pp_ts, n_ub, label))
        except BenchCancelled:
            raise
        except (BenchError, ValueError) as exc:
            row.error = str(exc)
        rows.append(row)
    if progress:
        progress(len(candidates), len(candidates), "done")
    report = fit(model, measurements, params) if calibrate and measurements else None
    return ProofResult(rows, report, notes)
