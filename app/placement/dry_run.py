"""One dry run of llama.cpp for a placement, and what it teaches the estimate (:mod:`app.memory.learned`).

:func:`prepare` builds the ``llama-fit-params`` run for what this machine can check (planned cards' blocks
counted on the CPU, as :meth:`app.session.Session.verifiable` decides); the run itself
(:class:`~app.memory.learned.DryRun`) goes to a worker thread and can be cancelled by the next edit; then
:func:`learned_from` keeps its figures under the keys of the placement as ``llama-fit-params`` read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..command.parse import settings_from_args
from ..llamacpp.fit_print import FitRow
from ..memory.estimator import Estimator
from ..memory.learned import DryRun, DryRunCorrection, LearnedStore, Machine, devices_id, figure_keys, learn
from .placement import Placement
from .second_opinion import Opinion, fit_params_args


@dataclass
class DryRunJob:
    trial: Placement  # the placement run (planned cards' blocks on the CPU)
    checked: list[str]  # the lanes whose figures are llama.cpp's for this placement
    planned: list[str]
    argv: list[str]  # llama-fit-params arguments, without -m
    notes: list[str]
    run: DryRun


def prepare(
    trial: Placement,
    checked: list[str],
    planned: list[str],
    model_path: str | os.PathLike,
    *,
    rpc: list[str] | None = None,
    llama_dir: str | os.PathLike | None = None,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
) -> DryRunJob:
    """The job for ``trial``; its run raises :class:`~app.llamacpp.fit_print.FitPrintError` when llama.cpp is not
    found (the message says where it was looked for)."""
    argv, notes = fit_params_args(trial, rpc)
    run = DryRun(model_path, argv, llama_dir=llama_dir, timeout=timeout, env=env)
    return DryRunJob(trial, checked, planned, argv, notes, run)


def opinion_of(job: DryRunJob, rows: list[FitRow]) -> Opinion:
    """The rows as Verify shows them: only the checked lanes when planned cards were left out."""
    if job.planned:
        return Opinion(
            [r for r in rows if r.name in job.checked],
            job.argv,
            [*job.notes, f"not checked: {', '.join(job.planned)} (planned)"],
        )
    return Opinion(rows, job.argv, list(job.notes))


def learned_from(
    job: DryRunJob, rows: list[FitRow], estimator: Estimator, store: LearnedStore, model_id: str
) -> tuple[Machine, DryRunCorrection]:
    """Keep the figures of the checked lanes, keyed as the placement looks to ``llama-fit-params`` (its
    settings parsed back from the arguments it was given, so the estimate is the one of the graph it built)."""
    settings = settings_from_args(job.argv, tool="fit-params")
    wp = job.trial.weight_placement()
    est = estimator.estimate(job.trial.devices, settings, wp)
    keys = figure_keys(estimator, job.trial.devices, settings, wp, est)
    machine = Machine(job.run.build, model_id, devices_id(job.trial.devices))
    return machine, learn(store, machine, keys, est, rows, job.checked)
