"""Device listing and RPC probing against the real llama.cpp binaries (CPU + RPC build)."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from app.devices import DeviceKind, detect, rpc_server_command
from app.devices.listing import run_list_devices
from app.devices.records import MiB

from .fake_nvml import FakeNvml

pytestmark = pytest.mark.llama


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_detect(llama_bin, rpc, **kw):
    kw.setdefault("nvml", FakeNvml([]))
    return detect(llama_dir=llama_bin, rpc=rpc, amd=False, cuda_probe=None, **kw)


def test_cpu_only_build_lists_none(llama_bin):
    listing = run_list_devices(llama_bin / "llama-server", [], timeout=60)
    assert listing.none and listing.devices == ()
    result = run_detect(llama_bin, [])
    assert [d.name for d in result.devices] == ["CPU"]
    assert result.llama_listed and result.llama_server.endswith("llama-server")


def test_two_rpc_servers_are_named_in_rpc_order(llama_bin, rpc_servers):
    a, b = rpc_servers(2, memory_mib=[3000, 5000])
    result = run_detect(llama_bin, [b.endpoint, a.endpoint])
    rpc = [d for d in result.devices if d.kind == DeviceKind.RPC]
    assert [(d.name, d.rpc_endpoint, d.description, d.total_bytes // MiB) for d in rpc] == [
        ("RPC0", b.endpoint, b.endpoint, 5000),
        ("RPC1", a.endpoint, a.endpoint, 3000),
    ]
    assert all(not d.name_guessed and d.rpc_device_index == 0 for d in rpc)
    assert rpc[0].sources["name"].startswith("llama.cpp --rpc")
    assert [(h.endpoint, h.status, h.devices) for h in result.rpc_hosts] == [
        (b.endpoint, "ok", ("RPC0",)),
        (a.endpoint, "ok", ("RPC1",)),
    ]
    assert result.rpc_hosts[0].server_command == ("ggml-rpc-server", "-H", "127.0.0.1", "-p", str(b.port))
    assert result.devices[-1].name == "CPU"


def test_rpc_memory_is_plausible_without_the_shim(llama_bin, rpc_servers):
    (server,) = rpc_servers(1)
    result = run_detect(llama_bin, [server.endpoint])
    (dev,) = [d for d in result.devices if d.kind == DeviceKind.RPC]
    assert 0 < dev.free_bytes <= dev.total_bytes <= result.host.ram_total_bytes + 64 * MiB


def test_dead_endpoint_gets_its_own_error_and_live_hosts_still_list(llama_bin, rpc_servers):
    live1, live2 = rpc_servers(2, memory_mib=[1000, 2000])
    dead = f"127.0.0.1:{free_port()}"
    result = run_detect(llama_bin, [live1.endpoint, dead, live2.endpoint])
    hosts = {h.endpoint: h for h in result.rpc_hosts}
    assert hosts[dead].status == "refused"
    assert "nothing listens" in hosts[dead].error
    assert hosts[dead].devices == ()
    # llama.cpp numbers RPC devices with one counter across every --rpc entry: the dead host stands for one
    # assumed device (memory unknown) so the live host after it is RPC2, as it will be once the dead one is up.
    assert hosts[live1.endpoint].devices == ("RPC0",)
    assert hosts[live2.endpoint].devices == ("RPC2",)
    rpc = [(d.name, d.rpc_endpoint, d.total_bytes, d.name_guessed) for d in result.devices if d.kind == DeviceKind.RPC]
    assert rpc == [
        ("RPC0", live1.endpoint, 1000 * MiB, True),
        ("RPC1", dead, None, True),
        ("RPC2", live2.endpoint, 2000 * MiB, True),
    ]
    assert [e.source for e in result.errors] == ["--rpc"]
    assert f"RPC1 = {dead} (refused)" in result.errors[0].message


def test_busy_server_is_reported_as_no_answer(llama_bin, rpc_servers):
    (server,) = rpc_servers(1)
    # ggml-rpc-server serves one client at a time: hold the only slot.
    holder = socket.create_connection((server.host, server.port))
    try:
        time.sleep(0.2)
        result = run_detect(llama_bin, [server.endpoint], rpc_timeout=3)
    finally:
        holder.close()
    (host,) = result.rpc_hosts
    assert host.status == "no answer"
    assert "one client at a time" in host.error
    # its devices are unknown: one assumed device of unknown memory stands for it, never a CPU-only machine
    assert [(d.name, d.rpc_endpoint, d.total_bytes) for d in result.devices] == [
        ("RPC0", server.endpoint, None),
        ("CPU", None, result.host.ram_total_bytes),
    ]


def test_the_suggested_server_command_starts_a_working_server(llama_bin, tmp_path):
    port = free_port()
    cmd = rpc_server_command("127.0.0.1", port, devices=["CPU"], threads=1, cache=True)
    cmd[0] = str(llama_bin / "ggml-rpc-server")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={"LLAMA_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
        result = run_detect(llama_bin, [f"127.0.0.1:{port}"])
        assert result.rpc_hosts[0].status == "ok"
        assert result.device("RPC0").rpc_endpoint == f"127.0.0.1:{port}"
        assert (tmp_path / "cache" / "rpc").is_dir()  # -c stores tensors under $LLAMA_CACHE/rpc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
