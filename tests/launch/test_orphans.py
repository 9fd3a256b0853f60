"""No orphaned llama-server: the parent is SIGKILLed (PR_SET_PDEATHSIG, and the macOS-style watchdog), or exits
normally (atexit). Each test runs a child Python that starts a real llama-server through ServerProcess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.launch.helpers import child_env, pid_alive, wait_gone

pytestmark = [pytest.mark.llama, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")]

CHILD = r"""
import sys, threading, time
from app.launch.process import ServerProcess, State

exe, model, guard, mode = sys.argv[1:5]
holder = {}

def start():
    # started from a short-lived worker thread: PR_SET_PDEATHSIG must still follow the process, not this thread
    sp = ServerProcess([exe, "-m", model, "-c", "256", "-np", "1"], guard=guard)
    sp.start()
    holder["sp"] = sp

t = threading.Thread(target=start)
t.start()
t.join()
sp = holder["sp"]
print(sp.pid, flush=True)
print(sp.wait_ready(60), flush=True)
if mode == "exit":
    sys.exit(0)
time.sleep(120)
"""


def run_child(llama_bin, model, guard: str, mode: str) -> tuple[subprocess.Popen, int]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(llama_bin / "llama-server"), str(model), guard, mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True)
    try:
        pid = int(child.stdout.readline())
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        return child, pid
    except BaseException:
        child.kill()
        child.wait()
        raise


def cleanup(child: subprocess.Popen, server_pid: int | None) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()
    for stream in (child.stdout, child.stderr):
        stream.close()
    if server_pid and pid_alive(server_pid):  # the guard failed: do not leave it behind
        os.kill(server_pid, signal.SIGKILL)


@pytest.mark.parametrize("guard", ["pdeathsig", "watchdog"])
def test_server_dies_with_a_killed_parent(llama_bin, tiny_models, guard):
    child, server_pid = run_child(llama_bin, tiny_models["llama"], guard, "sleep")
    try:
        assert pid_alive(server_pid)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert wait_gone(server_pid, 8), f"llama-server {server_pid} outlived its SIGKILLed parent ({guard})"
    finally:
        cleanup(child, server_pid)


def test_atexit_stops_the_server_on_a_normal_exit(llama_bin, tiny_models):
    # guard "none": only the atexit handler can stop it
    child, server_pid = run_child(llama_bin, tiny_models["llama"], "none", "exit")
    try:
        assert child.wait(20) == 0
        assert wait_gone(server_pid, 5), "the atexit handler did not stop llama-server"
    finally:
        cleanup(child, server_pid)
