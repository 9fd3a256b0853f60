"""Parse what a running llama-server reports: ``/metrics``, ``/slots``, completion timings, timing log lines.

Formats (``tools/server/server-context.cpp`` and ``tools/server/server-task.cpp``):

* ``/metrics`` (with ``--metrics``): Prometheus text, ``llamacpp:<name> <value>``.
  The ``*_seconds`` gauges are averages since the previous scrape and reset on
  every scrape, so only one scraper (the :class:`~app.launch.monitor.Monitor`)
  may read them.
* ``/slots``: ``[{id, n_ctx, speculative, is_processing, ...}]``; once a slot
  has had a task also ``id_task``, ``n_prompt_tokens``,
  ``n_prompt_tokens_processed``, ``n_prompt_tokens_cache`` and
  ``next_token[{has_next_token, has_new_line, n_remain, n_decoded}]``.
  ``n_prompt_tokens`` is the slot's token count (``prompt.tokens.size()``),
  which grows by one with every sampled token (``server_slot::add_token`` pushes
  it), so it is the context in use; ``n_prompt_tokens_processed`` counts only
  the prompt tokens the last task evaluated (the rest came from the cache).
* completion ``timings``: ``cache_n, prompt_n, prompt_ms, prompt_per_token_ms,
  prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
  predicted_per_second`` (``server_slot_stats::to_json``).
* log lines ``slot print_timing: id  0 | task 11 | prompt eval time = ... ms /
  N tokens (... ms per token, ... tokens per second)``, the ``eval time`` line
  after it, and ``n_gen = N, tg = X t/s, tg_3s = Y t/s`` during long generations.

Buffer sizes per device are in :mod:`app.launch.buffers`; the comparison with
the estimate is :func:`predicted_vs_actual`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..units import MiB
from .buffers import DeviceBuffers, device_buffers, device_for_buffer_type, logged_buffers  # noqa: F401 (re-export)

# --------------------------------------------------------------------------- /metrics


@dataclass
class Metrics:
    """One scrape of ``/metrics``; ``values`` keeps every sample by name without the ``llamacpp:`` prefix."""

    values: dict[str, float] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, default: float = 0.0) -> float:
        return self.values.get(name, default)

    @property
    def prompt_tokens_total(self) -> float:
        return self.get("prompt_tokens_total")

    @property
    def tokens_predicted_total(self) -> float:
        return self.get("tokens_predicted_total")

    @property
    def prompt_tokens_per_second(self) -> float:
        """Average prompt throughput since the previous scrape (0 when idle)."""
        return self.get("prompt_tokens_seconds")

    @property
    def predicted_tokens_per_second(self) -> float:
        """Average generation throughput since the previous scrape (0 when idle)."""
        return self.get("predicted_tokens_seconds")

    @property
    def requests_processing(self) -> float:
        return self.get("requests_processing")

    @property
    def requests_deferred(self) -> float:
        return self.get("requests_deferred")


_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)")


def parse_prometheus(text: str, prefix: str = "llamacpp:") -> Metrics:
    """Parse Prometheus text exposition; names keep their labels (``name{a="b"}``) if any."""
    out = Metrics()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                out.types[parts[2].removeprefix(prefix)] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.values[m.group(1).removeprefix(prefix) + (m.group(2) or "")] = value
    return out


def counter_rates(prev: Metrics, cur: Metrics) -> dict[str, float]:
    """Tokens per second of processing time between two scrapes, from the counters (0 when nothing ran)."""

    def rate(tokens: str, seconds: str) -> float:
        dt = cur.get(seconds) - prev.get(seconds)
        dn = cur.get(tokens) - prev.get(tokens)
        return dn / dt if dt > 0 and dn >= 0 else 0.0

    return {
        "prompt": rate("prompt_tokens_total", "prompt_seconds_total"),
        "generation": rate("tokens_predicted_total", "tokens_predicted_seconds_total"),
    }


# --------------------------------------------------------------------------- /slots


@dataclass(frozen=True)
class Slot:
    id: int
    n_ctx: int
    is_processing: bool
    id_task: int | None = None
    n_prompt_tokens: int = 0  # tokens in the slot now: prompt + generated so far
    n_prompt_tokens_processed: int = 0  # prompt tokens the last task evaluated
    n_prompt_tokens_cache: int = 0
    n_decoded: int = 0  # tokens generated by the current/last task
    n_remain: int | None = None

    @property
    def context_used(self) -> int:
        return self.n_prompt_tokens

    @property
    def context_fraction(self) -> float:
        return self.n_prompt_tokens / self.n_ctx if self.n_ctx else 0.0


@dataclass(frozen=True)
class Slots:
    slots: tuple[Slot, ...]

    @property
    def total(self) -> int:
        return len(self.slots)

    @property
    def busy(self) -> int:
        return sum(1 for s in self.slots if s.is_processing)

    @property
    def context_used(self) -> int:
        return sum(s.context_used for s in self.slots)

    @property
    def context_size(self) -> int:
        return sum(s.n_ctx for s in self.slots)


def parse_slots(data: Any) -> Slots:
    """Parse the ``/slots`` JSON (a list of slot objects)."""
    if not isinstance(data, list):
        raise ValueError("/slots did not return a list")
    out: list[Slot] = []
    for item in data:
        nxt = (item.get("next_token") or [{}])[0] if isinstance(item.get("next_token"), list) else {}
        out.append(
            Slot(
                id=int(item.get("id", len(out))),
                n_ctx=int(item.get("n_ctx", 0)),
                is_processing=bool(item.get("is_processing", False)),
                id_task=item.get("id_task"),
                n_prompt_tokens=int(item.get("n_prompt_tokens", 0) or 0),
                n_prompt_tokens_processed=int(item.get("n_prompt_tokens_processed", 0) or 0),
                n_prompt_tokens_cache=int(item.get("n_prompt_tokens_cache", 0) or 0),
                n_decoded=int(nxt.get("n_decoded", 0) or 0),
                n_remain=nxt.get("n_remain"),
            )
        )
    return Slots(tuple(out))


# --------------------------------------------------------------------------- completion timings


@dataclass(frozen=True)
class Timings:
    cache_n: int = 0
    prompt_n: int = 0
    prompt_ms: float = 0.0
    prompt_per_second: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    predicted_per_second: float = 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timings:
        def f(key: str) -> float:
            value = data.get(key, 0) or 0
            return float(value) if not (isinstance(value, float) and math.isnan(value)) else 0.0

        return cls(
            int(f("cache_n")),
            int(f("prompt_n")),
            f("prompt_ms"),
            f("prompt_per_second"),
            int(f("predicted_n")),
            f("predicted_ms"),
            f("predicted_per_second"),
        )


# --------------------------------------------------------------------------- log lines

_TIMING = re.compile(
    r"print_timing: id\s+(\d+) \| task (\d+) \| \s*(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) tokens "
    r"\(\s*([\d.]+|inf|nan) ms per token,\s+([\d.]+|inf|nan) tokens per second\)"
)
_TG = re.compile(r"id\s+(\d+) \| task (\d+) \| n_gen =\s+(\d+), tg =\s+([\d.]+) t/s, tg_3s =\s+([\d.]+) t/s")
_PP = re.compile(
    r"id\s+(\d+) \| task (\d+) \| prompt processing, n_tokens =\s+(\d+), progress = ([\d.]+), "
    r"t =\s+([\d.]+) s / ([\d.]+) tokens per second"
)


@dataclass(frozen=True)
class RequestTiming:
    """The ``print_timing`` lines of one finished request."""

    slot: int
    task: int
    prompt_ms: float = 0.0
    prompt_tokens: int = 0
    prompt_per_second: float = 0.0
    eval_ms: float = 0.0
    eval_tokens: int = 0
    eval_per_second: float = 0.0


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def request_timings(text: str | Iterable[str]) -> list[RequestTiming]:
    """Every finished request's prompt/eval speed, in log order."""
    lines = text.splitlines() if isinstance(text, str) else list(text)
    partial: dict[tuple[int, int], dict[str, Any]] = {}
    order: list[tuple[int, int]] = []
    for line in lines:
        m = _TIMING.search(line)
        if not m:
            continue
        key = (int(m.group(1)), int(m.group(2)))
        if key not in partial:
            partial[key] = {}
            order.append(key)
        which = "prompt" if m.group(3) == "prompt eval" else "eval"
        partial[key][f"{which}_ms"] = float(m.group(4))
        partial[key][f"{which}_tokens"] = int(m.group(5))
        partial[key][f"{which}_per_second"] = _num(m.group(7))
    return [RequestTiming(slot, task, **partial[(slot, task)]) for slot, task in order]


