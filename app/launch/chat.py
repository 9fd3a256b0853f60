"""A chat with a running llama-server through its OpenAI-compatible endpoint (``/v1/chat/completions``).

llama-server applies the model's own chat template to the messages (``tools/server/server.cpp``), so a chat
works for any model with a template. Replies stream (server-sent events, one ``choices[0].delta`` each);
the last event carries llama-server's ``timings`` (prompt and generation speed), from which each message
gets its tokens per second. Where a server sends no timings the speed is measured here from the arrival of
the pieces, and the reply says so. Calls block: run them off the GUI thread.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .client import LlamaClient, ServerError
from .metrics import Timings

__all__ = ["ChatMessage", "ChatParams", "ChatReply", "ChatCancelled", "stream_chat", "parse_stop", "has_web_ui"]

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system, user or assistant
    content: str

    def to_json(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatParams:
    """The common samplers (llama-server's names); None leaves the server's default."""

    max_tokens: int = 256
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"max_tokens": int(self.max_tokens)}
        for key in ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "seed"):
            v = getattr(self, key)
            if v is not None:
                if isinstance(v, float) and not math.isfinite(v):
                    raise ValueError(f"{key} must be a finite number")
                body[key] = v
        if self.stop:
            body["stop"] = list(self.stop)
        return body


@dataclass
class ChatReply:
    text: str
    timings: Timings
    finish_reason: str | None = None
    pieces: int = 0
    measured_here: bool = False  # the server sent no timings: the speed is Layerdeck's own measure
    reasoning: str = ""  # a thinking model's reasoning_content, when the server separates it
    final: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        return self.timings.predicted_per_second


class ChatCancelled(ServerError):
    """The user stopped the reply; ``partial`` is what had arrived."""

    def __init__(self, partial: ChatReply):
        super().__init__("the reply was stopped")
        self.partial = partial


def parse_stop(text: str) -> tuple[str, ...]:
    """Stop strings typed in one box: separated by ``|``; ``\\n`` and ``\\t`` stand for a newline and a tab."""
    out = []
    for part in text.split("|"):
        s = part.replace("\\n", "\n").replace("\\t", "\t")
        if s and (s.strip() or "\n" in s or "\t" in s):  # a newline is a stop string; a stray space is not
            out.append(s)
    return tuple(out[:16])


def stream_chat(
    client: LlamaClient,
    messages: Sequence[ChatMessage],
    params: ChatParams = ChatParams(),
    on_token: Callable[[str], None] | None = None,
    *,
    timeout: float = 120.0,
    cancel: threading.Event | None = None,
) -> ChatReply:
    """POST ``/v1/chat/completions`` with ``"stream": true``; ``on_token(text)`` for every piece.

    ``timeout`` is the longest wait between two events. Setting ``cancel`` stops the reply at the next event
    (raises :class:`ChatCancelled` with what arrived). Raises :class:`ServerError` for the server's errors.
    """
    for m in messages:
        if m.role not in ROLES:
            raise ValueError(f"a chat message's role is one of {', '.join(ROLES)}, not {m.role!r}")
    body = {"messages": [m.to_json() for m in messages], "stream": True, **params.to_json()}
    pieces: list[str] = []
    reasoning: list[str] = []
    final: dict[str, Any] = {}
    finish: str | None = None
    t_first = t_last = None
    t0 = time.monotonic()

    def reply(measured: bool, timings: Timings) -> ChatReply:
        return ChatReply("".join(pieces), timings, finish, len(pieces), measured, "".join(reasoning), final)

    def own_timings() -> Timings:
        n = len(pieces)
        span = (t_last - t_first) if t_first is not None and t_last is not None else 0.0
        tps = (n - 1) / span if n > 1 and span > 0 else 0.0
        return Timings(
            prompt_ms=((t_first or t0) - t0) * 1000, predicted_n=n, predicted_ms=span * 1000, predicted_per_second=tps
        )

    with client._request("/v1/chat/completions", body, timeout=timeout) as resp:
        for raw in resp:
            if cancel is not None and cancel.is_set():
                raise ChatCancelled(reply(True, own_timings()))
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            try:
                event = json.loads(payload)
            except ValueError:
                raise ServerError(f"/v1/chat/completions sent an event that is not JSON: {payload[:200]!r}") from None
            if not isinstance(event, dict):
                continue
            if "error" in event:
                err = event["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                raise ServerError(f"/v1/chat/completions failed: {msg}", None, event)
            choices = event.get("choices")
            choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            piece = delta.get("content")
            piece = piece if isinstance(piece, str) else ""
            think = delta.get("reasoning_content")
            think = think if isinstance(think, str) else ""
            if think:
                reasoning.append(think)
            if piece:
                now = time.monotonic()
                t_first = now if t_first is None else t_first
                t_last = now
                pieces.append(piece)
                if on_token is not None:
                    on_token(piece)
            if isinstance(choice.get("finish_reason"), str):
                finish = choice["finish_reason"]
            if isinstance(event.get("timings"), dict):
                final = event
    if finish is None and not final:
        raise ServerError("/v1/chat/completions stream ended without a final event (the server may have stopped)")
    theirs = _server_timings(final.get("timings"))
    return reply(False, theirs) if theirs is not None else reply(True, own_timings())


def _server_timings(raw: Any) -> Timings | None:
    """llama-server's timings, or None when there are none or they are not sane numbers."""
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        t = Timings.from_json(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    values = (t.prompt_n, t.prompt_ms, t.prompt_per_second, t.predicted_n, t.predicted_ms, t.predicted_per_second)
    if any(not math.isfinite(v) or v < 0 for v in values):
        return None
    return t


def has_web_ui(client: LlamaClient, timeout: float = 3.0) -> bool:
    """Whether the server serves its own web UI at ``/`` (builds without it, or ``--no-webui``, do not)."""
    try:
        with client._request("/", timeout=timeout) as resp:
            kind = resp.headers.get("Content-Type", "")
            head = resp.read(512).decode("utf-8", errors="replace").lower()
    except ServerError:
        return False
    return "text/html" in kind or "<html" in head or "<!doctype html" in head
