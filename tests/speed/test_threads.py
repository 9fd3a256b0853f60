"""Thread and NUMA advice: sysfs parsing on fake trees, and the advice for one- and two-socket machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.speed.predict import CpuFacts
from app.speed.threads import _cpu_list, advise, numa_nodes, pci_numa_node


def _sysfs(root: Path, nodes: dict[int, str], gpus: dict[str, int]) -> Path:
    for n, cpus in nodes.items():
        d = root / f"devices/system/node/node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    for bus, node in gpus.items():
        d = root / "bus/pci/devices" / bus
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
    return root


@pytest.mark.parametrize("text,want", [
    ("0-3", (0, 1, 2, 3)),
    ("0-1,8-9", (0, 1, 8, 9)),
    ("5", (5,)),
    ("", ()),
    ("x-y,2", (2,)),
    ("3-1", ()),
    ("0-99999999", ()),
])
def test_cpu_lists_parse_as_linux_writes_them(text, want):
    assert _cpu_list(text) == want


def test_one_socket_gets_one_thread_per_physical_core(tmp_path):
    root = _sysfs(tmp_path, {0: "0-15"}, {})
    adv = advise(CpuFacts(8, ("avx2",), 3600.0), cpu_share=0.6, sys_root=root)
    assert (adv.threads, adv.threads_batch, adv.numa) == (8, 8, None)
    assert "physical core" in adv.lines[0]


def test_a_gpu_on_the_second_socket_binds_to_that_node(tmp_path):
    root = _sysfs(tmp_path, {0: "0-15,32-47", 1: "16-31,48-63"}, {"0000:81:00.0": 1})
    nodes = numa_nodes(root)
    assert [n.id for n in nodes] == [0, 1] and len(nodes[1].cpus) == 32
    assert pci_numa_node("0000:81:00.0", root) == 1
    assert pci_numa_node("81:00.0", root) == 1  # the short form NVML can print
    adv = advise(CpuFacts(32, ("avx2",), 3000.0), cpu_share=0.2, gpus=[("CUDA0", "0000:81:00.0")], sys_root=root)
    assert (adv.numa, adv.numa_node, adv.threads) == ("numactl", 1, 16)
    assert any("numactl --cpunodebind=1 --membind=1" in line and "CUDA0" in line for line in adv.lines)


def test_cpu_heavy_work_on_two_sockets_is_distributed(tmp_path):
    root = _sysfs(tmp_path, {0: "0-7", 1: "8-15"}, {"0000:01:00.0": 0})
    adv = advise(CpuFacts(16), cpu_share=0.8, gpus=[("CUDA0", "0000:01:00.0")], sys_root=root)
    assert adv.numa == "distribute" and adv.threads == 16


def test_unknown_gpu_node_is_said(tmp_path):
    root = _sysfs(tmp_path, {0: "0-7", 1: "8-15"}, {"0000:01:00.0": -1})
    assert pci_numa_node("0000:01:00.0", root) is None  # -1: no affinity
    adv = advise(CpuFacts(16), cpu_share=0.1, gpus=[("CUDA0", "0000:01:00.0")], sys_root=root)
    assert adv.numa == "distribute" and any("not known" in line for line in adv.lines)


def test_gpu_only_work_says_threads_hardly_matter(tmp_path):
    adv = advise(CpuFacts(4), cpu_share=0.01, nodes=[], sys_root=tmp_path)
    assert any("hardly matters" in line for line in adv.lines)


def test_no_sysfs_means_no_numa_claims(tmp_path):
    assert numa_nodes(tmp_path / "absent") == []
    assert pci_numa_node("0000:01:00.0", tmp_path / "absent") is None
    assert pci_numa_node(None) is None


def test_more_threads_than_cores_is_warned_with_the_measured_cost(tmp_path):
    adv = advise(CpuFacts(2), cpu_share=1.0, nodes=[], sys_root=tmp_path, requested=4)
    assert adv.threads == 2 and any("-t 4 is more than the 2 physical cores" in line for line in adv.lines)
