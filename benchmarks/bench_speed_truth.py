"""The speed model held to measurement, out of sample.

Reads the data set that ``benchmarks/speed_data/collect.py`` measured on this machine (real
``llama-bench`` and ``llama-batched-bench`` runs of the pinned llama.cpp on full-size models: several
architectures, quantizations, thread counts, depths, micro-batch sizes, CPU and loopback-RPC
placements, parallel slots), predicts every measured figure with Layerdeck's speed model, and prints:

- per case: measured (mean and spread of the repetitions) and predicted, before and after calibration;
- median and worst absolute error for tg and pp, before calibration (the machine's figures only: its
  measured RAM bandwidth, core count and clock) and after it, where the calibration is fitted on one
  half of the models and judged on the other half (two folds, split by model, never by row);
- the spread of the measurements themselves (repetitions, and the first case measured again at the end).

    python3 benchmarks/bench_speed_truth.py [--data FILE] [--verbose]

The models are rebuilt from the factory's shapes when their sparse files are missing (a second each).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "speed_data"))

from collect import DEFAULT_OUT, model_file  # noqa: E402

from app.lanes import DeviceKind, Lane  # noqa: E402
from app.memory.settings import LlamaSettings  # noqa: E402
from app.model import Model, open_model  # noqa: E402
from app.placement import Placement  # noqa: E402
from app.speed.calibrate import Measurement, fit_many  # noqa: E402
from app.speed.params import speed_params  # noqa: E402
from app.speed.predict import CpuFacts, SpeedFacts, Workload, predict  # noqa: E402

GiB = 1 << 30

#: The two folds: calibrate on one, judge on the other. Every quantization family appears in both.
FOLD_A = {
    "llama-3.2-1b-Q8_0",
    "llama-3.2-3b-IQ4_XS",
    "qwen3-4b-Q4_K_M",
    "llama-3.1-8b-Q4_K_M",
    "olmoe-1b-7b-MXFP4_MOE",
    "deepseek-v2-lite-Q4_K_M",
}


RPC_NOTE = (
    "loopback RPC (ggml-rpc-server processes on this machine, standing in for GPUs) is reported, not fitted: "
    "on 2 cores the servers' thread pools and llama.cpp's own spin on the same cores, so generation there "
    "runs at 1.4-2.6 tok/s against 8-15 on the CPU alone; that is contention, not a cost of the network"
)


@dataclass
class Row:
    """One measured figure: a llama-bench test (pp or tg) or a batched-bench line."""

    model: str
    case: str
    kind: str  # "pp" | "tg" | "par" (aggregate tokens/s of N parallel sequences)
    measured: float
    samples: list[float]
    workload: Workload
    settings: LlamaSettings
    lanes: list[Lane] = field(default_factory=list)

    @property
    def spread(self) -> float:
        """Relative spread of the repetitions: (max - min) / mean."""
        s = self.samples
        return (max(s) - min(s)) / statistics.fmean(s) if len(s) > 1 else 0.0


def _arg(args: list[str], flag: str, default: str | None = None) -> str | None:
    return args[args.index(flag) + 1] if flag in args else default


def _rpc_lanes(args: list[str]) -> list[Lane]:
    eps = (_arg(args, "--rpc") or "").split(",")
    return [
        Lane(f"RPC{i}", f"RPC{i}[{ep}]", free=20 * GiB, total=20 * GiB, kind=DeviceKind.RPC, endpoint=ep)
        for i, ep in enumerate(e for e in eps if e)
    ]


def _settings(args: list[str], n_ubatch: int, n_batch: int, n_ctx: int, threads: int, n_seq: int = 1) -> LlamaSettings:
    from app.command.parse import parse_llama_args

    argv = ["-c", str(n_ctx), "-ub", str(n_ubatch), "-b", str(n_batch), "-t", str(threads), "-np", str(n_seq)]
    for flag in ("-ngl", "-ts", "-ot"):
        if flag in args:
            argv += [flag, _arg(args, flag) or ""]
    argv += ["-fa", "auto", "-kvu"] if n_seq > 1 else []
    return parse_llama_args(["-m", "x.gguf", *argv]).settings


def rows_of(doc: dict) -> list[Row]:
    out: list[Row] = []
    for run in doc["runs"]:
        args, lanes = run["args"], _rpc_lanes(run["args"])
        if run["tool"] == "llama-bench":
            for r in run["results"]:
                pp = r["n_prompt"] > 0
                depth = r.get("n_depth") or 0
                work = Workload(
                    n_prompt=r["n_prompt"], n_gen=r["n_gen"], depth=depth, threads=r["n_threads"],
                    n_ubatch=r["n_ubatch"], n_batch=r["n_batch"],
                )
                n_ctx = r["n_prompt"] + r["n_gen"] + depth
                st = _settings(args, r["n_ubatch"], r["n_batch"], max(n_ctx, 256), r["n_threads"])
                out.append(Row(run["model"], run["case"], "pp" if pp else "tg", r["avg_ts"], r["samples_ts"],
                               work, st, lanes))
        elif run["tool"] == "llama-server":  # real concurrent requests: what each user saw
            threads = int(_arg(args, "-t", "2") or 2)
            for r in run["results"]:
                per_round = [statistics.fmean(rd["per_user_tg"]) for rd in r["rounds"]]
                work = Workload(n_prompt=r["n_prompt"], n_gen=r["n_gen"], threads=threads, n_seq=r["users"])
                st = _settings(args, 512, 2048, int(_arg(args, "-c", "4096") or 4096), threads,
                               n_seq=int(_arg(args, "-np", "1") or 1))
                out.append(Row(run["model"], f"server {r['users']} users", "srv", statistics.fmean(per_round),
                               per_round, work, st, lanes))
        else:  # llama-batched-bench: one line per parallel-sequence count
            threads = int(_arg(args, "-t", "2") or 2)
            n_ctx = int(_arg(args, "-c", "4096") or 4096)
            for r in run["results"]:
                work = Workload(n_prompt=r["pp"], n_gen=r["tg"], threads=threads, n_seq=r["pl"],
                                shared_prompt="-pps" in args)
                st = _settings(args, 512, 2048, n_ctx, threads, n_seq=max(1, r["pl"]))
                out.append(Row(run["model"], run["case"], "par", r["speed_tg"], [r["speed_tg"]], work, st, lanes))
    return out


_models: dict[str, tuple[Model, SpeedFacts]] = {}


def model_of(key: str) -> tuple[Model, SpeedFacts]:
    if key not in _models:
        m = open_model(model_file(key))
        _models[key] = (m, SpeedFacts(m))
    return _models[key]


def predicted(row: Row, params) -> float:
    model, facts = model_of(row.model)
    placement = Placement.from_settings(model, row.lanes, row.settings)
    rate = predict(model, placement.weight_placement(), params, row.workload, facts=facts).tokens_per_s
    return rate / row.workload.n_seq if row.kind == "srv" else rate  # a server user sees their share


def _err(p: float, m: float) -> float:
    return abs(p - m) / m


def _summary(errs: list[float]) -> str:
    if not errs:
        return "-"
    return f"median {100 * statistics.median(errs):5.1f}%, worst {100 * max(errs):5.1f}% ({len(errs)} figures)"


@dataclass
class Evaluation:
    rows: list[Row]
    before: dict[int, float]
    after: dict[int, float]
    fitted: list[dict]

    def errors(self, kind: str, which: str, case: str | None = None, rpc: bool | None = False) -> list[float]:
        """Relative errors of ``kind`` figures (``case``: that case only; ``rpc``: on loopback RPC devices,
        False: on the CPU alone, None: both)."""
        table = self.before if which == "before" else self.after
        return [
            _err(table[id(r)], r.measured)
            for r in self.rows
            if r.kind == kind
            and id(r) in table
            and (case is None or r.case == case)
            and (rpc is None or bool(r.lanes) == rpc)
            and (r.case != "threads-over" or case == "threads-over")  # reported apart: see main()
        ]


def evaluate(doc: dict, prior: float = 0.3) -> Evaluation:
    """Predict every figure of ``doc`` before calibration and after it, out of sample (two folds by model)."""
    mach = doc["machine"]
    host_bw = mach["host_bandwidth_gb_s"] * 1e9
    rows = rows_of(doc)
    cpu = machine_cpu(mach)
    lanes_all = max((r.lanes for r in rows), key=len)

    def base_params():
        return speed_params(lanes_all, host_bw, cpu=cpu)

    before = {id(r): predicted(r, base_params()) for r in rows}
    after: dict[int, float] = {}
    folds = [{r.model for r in rows if r.model in FOLD_A}, {r.model for r in rows if r.model not in FOLD_A}]
    fitted = []
    for train, test in (folds, folds[::-1]):
        # loopback RPC is left out of the fit: see RPC_NOTE
        meas = [
            measurement(r)
            for r in rows
            if r.model in train and r.kind in ("tg", "pp", "par") and not r.lanes and r.case != "threads-over"
        ]
        params = base_params()
        fitted.append(fit_many(meas, params, prior_weight=prior))
        for r in rows:
            if r.model in test:
                after[id(r)] = predicted(r, params)
    return Evaluation(rows, before, after, fitted)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--verbose", action="store_true", help="one line per measured figure")
    ap.add_argument("--prior", type=float, default=0.3,
                    help="weight of the prior that pulls fitted factors toward their defaults (default 0.3, as the app's calibration)")
    ap.add_argument("--fitted", action="store_true", help="print the factors fitted on each fold")
    a = ap.parse_args(argv)
    doc = json.loads(a.data.read_text())
    mach = doc["machine"]
    ev = evaluate(doc, a.prior)
    rows, before, after = ev.rows, ev.before, ev.after
    shown = a.data.relative_to(ROOT) if a.data.is_relative_to(ROOT) else a.data
    print(f"data: {shown}: {len(doc['runs'])} runs, {len(rows)} figures, {len({r.model for r in rows})} models, "
          f"measured {doc['runs'][0]['when'][:10]}; {mach['cpu']}, {mach.get('physical_cores', '?')} cores, "
          f"RAM {mach['host_bandwidth_gb_s']} GB/s (copy test); llama.cpp {doc['llama_cpp'][0].split(': ')[-1]}")
    print(f"calibration: fitted on half of the models ({', '.join(sorted(FOLD_A))}), judged on the other half, "
          "and the other way round")
    if a.verbose:
        print(f"{'model':26} {'case':14} {'kind':4} {'t':>2} {'pp':>4} {'tg':>3} {'d':>5} {'ub':>4} {'np':>2} "
              f"{'measured':>9} {'spread':>6} {'before':>8} {'after':>8}")
        for r in rows:
            w = r.workload
            print(f"{r.model:26} {r.case:14} {r.kind:4} {w.threads:2} {w.n_prompt:4} {w.n_gen:3} {w.depth:5} "
                  f"{w.n_ubatch:4} {w.n_seq:2} {r.measured:9.2f} {100 * r.spread:5.1f}% {before[id(r)]:8.2f} "
                  f"{after.get(id(r), float('nan')):8.2f}")
    print(f"{'figures':28} {'n':>3}  {'before: median':>15} {'worst':>7}  {'after: median':>14} {'worst':>7}")
    cpu_cases = {
        k: sorted({r.case for r in rows if r.kind == k and not r.lanes and r.case != "threads-over"})
        for k in ("tg", "pp", "srv")
    }
    rpc_cases = {k: sorted({r.case for r in rows if r.kind == k and r.lanes}) for k in ("tg", "pp")}
    cats = [("tg", None, False, "CPU: generation (tg)"), ("pp", None, False, "CPU: prompt (pp)")]
    cats += [(k, c, False, f"  {k} {c}") for k in ("tg", "pp") for c in cpu_cases[k]]
    cats += [("par", None, False, "CPU: parallel (aggregate tg)")]
    cats += [("srv", None, False, "CPU: server, per user")] + [("srv", c, False, f"  {c}") for c in cpu_cases["srv"]]
    cats += [("tg", None, True, "loopback RPC: tg (see below)"), ("pp", None, True, "loopback RPC: pp")]
    cats += [(k, c, True, f"  {k} {c}") for k in ("tg", "pp") for c in rpc_cases[k]]
    for kind, case, rpc, label in cats:
        b, af = ev.errors(kind, "before", case, rpc), ev.errors(kind, "after", case, rpc)
        if not b:
            continue
        print(f"{label:28} {len(b):3}  {100 * statistics.median(b):14.1f}% {100 * max(b):6.1f}%  "
              f"{100 * statistics.median(af):13.1f}% {100 * max(af):6.1f}%")
    print(RPC_NOTE)
    for r in rows:
        if r.case == "threads-over":
            print(f"{r.model} -t {r.workload.threads} on {mach.get('physical_cores')} cores, {r.kind}: measured "
                  f"{r.measured:.2f} tok/s; the model counts at most the physical cores ({before[id(r)]:.2f}) "
                  "and the advice says so")
    spreads = [r.spread for r in rows if len(r.samples) > 1]
    print(f"measurement spread, (max - min) / mean of the repetitions: median {100 * statistics.median(spreads):.1f}%, "
          f"worst {100 * max(spreads):.1f}% ({len(spreads)} figures)")
    again = [r for r in doc["runs"] if r["case"] == "base-again"]
    for r in again:
        first = next(x for x in doc["runs"] if x["case"] == "base" and x["model"] == r["model"])
        drift = [abs(b["avg_ts"] - a_["avg_ts"]) / a_["avg_ts"] for a_, b in zip(first["results"], r["results"])]
        print(f"the same case measured again at the end ({r['model']}): {', '.join(f'{100 * d:.1f}%' for d in drift)} "
              "apart (pp, tg)")
    if a.fitted:
        for name, f in zip(("fold A", "fold B"), ev.fitted):
            print(f"fitted on {name}: {json.dumps(f.get('CPU', f))} overhead {f.get('_overhead')}")
    return 0


def machine_cpu(mach: dict) -> CpuFacts:
    return CpuFacts(physical_cores=mach.get("physical_cores") or mach["logical_cpus"], simd=tuple(mach["simd"]),
                    mhz=mach.get("mhz"))


def measurement(row: Row) -> Measurement:
    model, facts = model_of(row.model)
    wp = Placement.from_settings(model, row.lanes, row.settings).weight_placement()
    rate = row.measured
    return Measurement(wp, rate if row.kind in ("tg", "par") else None, rate if row.kind == "pp" else None,
                       row.workload.n_ubatch, f"{row.case} {row.model}", model, row.workload, facts)


if __name__ == "__main__":
    raise SystemExit(main())
