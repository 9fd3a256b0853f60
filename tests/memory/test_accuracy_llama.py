"""Our estimate against llama.cpp's own dry run, on the full matrix, with the real binaries.

Tolerances (issue "Memory model"): model and context within 1% or 16 MiB per
device, compute within 10% or 64 MiB (plus 1 MiB because llama.cpp floors its
printed MiB).
"""

from __future__ import annotations

import re

import pytest

from app.command.parse import settings_from_args
from app.memory.compute import APPROXIMATE
from app.memory.estimator import estimate
from app.model import open_model

from .accuracy import CASES, MiB, errors, list_rpc_devices, run_case

pytestmark = pytest.mark.llama


def _model_path(case, tiny_models, sparse_models):
    if case.model.startswith("tiny:"):
        return tiny_models[case.model[5:]]
    return sparse_models[case.model]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_estimate_matches_fit_print(case, llama_bin, rpc_servers, tiny_models, sparse_models):
    servers = rpc_servers(case.n_rpc) if case.n_rpc else []
    result = run_case(case, _model_path(case, tiny_models, sparse_models), llama_bin, [s.endpoint for s in servers])
    rows = errors(result)
    assert not [n for n in result.ours.notes if n.startswith(APPROXIMATE)], "the compute graph was built"
    assert {r[0] for r in rows} == {d.name for d in result.ours.devices}, "device names and order follow llama.cpp"
    assert [r.name for r in result.theirs] == [d.name for d in result.ours.devices]
    misses = [f"{dev} {q}: ours {o:.1f} MiB vs llama.cpp {t:.0f} MiB" for dev, q, o, t, ok in rows if not ok]
    assert not misses, "\n".join(misses)


SERVER_CASES = [
    ("qwen3moe", 2, "-c 4096 -ngl all -ts 1,1 -fa on"),
    ("qwen3moe", 1, "-c 8192 -np 2 -ngl all -cmoe -fa off"),
    ("gpt-oss", 2, "-c 4096 -ngl all -ts 2,1 -ncmoe 1"),
    ("deepseek2", 1, "-c 2048 -ngl all -fa on"),
    ("llama", 0, "-c 2048 -np 1"),
    ("granitehybrid", 1, "-c 4096 -ngl all"),
]

_BUF = re.compile(r"(\S+) (model|KV|RS|compute|output) buffer size =\s*([\d.]+) MiB")


@pytest.mark.parametrize("arch,n_rpc,args", SERVER_CASES, ids=[f"{a}-{n}rpc" for a, n, _ in SERVER_CASES])
def test_server_mode_matches_logged_buffers(arch, n_rpc, args, llama_bin, rpc_servers, llama_server, tiny_models):
    """Server mode (logits for the slots, auto -np) against the buffer sizes llama-server -lv 4 logs."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    extra = (["--rpc", ",".join(endpoints)] if endpoints else []) + args.split()
    # list the devices first: an RPC server serves one client at a time
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    srv = llama_server(tiny_models[arch], *extra, "--fit", "off", "--no-repack", "-lv", "4")
    logged: dict[tuple[str, str], float] = {}
    for buft, kind, mib in _BUF.findall(srv.output()):
        logged[(buft, kind)] = logged.get((buft, kind), 0.0) + float(mib)
    assert logged, srv.output()[-3000:]
    srv.stop()
    est = estimate(open_model(tiny_models[arch]), devices, settings_from_args(args.split(), tool="server"))
    assert not [n for n in est.notes if n.startswith(APPROXIMATE)], "the compute graph was built"
    by_buft = {d.buft: d.name for d in devices}
    for (buft, kind), mib in logged.items():
        dev = est.device(by_buft.get(buft, "CPU"))
        ours = {"model": dev.model, "KV": dev.kv, "RS": dev.recurrent, "compute": dev.compute,
                "output": dev.output}[kind] / MiB
        if kind == "model" and buft not in by_buft:
            ours = est.host.model / MiB  # CPU / CPU_Mapped host buffers
        tol = max(0.10 * mib, 64) if kind == "compute" else max(0.01 * mib, 16)
        assert abs(ours - mib) <= tol, f"{buft} {kind}: ours {ours:.2f} MiB, llama-server logged {mib:.2f} MiB"
