"""Start llama.cpp children so that they never outlive Layerdeck.

Three layers, strongest first:

* **Linux: ``PR_SET_PDEATHSIG``.** The child asks the kernel for SIGTERM when
  its parent dies (``prctl`` through ctypes in ``preexec_fn``), even when
  Layerdeck is SIGKILLed. The kernel sends it when the *thread* that forked
  the child ends, not the process, so every child is forked from one
  long-lived daemon thread (:class:`_Spawner`); a worker thread that starts a
  server and then finishes would otherwise kill it at once. The child also
  checks that its parent is still the one that forked it, closing the window
  between ``fork`` and ``prctl``.
* **Windows: a Job object** with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``. Every
  child is assigned to one job whose handle Layerdeck holds until it exits;
  when the last handle closes (Layerdeck exits or is killed), Windows kills
  the children. Not tested here (no Windows machine): failures to create or
  assign the job are logged and the atexit handler is the only guard left.
  The child runs briefly before it is assigned (``Popen`` cannot start it
  suspended); llama-server starts no children of its own in that time.
* **macOS and other POSIX: a watchdog.** There is no parent-death signal and a
  child we exec cannot run a watchdog thread of ours, so a tiny ``/bin/sh``
  helper (its own session, so a terminal Ctrl-C does not take it down first)
  blocks reading a pipe from Layerdeck. When Layerdeck dies, the pipe closes,
  ``read`` returns end-of-file and the helper sends SIGTERM, then SIGKILL
  after 5 s, to the server's process group. On a normal stop Layerdeck writes
  ``stop`` and the helper exits without signalling. The helper runs a fixed
  script with the process-group number as its only argument; llama-server
  itself is never started through a shell. The same mode works on Linux
  (``guard="watchdog"``), which is how it is tested.

On POSIX every child also gets its own session and process group
(``start_new_session``), so a stop signals the whole group (ggml's abort
handler starts gdb as a child of llama-server), and a terminal's Ctrl-C
reaches Layerdeck only. Independently of all this, an :mod:`atexit` handler
stops every live server on a normal interpreter exit (see
:func:`register`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

GUARDS = ("auto", "pdeathsig", "job", "watchdog", "none")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

WATCHDOG_SCRIPT = r"""
if read -r _line; then exit 0; fi
kill -TERM "-$1" 2>/dev/null || exit 0
i=0
while [ "$i" -lt 50 ]; do
    kill -0 "-$1" 2>/dev/null || exit 0
    sleep 0.1
    i=$((i + 1))
done
kill -KILL "-$1" 2>/dev/null
exit 0
"""


def resolve_guard(guard: str) -> str:
    """The concrete guard for ``"auto"`` on this platform."""
    if guard not in GUARDS:
        raise ValueError(f"unknown orphan guard {guard!r}; use one of {', '.join(GUARDS)}")
    if guard != "auto":
        return guard
    if sys.platform.startswith("linux"):
        return "pdeathsig"
    if sys.platform == "win32":
        return "job"
    return "watchdog"


@dataclass
class Spawned:
    """A started child and what guards it."""

    popen: subprocess.Popen
    guard: str
    pgid: int | None = None  # POSIX: the child's own process group
    watchdog: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid


# --------------------------------------------------------------------------- the spawner thread


class _Spawner:
    """One daemon thread that forks every child (PR_SET_PDEATHSIG follows the forking thread)."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="layerdeck-spawner", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((fn, future))
        return future.result()

    def _run(self) -> None:
        while True:
            fn, future = self._queue.get()
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)


_spawner = _Spawner()


