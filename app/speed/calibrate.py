"""Fit the speed model's efficiency factors from measured llama-bench results.

Every predicted time is linear in the unknowns. Decode, per token:
``t = sum_gpu bytes_d / bw_d * x_d + bytes_cpu / bw_cpu * x_cpu + sum_type elems_type / rate * u_type
+ hops * h + c``, where ``x = 1 / eff_bandwidth``, ``u_type = cost_type / eff_vec`` (the CPU kernels' time
per weight element of that ggml type, attention included as its own "type") and ``c`` the per-token
overhead. Prompt processing, per prompt: ``sum_gpu flops_d / F_d * y_d + sum_type flops_type / F_cpu *
v_type + ...``. A least-squares fit with a prior pulling each unknown toward its default (so a few
measurements cannot send a factor to nonsense) gives them all at once, over one model or several.

CPU-type devices (the host and CPU-backed RPC servers of the same machine) share one set of CPU figures:
they run on the same cores and RAM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lanes import CPU
from ..memory.layout import WeightPlacement
from ..model import Model
from .predict import (
    ATTENTION,
    SpeedFacts,
    SpeedParams,
    Workload,
    _attended,
    _layer_share,
    hop_cost,
    layer_path,
    predict,
    predict_decode,
    prompt_work,
)


@dataclass
class Measurement:
    placement: WeightPlacement
    tg_tokens_per_s: float | None = None
    pp_tokens_per_s: float | None = None
    n_ubatch: int = 512
    label: str = ""
    model: Model | None = None  # None: the model given to fit()
    work: Workload | None = None  # None: tg at depth 0 and pp of one micro-batch, default threads
    facts: SpeedFacts | None = None


@dataclass
class FitReport:
    params: SpeedParams
    rows: list[tuple[str, str, float, float]]  # label, "tg"/"pp", predicted, measured
    fitted: dict[str, dict]

    @property
    def worst_error(self) -> float:
        return max((abs(p - m) / m for _, _, p, m in self.rows if m), default=0.0)


def _hop_counts(model: Model, wp: WeightPlacement, params: SpeedParams, n_seq: int = 1) -> tuple[int, int, float]:
    """(local hops, RPC hops, payload seconds) along a token's path."""
    path = layer_path(model, wp)
    local = rpc = 0
    payload = 0.0
    for a, b in zip(path, path[1:]):
        if a == b:
            continue
        da, db = params.get(a), params.get(b)
        link = da if da.kind == "rpc" else db if db.kind == "rpc" else (da if da.kind != "cpu" else db)
        payload += hop_cost(da, db, model.params.n_embd, n_seq) - link.link_latency
        if link.kind == "rpc":
            rpc += 1
        else:
            local += 1
    return local, rpc, payload


def _solve(rows: list[list[float]], rhs: list[float], x0: list[float], prior_weight: float) -> np.ndarray:
    """Least squares for ``rows @ x = rhs`` with a prior pulling x toward x0 (scaled, so units do not matter)."""
    scale = np.array([max(abs(v), 1e-9) for v in x0])
    a = np.array(rows) * scale
    b = np.array(rhs)
    w = prior_weight * float(np.mean(np.abs(b)))
    a = np.vstack([a, w * np.eye(len(x0))])
    b = np.concatenate([b, w * np.ones(len(x0))])
    sol, *_ = np.linalg.lstsq(a, b, rcond=None)
    return sol * scale


def _work(m: Measurement) -> Workload:
    return m.work or Workload(n_prompt=m.n_ubatch, n_ubatch=m.n_ubatch)


def _cpu_threads(params: SpeedParams, dev: str, work: Workload) -> int:
    return params.get(dev).n_threads(work.threads if dev == CPU else None)


def _decode_row(model: Model, facts: SpeedFacts, m: Measurement, params: SpeedParams) -> tuple[dict, float]:
    """The coefficients of one decode measurement's time, and the time minus the fixed (payload) part."""
    work = _work(m)
    depth = work.depth + (work.n_prompt if work.n_gen else 0) + work.n_gen // 2
    pred = predict_decode(model, m.placement, params, depth=depth, facts=facts, threads=work.threads, n_seq=work.n_seq)
    row: dict[str, float] = {}
    for dev, b in pred.device_bytes.items():
        d = params.get(dev)
        key = "bw:cpu" if d.is_cpu else f"bw:{dev}"
        rate = d.ram_rate(work.threads if dev == CPU else None) / d.eff_bandwidth if d.is_cpu else d.bandwidth
        row[key] = row.get(key, 0.0) + b / rate
    share = _layer_share(model, m.placement)
    attn = facts.attn_flops_per_cell * _attended(facts, depth) * work.n_seq / 2
    for dev, fams in facts.digest(m.placement).elems.items():
        d = params.get(dev)
        if d.is_cpu:
            rate = d.vec_rate(work.threads if dev == CPU else None) / d.eff_vec
            for family, e in fams.items():
                row[f"vec:{family}"] = row.get(f"vec:{family}", 0.0) + e * work.n_seq / rate
    for dev, sh in share.items():
        d = params.get(dev)
        if d.is_cpu and attn:
            key = f"vec:{ATTENTION}"
            row[key] = row.get(key, 0.0) + attn * sh / (d.vec_rate(work.threads if dev == CPU else None) / d.eff_vec)
    local, rpc, payload = _hop_counts(model, m.placement, params, work.n_seq)
    row["lat:local"], row["lat:rpc"], row["overhead"] = float(local), float(rpc), 1.0
    rate = m.tg_tokens_per_s or 0.0
    return row, work.n_seq / rate - payload


