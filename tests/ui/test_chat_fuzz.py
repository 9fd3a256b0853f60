"""Fuzz the chat's input door: whatever a server streams back on /v1/chat/completions (a local HTTP server on
127.0.0.1 stands in for a broken or hostile one) ends in a reply or a typed error within the fuzz budget."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import LayerdeckError
from app.launch.chat import ChatMessage, ChatParams, ChatReply, parse_stop, stream_chat
from app.launch.client import LlamaClient
from tests.fuzz.harness import within_budget

FUZZ = settings(max_examples=40, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])


class _Handler(BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(type(self).status)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _event(delta=None, finish=None, timings=None, raw=None):
    if raw is not None:
        return raw
    ev = {"choices": [{"delta": delta or {}, "finish_reason": finish}]}
    if timings is not None:
        ev["timings"] = timings
    return "data: " + json.dumps(ev)


JUNK = st.one_of(
    st.builds(_event, st.fixed_dictionaries({}, optional={"content": st.text(max_size=20) | st.none() | st.integers(),
                                                           "reasoning_content": st.text(max_size=5)}),
              st.sampled_from([None, "stop", "length", 7]),
              st.none() | st.fixed_dictionaries({"predicted_n": st.integers(-5, 10**6) | st.text(max_size=3),
                                                 "predicted_per_second": st.floats() | st.none()})),
    st.sampled_from(["data: [DONE]", "data: {", "data: []", "data: null", 'data: {"error": {"message": "boom"}}',
                     'data: {"choices": []}', 'data: {"choices": [5]}', "event: x", ": ping", "", "garbage"]),
    st.text(max_size=40).map(lambda t: "data: " + t),
)


@FUZZ
@given(st.lists(JUNK, max_size=15), st.sampled_from([200, 200, 200, 400, 401, 500, 503]), st.binary(max_size=30))
def test_whatever_the_server_streams_ends_in_a_reply_or_a_typed_error(server, events, status, tail):
    _Handler.body = ("\n\n".join(events) + "\n\n").encode("utf-8", "surrogatepass") + tail
    _Handler.status = status
    client = LlamaClient(f"http://127.0.0.1:{server.server_address[1]}", timeout=5)
    with within_budget("chat stream"):
        try:
            reply = stream_chat(client, [ChatMessage("user", "hi")], ChatParams(max_tokens=4), timeout=5)
        except LayerdeckError as exc:
            assert str(exc)
            return
    assert isinstance(reply, ChatReply) and isinstance(reply.text, str)
    assert reply.timings.predicted_per_second >= 0 or reply.timings.predicted_per_second != reply.timings.predicted_per_second


@FUZZ
@given(st.text(max_size=200))
def test_stop_strings_box(text):
    stops = parse_stop(text)
    assert len(stops) <= 16 and all(s for s in stops)
    ChatParams(stop=stops).to_json()
