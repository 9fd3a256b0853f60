"""AMD sysfs and host facts from fake trees under tmp_path."""

from __future__ import annotations

from app.devices.amd import read_amd
from app.devices.host import cpu_device, cpu_model, numa_nodes, read_host

from .helpers import amd_card, write_tree

GiB = 1024**3


def test_reads_amd_cards_and_skips_others(tmp_path):
    files = {}
    files.update(amd_card(0, "0000:03:00.0", 24 * GiB, 2 * GiB))
    files.update(amd_card(1, "0000:0c:00.0", 512 * 1024**2, 100 * 1024**2, product=None))  # an APU
    files.update(amd_card(2, "0000:01:00.0", 8 * GiB, 0, vendor="0x10de"))  # NVIDIA: not ours
    write_tree(tmp_path, files)
    dgpu, apu = read_amd(tmp_path)
    assert (dgpu.name, dgpu.pci_bus_id, dgpu.total_bytes, dgpu.used_bytes, dgpu.free_bytes) == (
        "AMD Radeon RX 7900 XTX", "0000:03:00.0", 24 * GiB, 2 * GiB, 22 * GiB,
    )
    assert (dgpu.utilisation_percent, dgpu.temperature_c, dgpu.power_w, dgpu.numa_node) == (7.0, 45.0, 65.0, 1)
    assert dgpu.pcie.current_gen == 4 and dgpu.pcie.current_width == 16
    assert dgpu.bandwidth_bytes_per_s == 960e9 and "catalogue" in dgpu.bandwidth_source
    assert not dgpu.integrated and dgpu.warnings == ()
    assert apu.name == "AMD GPU 0x744c" and apu.integrated and apu.bandwidth_bytes_per_s is None


def test_amd_degraded_link_and_missing_memory(tmp_path):
    files = amd_card(0, "0000:03:00.0", 16 * GiB, 0, link=("8.0 GT/s PCIe", "4", "16.0 GT/s PCIe", "16"))
    del files["sys/class/drm/card0/device/mem_info_vram_total"]
    write_tree(tmp_path, files)
    (gpu,) = read_amd(tmp_path)
    assert any("x4" in w for w in gpu.warnings) and any("generation 3 of 4" in w for w in gpu.warnings)
    assert "mem_info_vram_total" in gpu.errors["memory"]


def test_no_drm_directory_means_no_cards(tmp_path):
    assert read_amd(tmp_path) == ()


def test_host_facts(tmp_path):
    write_tree(tmp_path, {
        "proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n",
        "sys/devices/system/node/node0/cpulist": "0-95\n",
        "sys/devices/system/node/node0/meminfo": "Node 0 MemTotal:       263842000 kB\n",
        "sys/devices/system/node/node1/cpulist": "96-191\n",
        "sys/devices/system/node/node1/meminfo": "Node 1 MemTotal:       264000000 kB\n",
        "sys/devices/system/node/possible": "0-1\n",
    })
    assert cpu_model(tmp_path) == "AMD EPYC 9654 96-Core Processor"
    nodes = numa_nodes(tmp_path)
    assert [(n.id, n.cpus, n.memory_total_bytes) for n in nodes] == [
        (0, "0-95", 263842000 * 1024), (1, "96-191", 264000000 * 1024),
    ]
    host = read_host(tmp_path)
    assert host.ram_total_bytes > 0 and 0 < host.ram_available_bytes <= host.ram_total_bytes
    assert host.logical_cores >= 1
    cpu = cpu_device(host)
    assert cpu.name == "CPU" and cpu.kind == "cpu" and cpu.total_bytes == host.ram_total_bytes
    assert cpu.description.startswith("AMD EPYC 9654")
    assert any("NUMA" in w for w in cpu.warnings)
