"""ServerProcess's process handling, on tiny ``sys.executable -c`` scripts (no llama.cpp needed).

ServerProcess appends ``--host/--port/--metrics/-lv`` to the command; a
``python -c`` script receives them in ``sys.argv`` and ignores them.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import time

import pytest

from app.launch.diagnose import DiagnosisKind
from app.launch.logbuffer import LevelTracker, LogBuffer
from app.launch.orphans import JobObjectExtendedLimitInformation, resolve_guard
from app.launch.process import ServerProcess, State
from tests.launch.helpers import wait_gone

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LOADING_LINE = "print(\"0.00.000.001 I srv    load_model: loading model 'x.gguf'\", file=sys.stderr, flush=True)"


def script_server(body: str, **kwargs) -> ServerProcess:
    code = "import os, signal, sys, time\n" + body
    return ServerProcess([sys.executable, "-c", code], check_rpc=False, poll_interval=0.05, **kwargs)


def test_log_levels_and_bounded_buffer():
    tracker = LevelTracker()
    assert tracker.level_of("0.00.003.476 W srv  llama_server: security: no API key") == "W"
    assert tracker.level_of("You are a helpful assistant<|im_end|>") == "W"   # continuation inherits
    assert tracker.level_of("error: invalid argument: --no-mmap") == "E"
    buf = LogBuffer(max_lines=3)
    for i in range(5):
        buf.append("stderr", f"0.00.000.00{i} I line {i}", "I")
    assert [ln.message for ln in buf.lines()] == ["line 2", "line 3", "line 4"]
    assert buf.dropped == 2
    assert [ln.seq for ln in buf.lines(since=3)] == [4]


@posix_only
def test_sigterm_ignored_escalates_to_sigkill_once():
    sp = script_server("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + LOADING_LINE + "\ntime.sleep(60)\n")
    states = []
    sp.add_state_listener(states.append)
    sp.start()
    assert sp._wait_for((State.LOADING,), 10) == State.LOADING
    pid = sp.pid
    assert sp.stop(timeout=0.5, kill_timeout=5) == State.STOPPED
    assert sp.signals_sent == (signal.SIGTERM, signal.SIGKILL)
    assert sp.returncode == -signal.SIGKILL
    assert sp.diagnosis is None
    assert states == [State.STARTING, State.LOADING, State.STOPPING, State.STOPPED]
    assert wait_gone(pid, 5)
    assert [ln.text for ln in sp.log.lines() if ln.stream == "layerdeck"][-2:] == [
        "no exit after 0.5 s: sent SIGKILL", f"exited: {-signal.SIGKILL}"]


@posix_only
def test_stopped_by_us_even_when_it_aborts_on_sigterm():
    # llama-server can abort in its shutdown path (tools/server/server-stream.cpp): the exit status says SIGABRT, we asked.
    sp = script_server("signal.signal(signal.SIGTERM, lambda *a: os.abort())\n" + LOADING_LINE + "\ntime.sleep(60)\n")
    sp.start()
    sp._wait_for((State.LOADING,), 10)
    assert sp.stop(timeout=10) == State.STOPPED
    sp.stop()  # a second stop sends nothing more
    assert sp.returncode == -signal.SIGABRT
    assert sp.signals_sent == (signal.SIGTERM,)
    assert sp.diagnosis is None


@posix_only
def test_crash_and_plain_exit_are_failures():
    sp = script_server("print('0.00.0 E boom: GGML_ASSERT(x) failed', file=sys.stderr, flush=True)\n"
                       "os.kill(os.getpid(), signal.SIGSEGV)\n")
    sp.start()
    assert sp.wait_stopped(10) == State.FAILED
    assert sp.diagnosis.kind == DiagnosisKind.CRASH and "SIGSEGV" in sp.diagnosis.explanation
    sp2 = script_server("sys.exit(0)\n")
    sp2.start()
    assert sp2.wait_stopped(10) == State.FAILED and sp2.diagnosis.kind == DiagnosisKind.EXITED


def test_output_is_decoded_with_replacement_and_levels_kept():
    sp = script_server("sys.stderr.buffer.write(b'0.00.000.001 E bad bytes \\xff\\xfe here\\n')\n"
                       "sys.stdout.write('plain stdout line\\n')\nsys.exit(3)\n")
    lines = []
    sp.add_log_listener(lines.append)
    sp.start()
    assert sp.wait_stopped(10) == State.FAILED
    err = next(ln for ln in lines if ln.stream == "stderr")
    assert err.level == "E" and "\ufffd" in err.text and err.message.startswith("bad bytes")
    assert any(ln.stream == "stdout" and ln.text == "plain stdout line" for ln in lines)
    assert sp.diagnosis.kind == DiagnosisKind.UNKNOWN and sp.returncode == 3


def test_load_timeout_fails_with_a_timeout_diagnosis():
    sp = script_server(LOADING_LINE + "\ntime.sleep(60)\n", load_timeout=0.5)
    sp.start()
    assert sp.wait_stopped(15) == State.FAILED
    assert sp.diagnosis.kind == DiagnosisKind.TIMEOUT


def test_command_gets_host_port_metrics_and_verbosity(monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_N_GPU_LAYERS", "0")
    sp = script_server("time.sleep(30)\n", env={"EXTRA": "1"})
    sp.start()
    try:
        argv = sp.argv
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert int(argv[argv.index("--port") + 1]) == sp.port > 0
        assert "--metrics" in argv and argv[argv.index("-lv") + 1] == "4"
        assert sp.openai_base_url == f"http://127.0.0.1:{sp.port}/v1"
        assert sp.web_ui_url == f"http://127.0.0.1:{sp.port}/"
        assert "LLAMA_ARG_N_GPU_LAYERS" not in sp.env and sp.env["EXTRA"] == "1"
        assert sp.dropped_env == ["LLAMA_ARG_N_GPU_LAYERS"]
        with pytest.raises(RuntimeError):
            sp.start()
    finally:
        sp.stop(timeout=5)
    kept = ServerProcess([sys.executable, "-c", "pass", "--port", "0", "-v", "--metrics"], check_rpc=False)
    kept.start()
    kept.wait_stopped(10)
    assert kept.argv[1:] == ["-c", "pass", "--port", "0", "-v", "--metrics", "--host", "127.0.0.1"]
    assert kept.port is None   # --port 0: known only from the "listening on" line


def test_listener_may_stop_the_server_from_its_callback():
    sp = script_server(LOADING_LINE + "\ntime.sleep(60)\n")
    sp.add_state_listener(lambda s: sp.stop() if s == State.LOADING else None)
    sp.start()
    assert sp.wait_stopped(10) == State.STOPPED


def test_guard_resolution_and_windows_job_structure():
    assert resolve_guard("none") == "none"
    if sys.platform.startswith("linux"):
        assert resolve_guard("auto") == "pdeathsig"
    with pytest.raises(ValueError):
        resolve_guard("bogus")
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert ctypes.sizeof(JobObjectExtendedLimitInformation) == 144   # as in winnt.h on 64-bit Windows


def test_restart_reuses_listeners_and_log():
    sp = script_server(LOADING_LINE + "\ntime.sleep(60)\n")
    states = []
    sp.add_state_listener(states.append)
    sp.start()
    sp._wait_for((State.LOADING,), 10)
    first = sp.pid
    sp.restart()
    sp._wait_for((State.LOADING,), 10)
    assert sp.pid != first and wait_gone(first, 5)
    assert states.count(State.STARTING) == 2 and State.STOPPED in states
    assert any(ln.text == "restart" for ln in sp.log.lines())
    t = time.monotonic()
    assert sp.stop(timeout=5) == State.STOPPED and time.monotonic() - t < 5
