"""``layerdeck export MODEL --plan PLAN [--format F] [--tool T]``: the llama.cpp command for a saved plan.

The command goes to stdout in the chosen format; notes go to stderr as ``# ...`` lines.
"""

from __future__ import annotations

import argparse
import sys

from ..command.formats import FORMATS, render
from ..errors import ExportError
from ..placement.plan_file import load_plan
from ..session import Session
from .common import ERRORS, check_notes, device_options, fail, load_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", parents=[device_options()], help="print the llama.cpp command for a saved plan")
    p.add_argument("model")
    p.add_argument("--plan", required=True)
    p.add_argument("--format", choices=FORMATS, default="bash")
    p.add_argument("--tool", choices=("server", "cli", "bench"), default="server")
    p.add_argument("--rpc", help="host:port,... to put in the command")
    p.add_argument(
        "--cuda-visible",
        metavar="I,J,...",
        help="hide or reorder GPUs with CUDA_VISIBLE_DEVICES (indices as numbered without it); "
        "device names in the command are renamed to match",
    )
    p.set_defaults(func=run)


def cuda_order(text: str | None) -> list[int] | None:
    """``--cuda-visible 1,0`` as GPU indices; None when not given."""
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ExportError(f"--cuda-visible takes GPU indices separated by commas, such as 1,0; not {text!r}.") from None


def run(args: argparse.Namespace) -> int:
    try:
        model, verdict = load_model(args.model, args.llama_dir)
        p = load_plan(args.plan, model)
        session = Session(model, p.devices, placement=p)
        cmd = session.command(
            model_path=args.model,
            tool=args.tool,
            rpc=args.rpc.split(",") if args.rpc else [],
            cuda_order=cuda_order(args.cuda_visible),
        )
    except ERRORS as exc:
        return fail(exc)
    print(
        render(
            cmd.argv,
            args.format,
            env=cmd.env or None,
            name=model.path.stem,
            n_layers=model.params.n_layer,
            multiline=False,
        )
    )
    for note in [*check_notes(verdict), *cmd.notes]:
        print(f"# {note}", file=sys.stderr)
    return 0
