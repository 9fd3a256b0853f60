"""A bounded, thread-safe buffer of a llama.cpp process's output lines.

llama.cpp prefixes every log line with ``M.SS.mmm.uuu L `` where ``L`` is
``I``, ``W``, ``E`` or ``D`` (``common/log.cpp`` ``common_log_entry::print``).
Lines without that prefix are continuations of a multi-line message (the chat
template example, sampler parameters), argument-parser errors printed before
logging starts, or a gdb backtrace after an abort; they take the level of the
previous prefixed line of the same stream, except ``error...`` lines, which are
errors.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

LEVELS = ("D", "I", "W", "E")
_PREFIX = re.compile(r"^(\d+\.\d{2}\.\d{3}\.\d{3}) ([IWED]) ")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class LogLine:
    """One output line. ``stream`` is ``stdout``, ``stderr`` or ``layerdeck`` (our own notes)."""

    seq: int
    time: float  # time.time() when read
    stream: str
    level: str | None  # I, W, E, D, or None when unknown
    text: str  # the line as printed (colour codes removed)

    @property
    def message(self) -> str:
        """The text without llama.cpp's timestamp and level prefix."""
        m = _PREFIX.match(self.text)
        return self.text[m.end() :] if m else self.text


def clean(raw: str) -> str:
    return _ANSI.sub("", raw).rstrip("\r\n")


class LevelTracker:
    """Assigns levels to the lines of one stream (continuations inherit)."""

    def __init__(self) -> None:
        self._last: str | None = None

    def level_of(self, text: str) -> str | None:
        m = _PREFIX.match(text)
        if m:
            self._last = m.group(2)
            return self._last
        if text.lstrip().lower().startswith("error"):
            return "E"
        return self._last


class LogBuffer:
    """The last ``max_lines`` lines; ``seq`` numbers keep counting so readers can ask for what is new."""

    def __init__(self, max_lines: int = 5000):
        self._lines: deque[LogLine] = deque(maxlen=max_lines)
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self.dropped = 0

    @property
    def max_lines(self) -> int:
        return self._lines.maxlen or 0

    def append(self, stream: str, text: str, level: str | None) -> LogLine:
        with self._lock:
            line = LogLine(next(self._seq), time.time(), stream, level, text)
            if len(self._lines) == self._lines.maxlen:
                self.dropped += 1
            self._lines.append(line)
            return line

    def lines(self, since: int | None = None, levels: Iterable[str] | None = None) -> list[LogLine]:
        """Lines with ``seq > since`` (all when None), optionally only some levels."""
        wanted = set(levels) if levels is not None else None
        with self._lock:
            snapshot = list(self._lines)
        return [ln for ln in snapshot if (since is None or ln.seq > since) and (wanted is None or ln.level in wanted)]

    def text(self) -> str:
        return "\n".join(ln.text for ln in self.lines())

    def tail(self, n: int) -> list[LogLine]:
        with self._lock:
            return list(self._lines)[-n:]

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()
            self.dropped = 0
