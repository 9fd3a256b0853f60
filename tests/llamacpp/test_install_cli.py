"""``layerdeck llama list|get|use|remove`` end to end, as a user runs them (a subprocess, the local release
server of test_install.py serving real archives of the test build)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llamacpp.test_install import ReleaseServer, archives, recorded  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("LAYERDECK_LLAMA_CPP_DIR",)}
    e.update(HOME=str(home), LAYERDECK_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(ROOT))
    e["PATH"] = os.pathsep.join(p for p in e["PATH"].split(os.pathsep) if not (Path(p) / "llama-server").exists())
    return e


def cli(env, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "app.cli", "llama", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


@pytest.fixture
def server(archives):  # noqa: F811
    srv = ReleaseServer()
    rec = recorded("b10107.json")
    srv.publish(rec["tag_name"], {n: archives["tar"] if "-bin-ubuntu-" in n and n.endswith("-x64.tar.gz")
                                  else b"not a build\n" for n in rec["assets"]})
    yield srv
    srv.close()


def test_list_when_nothing_is_there(env):
    p = cli(env, "list")
    assert p.returncode == 0 and "No llama.cpp found" in p.stdout and "layerdeck llama get" in p.stdout
    j = json.loads(cli(env, "list", "--json").stdout)
    assert j["schema"] == "layerdeck.llama-builds/1" and j["builds"] == [] and j["current"] is None
    assert j["oldest_supported_build"] == 9284 and j["pinned_build"] == 11312
    assert "no llama.cpp found" in j["notes"][0]


def test_get_list_use_remove(env, server, llama_bin):
    p = cli(env, "get", "--backend", "cpu", "--release-url", server.release_url)
    assert p.returncode == 0, p.stderr
    assert "b10107-ubuntu-x64 installed and made current" in p.stdout
    assert "llama-b10107-bin-ubuntu-x64.tar.gz" in p.stderr and "why: cpu build, as asked" in p.stderr
    p = cli(env, "get", "--backend", "vulkan", "--release-url", server.release_url, "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["version"] == "b10107-ubuntu-vulkan-x64" and got["build"]["usable"] and not got["already_installed"]
    env2 = dict(env, LAYERDECK_LLAMA_CPP_DIR=str(llama_bin))
    j = json.loads(cli(env2, "list", "--json").stdout)
    by_version = {b["installed_version"]: b for b in j["builds"]}
    assert set(by_version) == {None, "b10107-ubuntu-x64", "b10107-ubuntu-vulkan-x64"}
    assert by_version[None]["current"] and by_version[None]["sources"][0] == "environment"  # the env folder wins
    assert by_version["b10107-ubuntu-vulkan-x64"]["sources"] == ["current", "installed by Layerdeck"]
    assert all(b["backends"] == ["cpu", "rpc"] and b["supported"] for b in j["builds"])
    text = cli(env, "list").stdout
    assert "* " + got["folder"] in text and "[b10107-ubuntu-vulkan-x64]" in text
    p = cli(env, "remove", "b10107-ubuntu-vulkan-x64")
    assert p.returncode == 2 and p.stderr.startswith("layerdeck: b10107-ubuntu-vulkan-x64 is the current")
    assert p.stderr.count("\n") == 1
    assert cli(env, "use", "b10107-ubuntu-x64").returncode == 0
    p = cli(env, "remove", "b10107-ubuntu-vulkan-x64")
    assert p.returncode == 0 and "removed b10107-ubuntu-vulkan-x64" in p.stdout
    p = cli(env, "use", str(llama_bin))
    assert p.returncode == 0 and f"current: {llama_bin}" in p.stdout


def test_get_errors_are_one_line(env, server):
    server.fail["/repos/ggml-org/llama.cpp/releases/latest"] = (403, {"X-RateLimit-Remaining": "0"})
    p = cli(env, "get", "--release-url", server.release_url)
    assert p.returncode == 2 and "rate limit is used up" in p.stderr and p.stderr.count("\n") == 1
    p = cli(env, "get", "--release-url", "http://example.com/releases/latest")
    assert p.returncode == 2 and "is not an HTTPS URL" in p.stderr
    del server.fail["/repos/ggml-org/llama.cpp/releases/latest"]
    p = cli(env, "get", "--backend", "metal", "--release-url", server.release_url)
    assert p.returncode == 2 and "has no metal build for linux x64" in p.stderr and p.stderr.count("\n") == 1


def test_use_and_remove_errors(env, tmp_path):
    p = cli(env, "use", str(tmp_path / "nothing-here"))
    assert p.returncode == 2 and "neither an installed version" in p.stderr
    p = cli(env, "remove", "b1")
    assert p.returncode == 2 and "is not a Layerdeck install" in p.stderr


def test_build_uses_the_builder_and_makes_it_current(env, llama_bin):
    """``llama build`` calls app.llamacpp.build.ensure_built (LAYERDECK_LLAMA_CPP_DIR names the pinned build the
    llama_bin fixture made, so nothing is compiled again), then marks the result current."""
    p = cli(dict(env, LAYERDECK_LLAMA_CPP_DIR=str(llama_bin)), "build", "--backend", "cpu")
    assert p.returncode == 0, p.stderr
    assert f"built cpu and made it current: {llama_bin}" in p.stdout
    j = json.loads(cli(env, "list", "--json").stdout)  # without the variable: the build is current by the mark
    assert j["current"] == str(llama_bin) and j["builds"][0]["sources"] == ["current"]
