"""app.llamacpp.build.ensure_tool: an on-demand tool joins the cached build without invalidating it."""

from __future__ import annotations

import os
import platform
import stat

import pytest

from app.llamacpp import build


def _fake_bin(folder, names):
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        p = folder / build.exe_name(n)
        p.write_text("#!/bin/sh\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return folder


def test_the_cache_key_and_completeness_do_not_change():
    # the key of the existing x86-64 CPU caches (their folder name): adding llama-quantize must not rename it
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert build.build_key() == "llama.cpp-0.3.36-8730327ebf"
    assert "llama-quantize" not in build.TARGETS and "llama-quantize" in build.ON_DEMAND_TARGETS


def test_complete_does_not_ask_for_on_demand_tools(tmp_path):
    assert build.complete(_fake_bin(tmp_path / "bin", build.TARGETS))


def test_env_folder_with_the_tool_is_used(tmp_path, monkeypatch):
    d = _fake_bin(tmp_path / "tools", [*build.TARGETS, "llama-quantize"])
    monkeypatch.setenv(build.ENV_DIR, str(d))
    assert build.ensure_tool("llama-quantize") == d / build.exe_name("llama-quantize")


def test_the_cached_tool_is_found_without_a_build(tmp_path, monkeypatch):
    # an env folder without it: the cache's bin/ is looked at (and would be built into), not the env folder
    monkeypatch.setenv(build.ENV_DIR, str(_fake_bin(tmp_path / "tools", build.TARGETS)))
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    bin_dir = _fake_bin(tmp_path / "cache" / build.build_key() / "bin", [*build.TARGETS, "llama-quantize"])
    monkeypatch.setattr(build, "_build_one", lambda *a: pytest.fail("built although it is there"))
    monkeypatch.setattr(build, "_build", lambda *a: pytest.fail("rebuilt the four tools"))
    assert build.ensure_tool("llama-quantize") == bin_dir / build.exe_name("llama-quantize")


def test_a_missing_tool_builds_only_that_target(tmp_path, monkeypatch):
    monkeypatch.delenv(build.ENV_DIR, raising=False)
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    root = tmp_path / "cache" / build.build_key()
    bin_dir = _fake_bin(root / "bin", build.TARGETS)
    (root / "src").mkdir()
    (root / "src" / "CMakeLists.txt").write_text("")
    calls = []

    def fake_run(cmd, log, cwd=None, **kw):
        calls.append(cmd)
        assert kw["stage"] == ("compile" if "--build" in cmd else "configure")
        if "--build" in cmd:
            out = _fake_bin(type(root)(cmd[cmd.index("--build") + 1]) / "bin", ["llama-quantize"])
            assert out.is_dir()

    monkeypatch.setattr(build, "_run", fake_run)
    monkeypatch.setattr(build, "_build", lambda *a: pytest.fail("rebuilt the four tools"))
    exe = build.ensure_tool("llama-quantize", jobs=1)
    assert exe == bin_dir / build.exe_name("llama-quantize") and exe.is_file()
    configure, make = calls
    assert configure[:3] == ["cmake", "-S", str(root / "src")] and all(o in configure for o in build.CMAKE_OPTIONS)
    assert make[-2:] == ["--target", "llama-quantize"]
    # the on-demand build folder is kept, so the next on-demand tool (or a cancelled build) is incremental
    assert configure[4] == make[2] == str(root / build.TOOLS_BUILD_DIR)
    assert sorted(os.listdir(bin_dir)) == sorted(build.exe_name(t) for t in [*build.TARGETS, "llama-quantize"])


def test_batched_bench_is_an_on_demand_target_of_the_pinned_sources(llama_bin):
    assert build.ON_DEMAND_TARGETS["llama-batched-bench"] == "llama-batched-bench"
    src = build.cache_root() / build.build_key() / "src"
    if not src.is_dir():
        pytest.skip(f"no pinned sources at {src}")
    assert "add_subdirectory(batched-bench)" in (src / "tools" / "CMakeLists.txt").read_text()
    assert "set(TARGET llama-batched-bench)" in (src / "tools" / "batched-bench" / "CMakeLists.txt").read_text()


def test_unknown_tool():
    with pytest.raises(build.BuildError, match="unknown on-demand tool"):
        build.ensure_tool("llama-cli")
