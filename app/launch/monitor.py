"""Live readings of a running llama-server in fixed-size ring buffers, ready for pyqtgraph ``setData``.

Every tick (0.5-1 s, on its own thread or driven by the caller) the
:class:`Monitor` takes one :class:`~app.devices.telemetry.TelemetrySampler`
sample of the server's process tree and the GPUs, scrapes ``/metrics`` (the
Monitor must be the only scraper: the throughput gauges reset on every
scrape, ``get_metrics`` in ``tools/server/server-context.cpp``) and reads ``/slots``. Each series is a numpy array of
fixed length; :meth:`Monitor.series` returns them oldest first, with NaN
where a reading was missing (pyqtgraph draws gaps there).

Memory of RPC devices cannot be read from here (it lives on another machine);
for those, :meth:`Monitor.allocated_mib` gives what llama.cpp logged for them
and :meth:`Monitor.predicted_mib` what the estimate said.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..units import MiB
from .client import LlamaClient, ServerError
from .metrics import Metrics, Slots
from .process import ServerProcess, State

log = logging.getLogger(__name__)


class Ring:
    """A fixed-size float ring; :meth:`values` returns the filled part, oldest first."""

    def __init__(self, capacity: int, fill_to: int = 0):
        self._data = np.full(capacity, np.nan)
        self._count = 0
        for _ in range(fill_to):  # a series that appears late is padded so all series stay aligned
            self.append(np.nan)

    def append(self, value: float | None) -> None:
        self._data[self._count % len(self._data)] = np.nan if value is None else value
        self._count += 1

    def values(self) -> np.ndarray:
        cap = len(self._data)
        if self._count <= cap:
            return self._data[: self._count].copy()
        i = self._count % cap
        return np.concatenate((self._data[i:], self._data[:i]))

    def __len__(self) -> int:
        return min(self._count, len(self._data))

    @property
    def last(self) -> float:
        return float(self._data[(self._count - 1) % len(self._data)]) if self._count else float("nan")


@dataclass(frozen=True)
class MonitorSample:
    time: float  # seconds since the monitor started
    state: State
    device_used_mib: dict[str, float] = field(default_factory=dict)
    device_util: dict[str, float] = field(default_factory=dict)
    host_rss_mib: float | None = None  # the server's process tree
    host_cpu_percent: float | None = None  # the server's process tree; 100 = one core
    host_ram_used_mib: float | None = None  # the whole machine
    prompt_tps: float | None = None
    gen_tps: float | None = None
    busy_slots: int | None = None
    context_used: int | None = None
    context_size: int | None = None
    metrics: Metrics | None = None
    slots: Slots | None = None
    errors: tuple[str, ...] = ()


class Monitor:
    """Collects readings for one :class:`ServerProcess`.

    Args:
        server: the process to follow (its PID and URL may change on restart).
        sampler: a TelemetrySampler (or None for HTTP readings only); the
            Monitor points it at the server's PID.
        estimate: the :class:`app.memory.estimator.Estimate` of this placement, for
            :meth:`predicted_mib`.
        capacity: points kept per series (600 at 0.5 s = 5 minutes).
    """

    def __init__(
        self,
        server: ServerProcess,
        sampler: Any = None,
        estimate: Any = None,
        *,
        capacity: int = 600,
        interval: float = 0.5,
        http_timeout: float = 1.0,
    ):
        self.server = server
        self.sampler = sampler
        self.estimate = estimate
        self.capacity = capacity
        self.interval = interval
        self.http_timeout = http_timeout
        self.last: MonitorSample | None = None
        self._series: dict[str, Ring] = {}
        self._ticks = 0
        self._t0 = time.monotonic()
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[MonitorSample], None]] = []

    def add_listener(self, fn: Callable[[MonitorSample], None]) -> None:
        self._listeners.append(fn)

    # ------------------------------------------------------------------ sampling

    def tick(self) -> MonitorSample:
        """Take one reading of everything and append it to the series."""
        errors: list[str] = []
        used: dict[str, float] = {}
        util: dict[str, float] = {}
        rss = cpu = ram = None
        if self.sampler is not None:
            pid = self.server.pid if self.server.running else None
            if pid != self._pid:
                self.sampler.set_pid(pid)
                self._pid = pid
            try:
                sample = self.sampler.sample()
            except Exception as exc:  # noqa: BLE001 - the sampler should not raise; never stop monitoring
                errors.append(f"telemetry: {exc}")
            else:
                for reading in sample.devices:
                    name = reading.name or reading.key
                    if reading.memory_used_bytes is not None:
                        used[name] = reading.memory_used_bytes / MiB
                    if reading.utilisation_percent is not None:
                        util[name] = reading.utilisation_percent
                    if reading.error:
                        errors.append(f"{name}: {reading.error}")
                if pid is not None and sample.processes:
                    rss = sample.process_rss_bytes / MiB
                    cpu = (
                        sample.process_cpu_percent if any(p.cpu_percent is not None for p in sample.processes) else None
                    )
                ram = sample.host.ram_used_bytes / MiB
                errors += list(sample.errors)
        metrics = slots = None
        if self.server.state == State.READY and self.server.base_url:
            client = LlamaClient(self.server.base_url, self.server.api_key, self.http_timeout)
            try:
                metrics = client.metrics()
            except ServerError as exc:
                errors.append(str(exc))
            try:
                slots = client.slots()
            except (ServerError, ValueError) as exc:
                errors.append(str(exc))
        sample_out = MonitorSample(
            time=time.monotonic() - self._t0,
            state=self.server.state,
            device_used_mib=used,
            device_util=util,
            host_rss_mib=rss,
            host_cpu_percent=cpu,
            host_ram_used_mib=ram,
            prompt_tps=metrics.prompt_tokens_per_second if metrics else None,
            gen_tps=metrics.predicted_tokens_per_second if metrics else None,
            busy_slots=slots.busy if slots else None,
            context_used=slots.context_used if slots else None,
            context_size=slots.context_size if slots else None,
            metrics=metrics,
            slots=slots,
            errors=tuple(errors),
        )
        self._record(sample_out)
        for fn in list(self._listeners):
            try:
                fn(sample_out)
            except Exception:  # noqa: BLE001
                log.exception("monitor listener failed")
        return sample_out

    def _record(self, s: MonitorSample) -> None:
        values: dict[str, float | None] = {
            "time": s.time,
            "host_rss_mib": s.host_rss_mib,
            "host_cpu_percent": s.host_cpu_percent,
            "host_ram_used_mib": s.host_ram_used_mib,
            "prompt_tps": s.prompt_tps,
            "gen_tps": s.gen_tps,
            "busy_slots": s.busy_slots,
            "context_used": s.context_used,
        }
        for name, mib in s.device_used_mib.items():
            values[f"mem:{name}"] = mib
        for name, pct in s.device_util.items():
            values[f"util:{name}"] = pct
        with self._lock:
            for key, value in values.items():
                if key not in self._series:
                    self._series[key] = Ring(self.capacity, fill_to=min(self._ticks, self.capacity))
                self._series[key].append(value)
            for key, ring in self._series.items():
                if key not in values:
                    ring.append(None)
            self._ticks += 1
            self.last = s

    def series(self) -> dict[str, np.ndarray]:
        """Every series, oldest first, all the same length: ``time``, ``mem:<device>``, ``util:<device>``,
        ``host_rss_mib``, ``host_cpu_percent``, ``host_ram_used_mib``, ``prompt_tps``, ``gen_tps``,
        ``busy_slots``, ``context_used``."""
        with self._lock:
            return {key: ring.values() for key, ring in self._series.items()}

    # ------------------------------------------------------------------ reference lines

    def predicted_mib(self) -> dict[str, float]:
        """Estimated total MiB per device (empty without an estimate)."""
        if self.estimate is None:
            return {}
        return {d.name: d.total / MiB for d in self.estimate.devices}

    def allocated_mib(self) -> dict[str, float]:
        """What llama.cpp logged as allocated per device for this run."""
        return {name: b.total for name, b in self.server.buffers.items()}

    # ------------------------------------------------------------------ thread

    def start(self) -> None:
        """Tick every ``interval`` seconds on a daemon thread until :meth:`stop`."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="layerdeck-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - keep monitoring
                log.exception("monitor tick failed")
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
