"""Probe llama.cpp RPC hosts one by one, and build the ``ggml-rpc-server`` command.

llama.cpp aborts the whole process when one ``--rpc`` endpoint cannot be
reached (``GGML_ABORT("Failed to connect to %s")`` in
``ggml/src/ggml-rpc/ggml-rpc.cpp`` ``rpc_dispatcher::start``), so each host
is checked on its own first: a TCP connect with a short timeout, then
``llama-server --rpc that_one --list-devices``.  The hosts that answered are
then listed together, which gives the names llama.cpp will use: one global
counter ``RPC0, RPC1, ...`` across the ``--rpc`` entries in order
(``ggml_backend_rpc_add_server``), each described by its endpoint string.

The client connects over IPv4 only (``socket_t::connect`` uses ``AF_INET``
and ``gethostbyname``) and the server binds an IPv4 literal (``inet_addr``
in ``socket_t::create_server``, ``ggml/src/ggml-rpc/transport.cpp``).
``ggml-rpc-server`` serves one client at a time, so a server busy with
another llama.cpp accepts the TCP connection but never answers.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import socket
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from app.devices.listing import ListedDevice, Listing, ListingError, last_error_line, run_list_devices
from app.devices.records import RpcHostStatus, SourceError
from app.errors import DetectError

log = logging.getLogger(__name__)

DEFAULT_PORT = 50052  # tools/rpc/rpc-server.cpp rpc_server_params
CONNECT_TIMEOUT_S = 2.0
PROBE_TIMEOUT_S = 30.0
RPC_SERVER_PROGRAM = "ggml-rpc-server"


class EndpointError(DetectError, ValueError):
    """An ``--rpc`` entry is not ``host:port`` as llama.cpp reads it; the message says which and what to give."""


@dataclass(frozen=True)
class Endpoint:
    """A ``host:port`` given to ``--rpc``; ``text`` is kept verbatim (llama.cpp names by it)."""

    text: str
    host: str
    port: int


_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: str's \d also matches digits llama.cpp's std::stoi refuses
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_HOST = re.compile(r"[A-Za-z0-9._-]+")


def parse_endpoint(text: str) -> Endpoint:
    """Parse ``host:port`` the way llama.cpp does, but strictly.

    Raises :class:`EndpointError` (a ``ValueError``) with a message the user can act on.
    """
    value = text.strip()
    example = f"for example 192.168.1.20:{DEFAULT_PORT}"
    if not value:
        raise EndpointError(f"{text!r} is empty: give host:port ({example})")
    if _SCHEME.match(value):
        raise EndpointError(f"{text!r}: give host:port without a scheme ({example}); --rpc takes no URL")
    if value.startswith("["):
        raise EndpointError(f"{text!r}: llama.cpp RPC connects over IPv4 only; give an IPv4 address or a host name")
    host, sep, port_text = value.partition(":")
    if not sep or not host:
        raise EndpointError(f"{text!r} is not host:port ({example})")
    if ":" in port_text:
        raise EndpointError(f"{text!r}: llama.cpp RPC connects over IPv4 only; IPv6 addresses are not supported")
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) <= 65535:
        raise EndpointError(f"{text!r}: the port must be a number from 1 to 65535")
    if any(c.isspace() for c in host) or "," in host:
        raise EndpointError(f"{text!r}: the host name contains a space or a comma")
    if not _HOST.fullmatch(host) or len(host) > 253 or any(len(label) > 63 for label in host.split(".")):
        raise EndpointError(
            f"{text!r}: the host must be an IPv4 address or a host name of ASCII letters, digits, '.', '-' and '_' "
            "(at most 63 characters between dots)"
        )
    return Endpoint(value, host, int(port_text))


def rpc_server_command(
    host: str,
    port: int = DEFAULT_PORT,
    devices: Sequence[str] | None = None,
    threads: int | None = None,
    cache: bool = False,
    program: str = RPC_SERVER_PROGRAM,
) -> list[str]:
    """The ``ggml-rpc-server`` command to run on the remote machine (flags of ``tools/rpc/rpc-server.cpp``).

    ``host`` is the IPv4 address the server binds (``-H``; it must be a
    literal, the server uses ``inet_addr``), ``devices`` restricts it to some
    of its devices (``-d CUDA0,CUDA1``; default: all non-CPU devices, else
    the CPU), ``threads`` sets CPU threads (``-t``), ``cache`` stores received
    tensors in ``$LLAMA_CACHE/rpc`` (``-c``).  See :func:`rpc_server_note`
    for the warning to show next to it.
    """
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(
            f"ggml-rpc-server binds an IPv4 address (such as 192.168.1.20, or 0.0.0.0 for every interface), "
            f"not {host!r}"
        ) from None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
        raise ValueError(f"the port must be a number from 1 to 65535, not {port!r}")
    cmd = [program, "-H", host, "-p", str(port)]
    if devices:
        names = [str(d).strip() for d in devices]
        bad = [n for n in names if not n or re.search(r"[,/\s]", n)]
        if bad:
            raise ValueError(f"invalid device name(s) for -d: {bad!r} (use names such as CUDA0)")
        cmd += ["-d", ",".join(names)]
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0:
            raise ValueError(f"the thread count must be a positive whole number, not {threads!r}")
        cmd += ["-t", str(threads)]
    if cache:
        cmd.append("-c")
    return cmd


def rpc_server_note(host: str) -> str | None:
    """What to tell the user about the ``-H`` address (the server itself warns for anything but 127.0.0.1)."""
    if host == "0.0.0.0":
        return (
            "-H 0.0.0.0 exposes the RPC server on every network interface. It has no authentication or "
            "encryption: anyone who can reach the port can use this machine's GPUs and send it data. Prefer the "
            "address of the interface facing the llama.cpp machine, and only on a trusted network."
        )
    if host.startswith("127."):
        return None
    return (
        f"The RPC server will accept connections on {host}. It has no authentication or encryption: "
        "use it only on a trusted network."
    )


def server_bind_address(endpoint: Endpoint, resolved: str | None) -> str:
    """The ``-H`` to suggest: the endpoint's IPv4 literal, else its resolved address, else 0.0.0.0."""
    try:
        ipaddress.IPv4Address(endpoint.host)
        return endpoint.host
    except ValueError:
        pass
    if endpoint.host == "localhost":
        return "127.0.0.1"
    return resolved or "0.0.0.0"


