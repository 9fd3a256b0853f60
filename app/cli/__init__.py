"""Headless command line: ``layerdeck SUBCOMMAND ...`` (no display needed)."""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from . import devices, estimate, inspect, placement

#: Modules that contribute a subcommand through ``add_parser(subparsers)``.
_COMMANDS = [inspect, estimate, placement, devices]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layerdeck", description="Plan and launch llama.cpp tensor placement.")
    parser.add_argument("--version", action="version", version=f"layerdeck {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _COMMANDS:
        mod.add_parser(sub)
    return parser


def subcommands() -> set[str]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