@dataclass(frozen=True)
class GenerationProgress:
    slot: int
    task: int
    n_gen: int
    tg: float  # tokens/s since the request started
    tg_3s: float  # tokens/s over the last window (about 3 s)


def generation_progress(text: str | Iterable[str]) -> list[GenerationProgress]:
    """The ``n_gen = N, tg = X t/s, tg_3s = Y t/s`` lines (printed every >= 3 s once >= 100 tokens)."""
    lines = text.splitlines() if isinstance(text, str) else list(text)
    out = []
    for line in lines:
        m = _TG.search(line)
        if m:
            out.append(
                GenerationProgress(
                    int(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4)), float(m.group(5))
                )
            )
    return out


@dataclass(frozen=True)
class PromptProgress:
    slot: int
    task: int
    n_tokens: int
    progress: float
    seconds: float
    tokens_per_second: float


def prompt_progress(text: str | Iterable[str]) -> list[PromptProgress]:
    """The ``prompt processing, n_tokens = ...`` lines of prompts taking over 3 s."""
    lines = text.splitlines() if isinstance(text, str) else list(text)
    out = []
    for line in lines:
        m = _PP.search(line)
        if m:
            out.append(
                PromptProgress(
                    int(m.group(1)),
                    int(m.group(2)),
                    int(m.group(3)),
                    float(m.group(4)),
                    float(m.group(5)),
                    float(m.group(6)),
                )
            )
    return out


