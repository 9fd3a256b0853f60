"""Headless command line: ``layerdeck SUBCOMMAND ...`` (no display needed).

One module per subcommand (``inspect``, ``estimate``, ``export``, ``import_``,
``canonical``, ``fit``, ``devices``), each with ``add_parser(subparsers)`` and
``run(args)``; what they share (the model, the devices, one-line errors with
exit status 2, JSON, byte formatting) is in :mod:`app.cli.common`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from ..errors import LayerdeckError
from . import canonical, devices, estimate, export, fit, import_, inspect, llama, repo
from .common import fail

#: Modules that contribute a subcommand through ``add_parser(subparsers)``, in ``--help`` order.
_COMMANDS = [inspect, estimate, export, import_, canonical, fit, devices, llama, repo]


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


def _tolerant_stdout() -> None:
    """A strict stdout (``PYTHONIOENCODING=utf-8:strict``) writes what it cannot encode (a file name that is not
    UTF-8, read with surrogateescape) as a backslash escape instead of failing; commands quote such bytes
    themselves (``$'\\xff'``), so only display text is affected."""
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _tolerant_stdout()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except LayerdeckError as exc:  # a subcommand that did not report it itself: still one line, status 2
        return fail(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
