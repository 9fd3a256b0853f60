"""This machine's addresses on the local network, for a server the user opened to it (``--host 0.0.0.0``)."""

from __future__ import annotations

import ipaddress
import socket

#: TEST-NET-1 (RFC 5737): connecting a UDP socket to it only picks the outgoing interface; nothing is sent.
_PROBE = ("192.0.2.1", 9)


def _usable(addr: str) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return ip.version == 4 and not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def lan_addresses() -> list[str]:
    """IPv4 addresses other devices on the network can reach this machine by, the default route's first;
    empty when the machine has none (no network, loopback only)."""
    found: list[str] = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(_PROBE)
            found.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET, socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        infos = []
    found += [str(info[4][0]) for info in infos]
    out: list[str] = []
    for addr in found:
        if _usable(addr) and addr not in out:
            out.append(addr)
    return out


def lan_urls(port: int | None) -> str:
    """A sentence naming where other devices reach the server, or saying that no address was found."""
    addrs = lan_addresses()
    if not addrs:
        return "This machine has no local-network address right now, so no other device can reach the server."
    where = ", ".join(f"http://{a}:{port}" if port else f"http://{a}" for a in addrs[:3])
    tail = "" if port else " (on the port shown when the server starts; set a fixed port to keep it)"
    return f"Other devices reach it at {where}{tail}."
