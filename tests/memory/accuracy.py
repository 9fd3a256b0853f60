"""The estimator-vs-llama.cpp accuracy matrix, shared by the test and ``benchmarks/bench_estimator_accuracy.py``.

Each case is a llama.cpp command line (as a user would pass it, minus ``-m``
and ``--rpc``) on a model and a number of loopback RPC devices. The reference
is ``llama-fit-params --fit-print on`` with the same arguments plus
``--no-repack`` (the CPU build would otherwise repack CPU weights into a
``CPU_REPACK`` buffer that the printed table leaves out).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from app.llamacpp.fit_print import FitRow, run_fit_print
from app.command.parse import settings_from_args
from app.memory.estimator import Estimate, estimate
from app.lanes import Lane
from app.model import open_model

MiB = 1 << 20


@dataclass(frozen=True)
class Case:
    id: str
    model: str          # key: a sparse spec name or "tiny:<arch>"
    n_rpc: int
    args: tuple[str, ...]


def _c(id, model, n_rpc, args):
    return Case(id, model, n_rpc, tuple(args.split()))


CASES: list[Case] = [
    # Qwen3-30B-A3B (qwen3moe, 48 layers, 128 experts)
    _c("q30-cpu-4k", "qwen3-30b-a3b", 0, "-c 4096"),
    _c("q30-cpu-32k-faoff", "qwen3-30b-a3b", 0, "-c 32768 -fa off"),
    _c("q30-1rpc-all", "qwen3-30b-a3b", 1, "-c 8192 -ngl all -fa on"),
    _c("q30-2rpc-ts31", "qwen3-30b-a3b", 2, "-c 8192 -ngl all -ts 3,1 -fa off"),
    _c("q30-3rpc-ts121-q8", "qwen3-30b-a3b", 3, "-c 16384 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("q30-1rpc-cmoe", "qwen3-30b-a3b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("q30-2rpc-ncmoe", "qwen3-30b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("q30-1rpc-ot", "qwen3-30b-a3b", 1, r"-c 4096 -ngl all -ot blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps=CPU"),
    _c("q30-1rpc-ngl20", "qwen3-30b-a3b", 1, "-c 4096 -ngl 20 -fa on"),
    _c("q30-2rpc-np4", "qwen3-30b-a3b", 2, "-c 16384 -np 4 -ngl all -ts 2,1 -fa on"),
    _c("q30-1rpc-long-q4", "qwen3-30b-a3b", 1, "-c 65536 -ngl all -fa on -ctk q4_0 -ctv q4_0 -ub 1024"),
    # Qwen3-235B-A22B (94 layers)
    _c("q235-cpu", "qwen3-235b-a22b", 0, "-c 4096"),
    _c("q235-3rpc-cmoe", "qwen3-235b-a22b", 3, "-c 32768 -ngl all -ts 1,1,1 -cmoe -fa on"),
    _c("q235-2rpc-ngl50", "qwen3-235b-a22b", 2, "-c 8192 -ngl 50 -ts 1,3 -fa off"),
    # DeepSeek-V3 (MLA, dense leading layers, shared experts)
    _c("dsv3-cpu", "deepseek-v3", 0, "-c 4096 -fa on"),
    _c("dsv3-1rpc-cmoe", "deepseek-v3", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("dsv3-2rpc-faoff", "deepseek-v3", 2, "-c 4096 -ngl all -ts 1,1 -cmoe -fa off"),
    _c("dsv3-1rpc-q8", "deepseek-v3", 1, "-c 32768 -ngl all -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    # gpt-oss-120b (sliding window, sinks, MXFP4)
    _c("goss-cpu", "gpt-oss-120b", 0, "-c 8192 -fa on"),
    _c("goss-1rpc-cmoe", "gpt-oss-120b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("goss-2rpc-swafull", "gpt-oss-120b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -fa on -ncmoe 10"),
    _c("goss-1rpc-faoff-np", "gpt-oss-120b", 1, "-c 8192 -np 2 -ngl all -cmoe -fa off"),
    # tiny real models (these also load in llama-server)
    _c("tiny-llama-2rpc", "tiny:llama", 2, "-c 2048 -ngl all -ts 1,1"),
    _c("tiny-qwen3moe-3rpc", "tiny:qwen3moe", 3, "-c 4096 -ngl all -ts 1,1,2 -ncmoe 1 -fa off"),
    _c("tiny-deepseek2-1rpc", "tiny:deepseek2", 1, "-c 4096 -ngl all -cmoe"),
    _c("tiny-gptoss-2rpc", "tiny:gpt-oss", 2, "-c 4096 -ngl all -ts 2,1 -fa on"),
    _c("tiny-granite-1rpc", "tiny:granitehybrid", 1, "-c 4096 -ngl all -np 2"),
    _c("tiny-granite-2rpc", "tiny:granitehybrid", 2, "-c 4096 -ngl all -ts 1,1"),
    _c("tiny-llama4-1rpc", "tiny:llama4", 1, "-c 16384 -ngl all -cmoe"),
    _c("tiny-llama-nkvo", "tiny:llama", 1, "-c 4096 -ngl all -nkvo -fa off"),
    _c("tiny-llama-ub16", "tiny:llama", 2, "-c 4096 -ngl 2 -ts 1,1 -ub 16 -fa off"),
    _c("tiny-llama-ub2048", "tiny:llama", 1, "-c 8192 -ngl all -ub 2048 -b 4096"),
    _c("goss-2rpc-pipeline", "gpt-oss-120b", 2, "-c 8192 -ngl all -ts 1,1 -fa off"),
    _c("q30-cpu-np3-nokvu", "qwen3-30b-a3b", 0, "-c 12288 -np 3 -fa off"),
]


def list_rpc_devices(server: Path, endpoints: list[str]) -> list[Lane]:
    """RPC devices as llama.cpp reports them (name, buffer type, free/total)."""
    if not endpoints:
        return []
    out = subprocess.run([str(server), "--rpc", ",".join(endpoints), "--list-devices"], capture_output=True,
                         text=True, timeout=60).stdout
    devs = []
    local_index: dict[str, int] = {}
    for m in re.finditer(r"^\s+(RPC\d+): (\S+) \((\d+) MiB, (\d+) MiB free\)", out, re.M):
        name, endpoint, total, free = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        j = local_index.get(endpoint, 0)
        local_index[endpoint] = j + 1
        devs.append(Lane(name, f"RPC{j}[{endpoint}]", free * MiB, total * MiB, "rpc"))
    return devs


@dataclass
class Result:
    case: Case
    ours: Estimate
    theirs: list[FitRow]


def run_case(case: Case, model_path: Path, bin_dir: Path, endpoints: list[str]) -> Result:
    rpc = ["--rpc", ",".join(endpoints[: case.n_rpc])] if case.n_rpc else []
    args = [*rpc, *case.args, "--no-repack"]
    theirs = run_fit_print(model_path, args, llama_dir=bin_dir)
    devices = list_rpc_devices(bin_dir / "llama-server", endpoints[: case.n_rpc])
    settings = settings_from_args(list(case.args), tool="fit-params")
    model = open_model(model_path)
    return Result(case, estimate(model, devices, settings), theirs)


def errors(result: Result) -> list[tuple[str, str, float, float, bool]]:
    """(device, quantity, ours MiB, theirs MiB, within tolerance) for every row and quantity."""
    out = []
    for row in result.theirs:
        mine = result.ours.device(row.name)
        for q, ours_b, theirs_mib, rel, floor in (
            ("model", mine.model, row.model, 0.01, 16),
            ("context", mine.context, row.context, 0.01, 16),
            ("compute", mine.compute, row.compute, 0.10, 64),
        ):
            ours_mib = ours_b / MiB
            ok = abs(ours_mib - theirs_mib) <= max(rel * theirs_mib, floor) + 1  # +1: llama.cpp floors to MiB
            out.append((row.name, q, ours_mib, float(theirs_mib), ok))
    return out
