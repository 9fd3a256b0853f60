"""NVML reading through a fake pynvml: bandwidth, PCIe warnings, NUMA, missing library, lost GPU."""

from __future__ import annotations

import pytest

from app.devices.gpu import normalise_bus_id, numa_node
from app.devices.nvidia import read_nvidia

from .helpers import write_tree
from .fake_nvml import FakeNvml, NVMLError_DriverNotLoaded, NVMLError_LibraryNotFound, rtx3090, rtx4090


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("00000000:01:00.0", "0000:01:00.0"),
        (b"00000000:0A:00.0\x00", "0000:0a:00.0"),
        ("0000:C1:00.1", "0000:c1:00.1"),
        ("01:00.0", "0000:01:00.0"),
        ("00010000:e1:00.0", "10000:e1:00.0"),
        ("garbage", None),
        (None, None),
    ],
)
def test_normalise_bus_id(raw, expected):
    assert normalise_bus_id(raw) == expected


def test_numa_node_from_sysfs(tmp_path):
    write_tree(tmp_path, {"sys/bus/pci/devices/0000:01:00.0/numa_node": "1\n", "sys/bus/pci/devices/0000:02:00.0/numa_node": "-1\n"})
    assert numa_node("00000000:01:00.0", tmp_path) == 1
    assert numa_node("0000:02:00.0", tmp_path) is None  # -1: no NUMA affinity
    assert numa_node("0000:03:00.0", tmp_path) is None


def test_reads_every_gpu_with_bandwidth_and_extras(tmp_path):
    write_tree(tmp_path, {"sys/bus/pci/devices/0000:01:00.0/numa_node": "0\n"})
    nvml = FakeNvml([rtx4090(processes=[(4242, 3 * 1024**3), (4343, None)]), rtx3090()])
    report = read_nvidia(nvml, tmp_path, process_names=False)
    assert report.error is None and report.driver_version == "570.00"
    a, b = report.gpus
    assert (a.name, a.uuid, a.pci_bus_id, a.numa_node) == (
        "NVIDIA GeForce RTX 4090", "GPU-aaaaaaaa-0000-0000-0000-000000000001", "0000:01:00.0", 0,
    )
    assert a.bandwidth_bytes_per_s == pytest.approx(1008.096e9)  # 384 bit x 10501 MHz x 2
    assert "384 bit x 10501 MHz x 2" in a.bandwidth_source
    assert b.bandwidth_bytes_per_s == pytest.approx(936.1e9, rel=1e-3)
    assert (a.total_bytes, a.used_bytes, a.free_bytes) == (24 * 1024**3, 1024**3, 23 * 1024**3)
    assert (a.temperature_c, a.power_w, a.utilisation_percent) == (40.0, 80.0, 5.0)
    assert a.pcie.current_gen == 4 and a.pcie.max_width == 16
    assert [(p.pid, p.used_bytes) for p in a.processes] == [(4242, 3 * 1024**3), (4343, None)]
    assert a.errors == {} and a.warnings == ()
    assert nvml.initialised == 0  # shut down after reading


def test_degraded_pcie_link_warns():
    nvml = FakeNvml([rtx4090(pcie=(3, 4, 4, 16))])
    (gpu,) = read_nvidia(nvml, "/nonexistent").gpus
    text = " | ".join(gpu.warnings)
    assert "x4" in text and "x8" in text
    assert "generation 3 of 4" in text


def test_unsupported_facts_are_recorded_not_raised():
    nvml = FakeNvml([rtx4090(unsupported={"nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetPowerUsage"})])
    (gpu,) = read_nvidia(nvml, "/nonexistent").gpus
    assert gpu.bandwidth_bytes_per_s is None and gpu.power_w is None
    assert gpu.errors == {"bandwidth": "not supported on this GPU", "power": "not supported on this GPU"}
    assert gpu.total_bytes == 24 * 1024**3


def test_library_missing_is_a_source_error():
    report = read_nvidia(FakeNvml([rtx4090()], init_error=NVMLError_LibraryNotFound))
    assert report.gpus == ()
    assert "no NVIDIA driver is installed" in report.error


def test_driver_not_loaded_is_a_source_error():
    report = read_nvidia(FakeNvml([rtx4090()], init_error=NVMLError_DriverNotLoaded))
    assert "not loaded" in report.error


def test_lost_gpu_does_not_hide_the_others():
    nvml = FakeNvml([rtx4090(lost=True), rtx3090()])
    lost, ok = read_nvidia(nvml, "/nonexistent").gpus
    assert "GPU is lost" in lost.errors["name"]
    assert lost.total_bytes is None
    assert ok.name == "NVIDIA GeForce RTX 3090" and ok.errors == {}


def test_real_pynvml_never_raises():
    """On this machine pynvml may find no driver; either way detection gets a report, not an exception."""
    report = read_nvidia()
    assert report.error is not None or all(g.vendor == "nvidia" for g in report.gpus)
