"""Fuzz the remote door: whatever a server answers, reading a header over HTTP ends in a header or a typed error
(``app.errors.LayerdeckError``), never a traceback, a hang, or more bytes read than the header needs.

A raw TCP server on 127.0.0.1 answers each request from a script drawn by hypothesis, built on a real
GGUF file (the factory's tiny MoE model with a 30,000-token vocabulary, so its header takes several
requests): per request a status (206, 200, 30x, 304, 4xx, 5xx, nonsense), a ``Content-Range`` (right, wrong
start, wrong end, a total that lies, ``*``, garbage, missing), a ``Content-Length`` (right, short, long,
missing, garbage, negative), a body (the file's bytes for the range asked, cut short, bytes flipped,
garbage, an HTML page) and whether the connection closes early; redirects point back at themselves or
elsewhere on the same server. Every read must finish within :data:`TIME_BUDGET_S` (the watchdog ends a
hang) and :data:`MEMORY_BUDGET_BYTES`; a header that comes back from the file's own bytes must be the file's
header, and the bytes read never exceed the bytes offered, nor the header plus one read-ahead step.
"""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.errors import LayerdeckError
from app.model.gguf_reader import read_header
from app.remote import RemoteOptions, read_headers
from app.remote.header import READ_AHEAD
from tests.fuzz.harness import within_budget
from tests.gguf_factory import write_tiny_model
from tests.remote.hub_server import read_request, serve_raw

_RANGE = re.compile(rb"Range: bytes=(\d+)-(\d+)", re.IGNORECASE)

STATUS = st.sampled_from([206, 206, 206, 206, 200, 302, 304, 401, 403, 404, 416, 429, 500, 999])
CONTENT_RANGE = st.sampled_from(["right", "right", "right", "start", "end", "total-small", "total-big", "star",
                                 "garbage", "missing"])
CONTENT_LENGTH = st.sampled_from(["right", "right", "right", "short", "long", "missing", "garbage", "negative"])
BODY = st.sampled_from(["right", "right", "right", "cut", "flip", "garbage", "html", "empty"])
ANSWER = st.fixed_dictionaries({
    "status": STATUS, "range": CONTENT_RANGE, "length": CONTENT_LENGTH, "body": BODY,
    "close_early": st.booleans(), "seed": st.integers(0, 2**16),
})


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = write_tiny_model("qwen3moe", tmp_path_factory.mktemp("fuzz-remote") / "m.gguf", vocab_extra=30000)
    return path


class Script:
    """The answers of one example, one per request (the last repeats); what was sent is counted."""

    def __init__(self):
        self.answers: list[dict] = []
        self.i = 0
        self.sent = 0
        self.lock = threading.Lock()


def _answer(conn, script: Script, data: bytes) -> None:
    req = read_request(conn)
    if not req:
        return
    with script.lock:
        a = script.answers[min(script.i, len(script.answers) - 1)]
        script.i += 1
    m = _RANGE.search(req)
    start, end = (int(m.group(1)), int(m.group(2))) if m else (0, len(data) - 1)
    end = min(end, len(data) - 1)
    body = data[start : end + 1] if a["status"] == 206 else data
    rng = __import__("random").Random(a["seed"])
    if a["body"] == "cut":
        body = body[: rng.randrange(len(body) + 1)]
    elif a["body"] == "flip" and body:
        b = bytearray(body)
        for _ in range(4):
            b[rng.randrange(len(b))] ^= 0xFF
        body = bytes(b)
    elif a["body"] == "garbage":
        body = rng.randbytes(min(len(body), 4096))
    elif a["body"] == "html":
        body = b"<html><body>Error</body></html>"
    elif a["body"] == "empty":
        body = b""
    status = a["status"]
    lines = [f"HTTP/1.1 {status} Whatever"]
    if status in (301, 302, 307):
        lines.append("Location: " + rng.choice(["/m.gguf", "/other.gguf", "http://127.0.0.1:1/x", "", "//"]))
    if status == 429:
        lines.append("Retry-After: " + rng.choice(["5", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"]))
    total = len(data)
    cr = {
        "right": f"bytes {start}-{start + len(body) - 1}/{total}",
        "start": f"bytes {start + 7}-{end}/{total}",
        "end": f"bytes {start}-{end + 1000}/{total}",
        "total-small": f"bytes {start}-{end}/{max(1, total // 3)}",
        "total-big": f"bytes {start}-{end}/{total * 1000}",
        "star": f"bytes {start}-{end}/*",
        "garbage": "lots of bytes",
        "missing": None,
    }[a["range"]]
    if cr is not None:
        lines.append(f"Content-Range: {cr}")
    cl = {"right": str(len(body)), "short": str(max(0, len(body) - 10)), "long": str(len(body) + 1000),
          "missing": None, "garbage": "many", "negative": "-5"}[a["length"]]
    if cl is not None:
        lines.append(f"Content-Length: {cl}")
    lines.append("ETag: \"e1\"")
    lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if a["close_early"]:
        body = body[: len(body) // 2]
    with script.lock:  # counted before sending: the client closes a 200 answer as soon as it has the header
        script.sent += len(body)
    conn.sendall(head + body)


@pytest.fixture(scope="module")
def server(model_file):
    data = model_file.read_bytes()
    script = Script()
    url, stop = serve_raw(lambda conn: _answer(conn, script, data))
    yield url, script
    stop()


GOOD = {"status": 206, "range": "right", "length": "right", "body": "right", "close_early": False, "seed": 0}


@given(answers=st.lists(ANSWER, min_size=1, max_size=6))
@example(answers=[GOOD])
@example(answers=[{**GOOD, "status": 200}])
def test_any_server_answer_ends_in_a_header_or_a_typed_error(server, model_file, answers, tmp_path_factory):
    url, script = server
    with script.lock:
        script.answers, script.i, script.sent = answers, 0, 0
    opts = RemoteOptions(token="", timeout=1.0, deadline=3.0, use_cache=False)
    with within_budget("remote header read"):
        try:
            read = read_headers(f"{url}/m.gguf", opts)
        except LayerdeckError as exc:
            assert str(exc)
            return
    full = read_header(model_file)
    h = read.headers[0]
    used = answers[: max(1, script.i)] if script.i < len(answers) else answers
    if all(a["body"] == "right" for a in used):
        # the bytes were the file's own: the header is too (a lie about ranges or sizes that slipped through
        # would show here); flipped or garbage bytes that still parse are not detectable without a checksum
        assert h.header.tensors == full.tensors
        assert h.header.metadata.keys() == full.metadata.keys()
    assert h.bytes_read <= script.sent
    assert h.bytes_read <= full.header_size + READ_AHEAD  # never the whole file, whatever was offered


def test_the_fuzz_file_needs_several_requests(server, model_file):
    """The well-behaved script reads the header in more than one request (so the growth is exercised)."""
    url, script = server
    with script.lock:
        script.answers, script.i, script.sent = [GOOD], 0, 0
    read = read_headers(f"{url}/m.gguf", RemoteOptions(token="", use_cache=False))
    assert read.headers[0].requests >= 2
    assert read.headers[0].header.tensors == read_header(model_file).tensors
