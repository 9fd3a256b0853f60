"""detect(): NVML + AMD sysfs + llama.cpp listing (a stand-in program) + host, matched and ordered."""

from __future__ import annotations

import socket

import pytest

from app.devices import DeviceKind, detect
from app.devices.cuda import CudaDevice
from app.devices.match import BY_DRIVER

from .helpers import amd_card, write_tree
from .fake_nvml import FakeNvml, NVMLError_LibraryNotFound, rtx3090, rtx4090

GiB = 1024**3
MiB = 1024**2
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def two_4090s(**kw):
    return [rtx4090("01", "GPU-aaaaaaaa-0000-0000-0000-000000000001", **kw), rtx4090("41", "GPU-aaaaaaaa-0000-0000-0000-000000000041")]


def no_probe(env):
    raise AssertionError("the CUDA probe must not run here")


def names(result):
    return [d.name for d in result.devices]


def test_without_llama_cpp_names_are_guessed_from_cuda_visible_devices(no_llama_env, tmp_path):
    nvml = FakeNvml([rtx4090("01"), rtx3090("02")])
    env = {"CUDA_VISIBLE_DEVICES": "1,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    result = detect(nvml=nvml, sysfs_root=tmp_path, env=env, cuda_probe=None)
    assert names(result) == ["CUDA0", "CUDA1", "CPU"]
    cuda0, cuda1, cpu = result.devices
    assert cuda0.description == "NVIDIA GeForce RTX 3090" and cuda0.pci_bus_id == "0000:02:00.0"
    assert cuda1.description == "NVIDIA GeForce RTX 4090"
    assert cuda0.name_guessed and cuda1.name_guessed and not cpu.name_guessed
    assert "guessed" in cuda0.sources["name"] and cuda0.sources["total"] == "NVML memory info"
    assert cuda0.bandwidth_bytes_per_s == pytest.approx(936.1e9, rel=1e-3)
    assert cuda0.sources["bandwidth"].startswith("NVML bus width")
    assert not result.llama_listed and result.llama_server is None
    assert any(e.source == "llama.cpp" and "guessed" in e.message for e in result.errors)


def test_without_llama_cpp_a_gpu_hidden_by_uuid_is_listed_apart(no_llama_env, tmp_path):
    nvml = FakeNvml([rtx4090("01"), rtx3090("02", UUID_B)])
    result = detect(nvml=nvml, sysfs_root=tmp_path, env={"CUDA_VISIBLE_DEVICES": UUID_B}, cuda_probe=None)
    assert names(result) == ["CUDA0", "CPU"]
    assert result.devices[0].uuid == UUID_B
    (hidden,) = result.hidden
    assert hidden.description == "NVIDIA GeForce RTX 4090" and hidden.name == ""
    assert "CUDA_VISIBLE_DEVICES" in hidden.warnings[0]


def test_listing_with_probe_matches_by_pci_bus_id(fake_llama, tmp_path):
    bindir = fake_llama("cuda_two_4090.txt")
    nvml = FakeNvml(two_4090s())
    # The driver says CUDA0 is the GPU at 41:00.0 (e.g. CUDA_VISIBLE_DEVICES=1,0 in llama.cpp's environment).
    probe = lambda env: [CudaDevice(0, "NVIDIA GeForce RTX 4090", "0000:41:00.0"), CudaDevice(1, "NVIDIA GeForce RTX 4090", "0000:01:00.0")]
    result = detect(llama_dir=bindir, nvml=nvml, sysfs_root=tmp_path, env={}, cuda_probe=probe)
    cuda0, cuda1 = result.devices[:2]
    assert (cuda0.name, cuda0.pci_bus_id, cuda0.free_bytes) == ("CUDA0", "0000:41:00.0", 23583 * MiB)
    assert cuda1.pci_bus_id == "0000:01:00.0"
    assert not cuda0.name_guessed and cuda0.sources["total"] == "llama.cpp --list-devices"
    assert cuda0.sources["match"] == BY_DRIVER
    assert result.llama_listed and result.hidden == ()


def test_listing_without_probe_follows_cuda_visible_devices(fake_llama, tmp_path):
    bindir = fake_llama("cuda_two_4090.txt")
    env = {"CUDA_VISIBLE_DEVICES": "1,0"}
    result = detect(llama_dir=bindir, nvml=FakeNvml(two_4090s()), sysfs_root=tmp_path, env=env, cuda_probe=None)
    assert [d.pci_bus_id for d in result.devices[:2]] == ["0000:41:00.0", "0000:01:00.0"]
    assert "CUDA order guessed" in result.devices[0].sources["match"]
    (call,) = fake_llama.calls()
    assert call["env"]["CUDA_VISIBLE_DEVICES"] == "1,0"  # llama.cpp ran with the same environment


def test_hidden_gpu_with_listing(fake_llama, tmp_path):
    bindir = fake_llama("cuda_one_3090.txt")
    nvml = FakeNvml([rtx4090("01"), rtx3090("02", UUID_B)])
    result = detect(llama_dir=bindir, nvml=nvml, sysfs_root=tmp_path, env={"CUDA_VISIBLE_DEVICES": UUID_B}, cuda_probe=None)
    assert names(result) == ["CUDA0", "CPU"]
    assert result.devices[0].uuid == UUID_B
    assert result.devices[0].sources["match"].startswith("unique device name")
    assert [h.description for h in result.hidden] == ["NVIDIA GeForce RTX 4090"]
    assert "hidden from CUDA" in result.hidden[0].warnings[0]


def test_failed_probe_falls_back_and_says_so(fake_llama, tmp_path):
    from app.devices.cuda import CudaProbeError

    def probe(env):
        raise CudaProbeError("the CUDA driver library (libcuda) was not found")

    bindir = fake_llama("cuda_two_4090.txt")
    result = detect(llama_dir=bindir, nvml=FakeNvml(two_4090s()), sysfs_root=tmp_path, env={}, cuda_probe=probe)
    assert [d.pci_bus_id for d in result.devices[:2]] == ["0000:01:00.0", "0000:41:00.0"]
    assert any(e.source == "CUDA driver" and "libcuda" in e.message for e in result.errors)


def test_nvml_missing_still_lists_llama_devices_with_catalogue_bandwidth(fake_llama, tmp_path):
    bindir = fake_llama("cuda_two.txt")
    nvml = FakeNvml([rtx4090()], init_error=NVMLError_LibraryNotFound)
    result = detect(llama_dir=bindir, nvml=nvml, sysfs_root=tmp_path, env={}, cuda_probe=no_probe)
    assert names(result) == ["CUDA0", "CUDA1", "CPU"]
    cuda0 = result.devices[0]
    assert cuda0.bandwidth_bytes_per_s == 1008e9 and cuda0.sources["bandwidth"].startswith("catalogue: RTX 4090")
    assert cuda0.pci_bus_id is None and "match" not in cuda0.sources
    assert any(e.source == "NVML" and "no NVIDIA driver" in e.message for e in result.errors)


def test_lost_gpu_and_degraded_link_are_reported_per_device(fake_llama, tmp_path):
    bindir = fake_llama("cuda_two.txt")
    nvml = FakeNvml([rtx4090("01", pcie=(4, 4, 4, 16)), rtx3090("02", lost=True)])
    result = detect(llama_dir=bindir, nvml=nvml, sysfs_root=tmp_path, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, cuda_probe=None)
    cuda0, cuda1 = result.devices[:2]
    assert any("x4" in w for w in cuda0.warnings)
    # The lost GPU has no name in NVML, so llama.cpp's CUDA1 cannot be tied to it: it is listed, unmatched.
    assert cuda1.description == "NVIDIA GeForce RTX 3090" and cuda1.total_bytes == 24124 * MiB
    assert any("no NVIDIA GPU named" in w for w in cuda1.warnings)
    (lost,) = result.hidden
    assert "GPU is lost" in lost.errors["name"]


def test_amd_rocm_and_vulkan_duplicate(fake_llama, tmp_path):
    write_tree(tmp_path, amd_card(0, "0000:03:00.0", 24 * GiB, 1 * GiB))
    bindir = fake_llama("rocm_vulkan_amd.txt")
    result = detect(llama_dir=bindir, nvml=FakeNvml([]), sysfs_root=tmp_path, env={})
    rocm, vulkan, cpu = result.devices
    assert (rocm.name, rocm.pci_bus_id, rocm.vendor, rocm.bandwidth_bytes_per_s) == ("ROCm0", "0000:03:00.0", "amd", 960e9)
    assert rocm.temperature_c == 45.0 and rocm.numa_node == 1
    assert vulkan.name == "Vulkan0" and vulkan.pci_bus_id == "0000:03:00.0"
    assert any("only once" in w for w in vulkan.warnings)


def test_amd_without_llama_cpp_is_guessed_as_rocm(no_llama_env, tmp_path):
    files = amd_card(0, "0000:03:00.0", 24 * GiB, 1 * GiB)
    files.update(amd_card(1, "0000:0c:00.0", 512 * MiB, 0, product=None))
    write_tree(tmp_path, files)
    result = detect(nvml=FakeNvml([]), sysfs_root=tmp_path, env={})
    assert names(result) == ["ROCm0", "CPU"]
    assert result.devices[0].name_guessed
    assert result.hidden[0].kind == DeviceKind.IGPU


def test_metal_and_blas(fake_llama, tmp_path):
    bindir = fake_llama("metal_blas.txt")
    result = detect(llama_dir=bindir, nvml=FakeNvml([]), sysfs_root=tmp_path, env={})
    mtl, blas, cpu = result.devices
    assert (mtl.name, mtl.kind, mtl.bandwidth_bytes_per_s) == ("MTL0", DeviceKind.GPU, 400e9)
    assert "Apple M2 Max 96 GB" in mtl.sources["bandwidth"]
    assert (blas.name, blas.kind, blas.total_bytes) == ("BLAS", DeviceKind.ACCEL, 0)
    assert cpu.kind == DeviceKind.CPU


def test_igpu_goes_after_gpus_and_duplicates_after_that(fake_llama, tmp_path):
    bindir = fake_llama("cuda_vulkan_igpu.txt")
    result = detect(llama_dir=bindir, nvml=FakeNvml([rtx4090()]), sysfs_root=tmp_path, env={}, cuda_probe=None)
    assert names(result) == ["CUDA0", "Vulkan1", "Vulkan0", "CPU"]
    igpu = result.device("vulkan1")
    assert igpu.kind == DeviceKind.IGPU and any("no discrete GPU" in w for w in igpu.warnings)


def test_virtual_cuda_devices_share_one_gpu(fake_llama, tmp_path):
    bindir = fake_llama("cuda_virtual.txt")
    probe = lambda env: [CudaDevice(0, "NVIDIA GeForce RTX 4090", "0000:01:00.0")]
    result = detect(llama_dir=bindir, nvml=FakeNvml([rtx4090()]), sysfs_root=tmp_path, env={}, cuda_probe=probe)
    v0, v1 = result.devices[:2]
    assert v0.pci_bus_id == v1.pci_bus_id == "0000:01:00.0"
    assert v0.total_bytes == 12040 * MiB
    assert any("virtual device" in w for w in v1.warnings)


def test_failing_llama_server_is_a_source_error(fake_llama, tmp_path):
    bindir = fake_llama(None, exit_code=1, stderr="error: something broke\n")
    result = detect(llama_dir=bindir, nvml=FakeNvml([rtx4090()]), sysfs_root=tmp_path, env={}, cuda_probe=None)
    assert names(result) == ["CUDA0", "CPU"] and result.devices[0].name_guessed
    assert any("something broke" in e.message for e in result.errors)


def test_rpc_hosts_default_to_llama_arg_rpc(no_llama_env, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = detect(nvml=FakeNvml([]), sysfs_root=tmp_path, env={"LLAMA_ARG_RPC": f"127.0.0.1:{port}"}, connect_timeout=1)
    (host,) = result.rpc_hosts
    assert host.endpoint == f"127.0.0.1:{port}" and host.status == "refused"


def test_real_sources_never_raise(no_llama_env):
    """The machine's own NVML, sysfs and host: whatever is there, detect() returns."""
    result = detect(rpc=[])
    assert result.devices[-1].name == "CPU"
    assert result.host.logical_cores >= 1
