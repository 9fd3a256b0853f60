"""The HTTP client on replayed llama-server answers (captured in tests/data/launch/), and the ring buffers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from app.launch.client import LlamaClient, ServerError, ServerLoading, ServerUnreachable
from app.launch.monitor import Monitor, Ring
from app.launch.process import ServerProcess, State
from tests.launch.helpers import DATA, free_port

LOADING = b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'


class Replay(BaseHTTPRequestHandler):
    """Answers with the captured bytes; ``mode`` switches to loading / no-metrics answers."""

    mode = "ready"
    seen: list = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.mode == "loading":
            return self._send(503, LOADING)
        if self.path == "/health":
            return self._send(200, b'{"status":"ok"}')
        if self.path == "/metrics":
            if self.mode == "no-metrics":
                return self._send(501, b'{"error":{"code":501,"message":"This server does not support metrics '
                                       b'endpoint.","type":"not_supported_error"}}')
            return self._send(200, (DATA / "metrics-after.txt").read_bytes(), "text/plain; version=0.0.4")
        if self.path == "/slots":
            return self._send(200, (DATA / "slots-after.json").read_bytes())
        if self.path == "/props":
            return self._send(200, (DATA / "props.json").read_bytes())
        self._send(404, b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        data = (DATA / "completion-stream.txt").read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in data.split(b"\n\n"):   # event by event, as the server flushes them
            if chunk.strip():
                self.wfile.write(chunk + b"\n\n")
                self.wfile.flush()


@pytest.fixture
def replay():
    Replay.mode = "ready"
    Replay.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_stream_completion_on_a_captured_stream(replay):
    events = [json.loads(line[6:]) for line in (DATA / "completion-stream.txt").read_text().splitlines()
              if line.startswith("data: ")]
    pieces: list[str] = []
    done = LlamaClient(replay, api_key="k").stream_completion("Once upon a time", n_predict=6,
                                                              on_token=pieces.append, seed=2)
    assert done.text == "".join(e["content"] for e in events) and pieces
    assert done.timings.predicted_n == 6 and done.timings.predicted_per_second > 0
    assert done.stop_type == "limit" and done.tokens_predicted == 6
    path, body = Replay.seen[-1]
    assert path == "/completion" and body == {"prompt": "Once upon a time", "n_predict": 6, "stream": True, "seed": 2}


def test_endpoints_and_errors(replay):
    client = LlamaClient(replay, api_key="secret", timeout=5)
    assert client.health().ok
    assert client.metrics().tokens_predicted_total > 4000
    assert client.slots().slots[0].context_used > 4000
    assert "model_path" in client.props()
    assert all(auth == "Bearer secret" for _, auth in Replay.seen)
    Replay.mode = "no-metrics"
    with pytest.raises(ServerError, match="without --metrics"):
        client.metrics()
    Replay.mode = "loading"
    assert client.health().status == "loading"
    with pytest.raises(ServerLoading):
        client.slots()
    dead = LlamaClient(f"http://127.0.0.1:{free_port()}", timeout=1)
    assert dead.health().status == "unreachable"
    with pytest.raises(ServerUnreachable, match="no answer"):
        dead.props()


def test_ring_keeps_the_newest_values_in_order():
    ring = Ring(3)
    assert len(ring.values()) == 0 and np.isnan(ring.last)
    for v in (1, 2, None, 4, 5):
        ring.append(v)
    assert ring.values().tolist() == [pytest.approx(x, nan_ok=True) for x in (float("nan"), 4, 5)]
    assert len(ring) == 3 and ring.last == 5


def test_monitor_without_a_running_server_keeps_series_aligned():
    sp = ServerProcess(["llama-server"], check_rpc=False)
    monitor = Monitor(sp, sampler=None, capacity=4)
    sample = monitor.tick()
    assert sample.state == State.STOPPED and sample.metrics is None
    monitor._record(type(sample)(time=1.0, state=State.READY, device_used_mib={"CUDA0": 100.0}))
    series = monitor.series()
    assert len({len(v) for v in series.values()}) == 1
    assert np.isnan(series["mem:CUDA0"][0]) and series["mem:CUDA0"][1] == 100.0
