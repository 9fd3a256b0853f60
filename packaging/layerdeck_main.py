"""Entry script for the frozen (PyInstaller) Layerdeck: the same as the ``layerdeck`` console script."""

import os
import sys


def _restore_child_environment() -> None:
    """Give child processes (llama-server, llama-bench ...) the user's library path, not the bundle's.

    On Linux PyInstaller's bootloader puts the bundle's ``_internal`` folder on ``LD_LIBRARY_PATH``
    (keeping the user's value in ``LD_LIBRARY_PATH_ORIG``). This process has already read it, so
    resetting it here changes nothing for Layerdeck itself; but a llama-server built with a newer
    compiler than the bundle's would otherwise load the bundle's older libstdc++ and fail
    ("GLIBCXX_3.4.32 not found").
    """
    if not getattr(sys, "frozen", False) or not sys.platform.startswith("linux"):
        return
    orig = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if orig is not None:
        os.environ["LD_LIBRARY_PATH"] = orig
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)


_restore_child_environment()

from ui.launcher import main  # noqa: E402 - after the environment is fixed

if __name__ == "__main__":
    sys.exit(main())
