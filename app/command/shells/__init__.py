"""Quote an argument list for bash/zsh, PowerShell or cmd.exe, and read pasted commands back.

Every ``quote_*`` function returns text that, pasted into that shell, starts
the program with exactly ``argv`` (checked against a real bash in the tests;
PowerShell and cmd.exe are checked against models of their documented
parsers, in these modules, because neither runs here). Every ``parse_*``
function reads such text (or a command a person wrote) back into
``(env, argv)``.

One module per shell: :mod:`.posix` (bash, zsh), :mod:`.powershell`,
:mod:`.cmd` (cmd.exe), and :mod:`.windows` for the Microsoft C runtime rules
the last two end in; :mod:`.common` holds what they share. Each module's
docstring says exactly what its quoter emits and why.

What a shell cannot carry (a newline for cmd.exe, bytes that are not UTF-8
for PowerShell and cmd.exe, a NUL anywhere) raises :class:`QuoteError`.

Parser limits (all raise :class:`CommandSyntaxError` unless said otherwise):
pipelines, redirections, command/sub-expression substitution and more than
one command are rejected. Variable references are not expanded:
``$HOME``/``~``/globs in POSIX text and ``%NAME%`` in cmd text are kept as
typed (as the prompt does for an undefined variable); ``$var`` inside
PowerShell double quotes or bare words is rejected.
"""

from __future__ import annotations

from .cmd import parse_cmd_command, quote_cmd
from .common import CommandSyntaxError, QuoteError
from .posix import parse_posix_command, quote_posix, quote_posix_word, split_posix
from .powershell import parse_powershell_command, powershell_legacy_cmdline, quote_powershell, quote_powershell_word
from .windows import parse_windows_cmdline, windows_argv_to_cmdline, windows_quote_arg

__all__ = [
    "CommandSyntaxError",
    "QuoteError",
    "quote_posix",
    "quote_posix_word",
    "split_posix",
    "parse_posix_command",
    "quote_powershell",
    "quote_powershell_word",
    "parse_powershell_command",
    "powershell_legacy_cmdline",
    "quote_cmd",
    "parse_cmd_command",
    "windows_quote_arg",
    "windows_argv_to_cmdline",
    "parse_windows_cmdline",
]
