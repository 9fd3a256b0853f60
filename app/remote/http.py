"""HTTP for header reads: Range requests, redirects followed by hand, timeouts, cancel, byte accounting.

``http.client`` rather than ``urllib``: every redirect is followed here, so the token goes only where
:func:`~app.remote.names.token_allowed` says (``urllib`` would carry it to any host a redirect names), loops
are caught, and each answer's status becomes one typed :mod:`app.remote.errors` error. Bodies are read in
small chunks with the cancel flag and the overall deadline checked between them, and never past the bytes
asked for: a server that ignores ``Range`` and starts sending the whole file is read only as far as the
header needs, then the connection is closed.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from .. import __version__
from .errors import (
    NotAModelError,
    RangeNotSatisfiableError,
    RateLimitError,
    RedirectLoopError,
    RemoteAccessError,
    RemoteCancelled,
    RemoteError,
    RemoteNotFoundError,
    RemoteProtocolError,
    RemoteTimeoutError,
    RemoteTruncatedError,
    RemoteUnreachableError,
)
from .names import token_allowed

log = logging.getLogger(__name__)

__all__ = ["Fetcher", "Answer", "Stats"]

#: Most redirects one request follows (the Hub sends one or two).
MAX_REDIRECTS = 10
#: Bytes read from the socket at a time (the cancel flag and the deadline are checked between reads).
CHUNK = 64 * 1024
#: Most bytes of an error page or a JSON document read.
MAX_SMALL_BODY = 64 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class Stats:
    """What was sent and received: one ``(url, range)`` per request, body bytes received."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    bytes_read: int = 0


@dataclass
class Answer:
    """A response after redirects: status, headers (lower-case names; the redirects' own headers under
    ``hops``), the final URL, and the open response to read the body from."""

    status: int
    headers: dict[str, str]
    url: str
    hops: list[dict[str, str]]
    response: http.client.HTTPResponse
    conn: http.client.HTTPConnection

    def header(self, name: str) -> str | None:
        """``name`` from the final answer, else from the last redirect that had it (the Hub puts the file's
        ETag and size on its redirect: ``X-Linked-Etag``, ``X-Linked-Size``)."""
        if name in self.headers:
            return self.headers[name]
        for h in reversed(self.hops):
            if name in h:
                return h[name]
        return None

    def close(self) -> None:
        try:
            self.response.close()
        finally:
            self.conn.close()


