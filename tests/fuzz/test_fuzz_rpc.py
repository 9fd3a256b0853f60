"""Fuzz the RPC-endpoint door: every ``--rpc`` list ends in a result or a typed error, never a traceback, a
hang, or an answer for another machine than the one asked about.

Inputs are lists of endpoint strings: ``host:port`` forms (IPv4 literals, ``localhost``, names, ``127.1``),
IPv6 with and without brackets, empty entries and spaces, ports that are huge, negative, zero, padded,
non-ASCII digits, schemes (``http://``), commas inside an entry, NUL and other control characters, labels
too long for the resolver, and arbitrary unicode. Each list goes through four doors:

* :func:`app.devices.rpc.parse_endpoint` -- an :class:`~app.devices.rpc.Endpoint` exactly when an
  independent reading of llama.cpp's rule accepts it, else an :class:`~app.devices.rpc.EndpointError`;
* :func:`app.devices.rpc.probe_rpc_hosts` (no llama-server) -- one status per entry, one assumed device
  per distinct valid host, numbered like llama.cpp;
* ``layerdeck devices --json --rpc=...`` and ``layerdeck estimate --json -- -m M --rpc ... -ngl 99 -ts 1,1,...``
  (in-process) -- exit 0/1 with a document that has every host, or exit 2 with one ``layerdeck:`` line;
  an invalid entry never becomes a CPU-only answer, and an estimate always has one RPC device per host.

No traffic leaves 127.0.0.1: name resolution is replaced by one that resolves ``localhost`` and numeric
IPv4 forms of 127.0.0.1 only (the real resolver still sees every string, with ``AI_NUMERICHOST``, so its
encoding errors stay in play) and every other name fails as an unknown host; a connection anywhere but
127.0.0.1 fails the test. The ``llama``-marked variant adds one real ``ggml-rpc-server`` and the real
llama-server. Each door must finish within :data:`TIME_BUDGET_S` (a watchdog interrupts a hang) and
:data:`MEMORY_BUDGET_BYTES`. Inputs that once failed are replayed as ``@example``\\ s.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.cli import main as cli_main
from app.devices.rpc import Endpoint, EndpointError, parse_endpoint, probe_rpc_hosts
from app.errors import LayerdeckError
from tests.fuzz.harness import within_budget
from tests.gguf_factory import write_tiny_model

LOOPBACK = "127.0.0.1"
_REAL_GETADDRINFO = socket.getaddrinfo
_REAL_CREATE_CONNECTION = socket.create_connection


# --------------------------------------------------------------------------- the loopback-only network


def resolve(host: str) -> str | None:
    """What the fuzz world resolves: ``localhost`` and IPv4 spellings of 127.0.0.1; nothing else."""
    if host == "localhost":
        return LOOPBACK
    try:
        return LOOPBACK if host.isascii() and socket.inet_ntoa(socket.inet_aton(host)) == LOOPBACK else None
    except (OSError, ValueError):
        return None


def guarded_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    """The real resolver in numeric-only mode (no DNS query: it raises the same encoding errors), then the
    fuzz world's answer."""
    try:
        _REAL_GETADDRINFO(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass
    ip = resolve(host) if isinstance(host, str) else None
    if ip is None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (the fuzzer resolves 127.0.0.1 only)")
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, int(port)))]


def guarded_create_connection(address, *args, **kwargs):
    assert address[0] == LOOPBACK, f"the fuzzer tried to connect to {address!r}"
    return _REAL_CREATE_CONNECTION(address, *args, **kwargs)


