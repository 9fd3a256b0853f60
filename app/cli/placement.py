"""Headless placement commands: ``export``, ``import``, ``fit`` and ``canonical``.

- ``layerdeck export MODEL --plan PLAN [--format F] [--tool T]`` prints the command for a saved plan.
- ``layerdeck import [--json] -- LLAMA_ARGS...`` prints the placement a command means.
- ``layerdeck fit MODEL [--devices ...] [--rpc ...] [-c N] [-np N] [--margin MiB] [--plan-out PLAN]``
  auto-fits and prints the command (and saves the plan).
- ``layerdeck canonical -- LLAMA_ARGS...`` prints our canonical llama-server command for the same
  placement, in bash quoting, keeping the user's ``-m`` and ``--rpc``.
JSON schema ``layerdeck.placement/1`` is documented in ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from ..command.quoting import quote_posix
from ..memory.args import ArgsError, parse_llama_args
from ..memory.device_adapter import from_detected, parse_device_spec
from ..memory.kv import SettingsError
from ..memory.layout import PlacementError
from ..memory.settings import LlamaSettings
from ..model import GGUFError, Model, Role, open_model
from ..lanes import CPU, to_llama_name
from ..placement import Placement
from ..placement.autofit import FitError, auto_fit
from ..placement.command import build_command
from ..placement.export import InexpressibleError
from ..placement.formats import FORMATS, render
from ..placement.plan_file import PlanError, load_plan, save_plan

MiB = 1 << 20
_ERRORS = (GGUFError, SettingsError, PlacementError, ArgsError, InexpressibleError, PlanError, FitError, ValueError)


def _fail(exc: Exception) -> int:
    print(f"layerdeck: {exc}", file=sys.stderr)
    return 2


def _devices(spec: str | None, rpc: list[str], llama_dir: str | None):
    if spec:
        return parse_device_spec(spec), None
    from ..devices.detect import detect

    result = detect(llama_dir=llama_dir, rpc=rpc)
    return from_detected(result.devices), result


def placement_json(p: Placement) -> dict:
    blocks = []
    for b in p.model.blocks:
        entry = {"id": b.id, "device": p.device_of(b.id), "bytes": b.nbytes}
        if b.role is Role.EXPERTS:
            entry["parts"] = {part: p.device_of(f"{b.id}:{part}") for part in b.parts}
        blocks.append(entry)
    return {"schema": "layerdeck.placement/1", "devices": [d.name for d in p.devices] + [CPU],
            "layers": p.layer_device, "blocks": blocks,
            "tensors": {t.name: d for t, d in zip(p.model.tensors, p.tensor_device) if d}}


def placement_text(p: Placement) -> str:
    out = []
    n = p.model.params.n_layer
    runs: list[tuple[str, int, int]] = []
    for il, dev in enumerate(p.layer_device):
        if runs and runs[-1][0] == dev:
            runs[-1] = (dev, runs[-1][1], il)
        else:
            runs.append((dev, il, il))
    for dev, a, b in runs:
        last = "output" if b == n else str(b)
        out.append(f"layers {a}-{last}: {dev}" if a != b else f"layer {a if a < n else 'output'}: {dev}")
    default = p.default_tensor_devices()
    moved = Counter()
    for t, d, d0 in zip(p.model.tensors, p.tensor_device, default):
        if d != d0:
            moved[(p.model.block_of(t.name).role.value, d)] += t.nbytes
    for (role, dev), nbytes in sorted(moved.items()):
        out.append(f"moved by overrides: {role} tensors, {nbytes / MiB:.0f} MiB -> {dev}")
    return "\n".join(out)


# ---------------------------------------------------------------------- import / canonical

def _imported(argv: list[str], devices_spec: str | None, llama_dir: str | None):
    parsed = parse_llama_args(argv)
    if not parsed.model:
        raise ArgsError("the command has no -m MODEL.")
    model = open_model(parsed.model)
    devices, _ = _devices(devices_spec, parsed.rpc, llama_dir)
    return parsed, model, Placement.from_settings(model, devices, parsed.settings)


def run_import(args) -> int:
    try:
        parsed, model, p = _imported(_rest(args.llama_args), args.devices, args.llama_dir)
    except _ERRORS as exc:
        return _fail(exc)
    if args.json:
        doc = placement_json(p)
        doc["warnings"] = parsed.warnings
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print(placement_text(p))
        for w in parsed.warnings:
            print(f"warning: {w}")
    return 0


def run_canonical(args) -> int:
    try:
        parsed, model, p = _imported(_rest(args.llama_args), args.devices, args.llama_dir)
        p.settings = parsed.settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        cmd = build_command(p, parsed.model, rpc=parsed.rpc, program=parsed.program or "llama-server")
    except _ERRORS as exc:
        return _fail(exc)
    print(quote_posix(cmd.argv))
    for w in parsed.warnings + cmd.notes:
        print(f"# {w}", file=sys.stderr)
    return 0


def _rest(llama_args: list[str]) -> list[str]:
    return llama_args[1:] if llama_args and llama_args[0] == "--" else list(llama_args)


# ---------------------------------------------------------------------- export / fit

def run_export(args) -> int:
    try:
        model = open_model(args.model)
        p = load_plan(args.plan, model)
        order = [int(x) for x in args.cuda_visible.split(",")] if args.cuda_visible else None
        cmd = build_command(p, args.model, tool=args.tool, rpc=args.rpc.split(",") if args.rpc else None,
                            cuda_order=order)
    except _ERRORS as exc:
        return _fail(exc)
    print(render(cmd.argv, args.format, env=cmd.env or None, name=model.path.stem, n_layers=model.params.n_layer,
                 multiline=False))
    for note in cmd.notes:
        print(f"# {note}", file=sys.stderr)
    return 0


def run_fit(args) -> int:
    try:
        model: Model = open_model(args.model)
        rpc = args.rpc.split(",") if args.rpc else []
        devices, result = _devices(args.devices, rpc, args.llama_dir)
        settings = LlamaSettings(n_ctx=args.ctx, n_parallel=args.parallel, type_k=args.ctk, type_v=args.ctv,
                                 flash_attn=args.fa)
        host = result.host.total_bytes if result is not None and getattr(result.host, "total_bytes", None) else None
        from ..speed.membench import measure_host_bandwidth
        from ..speed.model import predict_decode, predict_prompt
        from ..speed.params import load_calibration, speed_params

        host_bw = args.host_bw * 1e9 if args.host_bw else measure_host_bandwidth()
        params = speed_params(devices, host_bw, load_calibration(devices))
        if args.fastest:
            from ..placement.fastest import fastest

            fr = fastest(model, devices, settings, params, margin=int(args.margin * MiB))
            placement, est, report = fr.placement, fr.estimate, [f"{len(fr.steps)} improvements over auto-fit"]
        else:
            res = auto_fit(model, devices, settings, margin=int(args.margin * MiB), host_budget=host)
            placement, est, report = res.placement, res.estimate, res.report
        placement.settings = settings
        cmd = build_command(placement, args.model, rpc=rpc)
        candidates = [("layerdeck " + ("fastest" if args.fastest else "auto-fit"), placement, est)]
        if args.compare_llama:
            from ..memory.estimator import estimate
            from ..placement.llama_fit import llama_fit

            fitted, theirs = llama_fit(model, args.model, devices, settings, rpc=rpc, margin=int(args.margin * MiB),
                                       llama_dir=args.llama_dir)
            candidates.append(("llama.cpp --fit", theirs, estimate(model, devices, settings,
                                                                   theirs.weight_placement())))
    except _ERRORS as exc:
        return _fail(exc)
    if args.plan_out:
        save_plan(placement, args.plan_out)
    print(quote_posix(cmd.argv))
    print()
    for line in report:
        print(line)
    print()
    names = [d.name for d in devices] + [CPU]
    print(f"{'placement':22}" + "".join(f"{to_llama_name(n):>12}" for n in names) + f"{'tg tok/s':>11}{'pp tok/s':>11}")
    for label, p, e in candidates:
        cells = []
        for n in names:
            m = next((x for x in e.devices if x.name == n), None)
            cells.append(f"{(m.total if m else 0) / MiB:>9.0f} MiB")
        wp = p.weight_placement()
        tg = predict_decode(model, wp, params).tokens_per_s
        pp = predict_prompt(model, wp, params, settings.n_ubatch).tokens_per_s
        print(f"{label:22}" + "".join(f"{c:>12}" for c in cells) + f"{tg:>11.1f}{pp:>11.0f}")
    print(f"(speeds predicted with host RAM {host_bw / 1e9:.0f} GB/s; calibrate with llama-bench for your machine)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--devices", metavar="NAME=MiB,...", help="declare devices by hand (planning)")
    common.add_argument("--llama-dir", help="llama.cpp binaries folder")

    p = sub.add_parser("export", parents=[common], help="print the llama.cpp command for a saved plan")
    p.add_argument("model")
    p.add_argument("--plan", required=True)
    p.add_argument("--format", choices=FORMATS, default="bash")
    p.add_argument("--tool", choices=("server", "cli", "bench"), default="server")
    p.add_argument("--rpc", help="host:port,... to put in the command")
    p.add_argument("--cuda-visible", metavar="I,J,...",
                   help="hide or reorder GPUs with CUDA_VISIBLE_DEVICES (indices as numbered without it); "
                        "device names in the command are renamed to match")
    p.set_defaults(func=run_export)

    p = sub.add_parser("import", parents=[common], help="print the placement a llama.cpp command means")
    p.add_argument("--json", action="store_true")
    p.add_argument("llama_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run_import)

    p = sub.add_parser("canonical", parents=[common], help="our canonical llama-server command for the same placement")
    p.add_argument("llama_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run_canonical)

    p = sub.add_parser("fit", parents=[common], help="auto-fit a placement and print its command")
    p.add_argument("model")
    p.add_argument("--rpc", help="host:port,...")
    p.add_argument("-c", "--ctx", type=int, default=8192)
    p.add_argument("-np", "--parallel", type=int, default=-1)
    p.add_argument("-ctk", default="f16")
    p.add_argument("-ctv", default="f16")
    p.add_argument("-fa", default="auto", choices=("auto", "on", "off"))
    p.add_argument("--margin", type=float, default=1024, help="MiB to leave free on each GPU (default 1024)")
    p.add_argument("--plan-out", help="save the fitted plan here")
    p.add_argument("--fastest", action="store_true",
                   help="minimise predicted decode time instead of filling devices in order")
    p.add_argument("--compare-llama", action="store_true",
                   help="also run llama.cpp's own --fit on the same devices and show both side by side")
    p.add_argument("--host-bw", type=float, help="host RAM bandwidth in GB/s (default: measure it)")
    p.set_defaults(func=run_fit)