def _pdeathsig_preexec() -> Callable[[], None]:
    """A preexec_fn that sets PR_SET_PDEATHSIG=SIGTERM; libc is resolved here, before the fork."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


# --------------------------------------------------------------------------- Windows job object

_job_handle: Any = None
_job_lock = threading.Lock()


def _windows_job() -> Any:
    """The process-wide job handle (created once, never closed: closing it kills the children)."""
    global _job_handle
    with _job_lock:
        if _job_handle is not None:
            return _job_handle
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
        kernel32.CreateJobObjectW.restype = wintypes.HANDLE
        kernel32.SetInformationJobObject.argtypes = [wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD]
        kernel32.SetInformationJobObject.restype = wintypes.BOOL
        job = kernel32.CreateJobObjectW(None, None)
        if not job:
            raise OSError(ctypes.get_last_error(), "CreateJobObjectW failed")  # type: ignore[attr-defined]  # Windows-only API
        info = JobObjectExtendedLimitInformation()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not kernel32.SetInformationJobObject(
            job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info), ctypes.sizeof(info)
        ):
            raise OSError(ctypes.get_last_error(), "SetInformationJobObject failed")  # type: ignore[attr-defined]  # Windows-only API
        _job_handle = job
        return job


def _assign_to_job(popen: subprocess.Popen) -> None:
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
    kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    handle = getattr(popen, "_handle", None)
    if handle is None:
        raise OSError("the process handle is not available")
    if not kernel32.AssignProcessToJobObject(_windows_job(), wintypes.HANDLE(int(handle))):
        raise OSError(ctypes.get_last_error(), "AssignProcessToJobObject failed")  # type: ignore[attr-defined]  # Windows-only API


JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9


class _BasicLimit(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),  # ULONG_PTR
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class _IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class JobObjectExtendedLimitInformation(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION`` (144 bytes on 64-bit Windows)."""

    _fields_ = [
        ("BasicLimitInformation", _BasicLimit),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


# --------------------------------------------------------------------------- spawning


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str] | None,
    *,
    cwd: str | None = None,
    guard: str = "auto",
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
) -> Spawned:
    """Start ``argv`` (no shell) with ``env``, guarded against outliving this process."""
    kind = resolve_guard(guard)
    if kind == "pdeathsig" and not sys.platform.startswith("linux"):
        raise ValueError("PR_SET_PDEATHSIG exists on Linux only")
    if kind == "job" and sys.platform != "win32":
        raise ValueError("Job objects exist on Windows only")
    if kind == "watchdog" and sys.platform == "win32":
        raise ValueError("the watchdog guard needs POSIX process groups")
    posix = sys.platform != "win32"
    kwargs: dict[str, Any] = dict(
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        close_fds=True,
    )
    if posix:
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)

    def start() -> subprocess.Popen:
        if kind == "pdeathsig":
            return subprocess.Popen(list(argv), preexec_fn=_pdeathsig_preexec(), **kwargs)  # noqa: PLW1509
        return subprocess.Popen(list(argv), **kwargs)

    popen = _spawner.call(start) if kind == "pdeathsig" else start()
    spawned = Spawned(popen, kind, pgid=popen.pid if posix else None)
    if kind == "job":
        try:
            _assign_to_job(popen)
        except OSError as exc:
            log.warning(
                "could not put llama.cpp (pid %d) in a kill-on-close job: %s; it is stopped at a normal exit only",
                popen.pid,
                exc,
            )
    elif kind == "watchdog":
        try:
            spawned.watchdog = subprocess.Popen(
                ["/bin/sh", "-c", WATCHDOG_SCRIPT, "layerdeck-watchdog", str(popen.pid)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            log.warning(
                "could not start the watchdog for pid %d: %s; it is stopped at a normal exit only", popen.pid, exc
            )
    return spawned


def signal_group(spawned: Spawned, sig: int) -> None:
    """Send ``sig`` to the child's process group (POSIX) or terminate it (Windows).

    Call only while the child has not been reaped: until then its PID, and so
    its process-group number, cannot belong to anyone else.
    """
    if spawned.pgid is not None:
        try:
            os.killpg(spawned.pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            spawned.popen.send_signal(sig)
    else:
        # Windows: llama-server only handles CTRL_C_EVENT, which cannot be sent to one process of ours;
        # TerminateProcess is the only stop there is.
        try:
            spawned.popen.terminate()
        except OSError:
            pass


def release(spawned: Spawned) -> None:
    """The child has exited and been reaped: tell its watchdog to stand down."""
    dog = spawned.watchdog
    if dog is None:
        return
    try:
        if dog.stdin is not None:
            dog.stdin.write(b"stop\n")
            dog.stdin.close()
    except OSError:
        pass
    try:
        dog.wait(timeout=2)
    except subprocess.TimeoutExpired:
        dog.kill()
        dog.wait(timeout=2)
    spawned.watchdog = None


# --------------------------------------------------------------------------- atexit


class Stoppable(Protocol):
    def stop(self, timeout: float = ..., kill_timeout: float = ...) -> Any: ...


_live: set = set()
_live_lock = threading.Lock()
_atexit_registered = False


def register(obj: Stoppable) -> None:
    """Keep ``obj`` alive and stop it at interpreter exit unless :func:`unregister` is called first."""
    global _atexit_registered
    with _live_lock:
        _live.add(obj)
        if not _atexit_registered:
            atexit.register(stop_all)
            _atexit_registered = True


def unregister(obj: Stoppable) -> None:
    with _live_lock:
        _live.discard(obj)


def live() -> list:
    with _live_lock:
        return list(_live)


def stop_all(timeout: float = 5.0) -> None:
    """Stop every registered process (the atexit handler)."""
    for obj in live():
        try:
            obj.stop(timeout=timeout, kill_timeout=2.0)
        except Exception:  # noqa: BLE001 - exiting: stop the others anyway
            log.exception("stopping %r at exit failed", obj)
