"""Our auto-fit next to llama.cpp's own --fit on the same (memory-limited) RPC devices."""

from __future__ import annotations

import pytest

from app.memory.estimator import estimate
from app.memory.settings import LlamaSettings
from app.model import Role, open_model
from app.placement import CPU
from app.placement.autofit import auto_fit
from app.placement.llama_fit import llama_fit
from tests.memory.accuracy import list_rpc_devices

pytestmark = pytest.mark.llama
MiB = 1 << 20


def summary(p, est):
    exps = [b for b in p.model.blocks if b.role is Role.EXPERTS and not b.nextn]
    out = {}
    for d in p.devices:
        m = next((x for x in est.devices if x.name == d.name), None)
        out[d.name] = {
            "MiB": round((m.total if m else 0) / MiB),
            "layers": sum(1 for x in p.layer_device if x == d.name),
            "expert_layers": sum(1 for b in exps if p.device_of(b.id) == d.name),
        }
    out[CPU] = {"expert_layers": sum(1 for b in exps if p.device_of(b.id) == CPU)}
    return out


@pytest.mark.parametrize("spec,mems,ctx", [("qwen3-30b-a3b", [6000, 3000], 16384), ("gpt-oss-120b", [24000, 12000], 32768)])
def test_auto_fit_vs_llama_cpp_fit(spec, mems, ctx, sparse_models, rpc_servers, llama_bin, record_property):
    servers = rpc_servers(2, memory_mib=mems)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    model = open_model(sparse_models[spec])
    settings = LlamaSettings(n_ctx=ctx, tool="fit-params")
    margin = 512 * MiB
    fitted_args, theirs = llama_fit(model, sparse_models[spec], devices, settings, rpc=endpoints, margin=margin,
                                    llama_dir=llama_bin)
    est_theirs = estimate(model, devices, settings, theirs.weight_placement())
    ours = auto_fit(model, devices, settings, margin=margin)
    a, b = summary(ours.placement, ours.estimate), summary(theirs, est_theirs)
    record_property("fit_comparison", {"ours": a, "llama.cpp": b, "llama.cpp args": " ".join(fitted_args)[:300]})
    print(f"\n{spec} on {mems} MiB, -c {ctx}:\n  ours      {a}\n  llama.cpp {b}")
    # ours never exceeds a budget by our (exact) estimate
    for d in devices:
        m = next((x for x in ours.estimate.devices if x.name == d.name), None)
        assert m is None or m.total <= d.free - margin
    # and it keeps at least as many expert layers off the CPU as llama.cpp does
    assert a[CPU]["expert_layers"] <= b[CPU]["expert_layers"]
