"""House habits, checked in the suite: ruff (lint and format) and mypy on the core, configured in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_the_tools_are_installed(tool):
    """They come with the test extras; a missing one must fail, not skip."""
    assert _run(tool, "--version").returncode == 0, f"{tool} is missing: pip install -e '.[test]'"


def test_ruff_lint_is_clean_on_app():
    proc = _run("ruff", "check", "app")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_lint_is_clean_on_the_gui_benchmarks_and_scripts():
    """The same rules outside the core (their formatting is their own): unsorted imports had crept into 13 files."""
    proc = _run("ruff", "check", "ui", "benchmarks", "scripts")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean_on_app():
    proc = _run("ruff", "format", "--check", "app")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean_on_app():
    proc = _run("mypy", timeout=600)  # files, version and strictness from [tool.mypy] in pyproject.toml
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success" in proc.stdout
