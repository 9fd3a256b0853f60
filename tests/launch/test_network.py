"""The addresses shown for a server opened to the local network: usable IPv4 only, the default route's first."""

from __future__ import annotations

import socket

from app.launch import network


class _Udp:
    def __init__(self, addr):
        self.addr = addr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def connect(self, where):
        if self.addr is None:
            raise OSError("network is unreachable")

    def getsockname(self):
        return (self.addr, 40000)


def _fake(monkeypatch, route, host_addrs):
    monkeypatch.setattr(network.socket, "socket", lambda *a: _Udp(route))
    monkeypatch.setattr(network.socket, "getaddrinfo",
                        lambda *a: [(socket.AF_INET, socket.SOCK_DGRAM, 0, "", (x, 0)) for x in host_addrs])


def test_loopback_link_local_and_duplicates_are_left_out(monkeypatch):
    _fake(monkeypatch, "192.168.1.23", ["127.0.1.1", "169.254.3.4", "192.168.1.23", "10.0.0.5", "not-an-ip"])
    assert network.lan_addresses() == ["192.168.1.23", "10.0.0.5"]
    assert network.lan_urls(8080) == "Other devices reach it at http://192.168.1.23:8080, http://10.0.0.5:8080."


def test_no_network_says_so(monkeypatch):
    _fake(monkeypatch, None, ["127.0.0.1"])
    assert network.lan_addresses() == []
    assert "no local-network address" in network.lan_urls(8080)


def test_without_a_fixed_port_it_says_the_port_comes_at_start(monkeypatch):
    _fake(monkeypatch, "10.1.2.3", [])
    assert network.lan_urls(None).startswith("Other devices reach it at http://10.1.2.3 (on the port shown")
