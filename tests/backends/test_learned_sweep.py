"""After one dry run, later placements agree with llama.cpp where the learned figures are claimed to transfer.

A real placement sweep on the Vulkan build's Vulkan0 (lavapipe), alone and with two RPC hosts: one placement is
dry-run and learned (app/memory/learned.py) through the session, as Verify or the background check does it; then
every other placement of the sweep is estimated (a figure is "verified" where a learned one applies) and dry-run
too. Every figure the session calls verified must equal llama.cpp's to the printed MiB; the test prints how many
figures were exact before and after learning, and how many were claimed.

Measured here (lavapipe, llama-3.1-8b Q4_K_M, -c 8192): moving one layer's FFN to the CPU, layer 5 to 26, with the
dry run of layer 11: the learned figure applies to every placement whose Vulkan0 neighbourhoods match (the layers
with the same quantization pattern around the moved one), and nowhere else. Before the Vulkan backend's graph
reordering was replayed, Vulkan0's compute buffer was 15 MiB under the estimate there and the claims fixed it;
now every figure of the sweep is exact before learning too, and the claims must keep it so.
"""

from __future__ import annotations

import os

import pytest

from app.devices.detect import detect
from app.memory.device_adapter import from_detected
from app.memory.learned import KINDS
from app.memory.settings import LlamaSettings
from app.placement.placement import Placement
from app.session import Session
from tests import gguf_factory as gf
from tests.llama_fixtures import VULKAN_ENV

pytestmark = [pytest.mark.llama, pytest.mark.slow]

MiB = 1 << 20
SETTINGS = LlamaSettings(n_ctx=8192, repack=False, tool="fit-params")


@pytest.fixture(scope="module")
def l8b(tmp_path_factory):
    return gf.write_sparse_model("llama-3.1-8b", tmp_path_factory.mktemp("sweep") / "llama-3.1-8b.gguf")


def _figure(mem, kind: str) -> int:
    return {"model": mem.model, "context": mem.context, "compute": mem.compute}[kind]


def _sweep(session: Session, place, points, learn_at, bin_dir, env) -> dict:
    """Learn from the dry run of ``place(learn_at)``, then dry-run every other point; count the figures."""

    def dry():
        job = session.dry_run_job(llama_dir=bin_dir, env=env, timeout=300)
        return job, job.run.run()

    place(learn_at)
    job, rows = dry()
    session.learn_dry_run(job, rows)
    assert session.verification.all_verified, session.verification
    for r in rows:  # the placement that was run: llama.cpp's figures exactly
        mem = session.estimate.device(r.name)
        assert [_figure(mem, k) // MiB for k in KINDS] == [r.model, r.context, r.compute], (r, mem)
    n = dict(figures=0, exact_before=0, exact_after=0, claimed=0, claimed_compute=0, fixed_by_claim=0)
    for point in points:
        if point == learn_at:
            continue
        place(point)
        v = session.verification
        raw = session.estimate_for(session.placement)  # what the estimate says without what was learned
        _job, rows = dry()
        for r in rows:
            for k in KINDS:
                theirs = getattr(r, k)
                before = _figure(raw.device(r.name), k) // MiB == theirs
                after = _figure(session.estimate.device(r.name), k) // MiB == theirs
                claimed = k in v.verified.get(r.name, set())
                if claimed:
                    assert after, (point, r.name, k, theirs, _figure(session.estimate.device(r.name), k) / MiB)
                n["figures"] += 1
                n["exact_before"] += before
                n["exact_after"] += after
                n["claimed"] += claimed
                n["claimed_compute"] += claimed and k == "compute"
                n["fixed_by_claim"] += claimed and after and not before
    print(f"\nsweep of {len(points) - 1} placements after one dry run: {n}")
    return n


def test_a_vulkan0_sweep_after_one_dry_run(llama_vulkan_bin, l8b):
    env = {**os.environ, **VULKAN_ENV}
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env=env, cuda_probe=None, amd=False).devices)
    assert [d.name for d in lanes] == ["Vulkan0"]
    s = Session.open(l8b, lanes, settings=SETTINGS)

    def place(k: int) -> None:  # layer k's FFN in host memory, everything else on Vulkan0
        st = SETTINGS.copy(n_gpu_layers=-2, overrides=[(rf"blk\.{k}\.ffn_(up|down|gate)", "CPU")])
        s.replace(Placement.from_settings(s.model, lanes, st).with_settings(SETTINGS), f"FFN {k} on the CPU")

    n = _sweep(s, place, list(range(5, 27)), 11, llama_vulkan_bin, env)
    assert n["claimed_compute"] >= 3  # the learned compute figure transfers to other placements
    assert n["exact_before"] == n["figures"]  # the replay (graph reordering included) is exact on every placement
    assert n["exact_after"] == n["exact_before"] + n["fixed_by_claim"]  # nothing exact was made wrong


def test_vulkan0_with_two_rpc_hosts_after_one_dry_run(llama_vulkan_bin, rpc_servers, l8b):
    """Layers move between two RPC hosts; Vulkan0 keeps the last 12 layers: its figures transfer to every split."""
    env = {**os.environ, **VULKAN_ENV}
    eps = [srv.endpoint for srv in rpc_servers(2)]
    lanes = from_detected(detect(llama_vulkan_bin, rpc=eps, env=env, cuda_probe=None, amd=False).devices)
    assert [d.name for d in lanes] == ["RPC0", "RPC1", "Vulkan0"]
    s = Session.open(l8b, lanes, settings=SETTINGS)
    n_layer = s.model.params.n_layer

    def place(a: int) -> None:
        st = SETTINGS.copy(n_gpu_layers=-2, tensor_split=[a, n_layer - 12 - a, 12])
        s.replace(Placement.from_settings(s.model, lanes, st).with_settings(SETTINGS), f"-ts {a}")

    points = list(range(2, 20, 2))
    n = _sweep(s, place, points, 10, llama_vulkan_bin, env)
    # Vulkan0's weights, cache and compute are claimed in every other placement of the sweep (and hold)
    assert n["claimed_compute"] >= len(points) - 1
    assert n["claimed"] >= 3 * (len(points) - 1)
