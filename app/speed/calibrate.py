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
from .model import SpeedParams, _hop_cost, _layer_path, predict_decode, predict_prompt, read_bytes_per_token


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
    rows: list[tuple[str, str, float, float]]   # label, "tg"/"pp", predicted, measured
    fitted: dict[str, dict]

    @property
    def worst_error(self) -> float:
        return max((abs(p - m) / m for _, _, p, m in self.rows if m), default=0.0)


def fit(model: Model, measurements: list[Measurement], params: SpeedParams, prior_weight: float = 0.3) -> FitReport:
    names = sorted({d for m in measurements for d in read_bytes_per_token(model, m.placement)})
    tg = [m for m in measurements if m.tg_tokens_per_s]
    fitted: dict[str, dict] = {}
    if tg:
        k = len(names)
        rows, rhs = [], []
        for m in tg:
            per = read_bytes_per_token(model, m.placement)
            path = _layer_path(model, m.placement)
            hop_base = sum(_hop_cost(params.get(a), params.get(b), model.params.n_embd) - params.get(
                a if params.get(a).kind != "cpu" else b).link_latency for a, b in zip(path, path[1:]) if a != b)
            hops = sum(1 for a, b in zip(path, path[1:]) if a != b)
            row = [per.get(n, 0.0) / params.get(n).bandwidth for n in names] + [hops, 1.0]
            rows.append(row)
            rhs.append(1.0 / m.tg_tokens_per_s - hop_base)
        x0 = [1.0 / params.get(n).eff_bandwidth for n in names] + [params.get(names[0]).link_latency,
                                                                    params.token_overhead]
        scale = np.array([max(abs(v), 1e-9) for v in x0])
        a = np.array(rows) * scale
        b = np.array(rhs)
        # prior rows: weight relative to the typical measured time
        w = prior_weight * float(np.mean(b))
        a = np.vstack([a, w * np.eye(k + 2)])
        b = np.concatenate([b, w * np.ones(k + 2)])
        sol, *_ = np.linalg.lstsq(a, b, rcond=None)
        x = sol * scale
        for n, xi in zip(names, x[:k]):
            eff = float(np.clip(1.0 / max(xi, 1e-6), 0.05, 1.0))
            params.get(n).eff_bandwidth = eff
            fitted.setdefault(n, {})["eff_bandwidth"] = eff
        lat = float(np.clip(x[k], 1e-6, 5e-3))
        for d in params.devices.values():
            if d.kind != "rpc":
                d.link_latency = lat
                fitted.setdefault(d.name, {})["link_latency"] = lat
        params.token_overhead = float(np.clip(x[k + 1], 0.0, 0.05))
        fitted["_overhead"] = {"token_overhead": params.token_overhead}
    for m in measurements:
        if not m.pp_tokens_per_s:
            continue
        pred = predict_prompt(model, m.placement, params, m.n_ubatch)
        ratio = pred.tokens_per_s / m.pp_tokens_per_s
        for n in pred.device_seconds:
            d = params.get(n)
            d.eff_flops = float(np.clip(d.eff_flops * ratio, 0.01, 1.0))
            fitted.setdefault(n, {})["eff_flops"] = d.eff_flops
    rows_out = []
    for m in measurements:
        if m.tg_tokens_per_s:
            rows_out.append((m.label, "tg", predict_decode(model, m.placement, params).tokens_per_s, m.tg_tokens_per_s))
        if m.pp_tokens_per_s:
            rows_out.append((m.label, "pp", predict_prompt(model, m.placement, params, m.n_ubatch).tokens_per_s,
                             m.pp_tokens_per_s))
    return FitReport(params, rows_out, fitted)