@pytest.fixture
def loopback_only(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", guarded_create_connection)


@pytest.fixture
def no_llama(monkeypatch, tmp_path_factory):
    empty = tmp_path_factory.mktemp("no-llama")
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("LLAMA_ARG_RPC", raising=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(write_tiny_model("llama", tmp_path_factory.mktemp("fuzz-rpc") / "llama.gguf"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- inputs

HOSTS = st.one_of(
    st.sampled_from(
        [
            LOOPBACK, "localhost", "127.1", "2130706433", "0x7f.1", "0", "10.0.0.1", "192.168.1.20", "gpu-box",
            "gpu_box.lan", "example.invalid", "a..b", ".", "-", "a" * 64, "b" * 300, "xn--bcher-kva", "bücher",
            " 127.0.0.1", "127.0.0.1 ", "user@host", "::1", "fe80::1", "[::1]", "http://127.0.0.1", "tcp://x",
            "ho,st", "h\x00st", "\u200b", "\u0661\u0662\u0667.0.0.1", "LOCALHOST", "localhost.", "",
        ]
    ),
    st.text(max_size=12),
)
PORTS = st.one_of(
    st.integers(-70_000, 140_000).map(str),
    st.sampled_from(
        [
            "", "0", "1", "00001", "050052", "65535", "65536", "99999999999999999999", "-1", "+1", "1e3", "0x50",
            " 50052", "50052 ", "\u0661\u0662", "\uff15\uff10\uff10\uff15\uff12", "50052/tcp", "50052:1", "5\x000",
        ]
    ),
    st.text(max_size=6),
)
#: Valid spellings, some of one server (127.0.0.1, localhost, 127.1, 2130706433), on a few ports: repeats
#: and aliases come up often.
VALID = st.builds(
    lambda h, p, pad: f"{pad}{h}:{p}",
    st.sampled_from([LOOPBACK, "localhost", "127.1", "2130706433", "gpu-box", "gpu_box.lan", "10.0.0.1", "a..b"]),
    st.sampled_from([1, 50052, 50053, 65535]),
    st.sampled_from(["", " "]),
)
ENDPOINTS = st.one_of(
    VALID,
    st.builds(lambda h, p: f"{h}:{p}", HOSTS, PORTS),
    st.builds(lambda h, p: f"[{h}]:{p}", HOSTS, PORTS),
    st.builds(lambda p: f"{LOOPBACK}:{p}", st.integers(1, 65535)),
    st.sampled_from(["", " ", ",", ":", "::", LOOPBACK, ":50052", "http://127.0.0.1:50052", "a:1,b:2", "\t"]),
    st.text(max_size=24),
)
#: Half the lists are all valid spellings (results, repeats, aliases), half anything (mostly typed errors).
LISTS = st.one_of(st.lists(VALID, min_size=1, max_size=3), st.lists(ENDPOINTS, min_size=1, max_size=3))


# --------------------------------------------------------------------------- the reference reading

_REFERENCE = re.compile(r"([A-Za-z0-9._-]{1,253}):([0-9]{1,5})")


def reference(text: str) -> Endpoint | None:
    """llama.cpp's ``--rpc`` entry read independently: ``host:port`` after trimming, an ASCII host name or
    IPv4 address (what ``gethostbyname`` can look up, labels of at most 63), a port from 1 to 65535."""
    m = _REFERENCE.fullmatch(text.strip())
    if not m or not 1 <= int(m.group(2)) <= 65535 or any(len(x) > 63 for x in m.group(1).split(".")):
        return None
    return Endpoint(text.strip(), m.group(1), int(m.group(2)))


def classify(entries: list[str]) -> list[str]:
    """Per entry: ``invalid``, ``host`` (a new server), ``repeat`` (the same text again: llama.cpp registers
    it once) or ``alias`` (the same server under another spelling: llama.cpp would hang)."""
    out, seen = [], {}
    for text in entries:
        ep = reference(text)
        if ep is None:
            out.append("invalid")
            continue
        key = (resolve(ep.host) or ep.host, ep.port)
        if key in seen:
            out.append("repeat" if seen[key] == ep.text else "alias")
        else:
            seen[key] = ep.text
            out.append("host")
    return out


# --------------------------------------------------------------------------- the doors


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), within_budget(f"layerdeck {argv[:2]}"):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> None:
    assert err.startswith("layerdeck: ") and err.count("\n") == 1 and "Traceback" not in err, err


def check_parse(text: str) -> None:
    with within_budget("parse_endpoint"):
        try:
            got: Endpoint | EndpointError = parse_endpoint(text)
        except EndpointError as exc:
            got = exc
    assert isinstance(got, LayerdeckError) or isinstance(got, Endpoint)
    want = reference(text)
    if want is None:
        assert isinstance(got, EndpointError), f"{text!r} was accepted as {got!r}"
        assert repr(text) in got.message or repr(text.strip()) in got.message  # it names the entry
    else:
        assert got == want, f"{text!r}: {got!r} != {want!r}"


def check_probe(entries: list[str]) -> None:
    with within_budget("probe_rpc_hosts"):
        probe = probe_rpc_hosts(entries, server=None, connect_timeout=0.5, timeout=1.0)
    kinds = classify(entries)
    assert [h.endpoint for h in probe.hosts] == entries
    for h, kind in zip(probe.hosts, kinds):
        assert (h.status == "invalid") == (kind == "invalid"), (h, kind)
        assert (h.status == "duplicate") == (kind in ("repeat", "alias")), (h, kind)
        assert h.status in ("invalid", "duplicate", "not probed", "refused", "unreachable", "timed out"), h
        assert h.error, h  # without llama-server no host is simply "ok": each says why
    hosts = [e.strip() for e, k in zip(entries, kinds) if k == "host"]
    assert [(d.listed.name, d.endpoint, d.assumed) for d in probe.devices] == [
        (f"RPC{i}", e, True) for i, e in enumerate(hosts)
    ]
    assert bool(probe.errors) == bool(hosts)


def check_devices_cli(entries: list[str]) -> None:
    joined = ",".join(entries)
    code, out, err = run_cli("devices", "--json", f"--rpc={joined}")
    assert code == 1, (code, out[-500:], err)  # a host that is not "ok" (none can be here) is exit status 1
    doc = json.loads(out)
    split = [e.strip() for e in joined.split(",")]  # the subcommand's own list: one entry per comma
    assert [h["endpoint"] for h in doc["rpc_hosts"]] == split
    kinds = classify(split)
    assert [h["status"] == "invalid" for h in doc["rpc_hosts"]] == [k == "invalid" for k in kinds]
    rpc = [(d["name"], d["rpc_endpoint"], d["total_bytes"]) for d in doc["devices"] if d["kind"] == "rpc"]
    hosts = [e for e, k in zip(split, kinds) if k == "host"]
    assert rpc == [(f"RPC{i}", e, None) for i, e in enumerate(hosts)]  # never dropped, never invented


def check_estimate_cli(tiny: str, entries: list[str], llama_dir: str | None = None) -> None:
    joined = ",".join(entries)
    parts = joined.split(",")  # llama.cpp splits on every comma
    kinds = classify(parts)
    extra = ["--llama-dir", llama_dir] if llama_dir else []
    ts = ",".join("1" * len(parts))  # an even split over every device: it does not depend on their memory
    code, out, err = run_cli(
        "estimate", "--json", *extra, "--", "-m", tiny, "--rpc", joined, "-ngl", "99", "-ts", ts, "--fit", "off"
    )
    if any(not p.strip() for p in parts) or any(k in ("invalid", "alias") for k in kinds):
        assert (code, out) == (2, ""), (code, out[-500:], err)  # stops: never a CPU-only answer
        one_error_line(err)
        return
    assert code == 0, (code, err)
    doc = json.loads(out)
    n = kinds.count("host")
    assert [d["name"] for d in doc["devices"]] == [f"RPC{i}" for i in range(n)] + ["Host"]
    # every layer on the RPC devices, split evenly from RPC0 on: not a CPU-only answer
    assert set(doc["layers"]) <= {f"RPC{i}" for i in range(n)} and doc["layers"][0] == "RPC0"


# --------------------------------------------------------------------------- the tests


@given(entries=LISTS)
@example(entries=["h\x00st:50052"])  # getaddrinfo raised ValueError: a traceback before
@example(entries=["a" * 64 + ":50052"])  # the IDNA codec raised UnicodeError (label too long)
@example(entries=["127.0.0.1:\u0661\u0662"])  # str's \d took Arabic-Indic digits that llama.cpp cannot read
@example(entries=["a..b:1"])  # empty label: UnicodeError in the resolver
@example(entries=["", "127.0.0.1:50052"])  # an empty entry was dropped: CPU-only or fewer devices
@example(entries=["http://127.0.0.1:50052"])
@example(entries=["127.0.0.1:1", "localhost:1"])  # one server under two names
@example(entries=["127.0.0.1:2", "a:1,b:2", "127.0.0.1:1"])  # four hosts (found by the long profile)
def test_every_endpoint_list_ends_in_a_result_or_a_typed_error(entries, tiny, loopback_only, no_llama):
    for text in entries:
        check_parse(text)
    check_probe(entries)
    check_devices_cli(entries)
    check_estimate_cli(tiny, entries)


def test_the_reference_and_the_strategies_reach_every_outcome(tiny, loopback_only, no_llama):
    """The building blocks are not vacuous: valid hosts, repeats, aliases and invalid entries all occur, and a
    valid list really gives an estimate on its RPC devices."""
    p1, p2 = closed_port(), closed_port()
    entries = [f"{LOOPBACK}:{p1}", f" {LOOPBACK}:{p1}", f"localhost:{p1}", f"127.1:{p2}", "gpu-box:1", "[::1]:2"]
    assert classify(entries) == ["host", "repeat", "alias", "host", "host", "invalid"]
    check_probe(entries)
    check_devices_cli(entries)
    code, out, err = run_cli(
        "estimate", "--json", "--", "-m", tiny, "--rpc", f"{LOOPBACK}:{p1},gpu-box:1", "-ngl", "99", "-ts", "1,1"
    )
    assert code == 0, err
    assert json.loads(out)["layers"] == ["RPC0", "RPC0", "RPC0", "RPC1", "RPC1"]


# --------------------------------------------------------------------------- with llama.cpp


_SERVERS: dict[int, object] = {}


@pytest.mark.llama
@settings(max_examples=12)
@given(data=st.data())
def test_with_a_real_rpc_server(data, tiny, llama_bin, rpc_servers, loopback_only, monkeypatch):
    """One real ggml-rpc-server (started once for all examples), the real llama-server, a closed port, an
    alias of the server, a name that does not resolve and invalid entries. Only loopback endpoints are
    drawn: a random open port could be another program, which llama-server would wait on."""
    monkeypatch.delenv("LLAMA_ARG_RPC", raising=False)
    if id(rpc_servers) not in _SERVERS:
        _SERVERS.clear()
        (_SERVERS[id(rpc_servers)],) = rpc_servers(1)
    server = _SERVERS[id(rpc_servers)]
    pool = [server.endpoint, f"localhost:{server.port}", f"{LOOPBACK}:{closed_port()}", "gpu-box:1", "[::1]:1", "",
            "127.0.0.1:0", "http://127.0.0.1:1"]
    entries = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    joined = ",".join(entries)
    code, out, err = run_cli("devices", "--json", "--llama-dir", str(llama_bin), f"--rpc={joined}")
    split = [e.strip() for e in joined.split(",")]
    kinds = classify(split)
    assert code in (0, 1), err
    doc = json.loads(out)
    assert [h["endpoint"] for h in doc["rpc_hosts"]] == split
    hosts = [e for e, k in zip(split, kinds) if k == "host"]
    reaches = [e for e in hosts if reference(e) is not None and resolve(reference(e).host) and e.endswith(f":{server.port}")]
    assert [h["endpoint"] for h in doc["rpc_hosts"] if h["status"] == "ok"] == reaches  # the server, and only it
    assert code == (0 if all(k == "host" for k in kinds) and reaches == hosts else 1)
    rpc = [d for d in doc["devices"] if d["kind"] == "rpc"]
    assert [d["rpc_endpoint"] for d in rpc] == hosts
    assert [d["name"] for d in rpc] == [f"RPC{i}" for i in range(len(rpc))]
    for d in rpc:
        assert (d["total_bytes"] is not None) == (d["rpc_endpoint"] in reaches), d
    check_estimate_cli(tiny, entries, str(llama_bin))