def _headers(resp: http.client.HTTPResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in resp.getheaders()}


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number of seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Fetcher:
    """One header read's connection policy: token, timeouts, deadline, cancel, progress and counters.

    ``timeout``: seconds any one connect or read may wait; ``deadline``: seconds the whole read (every request
    of it) may take; ``cancel()`` true stops it (:class:`RemoteCancelled`); ``on_bytes(n)`` is called with the
    body bytes of each chunk received.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        timeout: float = 20.0,
        deadline: float = 300.0,
        cancel: Callable[[], bool] | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        self.token = token
        self.timeout = timeout
        self.deadline = deadline
        self.cancel = cancel
        self.on_bytes = on_bytes
        self.started = time.monotonic()
        self.stats = Stats()

    # ------------------------------------------------------------------ checks

    def check(self, url: str) -> None:
        if self.cancel is not None and self.cancel():
            raise RemoteCancelled("cancelled: nothing more was read.", url)
        if time.monotonic() - self.started > self.deadline:
            raise RemoteTimeoutError(
                f"{url}: the server is too slow: the header was not read within {self.deadline:.0f} s "
                f"({self.stats.bytes_read:,} bytes received); try again later or another mirror.",
                url,
            )

    def _remaining(self) -> float:
        return max(0.1, min(self.timeout, self.deadline - (time.monotonic() - self.started)))

    # ------------------------------------------------------------------ requests

    def request(self, url: str, headers: dict[str, str] | None = None, what: str = "") -> Answer:
        """GET ``url`` (following redirects); raise the typed error for any status but 2xx and 304."""
        seen: list[str] = []
        hops: list[dict[str, str]] = []
        first = url
        for _ in range(MAX_REDIRECTS + 1):
            self.check(url)
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise RemoteProtocolError(f"{first}: a redirect leads to {url!r}, which is not an http(s) URL.", url)
            h = {"User-Agent": f"layerdeck/{__version__}", "Accept-Encoding": "identity"}
            h.update(headers or {})
            if self.token and token_allowed(url):
                h["Authorization"] = f"Bearer {self.token}"
            self.stats.requests.append((url, h.get("Range", "")))
            resp, conn = self._send(url, parts, h)
            if resp.status in _REDIRECTS:
                rh = _headers(resp)
                self._drain(resp)
                conn.close()
                loc = rh.get("location")
                if not loc:
                    raise RemoteProtocolError(
                        f"{url}: the server answered {resp.status} (a redirect) without saying where to.", url
                    )
                nxt = urljoin(url, loc)
                seen.append(url)
                hops.append(rh)
                if nxt in seen:
                    raise RedirectLoopError(
                        f"{first}: the server's redirects go round in a loop ({' -> '.join(seen + [nxt])}); "
                        "the server is misconfigured: try again later or report it to its owner.",
                        first,
                    )
                url = nxt
                continue
            answer = Answer(resp.status, _headers(resp), url, hops, resp, conn)
            if resp.status in (200, 206, 304):
                return answer
            try:
                raise self._status_error(answer, first, what)
            finally:
                answer.close()
        raise RedirectLoopError(
            f"{first}: more than {MAX_REDIRECTS} redirects without reaching the file; the server is misconfigured.",
            first,
        )

    def _send(self, url: str, parts, headers: dict[str, str]):
        port = parts.port
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, port, timeout=self._remaining())
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
        except TimeoutError:
            conn.close()
            raise RemoteTimeoutError(
                f"{url}: no answer within {self._remaining():.0f} s: the server is down, overloaded or "
                "unreachable from here; try again later.",
                url,
            ) from None
        except ssl.SSLError as exc:
            conn.close()
            raise RemoteUnreachableError(
                f"{url}: the secure connection failed ({exc.reason or exc}); check the system's certificates "
                "or a proxy that intercepts HTTPS.",
                url,
            ) from None
        except socket.gaierror:
            conn.close()
            raise RemoteUnreachableError(
                f"{url}: the host {parts.hostname!r} is not known; check the name and the network connection.", url
            ) from None
        except (http.client.HTTPException, ValueError) as exc:
            conn.close()
            raise RemoteProtocolError(f"{url}: the server's answer is not valid HTTP ({exc!r}).", url) from None
        except OSError as exc:
            conn.close()
            raise RemoteUnreachableError(
                f"{url}: cannot connect ({exc.strerror or exc}); check the address and the network, or try later.",
                url,
            ) from None
        return resp, conn

    def _drain(self, resp: http.client.HTTPResponse) -> bytes:
        try:
            return resp.read(MAX_SMALL_BODY)
        except (OSError, http.client.HTTPException):
            return b""

    def _status_error(self, a: Answer, first: str, what: str) -> RemoteError:
        body = self._drain(a.response)
        code = (a.header("x-error-code") or "").strip()
        server_says = (a.header("x-error-message") or "").strip()
        if not server_says:
            try:
                doc = json.loads(body.decode("utf-8", errors="replace"))
                server_says = str(doc.get("error", "")) if isinstance(doc, dict) else ""
            except ValueError:
                server_says = ""
        said = f" (the server says: {server_says[:200]})" if server_says else ""
        name = what or first
        if a.status == 404 or code in ("RepoNotFound", "EntryNotFound", "RevisionNotFound"):
            which = {"RepoNotFound": "the repository", "EntryNotFound": "the file", "RevisionNotFound": "the branch"}
            return RemoteNotFoundError(
                f"{name}: not found ({a.status}): {which.get(code, 'the repository or the file')} does not exist"
                f"{said}. Check the spelling (ORG/REPO is case-sensitive on some servers) and the file name; "
                "`layerdeck repo ORG/REPO` lists a repository's GGUF files.",
                first,
                a.status,
            )
        if a.status in (401, 403):
            gated = code == "GatedRepo" or "gated" in server_says.lower() or "restricted" in server_says.lower()
            token = "Your token was sent and refused" if self.token else "No token was sent"
            return RemoteAccessError(
                f"{name}: access denied ({a.status}){said}. {token}. "
                + (
                    "The repository is gated: open its page on Hugging Face, accept the licence with your account, "
                    "then set HF_TOKEN to a token of that account (or log in with `hf auth login`)."
                    if gated or not self.token
                    else "Check that the token can read this repository (a fine-grained token needs access to "
                    "gated repositories), or accept the licence on the model's page."
                ),
                first,
                a.status,
            )
        if a.status == 429:
            wait = retry_after(a.header("retry-after"))
            when = f"wait {wait:.0f} s before trying again" if wait is not None else "wait a minute and try again"
            return RateLimitError(
                f"{name}: the server limits how often it may be asked (429 Too Many Requests){said}: {when}"
                + ("; a token (HF_TOKEN) raises the limit." if not self.token else "."),
                first,
                wait,
            )
        if a.status == 416:
            return RangeNotSatisfiableError(
                f"{name}: the server refused the byte range asked for (416){said}: the file is shorter than it "
                "said or empty; check the URL, or try again if it was being replaced.",
                first,
                416,
            )
        if 500 <= a.status < 600:
            return RemoteError(
                f"{name}: the server failed ({a.status} {a.response.reason}){said}; try again later.", first, a.status
            )
        return RemoteProtocolError(f"{name}: unexpected answer {a.status} {a.response.reason}{said}.", first, a.status)

    # ------------------------------------------------------------------ bodies

    def read_body(self, a: Answer, n: int, what: str = "") -> bytes:
        """Up to ``n`` bytes of ``a``'s body (fewer only where it ends), chunk by chunk."""
        out = bytearray()
        while len(out) < n:
            self.check(a.url)
            if a.conn.sock is not None:
                a.conn.sock.settimeout(self._remaining())
            try:
                chunk = a.response.read(min(CHUNK, n - len(out)))
            except TimeoutError:
                raise RemoteTimeoutError(
                    f"{what or a.url}: the server stopped sending ({len(out):,} of {n:,} bytes received in the "
                    f"last request, no more within {self.timeout:.0f} s); try again later.",
                    a.url,
                ) from None
            except http.client.IncompleteRead as exc:
                chunk = exc.partial
                out += chunk
                self._count(len(chunk))
                break
            except (OSError, http.client.HTTPException) as exc:
                raise RemoteTruncatedError(
                    f"{what or a.url}: the connection broke after {len(out):,} of {n:,} bytes ({exc!r}); try again.",
                    a.url,
                ) from None
            if not chunk:
                break
            out += chunk
            self._count(len(chunk))
        return bytes(out)

    def _count(self, n: int) -> None:
        self.stats.bytes_read += n
        if self.on_bytes is not None:
            self.on_bytes(n)

    def get_json(self, url: str, limit: int, what: str = ""):
        """``(document, answer headers)`` of a JSON document at ``url`` of at most ``limit`` bytes."""
        a = self.request(url, {"Accept": "application/json"}, what)
        try:
            if a.status != 200:
                raise RemoteProtocolError(f"{what or url}: unexpected answer {a.status} to a plain request.", url)
            data = self.read_body(a, limit + 1, what)
        finally:
            a.close()
        if len(data) > limit:
            raise RemoteProtocolError(f"{what or url}: the listing is larger than {limit:,} bytes; not read.", url)
        try:
            return json.loads(data.decode("utf-8")), a
        except (UnicodeDecodeError, ValueError):
            kind = "an HTML page" if data.lstrip()[:1] == b"<" else "not JSON"
            raise NotAModelError(
                f"{what or url}: the server's answer is {kind}, not the Hub API's JSON; check HF_ENDPOINT "
                "(it must be the Hub's base URL, like https://huggingface.co).",
                url,
            ) from None
