"""``layerdeck estimate [--json] [--tool T] [--devices NAME=MiB,...] -- LLAMA_ARGS...``

Prints per device the model, context and compute MiB that llama.cpp will
allocate for a llama.cpp command line. The text output starts with exactly
``llama-fit-params --fit-print on``'s lines (``NAME model context compute``,
integer MiB floored as llama.cpp prints them, devices in llama.cpp's order,
then ``Host``) so the two can be diffed; a blank line; then capacities and
notes. JSON schema ``layerdeck.estimate/1`` is documented in ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..memory.args import ArgsError, parse_llama_args
from ..memory.device_adapter import from_detected, parse_device_spec
from ..memory.estimator import Estimate, estimate
from ..memory.kv import SettingsError
from ..memory.layout import PlacementError
from ..lanes import to_llama_name
from ..memory.settings import TOOLS
from ..model import GGUFError, open_model

SCHEMA = "layerdeck.estimate/1"
MiB = 1 << 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("estimate", help="per-device memory for a llama.cpp command line",
                       description="Estimate per-device memory (model, context, compute) for llama.cpp arguments "
                                   "given after --, e.g.: layerdeck estimate -- -m model.gguf -ngl all -c 8192")
    p.add_argument("--json", action="store_true", help="print the layerdeck.estimate/1 JSON document")
    p.add_argument("--tool", choices=TOOLS, default="server",
                   help="which llama.cpp program will run (they reserve different output buffers; default server)")
    p.add_argument("--devices", metavar="NAME=MiB[@GB/s],...",
                   help="declare devices and capacities by hand (planning for cards you don't have)")
    p.add_argument("--llama-dir", help="llama.cpp binaries folder (default: settings, LAYERDECK_LLAMA_CPP_DIR, PATH)")
    p.add_argument("llama_args", nargs=argparse.REMAINDER, help="llama.cpp arguments after --")
    p.set_defaults(func=run)


def _devices(args, rpc: list[str]):
    if args.devices:
        return parse_device_spec(args.devices), []
    from ..devices.detect import detect  # detection starts llama.cpp; only when asked

    result = detect(llama_dir=args.llama_dir, rpc=rpc)
    problems = [f"{e.source}: {e.message}" for e in getattr(result, "errors", [])]
    return from_detected(result.devices), problems


def to_json(est: Estimate) -> dict:
    s = est.shape
    return {
        "schema": SCHEMA,
        "devices": [
            {"name": to_llama_name(d.name), "model": d.model, "kv": d.kv, "recurrent": d.recurrent, "context": d.context,
             "compute": d.compute, "output": d.output, "total": d.total, "capacity": d.capacity}
            for d in est.devices
        ],
        "context": {"n_ctx": s.n_ctx, "n_ctx_seq": s.n_ctx_seq, "n_stream": s.n_stream, "n_seq": s.n_seq,
                    "unified": s.unified, "n_batch": s.n_batch, "n_ubatch": s.n_ubatch, "swa_cells": s.size_swa,
                    "flash_attn": s.flash_attn},
        "layers": est.placement.layer_device,
        "pipeline_parallel": est.pipeline_parallel,
        "notes": est.notes,
    }


def render_text(est: Estimate) -> str:
    lines = [f"{to_llama_name(d.name)} {d.model // MiB} {d.context // MiB} {d.compute // MiB} " for d in est.devices]
    lines.append("")
    lines.append(f"{'device':10} {'model':>9} {'context':>9} {'compute':>9} {'output':>8} {'total':>9} {'capacity':>9} {'free':>9}")
    for d in est.devices:
        cap = f"{d.capacity // MiB}" if d.capacity else "-"
        free = f"{(d.capacity - d.total) // MiB}" if d.capacity else "-"
        lines.append(f"{to_llama_name(d.name):10} {d.model / MiB:9.0f} {d.context / MiB:9.0f} {d.compute / MiB:9.0f} "
                     f"{d.output / MiB:8.1f} {d.total / MiB:9.0f} {cap:>9} {free:>9}")
    s = est.shape
    lines.append(f"context: {s.n_ctx} cells ({s.n_stream} stream{'s' if s.n_stream > 1 else ''} x {s.n_ctx_seq}), "
                 f"{s.n_seq} slot{'s' if s.n_seq > 1 else ''}, ubatch {s.n_ubatch}, flash attention "
                 f"{'on' if s.flash_attn else 'off'}" + (f", SWA cache {s.size_swa} cells" if s.size_swa else ""))
    for d in est.devices:
        if d.capacity and d.total > d.capacity:
            lines.append(f"over capacity: {to_llama_name(d.name)} needs {(d.total - d.capacity) / MiB:.0f} MiB more than it has")
    lines += [f"note: {n}" for n in est.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    llama_args = list(args.llama_args)
    if llama_args and llama_args[0] == "--":
        llama_args = llama_args[1:]
    try:
        parsed = parse_llama_args(llama_args, tool=args.tool)
    except ArgsError as exc:
        print(f"layerdeck: {exc}", file=sys.stderr)
        return 2
    if not parsed.model:
        print("layerdeck: give the model with -m after --, e.g. layerdeck estimate -- -m model.gguf -c 8192",
              file=sys.stderr)
        return 2
    try:
        model = open_model(parsed.model)
        devices, problems = _devices(args, parsed.rpc)
        est = estimate(model, devices, parsed.settings)
    except (GGUFError, SettingsError, PlacementError, ValueError) as exc:
        print(f"layerdeck: {exc}", file=sys.stderr)
        return 2
    est.notes.extend(parsed.warnings)
    est.notes.extend(problems)
    if args.json:
        json.dump(to_json(est), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(render_text(est))
    return 0
