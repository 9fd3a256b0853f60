"""Parsing ``llama-server --list-devices`` output, and running it (with a stand-in program)."""

from __future__ import annotations

import pytest

from app.devices.listing import (
    ListingError,
    ListingParseError,
    last_error_line,
    list_devices_command,
    parse_list_devices,
    run_list_devices,
)
from app.devices.records import MiB

from .helpers import sample


def test_cpu_only_build_prints_none():
    listing = parse_list_devices(sample("cpu_only.txt"))
    assert listing.none is True
    assert listing.devices == ()
    assert listing.unparsed == ()


def test_two_cuda_devices():
    listing = parse_list_devices(sample("cuda_two.txt"))
    assert [(d.name, d.description, d.total_mib, d.free_mib) for d in listing.devices] == [
        ("CUDA0", "NVIDIA GeForce RTX 4090", 24080, 23583),
        ("CUDA1", "NVIDIA GeForce RTX 3090", 24124, 23871),
    ]
    assert listing.devices[0].total_bytes == 24080 * MiB
    assert listing.devices[1].backend == "CUDA"
    assert not listing.none


def test_rpc_devices_are_described_by_endpoint():
    listing = parse_list_devices(sample("rpc_two_hosts.txt"))
    assert [(d.name, d.description, d.backend) for d in listing.devices] == [
        ("RPC0", "127.0.0.1:50071", "RPC"),
        ("RPC1", "127.0.0.1:50072", "RPC"),
    ]


def test_blas_has_zero_memory_and_metal():
    listing = parse_list_devices(sample("metal_blas.txt"))
    mtl, blas = listing.devices
    assert (mtl.name, mtl.description, mtl.total_mib) == ("MTL0", "Apple M2 Max", 73728)
    assert (blas.name, blas.backend, blas.total_mib, blas.free_mib) == ("BLAS", "BLAS", 0, 0)


def test_log_lines_before_header_are_ignored_and_parentheses_in_descriptions_kept():
    listing = parse_list_devices(sample("cuda_vulkan_rpc.txt"))
    names = [d.name for d in listing.devices]
    assert names == ["CUDA0", "Vulkan0", "Vulkan1", "RPC0", "RPC1", "RPC2"]
    assert listing.devices[2].description == "Intel(R) UHD Graphics 770 (ADL-S GT1)"
    assert listing.devices[4].description == "192.168.1.20:50052"
    assert listing.unparsed == ()


def test_virtual_cuda_devices_keep_their_suffix():
    listing = parse_list_devices(sample("cuda_virtual.txt"))
    assert listing.devices[1].description == "NVIDIA GeForce RTX 4090 (dev p0/v1)"


def test_unknown_lines_after_header_are_reported_not_dropped():
    listing = parse_list_devices("Available devices:\n  CUDA0: X (1 MiB, 1 MiB free)\n  something odd\n")
    assert len(listing.devices) == 1
    assert listing.unparsed == ("  something odd",)


def test_names_with_colons_parse():
    listing = parse_list_devices("Available devices:\n  HTP0:1: Hexagon (2048 MiB, 2048 MiB free)\n")
    assert listing.devices[0].name == "HTP0:1"
    assert listing.devices[0].description == "Hexagon"


def test_missing_header_is_a_typed_error():
    with pytest.raises(ListingParseError, match="too old"):
        parse_list_devices(sample("not_llama.txt"))


def test_rpc_goes_before_list_devices():
    assert list_devices_command("/x/llama-server", ["a:1", "b:2"]) == [
        "/x/llama-server",
        "--rpc",
        "a:1,b:2",
        "--list-devices",
    ]
    assert list_devices_command("/x/llama-server") == ["/x/llama-server", "--list-devices"]


def test_runner_passes_arguments_and_an_explicit_environment(fake_llama):
    bindir = fake_llama("cuda_two.txt")
    env = {"PATH": "/usr/bin", "LLAMA_ARG_RPC": "10.0.0.1:1", "CUDA_VISIBLE_DEVICES": "1,0"}
    listing = run_list_devices(bindir / "llama-server", ["h:5"], env, timeout=20)
    assert [d.name for d in listing.devices] == ["CUDA0", "CUDA1"]
    (call,) = fake_llama.calls()
    assert call["argv"] == ["--rpc", "h:5", "--list-devices"]
    assert call["env"]["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert "LLAMA_ARG_RPC" not in call["env"]  # only --rpc decides which hosts are listed


def test_runner_reports_failure_with_the_abort_message(fake_llama):
    stderr = "[New LWP 1]\n#2  0x0000 in ggml_abort ()\nggml-rpc.cpp:547: Failed to connect to 1.2.3.4:5\n"
    bindir = fake_llama(None, exit_code=134, stderr=stderr)
    with pytest.raises(ListingError) as info:
        run_list_devices(bindir / "llama-server", ["1.2.3.4:5"], {}, timeout=20)
    assert "Failed to connect to 1.2.3.4:5" in str(info.value)
    assert info.value.returncode == 134
    assert "Failed to connect" in info.value.stderr


def test_runner_times_out(fake_llama):
    bindir = fake_llama("cuda_two.txt", sleep=30)
    with pytest.raises(ListingError) as info:
        run_list_devices(bindir / "llama-server", [], {}, timeout=0.5)
    assert info.value.timed_out


def test_runner_missing_program(tmp_path):
    with pytest.raises(ListingError, match="cannot run"):
        run_list_devices(tmp_path / "llama-server", [], {}, timeout=5)


def test_last_error_line_skips_backtrace():
    assert last_error_line("#1 0x1 in ggml_abort ()\nerror: invalid argument: --rpc\n") == "error: invalid argument: --rpc"
    assert last_error_line("") == ""
