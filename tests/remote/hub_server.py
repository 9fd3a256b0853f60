"""A local stand-in for the Hugging Face Hub on 127.0.0.1 (http.server in a thread).

It answers like the Hub: the tree listing (``/api/models/ORG/REPO/tree/REV?recursive=true``, paged with a
``Link`` header when ``page_size`` is set), ``/ORG/REPO/resolve/REV/FILE`` redirecting (302) to a storage
path with ``ETag``/``X-Linked-Etag``/``X-Linked-Size`` (and ``304`` on a matching ``If-None-Match``), and the
storage path serving the file with ``Range`` (206, 416). Misbehaviour is switched on per server: gated repos
(401 without the token, 403 with a wrong one), 404 with ``X-Error-Code``, 429 with ``Retry-After``, ignoring
``Range`` (200 with the whole file), slow sending, a redirect loop, an HTML page. Every request is logged
with its range, its ``Authorization`` header and the bytes sent.
"""

from __future__ import annotations

import hashlib
import http.server
import json

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Logged:
    path: str
    range: str | None
    auth: str | None
    status: int
    sent: int = 0


@dataclass
class HubState:
    repos: dict[str, dict[str, Path]] = field(default_factory=dict)  # repo -> {path in repo: file on disk}
    extra_files: dict[str, dict[str, int]] = field(default_factory=dict)  # listed but not served: repo -> {path: size}
    gated: dict[str, str] = field(default_factory=dict)  # repo -> the token that opens it
    ignore_range: bool = False
    slow_chunk_delay: float = 0.0  # seconds between 16 KiB chunks of a body
    rate_limit: str | None = None  # Retry-After value: every resolve answers 429
    page_size: int = 0
    storage_base: str = ""  # redirect to this base (another server) instead of /storage on this one
    listed_size: dict[str, int] = field(default_factory=dict)  # path in repo -> the size the listing claims
    listed_sha: dict[str, str] = field(default_factory=dict)  # path in repo -> the sha256 the listing claims
    cut_after: int | None = None  # storage: close the connection after this many body bytes...
    cuts: int = 0  # ...this many times (then answer in full)
    storage_status: int | None = None  # storage answers this error status (429 with Retry-After 7 when 429)
    _sha: dict[str, str] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def etag(self, file: Path) -> str:
        st = file.stat()
        return '"' + hashlib.sha256(f"{file.name}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:32] + '"'

    def sha256(self, file: Path) -> str | None:
        """The file's real SHA-256 (the listing's ``lfs.oid``) for files up to 256 MiB; None (no ``oid``) for
        larger ones, whose hashing would cost a test minutes (sparse full-size models are never downloaded)."""
        if file.stat().st_size > 256 * 1024 * 1024:
            return None
        key = f"{file}:{self.etag(file)}"
        if key not in self._sha:
            h = hashlib.sha256()
            with open(file, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            self._sha[key] = h.hexdigest()
        return self._sha[key]

    def find(self, token: str) -> Path | None:
        for files in self.repos.values():
            for f in files.values():
                if hashlib.sha256(str(f).encode()).hexdigest()[:24] == token:
                    return f
        return None


_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - keep the test output quiet
        pass

    @property
    def state(self) -> HubState:
        return self.server.state

    def _entry(self, status: int) -> Logged:
        e = Logged(self.path, self.headers.get("Range"), self.headers.get("Authorization"), status)
        with self.state.lock:
            self.state.log.append(e)
        return e

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              ctype: str = "application/json") -> None:
        e = self._entry(status)
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        e.sent = len(body)

    def _error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        h = {"X-Error-Code": code, "X-Error-Message": message, **(headers or {})}
        self._send(status, json.dumps({"error": message}).encode(), h)

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        if path.startswith("/api/models/"):
            return self._tree(path, parts.query)
        if path.startswith("/storage/"):
            return self._storage(path)
        if path.startswith("/loop/"):
            nxt = "/loop/b" if path == "/loop/a" else "/loop/a"
            return self._send(302, b"", {"Location": nxt})
        if path == "/html/model.gguf":
            return self._send(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", ctype="text/html")
        if path == "/dead-redirect":
            return self._send(302, b"")
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(m.group(1), m.group(3))
        self._error(404, "EntryNotFound", "not found")

    def _auth_error(self, repo: str) -> bool:
        want = self.state.gated.get(repo)
        if want is None:
            return False
        got = self.headers.get("Authorization")
        if got is None:
            self._error(401, "GatedRepo", f"Access to model {repo} is restricted. You must have access to it and be authenticated to access it. Please log in.")
            return True
        if got != f"Bearer {want}":
            self._error(403, "GatedRepo", f"Access to model {repo} is restricted and you are not in the authorized list.")
            return True
        return False

    def _tree(self, path: str, query: str) -> None:
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)$", path)
        if not m or m.group(1) not in self.state.repos:
            return self._error(404, "RepoNotFound", "Repository not found")
        repo = m.group(1)
        if self._auth_error(repo):
            return
        entries = [{"type": "directory", "path": d, "oid": "0" * 40, "size": 0}
                   for d in sorted({p.rsplit("/", 1)[0] for p in self.state.repos[repo] if "/" in p})]
        entries.append({"type": "file", "path": "README.md", "oid": "1" * 40, "size": 12})
        for p, f in self.state.repos[repo].items():
            size = self.state.listed_size.get(p, f.stat().st_size)
            lfs = {"size": size, "pointerSize": 134}
            sha = self.state.listed_sha.get(p) or self.state.sha256(f)
            if sha:
                lfs["oid"] = sha
            entries.append({"type": "file", "path": p, "oid": "2" * 40, "size": size, "lfs": lfs})
        for p, size in self.state.extra_files.get(repo, {}).items():
            entries.append({"type": "file", "path": p, "oid": "4" * 40, "size": size})
        headers = {}
        if self.state.page_size:
            q = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
            start = int(q.get("cursor", "0"))
            page = entries[start : start + self.state.page_size]
            if start + self.state.page_size < len(entries):
                nxt = f"http://{self.headers['Host']}{path}?recursive=true&cursor={start + self.state.page_size}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            entries = page
        self._send(200, json.dumps(entries).encode(), headers)

    def _resolve(self, repo: str, file: str) -> None:
        if self.state.rate_limit is not None:
            return self._error(429, "RateLimited", "Too many requests", {"Retry-After": self.state.rate_limit})
        if repo not in self.state.repos:
            return self._error(401 if repo.startswith("private") else 404, "RepoNotFound", "Repository not found")
        if self._auth_error(repo):
            return
        f = self.state.repos[repo].get(file)
        if f is None:
            return self._error(404, "EntryNotFound", f"{file} does not exist on \"main\"")
        etag = self.state.etag(f)
        h = {"ETag": etag, "X-Linked-Etag": etag, "X-Linked-Size": str(f.stat().st_size)}
        if self.headers.get("If-None-Match") == etag:
            return self._send(304, b"", h)
        token = hashlib.sha256(str(f).encode()).hexdigest()[:24]
        base = self.state.storage_base
        h["Location"] = f"{base}/storage/{token}/{f.name}?X-Amz-Signature=abc" if base else f"/storage/{token}/{f.name}?X-Amz-Signature=abc"
        self._send(302, b"", h)

    def _storage(self, path: str) -> None:
        token = path.split("/")[2]
        f = self.state.find(token) or self.server.other_files.get(token)
        if f is None:
            return self._error(404, "EntryNotFound", "no such blob")
        if self.state.storage_status is not None:
            st = self.state.storage_status
            return self._error(st, "Error", f"storage says {st}", {"Retry-After": "7"} if st == 429 else None)
        size = f.stat().st_size
        rng = self.headers.get("Range")
        start, end = 0, size - 1
        status = 200
        if rng and not self.state.ignore_range:
            m = _RANGE.match(rng)
            if not m:
                return self._send(416, b"", {"Content-Range": f"bytes */{size}"})
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start >= size or end < start:
                return self._send(416, b"", {"Content-Range": f"bytes */{size}"}, ctype="text/plain")
            status = 206
        e = self._entry(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("ETag", self.state.etag(f))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        cut = None
        with self.state.lock:
            if self.state.cut_after is not None and self.state.cuts > 0:
                self.state.cuts -= 1
                cut = self.state.cut_after
        with open(f, "rb") as fh:
            fh.seek(start)
            left = end - start + 1
            try:
                while left > 0:
                    if cut is not None and e.sent >= cut:
                        self.close_connection = True
                        self.wfile.flush()
                        self.connection.shutdown(2)  # the connection is cut mid-body
                        return
                    chunk = fh.read(min(16384, left, (cut - e.sent) if cut is not None else left))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    e.sent += len(chunk)
                    left -= len(chunk)
                    if self.state.slow_chunk_delay:
                        time.sleep(self.state.slow_chunk_delay)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: HubState):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.other_files: dict[str, Path] = {}


class Hub:
    """The running stand-in: ``url`` is its base, ``state`` what it serves and how, ``log`` what it was asked."""

    def __init__(self, state: HubState | None = None):
        self.state = state or HubState()
        self.server = _Server(self.state)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, repo: str, path: str, file: Path) -> None:
        self.state.repos.setdefault(repo, {})[path] = file

    @property
    def log(self) -> list[Logged]:
        return self.state.log

    def storage_log(self) -> list[Logged]:
        return [e for e in self.state.log if e.path.startswith("/storage/")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_raw(handler) -> tuple[str, callable]:
    """A bare TCP server on 127.0.0.1 whose connections go to ``handler(conn)`` (for answers http.server
    cannot give: lies, garbage, half answers); returns ``(base URL, stop)``."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()

    def loop():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            threading.Thread(target=_run, args=(conn,), daemon=True).start()

    def _run(conn):
        try:
            conn.settimeout(5)
            handler(conn)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    threading.Thread(target=loop, daemon=True).start()

    def close():
        stop.set()
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", close


def read_request(conn) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


__all__ = ["Hub", "HubState", "Logged", "serve_raw", "read_request"]
