"""Telemetry sampling: reused NVML handles, a GPU lost mid-run, AMD sysfs, and a real process tree."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from app.devices.records import DetectionResult, Device, HostInfo
from app.devices.telemetry import TelemetrySampler, names_from

from .helpers import amd_card, write_tree
from .fake_nvml import FakeNvml, NVMLError_LibraryNotFound, rtx3090, rtx4090

GiB = 1024**3


def test_reads_gpus_and_reuses_handles(tmp_path):
    nvml = FakeNvml([rtx4090("01"), rtx3090("02")])
    with TelemetrySampler(nvml=nvml, sysfs_root=tmp_path, names={"0000:02:00.0": "CUDA0"}) as sampler:
        first = sampler.sample()
        for _ in range(4):
            sampler.sample()
    a, b = first.devices
    assert (a.key, a.name, a.memory_used_bytes, a.memory_total_bytes) == ("0000:01:00.0", None, GiB, 24 * GiB)
    assert (a.utilisation_percent, a.temperature_c, a.power_w, a.error) == (5.0, 40.0, 80.0, None)
    assert b.name == "CUDA0"
    assert nvml.calls["nvmlDeviceGetHandleByIndex"] == 2  # looked up once, not per sample
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1
    assert nvml.calls["nvmlDeviceGetMemoryInfo"] == 10
    assert first.host.ram_total_bytes > 0 and 0 <= first.host.cpu_percent <= 100
    assert first.processes == () and first.errors == ()


def test_gpu_lost_mid_run_is_recorded_and_others_still_read(tmp_path):
    lost_later = rtx4090("01")
    nvml = FakeNvml([lost_later, rtx3090("02")])
    sampler = TelemetrySampler(nvml=nvml, sysfs_root=tmp_path)
    before = sampler.sample()
    lost_later.lost = True
    after = sampler.sample()
    sampler.close()
    assert before.devices[0].error is None
    assert after.devices[0].error == "the GPU is lost (fell off the bus or hung): it needs a reset or a reboot"
    assert after.devices[0].memory_used_bytes is None
    assert after.devices[1].error is None and after.devices[1].memory_used_bytes == GiB


def test_partial_support_names_the_failing_facts(tmp_path):
    nvml = FakeNvml([rtx4090(unsupported={"nvmlDeviceGetPowerUsage"})])
    with TelemetrySampler(nvml=nvml, sysfs_root=tmp_path) as sampler:
        (reading,) = sampler.sample().devices
    assert reading.power_w is None and reading.error == "not supported on this GPU"
    assert reading.memory_used_bytes == GiB


def test_nvml_missing_is_a_sample_error(tmp_path):
    with TelemetrySampler(nvml=FakeNvml([], init_error=NVMLError_LibraryNotFound), sysfs_root=tmp_path) as sampler:
        sample = sampler.sample()
    assert sample.devices == ()
    assert "libnvidia-ml" in sample.errors[0]


def test_amd_cards_from_sysfs(tmp_path):
    write_tree(tmp_path, amd_card(0, "0000:03:00.0", 24 * GiB, 3 * GiB, busy=55))
    with TelemetrySampler(nvml=False, sysfs_root=tmp_path, names={"0000:03:00.0": "ROCm0"}) as sampler:
        (reading,) = sampler.sample().devices
    assert (reading.name, reading.vendor, reading.memory_used_bytes, reading.memory_total_bytes) == ("ROCm0", "amd", 3 * GiB, 24 * GiB)
    assert (reading.utilisation_percent, reading.temperature_c, reading.power_w) == (55.0, 45.0, 65.0)


def test_process_tree_rss_and_cpu(tmp_path):
    # A parent that starts a busy child: both must be read, the child's CPU must show.
    code = (
        "import subprocess, sys, time;"
        "c = subprocess.Popen([sys.executable, '-c', 'x = bytearray(50_000_000)\\nwhile True: pass']);"
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not psutil.Process(parent.pid).children():
            time.sleep(0.05)
        sampler = TelemetrySampler(nvml=False, sysfs_root=tmp_path, pid=parent.pid)
        sampler.sample()
        time.sleep(0.5)
        sample = sampler.sample()
        pids = [p.pid for p in sample.processes]
        assert pids[0] == parent.pid and len(pids) == 2
        child = sample.processes[1]
        assert child.rss_bytes > 40_000_000
        assert child.cpu_percent > 20  # a busy loop: close to 100 on an idle core
        assert sample.process_rss_bytes >= child.rss_bytes
    finally:
        for proc in psutil.Process(parent.pid).children(recursive=True):
            proc.kill()
        parent.kill()
        parent.wait()
    gone = sampler.sample()
    assert gone.processes[0].error == f"process {parent.pid} has exited"


def test_unknown_pid_is_reported_not_raised(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with TelemetrySampler(nvml=False, sysfs_root=tmp_path, pid=proc.pid) as sampler:
        (reading,) = sampler.sample().processes
    assert "exited" in reading.error


def test_names_from_detection():
    dev = Device("CUDA0", "gpu", "x", pci_bus_id="0000:01:00.0")
    result = DetectionResult((dev, Device("CPU", "cpu", "cpu")), HostInfo())
    assert names_from(result) == {"0000:01:00.0": "CUDA0"}
