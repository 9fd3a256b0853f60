"""Fixtures for device tests: a stand-in llama-server and an environment without llama.cpp."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from .helpers import sample


@pytest.fixture
def fake_llama(tmp_path):
    """A ``llama-server`` stand-in (a Python script) that prints a sample and records its argv/env.

    For tests about matching and process handling; the tests about llama.cpp
    itself run the real binaries (test_llama_real.py).
    """

    def make(sample_name: str | None = None, exit_code: int = 0, stderr: str = "", sleep: float = 0.0) -> Path:
        bindir = tmp_path / "llama"
        bindir.mkdir(exist_ok=True)
        record = bindir / "calls.jsonl"
        text = sample(sample_name) if sample_name else ""
        script = bindir / "llama-server"
        script.write_text(
            f"#!{sys.executable}\n"
            "import json, os, sys, time\n"
            f"with open({str(record)!r}, 'a') as f:\n"
            "    f.write(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}) + '\\n')\n"
            f"time.sleep({sleep!r})\n"
            f"sys.stdout.write({text!r})\n"
            f"sys.stderr.write({stderr!r})\n"
            f"sys.exit({exit_code})\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return bindir

    make.calls = lambda: [json.loads(line) for line in (tmp_path / "llama" / "calls.jsonl").read_text().splitlines()]
    return make


@pytest.fixture
def no_llama_env(monkeypatch, tmp_path):
    """Make sure find_tool cannot find a llama-server on PATH or in LAYERDECK_LLAMA_CPP_DIR."""
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
