"""Fit the speed model's efficiency factors from measured llama-bench results.

Decode time per token is linear in the unknowns: ``t = sum_d bytes_d / bw_d * x_d + hops * h + c`` with
``x_d = 1 / eff_d``. A least-squares fit with a prior pulling each unknown toward its default (so two or
three measurements cannot send a factor to nonsense) gives ``eff_d``, the hop latency and the per-token
overhead. Prompt processing gets one compute-efficiency scale per device the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory.layout import WeightPlacement
from ..model import Model
from .predict import (
    SpeedParams,
    hop_cost,
    layer_path,
    predict_decode,
    predict_prompt,
    prompt_work,
    read_bytes_per_token,
)


@dataclass
class Measurement:
    placement: WeightPlacement
    tg_tokens_per_s: float | None = None
    pp_tokens_per_s: float | None = None
    n_ubatch: int = 512
    label: str = ""


@dataclass
class FitReport:
    params: SpeedParams
    rows: list[tuple[str, str, float, float]]  # label, "tg"/"pp", predicted, measured
    fitted: dict[str, dict]

    @property
    def worst_error(self) -> float:
        return max((abs(p - m) / m for _, _, p, m in self.rows if m), default=0.0)


def _hop_counts(model: Model, wp: WeightPlacement, params: SpeedParams) -> tuple[int, int, float]:
    """(local hops, RPC hops, payload seconds) along a token's path."""
    path = layer_path(model, wp)
    local = rpc = 0
    payload = 0.0
    for a, b in zip(path, path[1:]):
        if a == b:
            continue
        da, db = params.get(a), params.get(b)
        link = da if da.kind == "rpc" else db if db.kind == "rpc" else (da if da.kind != "cpu" else db)
        payload += hop_cost(da, db, model.params.n_embd) - link.link_latency
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


def fit(model: Model, measurements: list[Measurement], params: SpeedParams, prior_weight: float = 0.3) -> FitReport:
    """Fit efficiencies, hop latencies and overheads so the model's times match the measurements."""
    names = sorted({d for m in measurements for d in read_bytes_per_token(model, m.placement)})
    fitted: dict[str, dict] = {}
    tg = [(m, m.tg_tokens_per_s) for m in measurements if m.tg_tokens_per_s]
    if tg:
        k = len(names)
        rows, rhs = [], []
        for m, tg_rate in tg:
            per = read_bytes_per_token(model, m.placement)
            local, rpc, payload = _hop_counts(model, m.placement, params)
            rows.append([per.get(n, 0.0) / params.get(n).bandwidth for n in names] + [local, rpc, 1.0])
            rhs.append(1.0 / tg_rate - payload)
        rpc_dev = next((d for d in params.devices.values() if d.kind == "rpc"), None)
        local_dev = next((d for d in params.devices.values() if d.kind == "gpu"), None)
        x0 = [1.0 / params.get(n).eff_bandwidth for n in names] + [
            local_dev.link_latency if local_dev else 60e-6,
            rpc_dev.link_latency if rpc_dev else 1.5e-3,
            params.token_overhead,
        ]
        x = _solve(rows, rhs, x0, prior_weight)
        for n, xi in zip(names, x[:k]):
            eff = float(np.clip(1.0 / max(xi, 1e-6), 0.02, 1.0))
            params.get(n).eff_bandwidth = eff
            fitted.setdefault(n, {})["eff_bandwidth"] = eff
        lat_local, lat_rpc = float(np.clip(x[k], 1e-6, 5e-3)), float(np.clip(x[k + 1], 1e-6, 0.05))
        for d in params.devices.values():
            d.link_latency = lat_rpc if d.kind == "rpc" else lat_local
            fitted.setdefault(d.name, {})["link_latency"] = d.link_latency
        params.token_overhead = float(np.clip(x[k + 2], 0.0, 0.05))
        fitted["_overhead"] = {"token_overhead": params.token_overhead}
    pp = [(m, m.pp_tokens_per_s) for m in measurements if m.pp_tokens_per_s]
    if pp:
        works = [prompt_work(model, m.placement, params, m.n_ubatch) for m, _ in pp]
        devs = sorted({d for flops, _, _ in works for d in flops})
        rows, rhs = [], []
        for (m, pp_rate), (flops, host_bytes, target) in zip(pp, works):
            transfer = host_bytes / params.get(target).link_bandwidth if target else 0.0
            rows.append([flops.get(d, 0.0) / params.get(d).nominal_flops for d in devs] + [1.0])
            rhs.append(m.n_ubatch / pp_rate - transfer)
        x0 = [1.0 / params.get(d).eff_flops for d in devs] + [params.token_overhead]
        y = _solve(rows, rhs, x0, prior_weight)
        for dev, yi in zip(devs, y[:-1]):
            eff = float(np.clip(1.0 / max(yi, 1e-6), 0.001, 1.0))
            params.get(dev).eff_flops = eff
            fitted.setdefault(dev, {})["eff_flops"] = eff
    rows_out = []
    for m in measurements:
        if m.tg_tokens_per_s:
            rows_out.append((m.label, "tg", predict_decode(model, m.placement, params).tokens_per_s, m.tg_tokens_per_s))
        if m.pp_tokens_per_s:
            rows_out.append(
                (m.label, "pp", predict_prompt(model, m.placement, params, m.n_ubatch).tokens_per_s, m.pp_tokens_per_s)
            )
    return FitReport(params, rows_out, fitted)
