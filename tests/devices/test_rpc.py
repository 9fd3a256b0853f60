"""RPC endpoint parsing, TCP probing, error classification and the ggml-rpc-server command."""

from __future__ import annotations

import socket

import pytest

from app.devices.listing import ListingError
from app.devices.rpc import (
    classify_listing_error,
    parse_endpoint,
    probe_rpc_hosts,
    rpc_server_command,
    rpc_server_note,
    server_bind_address,
    tcp_probe,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [("192.168.1.20:50052", "192.168.1.20", 50052), (" gpu-box:1 ", "gpu-box", 1), ("localhost:65535", "localhost", 65535)],
)
def test_parse_endpoint(text, host, port):
    ep = parse_endpoint(text)
    assert (ep.host, ep.port, ep.text) == (host, port, text.strip())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-box", "not host:port"),
        (":50052", "not host:port"),
        ("host:0", "1 to 65535"),
        ("host:70000", "1 to 65535"),
        ("host:50052x", "1 to 65535"),
        ("[::1]:50052", "IPv4 only"),
        ("fe80::1:50052", "IPv4 only"),
        ("a b:1", "space or a comma"),
    ],
)
def test_parse_endpoint_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        parse_endpoint(text)


def test_rpc_server_command_flags():
    assert rpc_server_command("192.168.1.20", 50052) == ["ggml-rpc-server", "-H", "192.168.1.20", "-p", "50052"]
    assert rpc_server_command("0.0.0.0", 6000, devices=["CUDA0", "CUDA1"], threads=8, cache=True) == [
        "ggml-rpc-server", "-H", "0.0.0.0", "-p", "6000", "-d", "CUDA0,CUDA1", "-t", "8", "-c",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"host": "gpu-box"}, "IPv4 address"),
        ({"host": "1.2.3.4", "port": 0}, "port"),
        ({"host": "1.2.3.4", "threads": 0}, "thread count"),
        ({"host": "1.2.3.4", "devices": ["CUDA0,CUDA1"]}, "device name"),
        ({"host": "1.2.3.4", "devices": [""]}, "device name"),
    ],
)
def test_rpc_server_command_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rpc_server_command(**kwargs)


def test_server_note():
    assert "every network interface" in rpc_server_note("0.0.0.0")
    assert "trusted network" in rpc_server_note("192.168.1.20")
    assert rpc_server_note("127.0.0.1") is None


def test_bind_address_for_names_uses_the_resolved_ip_or_all_interfaces():
    assert server_bind_address(parse_endpoint("10.1.2.3:1"), None) == "10.1.2.3"
    assert server_bind_address(parse_endpoint("localhost:1"), "127.0.0.1") == "127.0.0.1"
    assert server_bind_address(parse_endpoint("box:1"), "10.0.0.9") == "10.0.0.9"
    assert server_bind_address(parse_endpoint("box:1"), None) == "0.0.0.0"


def test_tcp_probe_refused_and_ok():
    port = free_port()
    refused = tcp_probe("127.0.0.1", port, timeout=1)
    assert refused.status == "refused"
    assert f"127.0.0.1:{port}" in refused.error
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        ok = tcp_probe("127.0.0.1", listener.getsockname()[1], timeout=1)
    assert ok.status == "ok" and ok.address == "127.0.0.1"


def test_tcp_probe_unresolvable_name():
    result = tcp_probe("no-such-host.invalid", 50052, timeout=1)
    assert result.status == "unreachable"
    assert "resolve" in result.error


@pytest.mark.parametrize(
    ("stderr", "timed_out", "status"),
    [
        ("", True, "no answer"),
        ("ggml-rpc.cpp:547: Failed to connect to 1.2.3.4:5\n", False, "unreachable"),
        ("RPC server version mismatch: 6.1.0\nRPC handshake failed for 1.2.3.4:5\n", False, "incompatible"),
        ("Remote RPC server crashed or returned malformed response\n", False, "not an rpc server"),
        ("error while handling argument \"--rpc\": RPC not supported in this build\n", False, "error"),
        ("something else\n", False, "error"),
    ],
)
def test_classify_listing_error(stderr, timed_out, status):
    err = ListingError("failed", stderr, None if timed_out else 134, timed_out)
    got, message = classify_listing_error(err, "1.2.3.4:5")
    assert got == status
    assert message
    if status == "incompatible":
        assert "6.1.0" in message


def test_probe_without_llama_server_checks_tcp_and_flags_duplicates():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        dead = free_port()
        probe = probe_rpc_hosts(
            [f"127.0.0.1:{port}", f"localhost:{port}", f"127.0.0.1:{port}", f"127.0.0.1:{dead}", "nonsense"],
            server=None,
            connect_timeout=1,
        )
    statuses = [(h.endpoint, h.status) for h in probe.hosts]
    assert statuses == [
        (f"127.0.0.1:{port}", "not probed"),
        (f"localhost:{port}", "duplicate"),
        (f"127.0.0.1:{port}", "duplicate"),
        (f"127.0.0.1:{dead}", "refused"),
        ("nonsense", "invalid"),
    ]
    assert "would hang" in probe.hosts[1].error  # different spelling, same single-client server
    assert "listed twice" in probe.hosts[2].error
    assert probe.hosts[3].server_command == ("ggml-rpc-server", "-H", "127.0.0.1", "-p", str(dead))
    assert probe.hosts[4].server_command == ()
    # the two hosts whose devices are unknown (not listed, refused) each stand for one assumed device, numbered
    # like llama.cpp across the --rpc entries; the duplicates and the invalid entry give none
    assert [(d.listed.name, d.endpoint, d.local_index, d.assumed) for d in probe.devices] == [
        ("RPC0", f"127.0.0.1:{port}", 0, True),
        ("RPC1", f"127.0.0.1:{dead}", 0, True),
    ]
    assert [e.source for e in probe.errors] == ["--rpc"]
    assert f"RPC0 = 127.0.0.1:{port} (llama-server was not found to list it)" in probe.errors[0].message
    assert f"RPC1 = 127.0.0.1:{dead} (refused)" in probe.errors[0].message


def test_hosts_are_numbered_in_rpc_order_when_the_combined_listing_fails(monkeypatch):
    """llama.cpp numbers RPC devices with one counter across --rpc; Layerdeck does the same when it must."""
    from app.devices import rpc
    from app.devices.listing import ListedDevice, Listing

    a, b = "127.0.0.1:1111", "127.0.0.1:2222"
    listings = {
        0: Listing((ListedDevice("RPC0", a, 1000, 900), ListedDevice("RPC1", a, 2000, 1900))),
        1: Listing((ListedDevice("RPC0", b, 3000, 2900),)),
    }

    def fail(*args, **kwargs):
        raise ListingError("failed", "boom", 1, False)

    monkeypatch.setattr(rpc, "run_list_devices", fail)
    out, combined, error = rpc._name_devices("llama-server", [a, b], listings, [0, 1], None, 1.0)
    assert combined is None and "numbered by Layerdeck" in error
    assert [(d.listed.name, d.endpoint, d.local_index, d.listed.total_mib, d.name_from_llama) for d in out] == [
        ("RPC0", a, 0, 1000, False), ("RPC1", a, 1, 2000, False), ("RPC2", b, 0, 3000, False)]
