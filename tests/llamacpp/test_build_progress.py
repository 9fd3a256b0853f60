"""Build progress and cancel, on real CMake output and real CMake builds.

* The parser reads output captured from real builds: data/make-build.log is the ``cmake --build`` of
  llama-server from the pinned llama.cpp (Unix Makefiles, the builder's generator; from the cache's build.log),
  data/make-batched-bench.log the on-demand build of llama-batched-bench, data/ninja-build.log a Ninja build of
  the small project of cmake_project.py.
* :func:`app.llamacpp.build.run_streamed` runs a real CMake build of that small project and reports progress.
* Cancel stops a real ``cmake --build`` mid-way (while make runs a ``sleep`` step): every process of the tree
  (cmake, make, sh, sleep) is gone, and the partial build folder is kept, so the next build resumes.
* ``layerdeck llama build`` is interrupted like Ctrl+C at a terminal does (SIGINT to its process group): exit
  130, the message, no process left, the build folder kept.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.llamacpp import build
from tests.llamacpp.cmake_project import write_project

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")


# ----------------------------------------------------------------------------- the parser, on captured output


def test_make_percentages_of_a_real_llama_cpp_build():
    lines = (DATA / "make-build.log").read_text().splitlines()
    shown = [(line, build.parse_progress(line)) for line in lines]
    pct = [f for _line, f in shown if f is not None]
    marked = [line for line in lines if re.match(r"^\[\s*\d+%\]", line)]
    assert len(pct) == len(marked) > 200  # every "[ NN%]" line, and only those
    assert pct[0] == 0.0 and pct[-1] == 1.0 and pct == sorted(pct)  # one target: 0% .. 100%, never backwards
    assert build.parse_progress("[ 42%] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o") == 0.42
    # the warnings, the "$ cmake" line and the notes between them carry no progress
    others = [line for line, f in shown if f is None]
    assert others and any("CMake Warning" in o for o in others) and others[0].startswith("$ cmake --build")


def test_make_percentages_of_the_batched_bench_build():
    """data/make-batched-bench.log: ``cmake --build build-tools --target llama-batched-bench`` into the CPU cache
    (the on-demand build of ensure_tool, captured from the real run)."""
    lines = (DATA / "make-batched-bench.log").read_text().splitlines()
    pct = [f for f in map(build.parse_progress, lines) if f is not None]
    assert len(pct) == sum(1 for line in lines if re.match(r"^\[\s*\d+%\]", line)) > 100
    assert pct[-1] == 1.0 and pct == sorted(pct) and lines[-1] == "[100%] Built target llama-batched-bench"


def test_ninja_counts_of_a_real_build():
    lines = (DATA / "ninja-build.log").read_text().splitlines()
    got = [build.parse_progress(line) for line in lines]
    assert got == [i / 15 for i in range(1, 16)]
    assert build.parse_progress("[12/345] Building CXX object x.o") == pytest.approx(12 / 345)


def test_not_progress():
    for line in ("-- Configuring done", "[0/0] nothing", "Consolidate compiler generated dependencies of target x",
                 "  [ 42%] indented", "[abc%] x", ""):
        assert build.parse_progress(line) is None, line


# ----------------------------------------------------------------------------- running a real CMake build


def test_run_streamed_reports_a_real_build(tmp_path):
    src = write_project(tmp_path / "src", n_files=8)
    seen: list[build.BuildProgress] = []
    with open(tmp_path / "build.log", "w") as log:
        build.run_streamed(["cmake", "-S", str(src), "-B", str(tmp_path / "b")], log, stage="configure",
                           progress=seen.append)
        build.run_streamed(["cmake", "--build", str(tmp_path / "b"), "-j", "2", "--target", "llama-server"], log,
                           progress=seen.append)
    compile_ = [p for p in seen if p.stage == "compile"]
    fractions = [p.fraction for p in compile_ if p.fraction is not None]
    assert fractions[-1] == 1.0 and fractions == sorted(fractions) and len(fractions) >= 9
    assert any("-- Configuring done" in p.line for p in seen if p.stage == "configure")
    assert all(p.log_path == tmp_path / "build.log" for p in seen)
    text = (tmp_path / "build.log").read_text()
    assert "$ cmake --build" in text and "Built target llama-server" in text
    assert (tmp_path / "b" / "bin" / "llama-server").is_file()


def test_a_failing_command_names_the_log(tmp_path):
    with open(tmp_path / "build.log", "w") as log, pytest.raises(build.BuildError, match="exit code 1") as e:
        build.run_streamed(["cmake", "-S", str(tmp_path / "nothing"), "-B", str(tmp_path / "b")], log)
    assert str(tmp_path / "build.log") in str(e.value)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {p.name()}")
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_for_sleep(root_pid: int, timeout: float = 120) -> list[psutil.Process]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        tree = [p for p in psutil.Process(root_pid).children(recursive=True)]
        try:
            if any(p.name() == "sleep" for p in tree):
                return tree
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.1)
    raise AssertionError("the build never reached its sleep step")


def test_cancel_ends_the_whole_build_tree_and_keeps_the_folder(tmp_path):
    src = write_project(tmp_path / "src", n_files=6, sleep_s=120)
    out = tmp_path / "b"
    with open(tmp_path / "build.log", "w") as log:
        build.run_streamed(["cmake", "-S", str(src), "-B", str(out)], log)
    cancel = threading.Event()
    result: list[BaseException] = []
    seen: list[build.BuildProgress] = []

    def go():
        with open(tmp_path / "build.log", "a") as log:
            try:
                build.run_streamed(["cmake", "--build", str(out), "-j", "2", "--target", "llama-server"], log,
                                   progress=seen.append, cancel=cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                result.append(exc)

    t = threading.Thread(target=go)
    t.start()
    tree = _wait_for_sleep(os.getpid())
    names = {p.name() for p in tree}
    assert {"cmake", "sleep"} <= names and ("make" in names or "gmake" in names), names
    t0 = time.monotonic()
    cancel.set()
    t.join(30)
    assert not t.is_alive() and time.monotonic() - t0 < 15
    assert isinstance(result[0], build.BuildCancelled) and "cancelled" in str(result[0])
    time.sleep(0.5)
    assert _alive(tree) == []  # cmake, make, sh and sleep: all gone
    assert any(p.fraction is not None and p.fraction > 0 for p in seen)  # it was mid-way
    assert (out / "CMakeCache.txt").is_file() and (out / "libparts.a").is_file()  # kept: the next build resumes


def test_cancelled_ensure_built_says_what_is_kept_and_resumes(tmp_path, monkeypatch):
    """ensure_built on a cache folder whose src/ is the small project: cancel, then build again to the end."""
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    for v in build.BACKEND_ENV_DIRS.values():
        monkeypatch.delenv(v, raising=False)
    root = tmp_path / "cache" / build.build_key()
    write_project(root / "src", n_files=6, sleep_s=120)
    cancel = threading.Event()
    result: list[BaseException] = []

    def go():
        try:
            build.ensure_built(jobs=2, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)

    t = threading.Thread(target=go)
    t.start()
    tree = _wait_for_sleep(os.getpid())
    cancel.set()
    t.join(30)
    assert isinstance(result[0], build.BuildCancelled)
    assert f"what was compiled so far is kept in {root / 'build'}" in str(result[0])
    assert "next build resumes" in str(result[0])
    time.sleep(0.5)
    assert _alive(tree) == [] and not (root / "bin").exists()
    log = (root / "build.log").read_text()
    assert "# cancelled after" in log and "-DGGML_RPC=ON" in log
    # resume: the sleep is shortened (a new project file), the compiled objects are reused
    objects = sorted((root / "build").rglob("*.c.o"))
    stamps = {o: o.stat().st_mtime_ns for o in objects}
    assert objects
    write_project(root / "src", n_files=6, sleep_s=0)
    bin_dir = build.ensure_built(jobs=2)
    assert sorted(os.listdir(bin_dir)) == sorted(build.TARGETS)
    assert all(o.stat().st_mtime_ns == stamps[o] for o in objects if o.exists())


def _default_sigint() -> None:
    """A terminal's Ctrl+C reaches a process that handles SIGINT; a child inherits an ignored SIGINT (a
    non-interactive shell's background jobs, and pytest once some test ignored it), and Python then keeps
    ignoring it, so the child is given the default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_the_cli(tmp_path):
    """``layerdeck llama build`` gets SIGINT (as its terminal's process group does on Ctrl+C) mid-build."""
    cache = tmp_path / "xdg"
    root = cache / "layerdeck" / build.build_key()
    write_project(root / "src", n_files=6, sleep_s=120)
    env = {k: v for k, v in os.environ.items() if k not in build.BACKEND_ENV_DIRS.values()}
    env.update(XDG_CACHE_HOME=str(cache), HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT),
               LAYERDECK_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "llama", "build", "--backend", "cpu", "-j", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        tree = _wait_for_sleep(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert f"building llama.cpp {build.PINNED_VERSION} (cpu) in {root}: about" in err
    assert f"log: {root / 'build.log'}" in err and "configure" in err and "compile" in err
    assert "cancelled: the compilers were stopped" in err and "resumes" in err
    time.sleep(0.5)
    assert _alive(tree) == []
    assert (root / "build" / "CMakeCache.txt").is_file()
