"""The RPC protocol probe (app/devices/rpc_protocol.py): real ggml-rpc-servers, and hostile or silent peers.

A real CPU server answers alignment 32 and no largest buffer (its memory as the listing gives it); detection
attaches the figures to the RPC lanes. A peer that is not a ggml-rpc-server (wrong sizes, silence, a closed
connection, absurd counts or random bytes) ends in a typed error within the timeout, never a hang or a guess.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.devices.detect import detect
from app.devices.rpc_protocol import CONN_CAPS_SIZE, RpcProtocolError, query_limits
from app.errors import DetectError

MiB = 1 << 20


@pytest.mark.llama
def test_a_real_cpu_server_answers_its_limits(rpc_servers, llama_bin):
    servers = rpc_servers(2, memory_mib=3000)
    for s in servers:
        host, port = s.endpoint.rsplit(":", 1)
        limits = query_limits(host, int(port))
        assert limits.version[0] == 7 and len(limits.devices) == 1
        (dev,) = limits.devices
        assert (dev.index, dev.alignment, dev.max_size) == (0, 32, 0)
        assert dev.total == 3000 * MiB  # the memory the server reports (here: its shim's)
    result = detect(llama_bin, rpc=[s.endpoint for s in servers], cuda_probe=None, amd=False)
    rpc = [d for d in result.devices if d.rpc_endpoint]
    assert [d.name for d in rpc] == ["RPC0", "RPC1"]
    assert all(d.buffer_alignment == 32 and d.max_buffer == 0 and "protocol 7.0" in d.sources["limits"] for d in rpc)
    assert not [e for e in result.errors if e.source == "RPC"]


class Peer:
    """A TCP peer on loopback that answers the first request with ``reply`` (bytes), then reads on until the
    client gives up (``drain``), closes (``close``) or says nothing more for 3 s (``silent``)."""

    def __init__(self, reply: bytes, then: str = "drain") -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.then = then
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(1 + 8 + CONN_CAPS_SIZE)
                conn.sendall(self.reply)
                if self.then == "silent":
                    time.sleep(3)
                elif self.then == "drain":
                    while conn.recv(4096):  # drain until the client gives up
                        pass
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def _hello(major=7, minor=0) -> bytes:
    return struct.pack("<Q", 4 + CONN_CAPS_SIZE) + bytes([major, minor, 0, 0]) + bytes(CONN_CAPS_SIZE)


@pytest.mark.parametrize("reply,needle", [
    (b"", "closed the connection"),
    (struct.pack("<Q", 3) + b"abc", "answered command 14 with 3 bytes"),
    (_hello(major=3), "speaks RPC protocol 3.0.0"),
    (_hello() + struct.pack("<QI", 4, 0), "reports 0 devices"),
    (_hello() + struct.pack("<QI", 4, 100000), "reports 100000 devices"),
    (_hello() + struct.pack("<QI", 4, 1) + struct.pack("<QQ", 8, 24), "alignment of 24"),
], ids=["closed", "short-hello", "old-major", "no-devices", "absurd-count", "odd-alignment"])
def test_a_peer_that_is_not_a_ggml_rpc_server_is_a_typed_error(reply, needle):
    tail = struct.pack("<QQ", 8, 0) + struct.pack("<QQQ", 16, 0, 0) if needle.startswith("alignment") else b""
    peer = Peer(reply + tail, then="close" if not reply else "drain")
    try:
        with pytest.raises(RpcProtocolError) as info:
            query_limits("127.0.0.1", peer.port, timeout=2)
        assert needle in info.value.message, info.value.message
    finally:
        peer.close()


def test_a_busy_server_times_out_and_detection_says_so(monkeypatch):
    peer = Peer(b"", then="silent")
    t0 = time.monotonic()
    try:
        with pytest.raises(RpcProtocolError, match="did not answer in time"):
            query_limits("127.0.0.1", peer.port, timeout=0.5)
    finally:
        peer.close()
    assert time.monotonic() - t0 < 2


@settings(max_examples=40, deadline=None, derandomize=True)
@given(reply=st.one_of(st.binary(max_size=200), st.builds(lambda tail: _hello() + tail, st.binary(max_size=120))))
def test_fuzz_any_answer_ends_in_limits_or_a_typed_error(reply):
    peer = Peer(reply, then="close")
    t0 = time.monotonic()
    try:
        try:
            limits = query_limits("127.0.0.1", peer.port, timeout=1)
        except (DetectError, OSError):
            pass
        else:  # only a well-formed conversation gives figures, and they are sane
            assert all(d.alignment and not d.alignment & (d.alignment - 1) for d in limits.devices)
    finally:
        peer.close()
    assert time.monotonic() - t0 < 2.5


def test_unknown_limits_are_said_in_the_detection_errors(tmp_path):
    """A listed RPC device whose server does not answer the probe: its limits are unknown, and that is said."""
    from app.devices.detect import _with_rpc_limits
    from app.devices.records import Device, DeviceKind

    def refuse(host, port):
        raise RpcProtocolError(f"the RPC server {host}:{port} did not answer in time (busy serving another llama.cpp?)")

    d = Device("RPC0", DeviceKind.RPC, "127.0.0.1:1", rpc_endpoint="127.0.0.1:1", rpc_device_index=0)
    errors: list = []
    (out,) = _with_rpc_limits([d], refuse, errors)
    assert out.buffer_alignment == 0 and out.max_buffer == 0
    assert len(errors) == 1 and "buffer limits of RPC0 (127.0.0.1:1) unknown" in errors[0].message
