"""``layerdeck canonical [--devices ...] -- LLAMA_ARGS...``: our canonical command for the same placement.

Imports the command, then exports it again as llama-server's shortest form in
bash quoting, keeping the user's ``-m`` and ``--rpc``; notes go to stderr.
"""

from __future__ import annotations

import argparse
import sys

from ..command.shells import quote_posix
from ..placement.command import build_command
from .common import ERRORS, device_options, fail, llama_args
from .import_ import imported


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "canonical", parents=[device_options()], help="our canonical llama-server command for the same placement"
    )
    p.add_argument("llama_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        parsed, model, p, notes = imported(llama_args(args.llama_args), args.devices, args.llama_dir)
        p.settings = parsed.settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        cmd = build_command(p, parsed.model, rpc=parsed.rpc, program=parsed.program or "llama-server")
    except ERRORS as exc:
        return fail(exc)
    print(quote_posix(cmd.argv))
    for w in parsed.warnings + cmd.notes + notes:
        print(f"# {w}", file=sys.stderr)
    return 0
