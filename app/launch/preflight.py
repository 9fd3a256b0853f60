"""Checks made before launching llama.cpp: every ``--rpc`` host must accept a TCP connection.

llama.cpp aborts the whole process on the first unreachable endpoint
(``GGML_ABORT("Failed to connect to %s")`` in ``ggml-rpc.cpp``), after a slow
gdb backtrace, and names only that one host. Checking each host first gives
one message per host, in well under a second for local networks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from app.devices.rpc import CONNECT_TIMEOUT_S, parse_endpoint, tcp_probe

log = logging.getLogger(__name__)


def check_rpc_hosts(endpoints: Sequence[str], timeout: float = CONNECT_TIMEOUT_S) -> list[tuple[str, str]]:
    """``(endpoint, message)`` for every endpoint that is malformed or does not accept a connection."""
    if not endpoints:
        return []

    def one(text: str) -> tuple[str, str] | None:
        try:
            ep = parse_endpoint(text)
        except ValueError as exc:
            return text, str(exc)
        probe = tcp_probe(ep.host, ep.port, timeout)
        if probe.status != "ok":
            return text, probe.error or probe.status
        return None

    with ThreadPoolExecutor(max_workers=min(8, len(endpoints))) as pool:
        results = list(pool.map(one, endpoints))
    problems = [r for r in results if r is not None]
    for ep, msg in problems:
        log.info("RPC host %s is not reachable: %s", ep, msg)
    return problems
