"""``layerdeck devices``: argument parsing, the table and the JSON schema."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
from pathlib import Path

from app.cli import devices as cli
from app.devices.records import DetectionResult, Device, HostInfo, PcieLink, RpcHostStatus, SourceError

ROOT = Path(__file__).resolve().parents[2]
DEVICE_KEYS = {
    "name", "kind", "description", "total_bytes", "free_bytes", "bandwidth_bytes_per_s", "name_guessed", "sources",
    "rpc_endpoint", "rpc_device_index", "warnings", "errors", "vendor", "uuid", "pci_bus_id", "pcie", "numa_node",
    "temperature_c", "power_w", "utilisation_percent", "processes", "max_tensor_bytes", "buffer_alignment",
    "max_buffer", "host_alignment", "host_max_buffer", "refused_ops",
}


def parse(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    cli.add_parser(sub)
    return parser.parse_args(argv)


def test_add_parser_options():
    args = parse(["devices", "--json", "--rpc", "a:1,b:2", "--rpc", "c:3", "--llama-dir", "/x"])
    assert args.json and args.llama_dir == "/x" and args.func is cli.run
    assert cli._endpoints(args.rpc) == ["a:1", "b:2", "c:3"]
    assert cli._endpoints(parse(["devices"]).rpc) is None


def sample_result():
    gpu = Device(
        "CUDA0", "gpu", "NVIDIA GeForce RTX 4090", 24 * 1024**3, 20 * 1024**3, 1008e9, False,
        {"name": "llama.cpp --list-devices", "total": "llama.cpp --list-devices", "bandwidth": "NVML bus width x memory clock"},
        warnings=("PCIe link runs at x4",), pci_bus_id="0000:01:00.0", pcie=PcieLink(4, 4, 4, 16), numa_node=0,
    )
    guessed = Device("CUDA1", "gpu", "NVIDIA GeForce RTX 3090", 24 * 1024**3, None, None, True, {"name": "guessed"})
    rpc = RpcHostStatus("10.0.0.5:50052", "10.0.0.5", 50052, "refused", "connection refused",
                        (), ("ggml-rpc-server", "-H", "10.0.0.5", "-p", "50052"), "use a trusted network")
    return DetectionResult((gpu, guessed, Device("CPU", "cpu", "Xeon", 64 * 1024**3, 60 * 1024**3)), HostInfo("Xeon", 8, 16, 1, 1),
                           rpc_hosts=(rpc,), errors=(SourceError("NVML", "no driver"),))


def test_table_shows_names_sources_warnings_and_rpc_commands():
    text = cli.format_table(sample_result())
    assert "CUDA0" in text and "1008" in text and "24.0" in text
    assert "CUDA1*" in text and "name guessed" in text
    assert "bandwidth: NVML bus width x memory clock" in text
    assert "warning: PCIe link runs at x4" in text
    assert "PCIe gen4 x4 (max gen4 x16)" in text
    assert "run on that host: ggml-rpc-server -H 10.0.0.5 -p 50052" in text
    assert "10.0.0.5:50052: refused" in text and "NVML: no driver" in text


def test_json_follows_the_documented_schema():
    data = json.loads(json.dumps(sample_result().to_dict()))
    assert data["schema"] == "layerdeck.devices/1"
    assert set(data) == {"schema", "devices", "hidden", "host", "rpc_hosts", "llama_cpp", "errors"}
    assert all(set(d) == DEVICE_KEYS for d in data["devices"])
    assert data["devices"][0]["pcie"] == {"current_gen": 4, "current_width": 4, "max_gen": 4, "max_width": 16}
    assert data["rpc_hosts"][0]["server_command"] == ["ggml-rpc-server", "-H", "10.0.0.5", "-p", "50052"]
    documented = (ROOT / "docs" / "cli-devices.md").read_text()
    for key in DEVICE_KEYS | set(data) | set(data["host"]) | set(data["rpc_hosts"][0]):
        assert f'"{key}"' in documented or f"`{key}`" in documented, key
        assert f'"{key}"' in cli.__doc__, key


def test_run_end_to_end_json_and_exit_status(fake_llama, monkeypatch):
    bindir = fake_llama("cpu_only.txt")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    out = io.StringIO()
    code = cli.run(parse(["devices", "--json", "--llama-dir", str(bindir), "--rpc", dead]), out)
    data = json.loads(out.getvalue())
    assert code == 1  # an RPC host did not answer
    assert data["llama_cpp"]["listed"] is True
    assert data["devices"][-1]["name"] == "CPU"
    assert data["rpc_hosts"][0]["status"] == "refused"
    out = io.StringIO()
    assert cli.run(parse(["devices", "--llama-dir", str(bindir)]), out) == 0
    assert out.getvalue().startswith("llama.cpp: ")


def test_module_entry_point(fake_llama):
    bindir = fake_llama("cpu_only.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.devices", "--json", "--llama-dir", str(bindir)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "layerdeck.devices/1"