# --------------------------------------------------------------------------- predicted vs actual


@dataclass(frozen=True)
class ComparisonRow:
    """One device and quantity: the estimate, what llama.cpp logged, and what was measured (MiB)."""

    device: str
    quantity: str  # model, context, compute, output, total
    predicted_mib: float | None
    logged_mib: float | None
    measured_mib: float | None = None
    difference_pct: float | None = None  # 100 * (logged - predicted) / predicted, in percent
    flagged: bool = False


def _extra(mem: Any) -> int:
    """A device's draft and projector shares (not in the model's own logged buffers)."""
    return getattr(mem, "draft", 0) + getattr(mem, "projector", 0)


def predicted_vs_actual(
    estimate: Any,
    logged: Mapping[str, DeviceBuffers],
    measured: Mapping[str, float] | None = None,
    *,
    tolerance: float = 0.05,
    abs_tolerance_mib: float = 0.01,
    draft_logged: Mapping[str, DeviceBuffers] | None = None,
) -> list[ComparisonRow]:
    """Rows comparing an :class:`app.memory.estimator.Estimate` with logged buffer sizes.

    Args:
        estimate: the prediction (bytes per device: ``model``, ``context``, ``compute``, ``output``).
        logged: :func:`app.launch.buffers.logged_buffers` of the real load (MiB).
        measured: optional measured MiB per device (telemetry: memory used on a GPU, process RSS for
            the Host), compared on the ``total`` row.
        tolerance: flag a row when |logged - predicted| exceeds this fraction of the prediction...
        abs_tolerance_mib: ...and this many MiB (the log prints sizes to 0.01 MiB).
        draft_logged: the draft model's logged buffers (``logged_buffers(..., part="draft")``), compared with
            each device's ``draft`` share on a ``draft`` row.
    """
    measured = measured or {}
    names = [d.name for d in estimate.devices]
    names += [n for n in logged if n not in names]
    names += [n for n in (draft_logged or {}) if n not in names]
    rows: list[ComparisonRow] = []
    for name in names:
        try:
            mem = estimate.device(name)
        except KeyError:
            mem = None
        lb = logged.get(name)
        pairs = [
            ("model", mem.model if mem else None, lb.model if lb else None),
            ("context", mem.context if mem else None, lb.context if lb else None),
            ("compute", mem.compute if mem else None, lb.compute if lb else None),
            ("output", mem.output if mem else None, lb.output if lb else None),
            # the model's own total: the draft's buffers are compared apart, the projector's are not all logged
            ("total", mem.total - _extra(mem) if mem else None, lb.total if lb else None),
        ]
        draft = getattr(mem, "draft", 0) if mem is not None else 0
        if draft_logged is not None and (draft or name in draft_logged):
            dl = draft_logged.get(name)
            pairs.append(("draft", draft if mem else None, dl.total if dl else None))
        for quantity, pred_bytes, logged_mib in pairs:
            if quantity == "output" and not pred_bytes and not logged_mib:
                continue
            pred = pred_bytes / MiB if pred_bytes is not None else None
            diff = None
            flagged = False
            if pred is not None and logged_mib is not None:
                delta = logged_mib - pred
                diff = (delta / pred * 100.0) if pred > 0 else (math.inf if logged_mib > 0 else 0.0)
                flagged = abs(delta) > tolerance * pred and abs(delta) > abs_tolerance_mib
            elif pred is not None or logged_mib is not None:
                other = pred if pred is not None else logged_mib
                flagged = bool(other and other > abs_tolerance_mib)  # one side has it, the other does not
            rows.append(
                ComparisonRow(
                    name, quantity, pred, logged_mib, measured.get(name) if quantity == "total" else None, diff, flagged
                )
            )
    return rows
