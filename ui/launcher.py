"""The ``layerdeck`` entry point.

``layerdeck SUBCOMMAND ...`` runs a headless command from :mod:`app.cli`
without importing Qt (so it works with no display); anything else starts the
GUI: ``layerdeck [MODEL] [--smoke-test]``.
"""

from __future__ import annotations

import argparse
import sys

from app import __version__, cli


def gui_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="layerdeck",
        description="Plan and launch llama.cpp tensor placement. Headless commands: "
        + ", ".join(sorted(cli.subcommands())) + " (layerdeck COMMAND --help).",
    )
    p.add_argument("model", nargs="?", help="GGUF model to open (default: the built-in demo)")
    p.add_argument("--version", action="version", version=f"layerdeck {__version__}")
    p.add_argument("--smoke-test", action="store_true",
                   help="open the window, let it paint, then quit with status 0 (for installers and CI)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    if argv and (argv[0] in cli.subcommands() or (first in cli.subcommands() and argv[0] in ("-v", "--verbose"))):
        return cli.main(argv)
    args = gui_parser().parse_args(argv)
    from .app_main import run_gui  # Qt is imported only here

    return run_gui(args.model, smoke_test=args.smoke_test)


if __name__ == "__main__":
    sys.exit(main())