@dataclass(frozen=True)
class TcpProbe:
    status: str  # "ok", "unreachable", "refused", "timed out"
    error: str | None = None
    address: str | None = None  # resolved IPv4


def tcp_probe(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> TcpProbe:
    """Open and close a TCP connection to ``host:port`` over IPv4, like the llama.cpp client."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return TcpProbe("unreachable", f"cannot resolve host name {host!r} to an IPv4 address ({exc.strerror})")
    except (UnicodeError, ValueError, OSError) as exc:  # an empty label ("a..b"), a NUL: the resolver refuses it
        return TcpProbe("unreachable", f"cannot resolve host name {host!r} to an IPv4 address ({exc})")
    if not infos:
        return TcpProbe("unreachable", f"host name {host!r} has no IPv4 address")
    address = str(infos[0][4][0])  # an AF_INET sockaddr is (host, port): the host is already a str
    try:
        with socket.create_connection((address, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        return TcpProbe(
            "refused",
            f"connection refused: nothing listens on {address}:{port}. Start ggml-rpc-server there "
            f"(see the command below), and check its -H address and -p port",
            address,
        )
    except TimeoutError:
        return TcpProbe(
            "timed out",
            f"no answer from {address}:{port} within {timeout:g} s: the host is down, or a firewall drops the port",
            address,
        )
    except OSError as exc:
        if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
            return TcpProbe("unreachable", f"{address}:{port} is unreachable ({exc.strerror})", address)
        return TcpProbe("unreachable", f"cannot connect to {address}:{port} ({exc.strerror or exc})", address)
    return TcpProbe("ok", None, address)


def classify_listing_error(err: ListingError, endpoint: str) -> tuple[str, str]:
    """Map a failed ``--rpc endpoint --list-devices`` run to (status, message)."""
    text = err.stderr
    if err.timed_out:
        return "no answer", (
            f"{endpoint} accepted the connection but did not answer the RPC handshake: ggml-rpc-server serves "
            "one client at a time, so it may be busy with another llama.cpp process, or the port belongs to "
            "another program"
        )
    if "RPC not supported" in text or "failed to find RPC backend" in text:
        return "error", "this llama-server was built without RPC support (rebuild with -DGGML_RPC=ON)"
    m = re.search(r"RPC server version mismatch: ([\d.]+)", text)
    if m:
        return "incompatible", (
            f"{endpoint} runs ggml-rpc-server protocol {m.group(1)}, which this llama-server does not speak: "
            "build both from the same llama.cpp version"
        )
    if "Failed to connect to" in text or "Cannot resolve host" in text:
        return "unreachable", f"llama-server could not connect to {endpoint} ({last_error_line(text)})"
    if "malformed response" in text or "RPC handshake failed" in text:
        return "not an rpc server", (
            f"{endpoint} answered, but not with the ggml RPC protocol: another program uses this port, "
            "or the RPC server crashed"
        )
    return "error", str(err)


@dataclass(frozen=True)
class RpcDevice:
    """An RPC device as llama.cpp lists it, tied to its host."""

    listed: ListedDevice
    endpoint: str
    local_index: int  # index on that server (buffer type RPC<local_index>[endpoint])
    name_from_llama: bool  # False when numbered here (the combined listing failed, or a host is assumed)
    assumed: bool = False  # True: the host was not listed; one device of unknown memory stands in for it


@dataclass(frozen=True)
class RpcProbe:
    """Per-host statuses plus the devices of the hosts that answered."""

    hosts: tuple[RpcHostStatus, ...]
    devices: tuple[RpcDevice, ...] = ()
    listing: Listing | None = None  # a listing that includes the local devices (any successful run)
    errors: tuple[SourceError, ...] = field(default=())


def probe_rpc_hosts(
    endpoints: Sequence[str],
    server: str | Path | None,
    env: Mapping[str, str] | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    timeout: float = PROBE_TIMEOUT_S,
) -> RpcProbe:
    """Check every endpoint separately, then list the reachable ones together.

    ``server`` is the ``llama-server`` path; without it only the TCP check is
    made (status ``not probed``).  Never raises for a host problem: each host
    gets a status and an error message.
    """
    parsed: list[tuple[str, Endpoint | None, str | None]] = []
    for text in endpoints:
        try:
            parsed.append((text, parse_endpoint(text), None))
        except EndpointError as exc:
            parsed.append((text, None, str(exc)))
    # The verbatim host:port of each entry that parsed: only those get a TCP probe and can reach status "ok".
    valid = {i: ep.text for i, (_, ep, _) in enumerate(parsed) if ep is not None}

    with ThreadPoolExecutor(max_workers=8) as pool:
        tcp = list(pool.map(lambda p: tcp_probe(p[1].host, p[1].port, connect_timeout) if p[1] else None, parsed))

    status: dict[int, tuple[str, str | None]] = {}
    seen: dict[tuple[str, int], str] = {}
    for i, ((_text, ep, perr), probe) in enumerate(zip(parsed, tcp)):
        if ep is None:
            status[i] = ("invalid", perr)
            continue
        assert probe is not None  # tcp_probe ran for every entry that parsed
        key = (probe.address or ep.host, ep.port)
        if key in seen:
            if seen[key] == ep.text:
                why = f"{ep.text} is listed twice: llama.cpp connects to it once"
            else:
                why = (
                    f"same server as {seen[key]}: llama.cpp would open a second connection to it, and "
                    "ggml-rpc-server serves one client at a time, so llama.cpp would hang"
                )
            status[i] = ("duplicate", why)
            continue
        seen[key] = ep.text
        status[i] = (probe.status, probe.error)

    errors: list[SourceError] = []
    listings: dict[int, Listing] = {}
    if server is None:
        for i, (st, _) in status.items():
            if st == "ok":
                status[i] = ("not probed", "reachable over TCP; llama-server is not available to list its devices")
    else:
        todo = [i for i, (st, _) in status.items() if st == "ok"]

        def run_one(i: int):
            try:
                return i, run_list_devices(server, [valid[i]], env, timeout), None
            except ListingError as exc:
                return i, None, exc

        with ThreadPoolExecutor(max_workers=8) as pool:
            for i, listing, failure in pool.map(run_one, todo):
                if listing is not None:
                    listings[i] = listing
                else:
                    status[i] = classify_listing_error(failure, valid[i])

    ok = [i for i in range(len(parsed)) if i in listings]
    unknown = [i for i in range(len(parsed)) if status[i][0] not in ("ok", "invalid", "duplicate")]
    combined: Listing | None = None
    if unknown:
        # llama.cpp numbers RPC devices with one counter across every --rpc entry, so a host whose devices are
        # unknown changes the names of the hosts after it: number them all here, one assumed device per such host.
        devices = _numbered(
            [i for i in range(len(parsed)) if status[i][0] not in ("invalid", "duplicate")], valid, listings
        )
        errors.append(SourceError("--rpc", _assumed_note(devices, unknown, valid, status)))
        log.info("RPC devices assumed: %s", errors[-1].message)
    else:
        devices, combined, combined_error = _name_devices(server, [valid[i] for i in ok], listings, ok, env, timeout)
        if combined_error:
            errors.append(SourceError("llama.cpp --rpc (all hosts)", combined_error))

    hosts = []
    for i, (text, ep, _) in enumerate(parsed):
        st, err = status[i]
        names = tuple(d.listed.name for d in devices if st == "ok" and d.endpoint == text.strip())
        if st == "ok" and not names:
            err = "the server reported no devices"
        command: tuple[str, ...] = ()
        note = None
        if ep is not None:
            probe = tcp[i]
            bind = server_bind_address(ep, probe.address if probe else None)
            command = tuple(rpc_server_command(bind, ep.port))
            note = rpc_server_note(bind)
        hosts.append(
            RpcHostStatus(text, ep.host if ep else None, ep.port if ep else None, st, err, names, command, note)
        )
    any_listing = combined or next(iter(listings.values()), None)
    return RpcProbe(tuple(hosts), tuple(devices), any_listing, tuple(errors))


def _name_devices(
    server: str | Path | None,
    texts: Sequence[str],
    listings: Mapping[int, Listing],
    order: Sequence[int],
    env: Mapping[str, str] | None,
    timeout: float,
) -> tuple[list[RpcDevice], Listing | None, str | None]:
    """List all answering hosts together for llama.cpp's own names; number them here if that fails."""
    if not texts:
        return [], None, None
    combined = listings[order[0]] if len(texts) == 1 else None
    error = None
    if combined is None:
        assert server is not None  # texts only holds hosts this server has listed
        try:
            combined = run_list_devices(server, texts, env, timeout)
        except ListingError as exc:
            error = f"listing all reachable RPC hosts together failed ({exc}); RPC names were numbered by Layerdeck"
            log.warning(error)
    if combined is not None:
        out = []
        counters: dict[str, int] = {}
        for dev in combined.devices:
            if dev.backend == "RPC" and dev.description in texts:
                j = counters.get(dev.description, 0)
                counters[dev.description] = j + 1
                out.append(RpcDevice(dev, dev.description, j, True))
        return out, combined, error
    # Same rule as ggml_backend_rpc_add_server: one counter across the hosts in --rpc order.
    return _numbered(order, dict(zip(order, texts)), listings), None, error


#: What each assumed RPC device says about itself (``Device.warnings``, the estimate's notes).
ASSUMED = (
    "assumed: llama.cpp did not list this RPC host, so one device with unknown memory stands in for it "
    "(placement and command hold if the host has one device; the capacity check is skipped)"
)


def _numbered(indices: Sequence[int], valid: Mapping[int, str], listings: Mapping[int, Listing]) -> list[RpcDevice]:
    """Every host's devices numbered like ``ggml_backend_rpc_add_server`` (one counter in --rpc order), with one
    assumed device for each host that was not listed."""
    out, counter = [], 0
    for i in indices:
        text = valid[i]
        if i not in listings:
            out.append(RpcDevice(ListedDevice(f"RPC{counter}", text, 0, 0), text, 0, False, assumed=True))
            counter += 1
            continue
        j = 0
        for dev in listings[i].devices:
            if dev.backend == "RPC" and dev.description == text:
                named = ListedDevice(f"RPC{counter}", dev.description, dev.total_mib, dev.free_mib)
                out.append(RpcDevice(named, text, j, False))
                counter += 1
                j += 1
    return out


def _assumed_note(
    devices: Sequence[RpcDevice],
    unknown: Sequence[int],
    valid: Mapping[int, str],
    status: Mapping[int, tuple[str, str | None]],
) -> str:
    """One sentence: which hosts were not listed and why, which names stand in for them, what to do."""
    parts = []
    for i in unknown:
        st, err = status[i]
        why = "llama-server was not found to list it" if st == "not probed" else st
        name = next(d.listed.name for d in devices if d.assumed and d.endpoint == valid[i])
        parts.append(f"{name} = {valid[i]} ({why})")
    return (
        "devices of these RPC hosts are unknown, one device each is assumed, memory unknown: "
        + "; ".join(parts)
        + ". To list them: start ggml-rpc-server on each host and make llama-server available "
        "(--llama-dir, Settings, or LAYERDECK_LLAMA_CPP_DIR)."
    )