def _prompt_row(model: Model, facts: SpeedFacts, m: Measurement, params: SpeedParams) -> tuple[dict, float]:
    """The coefficients of one prompt measurement's time (per prompt), and the time minus the fixed part: the
    FLOPs of each type family (and attention) per device from the placement's digest, as ``prompt_work`` sums
    them before weighting by the per-type costs that this fit finds."""
    work = _work(m)
    n_prompt = work.n_prompt or m.n_ubatch
    n_ub = min(work.n_ubatch, n_prompt)
    dig = facts.digest(m.placement)
    row: dict[str, float] = {}
    fixed = 0.0
    done = 0

    def add(dev: str, family: str, fl: float) -> None:
        d = params.get(dev)
        if d.is_cpu:
            key, rate = f"flc:{family}", d.cpu_flops(work.threads if dev == CPU else None) / d.eff_flops
        else:
            key, rate = f"fl:{dev}", d.nominal_flops
        row[key] = row.get(key, 0.0) + fl / rate

    while done < n_prompt:
        ub = min(n_ub, n_prompt - done)
        _, host_bytes, target = prompt_work(model, m.placement, params, ub, True, facts, work.depth + done)
        for dev, fams in dig.flops.items():
            run_on = target if dev == CPU and target is not None else dev
            for family, fl in fams.items():
                add(run_on, family, fl * ub)
        attn = facts.attn_flops_per_cell * ub * _attended(facts, work.depth + done + ub / 2)
        for dev, share in dig.layer_share.items():
            if attn * share:
                add(dev, ATTENTION, attn * share)
        if target is not None and host_bytes:
            fixed += host_bytes / params.get(target).link_bandwidth
        fixed += params.token_overhead
        done += ub
    rate = m.pp_tokens_per_s or 0.0
    return row, n_prompt / rate - fixed


def _x0(key: str, params: SpeedParams) -> float:
    kind, _, name = key.partition(":")
    cpu = next((d for d in params.devices.values() if d.is_cpu), params.get(CPU))
    if kind == "bw":
        return 1.0 / (cpu.eff_bandwidth if name == "cpu" else params.get(name).eff_bandwidth)
    if kind == "vec":
        return cpu.type_cost.get(name, 1.0) / cpu.eff_vec
    if kind == "flc":
        return cpu.type_cost_pp.get(name, 1.0) / cpu.eff_flops
    if kind == "fl":
        return 1.0 / params.get(name).eff_flops
    if key == "lat:local":
        return next((d.link_latency for d in params.devices.values() if d.kind == "gpu"), 60e-6)
    if key == "lat:rpc":
        return next((d.link_latency for d in params.devices.values() if d.kind == "rpc"), 1.5e-3)
    return params.token_overhead


def _fit_rows(rows: list[tuple[dict, float]], params: SpeedParams, prior_weight: float) -> dict[str, float]:
    keys = sorted({k for r, _ in rows for k in r})
    x0 = [_x0(k, params) for k in keys]
    x = _solve([[r.get(k, 0.0) for k in keys] for r, _ in rows], [b for _, b in rows], x0, prior_weight)
    return dict(zip(keys, (float(v) for v in x)))


def _weighted_mean(values: dict[str, float], weights: dict[str, float]) -> float:
    total = sum(weights.get(t, 0.0) for t in values)
    return sum(v * weights.get(t, 0.0) for t, v in values.items()) / total if total else 1.0


def _type_costs(
    rows: list[tuple[dict, float]], x: dict[str, float], prefix: str
) -> tuple[dict[str, float], float] | None:
    """The fitted per-family costs under ``prefix`` (``vec:`` decode, ``flc:`` prompt) relative to their mean
    weighted by how much of the measured time each family's coefficients carry, and that mean (its inverse is the
    device's efficiency); None when the fit has no such coefficient."""
    n = len(prefix)
    weights: dict[str, float] = {}
    for r, _ in rows:
        for k, v in r.items():
            if k.startswith(prefix):
                weights[k[n:]] = weights.get(k[n:], 0.0) + v
    fitted = {k[n:]: max(v, 1e-3) for k, v in x.items() if k.startswith(prefix)}
    if not fitted:
        return None
    mean = _weighted_mean(fitted, weights)
    return {t: float(np.clip(v / mean, 0.05, 20.0)) for t, v in fitted.items()}, mean


