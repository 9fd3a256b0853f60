"""Run one ``llama-server`` and follow it from launch to exit.

:class:`ServerProcess` starts llama-server from an argument list (never a
shell) with an explicit environment, checks every ``--rpc`` host first, reads
its output into a bounded :class:`~app.launch.logbuffer.LogBuffer`, polls
``/health`` (503 while the model loads, 200 when ready: ``tools/server/server-http.cpp``) and, when
the process ends, turns its output and exit status into a
:class:`~app.launch.diagnose.Diagnosis`.

States::

    stopped -> starting -> loading -> ready -> stopping -> stopped
                   \\_________\\_________\\____________________> failed

Listeners are plain callables, called on Layerdeck's worker threads (the UI
bridges them to Qt signals): ``on_state(state)`` and ``on_log(line)``.

Stopping (see docs/launch.md): one SIGTERM to the server's process group,
wait, then SIGKILL; the result is "stopped" whenever Layerdeck asked, whatever
the exit status (a second SIGTERM can make llama-server abort while it shuts
down, so none is ever sent). See :mod:`app.launch.orphans` for how a server is
kept from outliving Layerdeck.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import signal
import socket
import threading
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence

from app.errors import LaunchError as _LaunchErrorBase
from app.llamacpp.binaries import LlamaCppNotFound, find_tool

from ..command.argv import (
    API_KEY_FLAGS,
    HOST_FLAGS,
    METRICS_FLAGS,
    PORT_FLAGS,
    VERBOSE_SWITCHES,
    VERBOSITY_FLAGS,
    flag_value,
    has_flag,
    mask_secrets,
    rpc_endpoints,
)
from . import orphans
from .buffers import DeviceBuffers, logged_buffers
from .client import OPENER, LlamaClient
from .diagnose import Diagnosis, DiagnosisKind, diagnose, preflight_rpc_diagnosis, timeout_diagnosis
from .logbuffer import LevelTracker, LogBuffer, LogLine, clean
from .preflight import check_rpc_hosts

log = logging.getLogger(__name__)

SIGKILL = getattr(signal, "SIGKILL", 9)
LISTENING = re.compile(r"listening on (https?)://(\S+?):(\d+)\s*$")
LOADING_MODEL = re.compile(r"load_model: loading model '")
MODEL_LOADED = re.compile(r"llama_server: model loaded|listening on https?://")
MAX_LOAD_LINES = 50_000
PORT_RETRIES = 3


class State(str, enum.Enum):
    STARTING = "starting"  # process started, HTTP socket not answering yet
    LOADING = "loading"  # /health answers 503: the model is loading
    READY = "ready"  # /health answers 200
    STOPPING = "stopping"  # SIGTERM sent
    STOPPED = "stopped"  # ended after Layerdeck asked (or never started)
    FAILED = "failed"  # ended on its own, or could not start; see .diagnosis

    def __str__(self) -> str:
        return self.value


RUNNING = (State.STARTING, State.LOADING, State.READY, State.STOPPING)


class LaunchError(_LaunchErrorBase, RuntimeError):
    """llama-server was not started; the message says why and what to do."""

    def __init__(self, message: str, diagnosis: Diagnosis | None = None):
        super().__init__(message)
        self.diagnosis = diagnosis


class RpcUnreachable(LaunchError):
    """One or more ``--rpc`` hosts did not accept a connection; ``problems`` has one message per host."""

    def __init__(self, problems: Sequence[tuple[str, str]]):
        diag = preflight_rpc_diagnosis(problems)
        super().__init__("\n".join(f"RPC host {ep}: {msg}" for ep, msg in problems), diag)
        self.problems = list(problems)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _connect_host(host: str) -> str:
    host = host.split(",")[0].strip()
    if host in ("", "0.0.0.0", "::", "[::]"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class ServerProcess:
    """One llama-server run (and its restarts).

    Args:
        argv: the command, program first (``Command.argv`` from
            :func:`app.placement.command.build_command`). A bare program name
            is looked up with :func:`app.llamacpp.binaries.find_tool`.
        env: variables added to the child's environment (``Command.env``).
        llama_dir: the configured llama.cpp folder for the lookup.
        host: ``--host`` added when the command has none.
        port: ``--port`` added when the command has none; None picks a free port.
        guard: orphan protection, see :mod:`app.launch.orphans` (``auto``
            on every platform except in tests).
        inherit_env: start from this process's environment. ``LLAMA_ARG_*``
            variables are never inherited, because they would silently change
            the placement the command describes (``common/arg.cpp``); pass them in
            ``env`` to use them.
        check_rpc: TCP-check every ``--rpc`` host before launching.
        load_timeout: stop and fail the server if it is not ready after this
            many seconds (None: wait as long as it takes).
        max_log_lines: size of the log buffer.
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        llama_dir: str | os.PathLike | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        guard: str = "auto",
        inherit_env: bool = True,
        check_rpc: bool = True,
        rpc_timeout: float = 2.0,
        load_timeout: float | None = None,
        max_log_lines: int = 5000,
        poll_interval: float = 0.2,
        cwd: str | os.PathLike | None = None,
    ):
        if not argv:
            raise ValueError("empty command")
        self._argv_in = list(argv)
        self._env_in = dict(env or {})
        self.llama_dir = llama_dir
        self.default_host = host
        self.default_port = port
        self.guard = orphans.resolve_guard(guard)
        self.inherit_env = inherit_env
        self.check_rpc = check_rpc
        self.rpc_timeout = rpc_timeout
        self.load_timeout = load_timeout
        self.poll_interval = poll_interval
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.log = LogBuffer(max_log_lines)

        self._lock = threading.RLock()
        self._emit_lock = threading.RLock()
        self._done = threading.Event()
        self._done.set()
        self._state_changed = threading.Condition(self._lock)
        self._state_listeners: list[Callable[[State], None]] = []
        self._log_listeners: list[Callable[[LogLine], None]] = []
        self._state = State.STOPPED
        self._run = 0
        self._reset_run()

    def _reset_run(self) -> None:
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.diagnosis: Diagnosis | None = None
        self.returncode: int | None = None
        self.port: int | None = None
        self.host: str = self.default_host
        self.buffers: dict[str, DeviceBuffers] = {}
        self.draft_buffers: dict[str, DeviceBuffers] = {}  # the draft model's (-md), after "loading draft model"
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self.dropped_env: list[str] = []
        self._spawned: orphans.Spawned | None = None
        self._exited = False
        self._stop_requested = False
        self._signals: list[int] = []
        self._load_lines: list[str] = []
        self._loaded_seen = threading.Event()  # the reader has passed "model loaded" / "listening on"
        self._first_seq = -1
        self._port_auto = False
        self._port_attempts = 0
        self._timed_out = False
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ listeners

    def add_state_listener(self, fn: Callable[[State], None]) -> None:
        self._state_listeners.append(fn)

    def add_log_listener(self, fn: Callable[[LogLine], None]) -> None:
        self._log_listeners.append(fn)

    def _set_state(self, new: State, only_from: tuple[State, ...] | None = None) -> bool:
        """Change state (only from ``only_from`` when given) and tell the listeners; False if unchanged."""
        with self._emit_lock:
            with self._lock:
                if self._state == new or (only_from is not None and self._state not in only_from):
                    return False
                self._state = new
                self._state_changed.notify_all()
            log.debug("llama-server %s: %s", self.pid, new)
            for fn in list(self._state_listeners):
                try:
                    fn(new)
                except Exception:  # noqa: BLE001 - a listener must not break the process manager
                    log.exception("state listener failed")
            return True

    def _emit_line(self, line: LogLine) -> None:
        for fn in list(self._log_listeners):
            try:
                fn(line)
            except Exception:  # noqa: BLE001
                log.exception("log listener failed")

    def _note(self, text: str) -> None:
        """A line of our own in the log (what we sent, why we stopped)."""
        self._emit_line(self.log.append("layerdeck", text, "I"))

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> State:
        return self._state

    @property
    def pid(self) -> int | None:
        sp = self._spawned
        return sp.pid if sp is not None else None

    @property
    def running(self) -> bool:
        return self._state in RUNNING

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    @property
    def signals_sent(self) -> tuple[int, ...]:
        return tuple(self._signals)

    @property
    def base_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` once the port is known (the server answers when READY)."""
        if not self.port:
            return None
        return f"http://{_connect_host(self.host)}:{self.port}"

    @property
    def web_ui_url(self) -> str | None:
        return self.base_url + "/" if self.base_url else None

    @property
    def openai_base_url(self) -> str | None:
        """The OpenAI-compatible API root, ``http://127.0.0.1:PORT/v1``."""
        return self.base_url + "/v1" if self.base_url else None

    @property
    def api_key(self) -> str | None:
        return flag_value(self.argv or self._argv_in, *API_KEY_FLAGS) or self.env.get("LLAMA_API_KEY") or None

    @property
    def rpc_endpoints(self) -> list[str]:
        return rpc_endpoints(self.argv or self._argv_in, self.env or self._env_in)

    def client(self, timeout: float = 5.0) -> LlamaClient:
        """An HTTP client for this server (raises RuntimeError before the port is known)."""
        if not self.base_url:
            raise RuntimeError("the server's port is not known yet")
        return LlamaClient(self.base_url, self.api_key, timeout)

    def run_lines(self) -> list[LogLine]:
        """Log lines of the current run (the buffer also holds earlier runs after a restart)."""
        return self.log.lines(since=self._first_seq)

    def load_log(self) -> str:
        """Everything printed until the server said it was loaded (kept apart from the bounded buffer)."""
        with self._lock:
            return "\n".join(self._load_lines)

    # ------------------------------------------------------------------ command preparation

    def _resolve_program(self, program: str) -> str:
        if os.sep in program or (os.altsep and os.altsep in program):
            if not os.path.isfile(program):
                raise LaunchError(f"{program} does not exist. Set the llama.cpp folder in Settings.")
            return program
        try:
            return str(find_tool(program, self.llama_dir).path)
        except LlamaCppNotFound as exc:
            raise LaunchError(str(exc)) from exc

    def _prepare(self) -> tuple[list[str], dict[str, str]]:
        env: dict[str, str] = {}
        if self.inherit_env:
            for k, v in os.environ.items():
                if k.startswith("LLAMA_ARG_"):
                    self.dropped_env.append(k)
                else:
                    env[k] = v
        if self.dropped_env:
            log.info(
                "not passing inherited %s to llama-server (they would change the placement)",
                ", ".join(self.dropped_env),
            )
        env.update(self._env_in)

        argv = [self._resolve_program(self._argv_in[0]), *self._argv_in[1:]]
        host = flag_value(argv, *HOST_FLAGS) or env.get("LLAMA_ARG_HOST")
        if host is None:
            host = self.default_host
            argv += ["--host", host]
        if host.endswith(".sock"):
            raise LaunchError(
                f"--host {host} is a Unix socket; Layerdeck follows the server over TCP, "
                "so give an IP address (127.0.0.1 for this machine only)."
            )
        self.host = host
        port_text = flag_value(argv, *PORT_FLAGS) or env.get("LLAMA_ARG_PORT")
        if port_text is None:
            port = self.default_port if self.default_port is not None else free_port(_bind_host(host))
            self._port_auto = self.default_port is None
            argv += ["--port", str(port)]
        else:
            try:
                port = int(port_text)
            except ValueError:
                raise LaunchError(f"--port {port_text} is not a number") from None
        self.port = port or None  # 0: read it from the "listening on" line
        if not has_flag(argv, *METRICS_FLAGS) and env.get("LLAMA_ARG_ENDPOINT_METRICS", "").lower() not in (
            "1",
            "true",
            "on",
            "enabled",
        ):
            argv.append("--metrics")
        if not has_flag(argv, *VERBOSITY_FLAGS, *VERBOSE_SWITCHES) and "LLAMA_ARG_LOG_VERBOSITY" not in env:
            argv += ["-lv", "4"]  # buffer-size lines are INFO from the library: verbosity 4 (common/log.cpp)
        return argv, env

    # ------------------------------------------------------------------ start / stop

    def start(self) -> None:
        """Check RPC hosts and launch; returns once the process exists (state ``starting``).

        Blocks for the RPC check (a TCP connect per host, up to ``rpc_timeout`` s, hosts in parallel, plus
        name resolution): a GUI calls it off its event thread (``ui.launch_panel.LaunchPanel.launch``).

        Raises:
            RpcUnreachable: an ``--rpc`` host did not accept a connection (state becomes ``failed``
                with that diagnosis; nothing was launched).
            LaunchError: the program or a flag value is unusable (state ``failed``).
            RuntimeError: this server is already running.
        """
        with self._lock:
            if self._state in RUNNING:
                raise RuntimeError(f"llama-server is already {self._state}")
            self._reset_run()
            self._run += 1
        try:
            argv, env = self._prepare()
            self.argv, self.env = argv, env
            if self.check_rpc:
                endpoints = rpc_endpoints(argv, env)
                if endpoints:
                    self._note(f"checking RPC hosts: {', '.join(endpoints)}")
                problems = check_rpc_hosts(endpoints, self.rpc_timeout)
                if problems:
                    raise RpcUnreachable(problems)
        except LaunchError as exc:
            self.diagnosis = exc.diagnosis or Diagnosis(
                DiagnosisKind.NOT_STARTED, "llama-server was not started", str(exc), "", (str(exc),)
            )
            self._note(f"not started: {exc}")
            self._set_state(State.FAILED)
            raise
        self._launch()

    def _launch(self) -> None:
        self._done.clear()
        self._first_seq = self.log.lines()[-1].seq if len(self.log) else -1
        self._note("starting: " + " ".join(mask_secrets(self.argv)))  # --api-key values never reach the log
        try:
            spawned = orphans.spawn(self.argv, self.env, cwd=self.cwd, guard=self.guard)
        except OSError as exc:
            self._done.set()
            self.diagnosis = Diagnosis(
                DiagnosisKind.NOT_STARTED,
                "llama-server could not be started",
                f"The system refused to run {self.argv[0]}: {exc}.",
                "Check that the file is a llama-server for this system and is executable.",
                (str(exc),),
            )
            self._set_state(State.FAILED)
            raise LaunchError(str(exc), self.diagnosis) from exc
        with self._lock:
            self._spawned = spawned
            self._exited = False
            self.started_at = time.monotonic()
            run = self._run
        orphans.register(self)
        self._set_state(State.STARTING)
        readers = [
            threading.Thread(
                target=self._read,
                args=(spawned.popen.stdout, "stdout", run),
                name=f"llama-server-{spawned.pid}-stdout",
                daemon=True,
            ),
            threading.Thread(
                target=self._read,
                args=(spawned.popen.stderr, "stderr", run),
                name=f"llama-server-{spawned.pid}-stderr",
                daemon=True,
            ),
        ]
        supervisor = threading.Thread(
            target=self._supervise,
            args=(spawned, readers, run),
            name=f"llama-server-{spawned.pid}-supervisor",
            daemon=True,
        )
        self._threads = [*readers, supervisor]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 10.0, kill_timeout: float = 5.0) -> State:
        """SIGTERM once, wait ``timeout`` s, then SIGKILL; returns the final state.

        Called from a listener (one of this object's threads) it only sends the
        signal and returns ``stopping``.
        """
        with self._lock:
            sp = self._spawned
            if sp is None or self._state not in RUNNING:
                return self._state
            self._stop_requested = True
            if not self._exited and signal.SIGTERM not in self._signals:
                self._signals.append(signal.SIGTERM)
                orphans.signal_group(sp, signal.SIGTERM)
                sent = True
            else:
                sent = False
        if sent:
            self._note("sent SIGTERM")
        self._set_state(State.STOPPING, only_from=(State.STARTING, State.LOADING, State.READY))
        if threading.current_thread() in self._threads:
            return self._state
        if not self._done.wait(timeout):
            with self._lock:
                if not self._exited:
                    self._signals.append(SIGKILL)
                    orphans.signal_group(sp, SIGKILL)
                    killed = True
                else:
                    killed = False
            if killed:
                self._note(f"no exit after {timeout:g} s: sent SIGKILL")
            self._done.wait(kill_timeout)
        return self._state

    def restart(
        self, argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, timeout: float = 10.0
    ) -> None:
        """Stop (waiting for the exit: an RPC server serves one client at a time), then start ``argv``."""
        self.stop(timeout)
        self._done.wait(timeout)
        if argv is not None:
            if not argv:
                raise ValueError("empty command")
            self._argv_in = list(argv)
        if env is not None:
            self._env_in = dict(env)
        self._note("restart")
        self.start()

    def wait_ready(self, timeout: float | None = None) -> State:
        """Block until ready, failed or stopped (or ``timeout``); returns the state then."""
        return self._wait_for((State.READY, State.FAILED, State.STOPPED), timeout)

    def wait_stopped(self, timeout: float | None = None) -> State:
        """Block until the process has ended and the final state is set."""
        self._done.wait(timeout)
        return self._state

    def _wait_for(self, states: tuple[State, ...], timeout: float | None) -> State:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state_changed:
            while self._state not in states:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._state_changed.wait(left)
            return self._state

    # ------------------------------------------------------------------ worker threads

    def _read(self, pipe, stream: str, run: int) -> None:
        tracker = LevelTracker()
        try:
            for raw in iter(pipe.readline, b""):
                text = clean(raw.decode("utf-8", errors="replace"))
                line = self.log.append(stream, text, tracker.level_of(text))
                with self._lock:
                    current = run == self._run
                    if current and not self._loaded_seen.is_set() and len(self._load_lines) < MAX_LOAD_LINES:
                        self._load_lines.append(text)
                if current:
                    self._watch_line(line.message)
                self._emit_line(line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _watch_line(self, message: str) -> None:
        if self.port is None:
            m = LISTENING.search(message)
            if m:
                self.port = int(m.group(3))
        if self._state == State.STARTING and LOADING_MODEL.search(message):
            self._set_state(State.LOADING, only_from=(State.STARTING,))
        if MODEL_LOADED.search(message):
            self._loaded_seen.set()

    def _health(self) -> int | None:
        url = self.base_url
        assert url is not None  # _supervise asks only once the port is known
        try:
            with OPENER.open(url + "/health", timeout=1.0) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return None

    def _exited_now(self, spawned: orphans.Spawned) -> bool:
        # Reap under the lock that stop() holds while signalling: once _exited is set, nobody signals the
        # process group again (its number could belong to someone else after the reap).
        with self._lock:
            if spawned.popen.poll() is not None:
                self._exited = True
            return self._exited

    def _supervise(self, spawned: orphans.Spawned, readers: list[threading.Thread], run: int) -> None:
        while not self._exited_now(spawned):
            state = self._state
            if state in (State.STARTING, State.LOADING) and self.port:
                status = self._health()
                if status == 200:
                    self._become_ready()
                elif status == 503 and state == State.STARTING:
                    self._set_state(State.LOADING, only_from=(State.STARTING,))
            if (
                self.load_timeout is not None
                and self._state in (State.STARTING, State.LOADING)
                and time.monotonic() - (self.started_at or 0) > self.load_timeout
                and not self._stop_requested
            ):
                self._timed_out = True
                self._note(f"not ready after {self.load_timeout:g} s: stopping")
                with self._lock:
                    self._signals.append(signal.SIGTERM)
                    orphans.signal_group(spawned, signal.SIGTERM)
                threading.Thread(target=self._kill_later, args=(spawned, 10.0), daemon=True).start()
            time.sleep(self.poll_interval if self._state != State.READY else 0.25)
        returncode = spawned.popen.wait()
        for t in readers:
            t.join(timeout=5.0)
        orphans.release(spawned)
        self._finish(spawned, returncode, run)

    def _kill_later(self, spawned: orphans.Spawned, delay: float) -> None:
        if self._done.wait(delay):
            return
        with self._lock:
            if not self._exited:
                self._signals.append(SIGKILL)
                orphans.signal_group(spawned, SIGKILL)

    def _become_ready(self) -> None:
        # /health turns 200 just before llama-server prints "model loaded": let the reader catch up so the
        # buffer-size lines printed during the load are all in (bounded, for builds that print neither line).
        self._loaded_seen.wait(2.0)
        text = self.load_log()
        try:
            self.buffers = logged_buffers(text, self.rpc_endpoints)
            self.draft_buffers = logged_buffers(text, self.rpc_endpoints, part="draft")
        except Exception:  # noqa: BLE001 - parsing must never stop a working server
            log.exception("could not parse buffer sizes")
        self.ready_at = time.monotonic()
        if self._set_state(State.READY, only_from=(State.STARTING, State.LOADING)):
            self._note(f"ready at {self.base_url} after {self.ready_at - (self.started_at or self.ready_at):.1f} s")

    def _finish(self, spawned: orphans.Spawned, returncode: int, run: int) -> None:
        self.returncode = returncode
        lines = [ln.text for ln in self.run_lines()]
        with self._lock:
            load = list(self._load_lines)
        diag: Diagnosis | None
        if self._timed_out:
            diag = timeout_diagnosis(self.load_timeout or 0, lines, self.rpc_endpoints)
        else:
            diag = diagnose(
                load + lines,
                returncode,
                signals_sent=self._signals,
                stop_requested=self._stop_requested,
                argv=self.argv,
            )
        self._note(f"exited: {returncode}" + (f" ({diag.title})" if diag else ""))
        if (
            diag is not None
            and diag.kind == DiagnosisKind.PORT_IN_USE
            and self._port_auto
            and self._port_attempts < PORT_RETRIES
            and not self._stop_requested
        ):
            # Another program took the free port between our check and llama-server's bind: pick another.
            self._port_attempts += 1
            port = free_port(_bind_host(self.host))
            i = self.argv.index("--port")
            self.argv[i + 1] = str(port)
            self.port = port
            with self._lock:
                self._load_lines = []
                self._loaded_seen.clear()
            self._note(f"port taken meanwhile; retrying on {port}")
            self._launch()
            return
        self.diagnosis = diag
        orphans.unregister(self)
        self._set_state(State.FAILED if diag is not None else State.STOPPED)
        self._done.set()

    def __repr__(self) -> str:
        return f"<ServerProcess pid={self.pid} state={self._state} url={self.base_url}>"


def _bind_host(host: str) -> str:
    host = host.split(",")[0].strip()
    return "127.0.0.1" if host in ("", "localhost") else host.strip("[]")
