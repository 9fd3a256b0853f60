"""The CUDA driver probe, run for real against a stand-in libcuda built from C.

The stand-in numbers its two GPUs the way CUDA does under CUDA_VISIBLE_DEVICES
(indices, stop at the first bad entry, CUDA_ERROR_NO_DEVICE when empty), so
the test checks the probe's ctypes calls, its JSON hand-over, bus id
normalisation, and that llama.cpp's environment reaches the driver.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from app.devices import detect
from app.devices.cuda import CudaProbeError, probe_cuda
from app.devices.match import BY_DRIVER

from .fake_nvml import FakeNvml, rtx3090, rtx4090

FAKE_LIBCUDA = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *buses[] = {"0000:01:00.0", "0000:C1:00.0"};
static const char *names[] = {"NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"};
static int order[2], n = 0;
int cuInit(unsigned flags) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) { order[0] = 0; order[1] = 1; n = 2; return 0; }
    for (const char *p = v; *p && n < 2;) {
        char *end; long i = strtol(p, &end, 10);
        if (end == p || i < 0 || i > 1) break;
        order[n++] = (int) i;
        p = strchr(p, ','); if (!p) break; p++;
    }
    return n ? 0 : 100; /* CUDA_ERROR_NO_DEVICE */
}
int cuDeviceGetCount(int *count) { *count = n; return 0; }
int cuDeviceGet(int *dev, int i) { *dev = i; return 0; }
int cuDeviceGetName(char *s, int len, int d) { snprintf(s, len, "%s", names[order[d]]); return 0; }
int cuDeviceGetPCIBusId(char *s, int len, int d) { snprintf(s, len, "%s", buses[order[d]]); return 0; }
int cuDeviceGetUuid(unsigned char *u, int d) { memset(u, 0xab, 16); u[15] = (unsigned char) order[d]; return 0; }
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("the stand-in libcuda is a Linux shared object")
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("needs a C compiler to build the stand-in libcuda")
    d = tmp_path_factory.mktemp("libcuda")
    (d / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(d / "fake.c"), "-o", str(d / "libcuda.so.1")], check=True)
    return d


def env_with(libdir, **extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "LD_LIBRARY_PATH": str(libdir)}
    env.update(extra)
    return env


def test_probe_reads_bus_ids_in_cuda_order(fake_libcuda):
    devices = probe_cuda(env_with(fake_libcuda, CUDA_VISIBLE_DEVICES="1,0"))
    assert [(d.index, d.name, d.pci_bus_id) for d in devices] == [
        (0, "NVIDIA GeForce RTX 3090", "0000:c1:00.0"),
        (1, "NVIDIA GeForce RTX 4090", "0000:01:00.0"),
    ]
    assert devices[0].uuid == "GPU-abababab-abab-abab-abab-ababababab01"


def test_probe_with_no_visible_device(fake_libcuda):
    assert probe_cuda(env_with(fake_libcuda, CUDA_VISIBLE_DEVICES="")) == []


def test_probe_without_a_driver(tmp_path):
    with pytest.raises(CudaProbeError, match="libcuda"):
        probe_cuda(env_with(tmp_path))


def test_detect_uses_the_probe_to_match_by_pci_bus_id(fake_libcuda, fake_llama, tmp_path):
    bindir = fake_llama("cuda_two_swapped.txt")
    nvml = FakeNvml([rtx4090("01"), rtx3090("c1")])
    env = env_with(fake_libcuda, CUDA_VISIBLE_DEVICES="1,0")
    result = detect(llama_dir=bindir, nvml=nvml, sysfs_root=tmp_path, env=env)
    cuda0, cuda1 = result.devices[:2]
    assert (cuda0.name, cuda0.description, cuda0.pci_bus_id) == ("CUDA0", "NVIDIA GeForce RTX 3090", "0000:c1:00.0")
    assert cuda1.pci_bus_id == "0000:01:00.0"
    assert cuda0.sources["match"] == BY_DRIVER and not cuda0.name_guessed
    assert not [e for e in result.errors if e.source == "CUDA driver"]
