"""A small HTTP client for llama-server's own endpoints (``tools/server/server.cpp``), on urllib only.

Every call has a timeout and raises :class:`ServerError` (HTTP error with the
server's message), :class:`ServerLoading` (503 while the model loads) or
:class:`ServerUnreachable` (no connection) with a message a user can act on.
Calls block: run them off the GUI thread.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import LaunchError
from .metrics import Metrics, Slots, Timings, parse_prometheus, parse_slots

log = logging.getLogger(__name__)

#: No proxies: llama-server is on this machine or the LAN, and an http_proxy variable without a matching
#: no_proxy would otherwise send 127.0.0.1 requests to the proxy.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServerError(LaunchError, RuntimeError):
    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class ServerLoading(ServerError):
    """503: the model is still loading."""


class ServerUnreachable(ServerError):
    """No HTTP connection (not started yet, exited, wrong port)."""


@dataclass(frozen=True)
class Health:
    status: str  # "ok", "loading", "error" or "unreachable"
    http_status: int | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Completion:
    text: str
    timings: Timings
    tokens_predicted: int = 0
    tokens_evaluated: int = 0
    stop_type: str | None = None
    final: dict[str, Any] = field(default_factory=dict)  # the last event, as sent


class LlamaClient:
    """Client for one server at ``base_url`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 5.0):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    # ------------------------------------------------------------------ plumbing

    def _request(self, path: str, body: Any | None = None, timeout: float | None = None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers)
        try:
            return OPENER.open(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode("utf-8", errors="replace")
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = raw
            message = raw.strip()
            if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
                message = payload["error"].get("message", message)
            if exc.code == 503:
                raise ServerLoading(f"{path}: the server is loading the model ({message})", 503, payload) from None
            if exc.code == 501 and path.startswith("/metrics"):
                message = "the server was started without --metrics"
            elif exc.code == 501 and path.startswith("/slots"):
                message = "the server was started with --no-slots"
            elif exc.code == 401:
                message = "the server needs an API key (--api-key) and it was missing or wrong"
            raise ServerError(f"{path}: HTTP {exc.code}: {message}", exc.code, payload) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerUnreachable(f"no answer from {self.base_url}{path}: {reason}") from None

    def _get_json(self, path: str, timeout: float | None = None) -> Any:
        with self._request(path, timeout=timeout) as resp:
            raw = resp.read().decode("utf-8", errors="replace")
        try:
            return json.loads(raw)
        except ValueError:
            raise ServerError(f"{path}: the answer is not JSON: {raw[:200]!r}") from None

    # ------------------------------------------------------------------ endpoints

    def health(self, timeout: float | None = None) -> Health:
        """``/health``: never raises."""
        try:
            with self._request("/health", timeout=timeout or min(self.timeout, 2.0)) as resp:
                return Health("ok", resp.status)
        except ServerLoading as exc:
            return Health("loading", 503, str(exc))
        except ServerUnreachable as exc:
            return Health("unreachable", None, str(exc))
        except ServerError as exc:
            return Health("error", exc.status, str(exc))

    def metrics_text(self, timeout: float | None = None) -> str:
        with self._request("/metrics", timeout=timeout) as resp:
            return resp.read().decode("utf-8", errors="replace")

    def metrics(self, timeout: float | None = None) -> Metrics:
        """Scrape ``/metrics``. The throughput gauges reset on every scrape: use one scraper only."""
        return parse_prometheus(self.metrics_text(timeout))

    def slots_json(self, timeout: float | None = None) -> Any:
        return self._get_json("/slots", timeout)

    def slots(self, timeout: float | None = None) -> Slots:
        return parse_slots(self.slots_json(timeout))

    def props(self, timeout: float | None = None) -> dict[str, Any]:
        return self._get_json("/props", timeout)

    def stream_completion(
        self,
        prompt: str,
        n_predict: int = 64,
        on_token: Callable[[str], None] | None = None,
        *,
        timeout: float = 120.0,
        **params: Any,
    ) -> Completion:
        """POST ``/completion`` with ``"stream": true``; ``on_token(text)`` for every piece as it arrives.

        ``timeout`` applies to each read (the time between two events), so a long generation is fine.
        Extra keyword arguments go into the request (``temperature``, ``seed``...).
        """
        body = {"prompt": prompt, "n_predict": n_predict, "stream": True, **params}
        pieces: list[str] = []
        final: dict[str, Any] = {}
        with self._request("/completion", body, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line or line.startswith(":") or line.startswith("event:"):
                    continue
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    event = json.loads(payload)
                except ValueError:
                    raise ServerError(f"/completion sent an event that is not JSON: {payload[:200]!r}") from None
                if "error" in event:
                    err = event["error"]
                    msg = err.get("message", err) if isinstance(err, dict) else err
                    raise ServerError(f"/completion failed: {msg}", None, event)
                piece = event.get("content", "")
                if piece:
                    pieces.append(piece)
                    if on_token is not None:
                        on_token(piece)
                if event.get("stop"):
                    final = event
                    break
        if not final:
            raise ServerError("/completion stream ended without a final event (the server may have stopped)")
        return Completion(
            "".join(pieces),
            Timings.from_json(final.get("timings") or {}),
            int(final.get("tokens_predicted", 0) or 0),
            int(final.get("tokens_evaluated", 0) or 0),
            final.get("stop_type"),
            final,
        )
