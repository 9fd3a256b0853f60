"""``layerdeck fit MODEL [--devices ...] [--rpc ...] [-c N] [-np N] [--margin MiB] [--plan-out PLAN]``.

Auto-fits a placement (or, with ``--fastest``, the fastest predicted one),
prints its llama-server command in bash quoting, the fit report, and a table
of memory per device and predicted speeds; ``--plan-out`` saves the plan and
``--compare-llama`` adds llama.cpp's own ``--fit`` choice as a second row.
"""

from __future__ import annotations

import argparse

from ..command.shells import quote_posix
from ..lanes import CPU, to_llama_name
from ..memory.settings import LlamaSettings
from ..model import Model
from ..placement.plan_file import save_plan
from ..session import Session
from .common import ERRORS, MiB, check_notes, device_options, devices, fail, fmt_mib, load_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", parents=[device_options()], help="auto-fit a placement and print its command")
    p.add_argument("model")
    p.add_argument("--rpc", help="host:port,...")
    p.add_argument("-c", "--ctx", type=int, default=8192)
    p.add_argument("-np", "--parallel", type=int, default=-1)
    p.add_argument("-ctk", default="f16")
    p.add_argument("-ctv", default="f16")
    p.add_argument("-fa", default="auto", choices=("auto", "on", "off"))
    p.add_argument("--margin", type=float, default=1024, help="MiB to leave free on each GPU (default 1024)")
    p.add_argument("--plan-out", help="save the fitted plan here")
    p.add_argument(
        "--fastest", action="store_true", help="minimise predicted decode time instead of filling devices in order"
    )
    p.add_argument(
        "--compare-llama",
        action="store_true",
        help="also run llama.cpp's own --fit on the same devices and show both side by side",
    )
    p.add_argument("--host-bw", type=float, help="host RAM bandwidth in GB/s (default: measure it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        model: Model
        model, verdict = load_model(args.model, args.llama_dir)
        rpc = args.rpc.split(",") if args.rpc else []
        lanes, result = devices(args.devices, rpc, args.llama_dir)
        settings = LlamaSettings(
            n_ctx=args.ctx, n_parallel=args.parallel, type_k=args.ctk, type_v=args.ctv, flash_attn=args.fa
        )
        host = result.host.total_bytes if result is not None and getattr(result.host, "total_bytes", None) else None
        from ..speed.membench import measure_host_bandwidth
        from ..speed.predict import predict_decode, predict_prompt

        host_bw = args.host_bw * 1e9 if args.host_bw else measure_host_bandwidth()
        session = Session(
            model, lanes, settings=settings, host_capacity=host, host_bandwidth=host_bw, margin=int(args.margin * MiB)
        )
        params = session.speed_params
        if args.fastest:
            fr = session.fastest()
            est, report = fr.estimate, [f"{len(fr.steps)} improvements over auto-fit"]
        else:
            res = session.auto_fit(host_budget=host)
            est, report = res.estimate, res.report
        placement = session.placement
        cmd = session.command(model_path=args.model, rpc=rpc)
        candidates = [("layerdeck " + ("fastest" if args.fastest else "auto-fit"), placement, est)]
        if args.compare_llama:
            from ..placement.llama_fit import llama_fit

            fitted, theirs = llama_fit(
                model, args.model, lanes, settings, rpc=rpc, margin=int(args.margin * MiB), llama_dir=args.llama_dir
            )
            candidates.append(
                ("llama.cpp --fit", theirs, session.estimator.estimate(lanes, settings, theirs.weight_placement()))
            )
    except ERRORS as exc:
        return fail(exc)
    if args.plan_out:
        save_plan(placement, args.plan_out)
    print(quote_posix(cmd.argv))
    print()
    for line in report:
        print(line)
    for note in check_notes(verdict):
        print(f"note: {note}")
    print()
    names = [d.name for d in lanes] + [CPU]
    print(f"{'placement':22}" + "".join(f"{to_llama_name(n):>12}" for n in names) + f"{'tg tok/s':>11}{'pp tok/s':>11}")
    for label, p, e in candidates:
        cells = []
        for n in names:
            m = next((x for x in e.devices if x.name == n), None)
            cells.append(fmt_mib(m.total if m else 0, 9))
        wp = p.weight_placement()
        tg = predict_decode(model, wp, params).tokens_per_s
        pp = predict_prompt(model, wp, params, settings.n_ubatch).tokens_per_s
        print(f"{label:22}" + "".join(f"{c:>12}" for c in cells) + f"{tg:>11.1f}{pp:>11.0f}")
    print(f"(speeds predicted with host RAM {host_bw / 1e9:.0f} GB/s; calibrate with llama-bench for your machine)")
    return 0
