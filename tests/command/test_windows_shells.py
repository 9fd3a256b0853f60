"""The PowerShell and cmd.exe quoters against the real shells.

Each case is quoted for the shell, run there, and the program it starts (this Python, with a script that
records ``sys.argv``) must receive exactly the arguments that were quoted. On Linux CI neither shell exists
(PowerShell 7 is not in Debian's archive), so these tests skip there and the parser models in
``test_quoting.py`` and ``tests/fuzz/test_roundtrips.py`` stand in; the GitHub workflow
``.github/workflows/shells.yml`` runs this file on Windows, where ``cmd.exe``, Windows PowerShell 5.1 and
PowerShell 7 are all real. ``pwsh`` installed on Linux or macOS runs the PowerShell cases there too.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.command.shells import QuoteError, quote_cmd, quote_powershell
from tests.command.test_quoting import ALPHABET, NASTY

WINDOWS = sys.platform == "win32"
PWSH = shutil.which("pwsh")
POWERSHELL_51 = shutil.which("powershell") if WINDOWS else None
CMD = (os.environ.get("COMSPEC") or shutil.which("cmd")) if WINDOWS else None

#: Records its arguments: one JSON line per run, appended to the file named by LAYERDECK_ARGV_LOG.
ECHO = """import json, os, sys
with open(os.environ["LAYERDECK_ARGV_LOG"], "a", encoding="utf-8", errors="surrogatepass") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def _cases() -> list[list[str]]:
    rng = random.Random(20261201)
    cases = [[a] for a in NASTY] + [NASTY]
    for _ in range(60):
        cases.append(["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 10))) for _ in range(rng.randint(1, 5))])
    return cases


CASES = _cases()


def _run(tmp_path: Path, quote, shell_argv, *, prologue: str = "", suffix: str) -> tuple[list, list]:
    """Quote every case into one script, run it, return (expected, received) argument lists."""
    echo = tmp_path / "echo argv.py"
    echo.write_text(ECHO, encoding="utf-8")
    log = tmp_path / "argv.jsonl"
    expected, lines = [], []
    for args in CASES:
        try:
            lines.append(quote([sys.executable, str(echo), *args]))
        except QuoteError:  # what the shell cannot carry is refused up front (tested in test_quoting.py)
            continue
        expected.append(args)
    assert len(expected) > len(CASES) // 2, "the quoter refused most cases"
    script = tmp_path / f"cases{suffix}"
    # PowerShell 5.1 reads a BOM-less script as the ANSI code page; cmd.exe reads the OEM code page (set to UTF-8)
    encoding = "utf-8-sig" if suffix == ".ps1" else "utf-8"
    eol = "\n" if suffix == ".sh" else "\r\n"  # batch files want CRLF; bash would keep the CR in the last word
    script.write_text(prologue + eol.join(lines) + eol, encoding=encoding, newline="")
    env = {**os.environ, "LAYERDECK_ARGV_LOG": str(log), "PYTHONUTF8": "1"}
    proc = subprocess.run([*shell_argv, str(script)], env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    got = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return expected, got


def _compare(expected: list, got: list) -> None:
    assert len(got) == len(expected), f"{len(expected)} commands ran, {len(got)} recorded"
    wrong = [(e, g) for e, g in zip(expected, got, strict=True) if e != g]
    assert not wrong, f"{len(wrong)} of {len(expected)} differ; first: sent {wrong[0][0]!r}, got {wrong[0][1]!r}"


@pytest.mark.skipif(PWSH is None, reason="PowerShell 7 (pwsh) is not installed; .github/workflows/shells.yml runs it")
def test_powershell_7_receives_exact_argv(tmp_path):
    expected, got = _run(
        tmp_path, quote_powershell, [PWSH, "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-File"],
        prologue="$ErrorActionPreference = 'Stop'\r\n", suffix=".ps1",
    )
    _compare(expected, got)


@pytest.mark.skipif(POWERSHELL_51 is None, reason="Windows PowerShell 5.1 exists only on Windows")
def test_windows_powershell_51_receives_exact_argv_from_the_legacy_form(tmp_path):
    expected, got = _run(
        tmp_path, lambda argv: quote_powershell(argv, legacy=True),
        [POWERSHELL_51, "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-File"],
        prologue="$ErrorActionPreference = 'Stop'\r\n", suffix=".ps1",
    )
    _compare(expected, got)


@pytest.mark.skipif(CMD is None, reason="cmd.exe exists only on Windows")
@pytest.mark.parametrize("delayed", [False, True], ids=["plain", "delayed-expansion"])
def test_cmd_batch_file_receives_exact_argv(tmp_path, delayed):
    prologue = "@echo off\r\nchcp 65001 >nul\r\n" + ("setlocal EnableDelayedExpansion\r\n" if delayed else "")
    expected, got = _run(
        tmp_path, lambda argv: quote_cmd(argv, batch_file=True, delayed_expansion=delayed),
        [CMD, "/d", "/c"], prologue=prologue, suffix=".cmd",
    )
    _compare(expected, got)


@pytest.mark.skipif(CMD is None, reason="cmd.exe exists only on Windows")
def test_cmd_prompt_line_receives_exact_argv(tmp_path):
    """The interactive form (what Copy gives for a terminal) through ``cmd /d /s /c "line"``, one line each."""
    echo = tmp_path / "echo argv.py"
    echo.write_text(ECHO, encoding="utf-8")
    log = tmp_path / "argv.jsonl"
    env = {**os.environ, "LAYERDECK_ARGV_LOG": str(log), "PYTHONUTF8": "1"}
    expected = []
    for args in CASES[:80]:
        try:
            line = quote_cmd([sys.executable, str(echo), *args])
        except QuoteError:
            continue
        expected.append(args)
        # a string (not a list) is passed to CreateProcess verbatim: exactly what a user's prompt would run
        proc = subprocess.run(f'"{CMD}" /d /s /c "{line}"', env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, (args, proc.stderr.decode(errors="replace"))
    got = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    _compare(expected, got)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_the_harness_itself_through_bash(tmp_path):
    """The same script-and-record harness with bash and the POSIX quoter, so the Windows job is not its first run."""
    from app.command.shells import quote_posix

    expected, got = _run(tmp_path, quote_posix, [shutil.which("bash"), "--norc", "--noprofile"], suffix=".sh")
    _compare(expected, got)
    assert len(expected) == len(CASES)  # bash carries everything