def fit_many(measurements: list[Measurement], params: SpeedParams, prior_weight: float = 0.3) -> dict[str, dict]:
    """Fit ``params`` (changed in place) to ``measurements`` (each with its own model); returns the fitted
    figures in the calibration file's shape (device -> figure -> value, ``_overhead``)."""
    facts_of: dict[int, SpeedFacts] = {}

    def facts(m: Measurement) -> tuple[Model, SpeedFacts]:
        model = m.model
        assert model is not None
        if m.facts is not None and m.facts.model is model:
            return model, m.facts
        if id(model) not in facts_of:
            facts_of[id(model)] = SpeedFacts(model)
        return model, facts_of[id(model)]

    fitted: dict[str, dict] = {}
    cpus = [d for d in params.devices.values() if d.is_cpu]
    tg = [m for m in measurements if m.tg_tokens_per_s]
    if tg:
        rows = [_decode_row(*facts(m), m, params) for m in tg]
        x = _fit_rows(rows, params, prior_weight)
        vec = _type_costs(rows, x, "vec:")
        for k, v in x.items():
            if k.startswith("bw:"):
                eff = float(np.clip(1.0 / max(v, 1e-6), 0.02, 4.0 if k == "bw:cpu" else 1.0))
                for d in cpus if k == "bw:cpu" else [params.get(k[3:])]:
                    d.eff_bandwidth = eff
                    fitted.setdefault(d.name, {})["eff_bandwidth"] = eff
        if vec is not None:
            costs, mean = vec
            for d in cpus:
                d.eff_vec = float(np.clip(1.0 / mean, 0.01, 4.0))
                d.type_cost = dict(costs)
                fitted.setdefault(d.name, {})["eff_vec"] = d.eff_vec
                fitted[d.name]["type_cost"] = dict(d.type_cost)
        lat_local = float(np.clip(x.get("lat:local", _x0("lat:local", params)), 1e-6, 5e-3))
        lat_rpc = float(
            np.clip(x.get("lat:rpc", _x0("lat:rpc", params)), 1e-6, 1.0)
        )  # loopback on shared cores: ~100 ms measured
        for d in params.devices.values():
            if d.name == CPU:
                continue
            d.link_latency = lat_rpc if d.kind == "rpc" else lat_local
            fitted.setdefault(d.name, {})["link_latency"] = d.link_latency
        params.token_overhead = float(np.clip(x.get("overhead", params.token_overhead), 0.0, 0.05))
        fitted["_overhead"] = {"token_overhead": params.token_overhead}
    pp = [m for m in measurements if m.pp_tokens_per_s]
    if pp:
        rows = [_prompt_row(*facts(m), m, params) for m in pp]
        y = _fit_rows(rows, params, prior_weight)
        flc = _type_costs(rows, y, "flc:")
        for k, v in y.items():
            if k.startswith("fl:"):
                d = params.get(k[3:])
                d.eff_flops = float(np.clip(1.0 / max(v, 1e-6), 0.001, 1.0))
                fitted.setdefault(d.name, {})["eff_flops"] = d.eff_flops
        if flc is not None:
            costs, mean = flc
            for d in cpus:
                d.eff_flops = float(np.clip(1.0 / mean, 0.001, 1.0))
                d.type_cost_pp = dict(costs)
                fitted.setdefault(d.name, {})["eff_flops"] = d.eff_flops
                fitted[d.name]["type_cost_pp"] = dict(d.type_cost_pp)
    return fitted


def fit(model: Model, measurements: list[Measurement], params: SpeedParams, prior_weight: float = 0.3) -> FitReport:
    """Fit efficiencies, hop latencies and overheads so the model's times match the measurements (of ``model``
    unless a measurement names its own)."""
    for m in measurements:
        m.model = m.model or model
    fitted = fit_many(measurements, params, prior_weight)
    rows_out = []
    for m in measurements:
        mm = m.model or model
        work = _work(m)
        if m.tg_tokens_per_s:
            tg_work = Workload(n_gen=work.n_gen or 1, depth=work.depth, threads=work.threads, n_seq=work.n_seq)
            rows_out.append(
                (m.label, "tg", predict(mm, m.placement, params, tg_work, m.facts).tokens_per_s, m.tg_tokens_per_s)
            )
        if m.pp_tokens_per_s:
            pp_work = Workload(
                n_prompt=work.n_prompt or m.n_ubatch,
                depth=work.depth,
                threads=work.threads,
                n_ubatch=min(work.n_ubatch, m.n_ubatch),
            )
            rows_out.append(
                (m.label, "pp", predict(mm, m.placement, params, pp_work, m.facts).tokens_per_s, m.pp_tokens_per_s)
            )
    return FitReport(params, rows_out, fitted)
