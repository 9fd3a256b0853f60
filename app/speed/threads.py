"""Thread-count and NUMA advice for the CPU's part of the work.

llama.cpp's CPU kernels scale with *physical* cores: its default ``-t`` is the physical core count
(``cpu_get_num_math`` in ``common/common.cpp``), SMT siblings share a core's SIMD units, and threads beyond the
cores only make the spinning thread pool wait for each other (measured on this project's machine:
``benchmarks/speed_data``). On a machine with several NUMA nodes, memory on the other socket costs a hop
over the interconnect, so the GPU's node (``/sys/bus/pci/devices/BUS/numa_node``) is where the process, its
threads and its RAM should live (``numactl --cpunodebind=N --membind=N`` with llama.cpp's ``--numa numactl``),
unless the CPU itself holds most of the weights, where ``--numa distribute`` spreads them over every node's
bandwidth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .predict import CpuFacts


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]


@dataclass
class ThreadAdvice:
    threads: int  # -t
    threads_batch: int  # -tb
    numa: str | None = None  # --numa value to use, None = leave it off
    numa_node: int | None = None  # the node to bind to (numactl), None = no binding advised
    lines: list[str] = field(default_factory=list)


def _cpu_list(text: str) -> tuple[int, ...]:
    """``0-3,8-11`` -> (0, 1, 2, 3, 8, 9, 10, 11); malformed parts are skipped."""
    out: list[int] = []
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        try:
            lo = int(a)
            hi = int(b) if b else lo
        except ValueError:
            continue
        if 0 <= lo <= hi < 1 << 16:
            out.extend(range(lo, hi + 1))
    return tuple(out)


def numa_nodes(sys_root: str | os.PathLike = "/sys") -> list[NumaNode]:
    """The NUMA nodes Linux lists, with their CPUs; [] where the system says nothing (not Linux)."""
    base = Path(sys_root) / "devices/system/node"
    nodes = []
    try:
        entries = sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    except (OSError, ValueError):
        return []
    for d in entries:
        try:
            nodes.append(NumaNode(int(d.name[4:]), _cpu_list((d / "cpulist").read_text()[:4096])))
        except (OSError, ValueError):
            continue
    return nodes


def pci_numa_node(bus_id: str | None, sys_root: str | os.PathLike = "/sys") -> int | None:
    """The NUMA node of a PCI device (``0000:01:00.0``), or None where unknown (-1 in sysfs: no affinity)."""
    if not bus_id:
        return None
    name = bus_id.lower()
    if name.count(":") == 1:
        name = "0000:" + name
    try:
        node = int((Path(sys_root) / "bus/pci/devices" / name / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def advise(
    cpu: CpuFacts,
    cpu_share: float,
    nodes: list[NumaNode] | None = None,
    gpus: list[tuple[str, str | None]] | None = None,
    sys_root: str | os.PathLike = "/sys",
    requested: int | None = None,
) -> ThreadAdvice:
    """The -t/-tb (and --numa) to use. ``cpu_share``: the fraction of the decode time the CPU spends (its part
    of the weights); ``gpus``: (name, PCI bus id) of the GPUs the placement uses."""
    nodes = numa_nodes(sys_root) if nodes is None else nodes
    cores = max(1, cpu.physical_cores)
    adv = ThreadAdvice(cores, cores)
    adv.lines.append(
        f"-t {cores} -tb {cores}: one thread per physical core (llama.cpp's default); SMT siblings and extra threads "
        "share the same SIMD units and slow the thread pool down"
    )
    if requested and requested > cores:
        adv.lines.append(
            f"-t {requested} is more than the {cores} physical cores: llama.cpp's thread pool spins while it "
            "waits, so the extra threads take turns with the working ones (measured on a 2-core machine, "
            "benchmarks/speed_data: -t 4 generated 19x slower than -t 2); the speed shown is for "
            f"{cores} threads"
        )
    if cpu_share < 0.05:
        adv.lines.append("the CPU does under 5% of the decode work here: the thread count hardly matters")
    if len(nodes) > 1:
        gpu_nodes = {n: pci_numa_node(bus, sys_root) for n, bus in (gpus or [])}
        known = {v for v in gpu_nodes.values() if v is not None}
        per_node = max((len(n.cpus) for n in nodes), default=cores)
        if cpu_share >= 0.5:
            adv.numa = "distribute"
            adv.lines.append(
                f"{len(nodes)} NUMA nodes and the CPU holds most of the work: --numa distribute spreads the threads "
                "over every node's memory bandwidth (drop the page cache once after changing it: llama.cpp warns)"
            )
        elif len(known) == 1:
            node = known.pop()
            logical = sum(len(n.cpus) for n in nodes) or cores
            node_cores = max(1, round(per_node * cores / logical))  # the node's physical cores
            adv.numa, adv.numa_node = "numactl", node
            adv.threads = adv.threads_batch = min(cores, node_cores)
            where = ", ".join(n for n, v in gpu_nodes.items() if v == node)
            adv.lines.append(
                f"{len(nodes)} NUMA nodes; {where} sits on node {node}: start llama-server under "
                f"`numactl --cpunodebind={node} --membind={node}` with --numa numactl and -t {adv.threads} (the node's "
                "cores), so the CPU's weights and threads stay next to the GPU"
            )
        else:
            adv.lines.append(
                f"{len(nodes)} NUMA nodes, and the GPUs' node is "
                + ("not known (no PCI bus id)" if not known else f"split over nodes {sorted(known)}")
                + ": --numa distribute is the safe choice"
            )
            adv.numa = "distribute"
    return adv
