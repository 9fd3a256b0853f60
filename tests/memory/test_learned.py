"""Figures learned from the user's llama.cpp (app/memory/learned.py): what each key keeps, how a learned figure is
applied and guarded, the bounded store, and the dry run that the next edit cancels. No llama.cpp here (the real
sweeps are in tests/backends/test_learned_sweep.py); the dry-run rows are made from the estimate plus a known
difference, so every expectation below follows from the rules, not from a recorded result."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from app.lanes import Lane
from app.llamacpp.fit_print import FitPrintError, FitRow
from app.memory import learned
from app.memory.estimator import Estimator
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.placement.placement import Placement
from tests import gguf_factory as gf

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def l8b(tmp_path_factory):
    return open_model(gf.write_sparse_model("llama-3.1-8b", tmp_path_factory.mktemp("learned") / "l8b.gguf"))


LANES = [
    Lane("RPC0", "RPC0[127.0.0.1:5001]", 24 * GiB, 24 * GiB, "rpc", endpoint="127.0.0.1:5001"),
    Lane("RPC1", "RPC1[127.0.0.1:5002]", 24 * GiB, 24 * GiB, "rpc", endpoint="127.0.0.1:5002"),
    Lane("Vulkan0", "Vulkan0", 2 * GiB, 2 * GiB, "gpu", max_tensor_bytes=128 * MiB, alignment=16, max_buffer=GiB,
         host_alignment=64),
]
BASE = LlamaSettings(n_ctx=8192, repack=False, tool="fit-params")


def _placement(model, settings: LlamaSettings) -> Placement:
    return Placement.from_settings(model, LANES, settings).with_settings(BASE)


def _keys(model, p: Placement, est=None):
    e = Estimator(model)
    wp = p.weight_placement()
    est = est or e.estimate(p.devices, p.settings, wp)
    return learned.figure_keys(e, p.devices, p.settings, wp, est), est


def _ts(model, a: int, vk: int = 12) -> Placement:
    n = model.params.n_layer
    return _placement(model, BASE.copy(n_gpu_layers=-2, tensor_split=[a, n - vk - a, vk]))


def test_moving_layers_between_two_rpc_hosts_keeps_the_third_device_s_compute_key(l8b):
    keys = [_keys(l8b, _ts(l8b, a))[0] for a in (2, 8, 14)]
    # Vulkan0 holds the same last 12 layers: its neighbourhoods are unchanged, so is its key
    assert keys[0][("Vulkan0", "compute")] == keys[1][("Vulkan0", "compute")] == keys[2][("Vulkan0", "compute")]
    assert keys[0][("Vulkan0", "model")] == keys[1][("Vulkan0", "model")]
    assert keys[0][("Vulkan0", "context")] == keys[1][("Vulkan0", "context")]
    # RPC0's layers and cache did change: its model and context keys say so
    assert keys[0][("RPC0", "model")] != keys[1][("RPC0", "model")]
    assert keys[0][("RPC0", "context")] != keys[1][("RPC0", "context")]


def test_the_graph_s_shape_is_in_every_compute_key_and_only_there(l8b):
    base, _ = _keys(l8b, _ts(l8b, 4))
    p = _ts(l8b, 4)
    p.settings = p.settings.copy(n_ubatch=1024)
    ub, _ = _keys(l8b, p)
    for dev in ("RPC0", "RPC1", "Vulkan0", "CPU"):
        assert base[(dev, "compute")] != ub[(dev, "compute")]
        assert base[(dev, "model")] == ub[(dev, "model")] and base[(dev, "context")] == ub[(dev, "context")]
    p.settings = p.settings.copy(n_ubatch=512, n_ctx=16384)
    ctx, _ = _keys(l8b, p)
    assert all(base[(d, "context")] != ctx[(d, "context")] for d in ("RPC0", "RPC1", "Vulkan0"))


def test_llama_server_and_the_dry_run_tool_share_weights_and_cache_keys_but_not_compute(l8b):
    fit, _ = _keys(l8b, _ts(l8b, 4))
    p = _ts(l8b, 4)
    p.settings = p.settings.copy(tool="server", repack=False)
    server, _ = _keys(l8b, p)
    for dev in ("RPC0", "RPC1", "Vulkan0"):
        assert fit[(dev, "model")] == server[(dev, "model")]
        assert fit[(dev, "context")] == server[(dev, "context")]  # one stream of 8192 cells either way
        assert fit[(dev, "compute")] != server[(dev, "compute")]  # logits for 2048 vs 4 outputs, norm pins


def _rows(est, extra: dict[tuple[str, str], int]):
    """The dry run llama.cpp would print if it agreed with ``est`` except for ``extra`` MiB."""
    out = []
    for d in est.devices:
        figs = {"model": d.model, "context": d.context, "compute": d.compute}
        out.append(FitRow(d.name, *(figs[k] // MiB + extra.get((d.name, k), 0) for k in learned.KINDS)))
    return out


MACHINE = learned.Machine("build", "model", "devices")


def test_a_learned_figure_replaces_the_estimate_where_its_key_matches_and_nowhere_else(l8b):
    store = learned.LearnedStore(None)
    keys, est = _keys(l8b, _ts(l8b, 4))
    corr = learned.learn(store, MACHINE, keys, est, _rows(est, {("Vulkan0", "compute"): -15}))
    assert corr.deltas["Vulkan0"] == {"model": 0, "context": 0, "compute": -15}
    same = learned.apply(store, MACHINE, keys, est)
    assert same.all_verified and {d: n for d, n in same.corrected.items() if n} == {"Vulkan0": -15 * MiB}
    got = same.estimate.device("Vulkan0").compute
    assert got // MiB == est.device("Vulkan0").compute // MiB - 15
    assert got % MiB == est.device("Vulkan0").compute % MiB  # the bytes below the printed MiB are kept
    # another split between the RPC hosts: Vulkan0's compute and weights transfer, RPC0's weights do not
    keys2, est2 = _keys(l8b, _ts(l8b, 10))
    other = learned.apply(store, MACHINE, keys2, est2)
    assert other.verified["Vulkan0"] == {"model", "context", "compute"}
    assert "model" not in other.verified.get("RPC0", set()) and other.status("RPC0") != "verified"
    assert other.estimate.device("Vulkan0").compute == got
    assert "corrected by -15 MiB" in other.describe("Vulkan0")
    assert other.describe("RPC0") == "estimated"  # its boundary moved: weights, cache and compute all differ
    # another machine (build, model or devices) gets nothing
    elsewhere = learned.apply(store, learned.Machine("other build", "model", "devices"), keys2, est2)
    assert not elsewhere.verified and elsewhere.status("Vulkan0") == "estimated"


def test_a_matching_key_whose_estimate_moved_is_not_trusted(l8b):
    store = learned.LearnedStore(None)
    keys, est = _keys(l8b, _ts(l8b, 4))
    learned.learn(store, MACHINE, keys, est, _rows(est, {("Vulkan0", "compute"): -15}))
    est.device("Vulkan0").compute += 4096  # as if the replay now said otherwise for the same key
    v = learned.apply(store, MACHINE, keys, est)
    assert "Vulkan0 compute" in v.mismatched
    assert "compute" not in v.verified["Vulkan0"]
    assert v.estimate.device("Vulkan0").compute == est.device("Vulkan0").compute


def test_only_the_checked_lanes_are_learned(l8b):
    store = learned.LearnedStore(None)
    keys, est = _keys(l8b, _ts(l8b, 4))
    learned.learn(store, MACHINE, keys, est, _rows(est, {}), checked=["RPC0", "RPC1"])
    v = learned.apply(store, MACHINE, keys, est)
    assert set(v.verified) == {"RPC0", "RPC1"} and v.status("CPU") == "estimated"


def test_the_store_persists_is_bounded_and_survives_a_broken_file(tmp_path, l8b):
    path = tmp_path / "learned.json"
    store = learned.LearnedStore(path, limit=10)
    keys, est = _keys(l8b, _ts(l8b, 4))
    learned.learn(store, MACHINE, keys, est, _rows(est, {("Vulkan0", "compute"): 3}))
    assert len(store) == 10  # 4 devices x 3 kinds, the 2 oldest dropped
    again = learned.LearnedStore(path, limit=10)
    assert again.facts == store.facts
    assert learned.apply(again, MACHINE, keys, est).corrected.get("Vulkan0") == 3 * MiB
    path.write_text("{not json")
    assert len(learned.LearnedStore(path)) == 0  # logged and started afresh, never raised
    path.write_text(json.dumps({"version": 999, "facts": {"k": [1, 2, 3]}}))
    assert len(learned.LearnedStore(path)) == 0


def test_a_missing_llama_cpp_is_said_plainly(tmp_path, monkeypatch):
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run = learned.DryRun(tmp_path / "m.gguf", ["-c", "512"], llama_dir=tmp_path / "nothing-here")
    with pytest.raises(FitPrintError, match="llama-fit-params was not found"):
        run.run()


@pytest.mark.skipif(sys.platform == "win32", reason="a script stands in for llama-fit-params")
def test_the_next_edit_kills_a_dry_run_in_flight(tmp_path):
    tool = tmp_path / "llama-fit-params"
    pid_file = tmp_path / "pid"
    tool.write_text(f"#!{sys.executable}\nimport os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                    "time.sleep(60)\n")
    tool.chmod(0o755)
    run = learned.DryRun(tmp_path / "m.gguf", ["-c", "512"], llama_dir=tmp_path)
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _catch(run.run, errors))
    t.start()
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the dry run did not start"
        time.sleep(0.05)
    started = time.monotonic()
    run.cancel()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - started < 5
    assert len(errors) == 1 and isinstance(errors[0], learned.Cancelled)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the process is gone (killed, and reaped by communicate)
    with pytest.raises(learned.Cancelled):
        run.run()  # a cancelled run never starts again


def _catch(fn, errors):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test looks at it
        errors.append(exc)


@pytest.mark.skipif(sys.platform == "win32", reason="a script stands in for llama-fit-params")
def test_a_session_learns_from_a_dry_run_and_shows_which_figures_are_llama_cpps(tmp_path, l8b):
    """Session wiring: the job's arguments are parsed back as llama-fit-params reads them, the figures are kept
    under the placement's keys, and a later placement they transfer to is corrected."""
    from app.session import Session

    tool = tmp_path / "llama-fit-params"
    tool.write_text(f"#!{sys.executable}\n")
    tool.chmod(0o755)
    s = Session(l8b, LANES, settings=BASE)
    s.replace(_ts(l8b, 4), "ts 4")
    assert s.verification is None  # nothing learned: no claim either way
    job = s.dry_run_job(llama_dir=tmp_path)
    assert job.argv[:2] == ["--rpc", "127.0.0.1:5001,127.0.0.1:5002"] and "--no-repack" in job.argv
    raw = s.estimate_for(s.placement)
    s.learn_dry_run(job, _rows(raw, {("Vulkan0", "compute"): -15}))
    assert s.verification.all_verified
    assert s.estimate.device("Vulkan0").compute // MiB == raw.device("Vulkan0").compute // MiB - 15
    assert s.last_correction.deltas["Vulkan0"]["compute"] == -15
    assert [r.name for r in s.opinion.rows] == ["RPC0", "RPC1", "Vulkan0", "CPU"]
    # the drag preview of RPC0's last layer to RPC1 shows the figures the gauges will show after the drop
    last = max(il for il, d in enumerate(s.placement.layer_device[:-1]) if d == "RPC0")
    pv = s.preview([b.id for b in l8b.layer_blocks(last)], "RPC1")
    assert pv is not None and pv.estimate is not None, pv
    assert pv.estimate.device("Vulkan0").compute == s.estimate.device("Vulkan0").compute
    s.preview([], None)
    s.replace(_ts(l8b, 10), "ts 10")  # layers move between the RPC hosts only
    assert s.opinion is None  # the dry run was of another placement
    assert s.verification.status("Vulkan0") == "verified"
    assert s.verification.status("RPC0") != "verified"
    assert s.estimate.device("Vulkan0").compute // MiB == raw.device("Vulkan0").compute // MiB - 15
    s.set_settings(n_ubatch=1024)  # another graph: nothing of compute transfers
    assert "compute" not in s.verification.verified.get("Vulkan0", set())
    assert Path(tool).exists()
