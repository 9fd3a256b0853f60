"""The estimate says when part of it is not known exactly: compute buffers from the approximate formula,
RPC devices whose memory is unknown. Neither is ever silent, and the approximation never triggers on the
accuracy matrix."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute import core
from app.memory.compute import APPROXIMATE, CHECKED_ARCHS
from app.memory.estimator import Estimator, estimate
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.placement import CPU
from app.placement.presets import all_on_gpus
from tests.gguf_factory import GGUF_ARCH, SPARSE_SPECS, write_tiny_model

from .accuracy import CASES
from .test_accuracy_llama import SERVER_CASES

GiB = 1 << 30


def rpc_lanes(n: int, memory: int = 48 * GiB) -> list[Lane]:
    return [Lane(f"RPC{i}", f"RPC0[127.0.0.1:{50052 + i}]", memory, memory, "rpc") for i in range(n)]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return open_model(write_tiny_model("llama", tmp_path_factory.mktemp("notes") / "llama.gguf"))


def test_the_approximate_path_is_a_note_and_one_warning(tiny_llama, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no graph for this")

    monkeypatch.setattr(core, "_run", broken)
    est = Estimator(tiny_llama)
    devices = rpc_lanes(2)
    settings = LlamaSettings(n_ctx=4096, n_gpu_layers=-2, tensor_split=[1.0, 1.0])
    with caplog.at_level(logging.DEBUG, logger="app.memory.compute"):
        first = est.estimate(devices, settings)
        again = est.estimate(devices, settings)  # a cached result keeps its note
        other = est.estimate(devices, settings.copy(n_ctx=8192))  # another graph, the same failure
    expected = (
        "compute buffers are approximate: Layerdeck could not build llama.cpp's compute graph for 'llama' "
        "(RuntimeError: no graph for this), so compute uses a rough per-layer formula; weights and KV are exact. "
        "Use Verify (llama-fit-params) for the real compute sizes"
    )
    for e in (first, again, other):
        assert [n for n in e.notes if n.startswith(APPROXIMATE)] == [expected]
        assert all(d.compute > 0 for d in e.devices)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [expected]  # once per model, with the traceback
    assert warnings[0].exc_info is not None


def test_the_exact_path_has_no_approximate_note(tiny_llama):
    e = estimate(tiny_llama, rpc_lanes(2), LlamaSettings(n_ctx=4096, n_gpu_layers=-2, tensor_split=[1.0, 1.0]))
    assert not [n for n in e.notes if n.startswith(APPROXIMATE)]


def test_unknown_rpc_memory_is_a_note_and_no_capacity(tiny_llama):
    known, unknown = rpc_lanes(1)[0], Lane("RPC1", "RPC0[127.0.0.1:50053]", 0, 0, "rpc")
    e = estimate(tiny_llama, [known, unknown], LlamaSettings(n_ctx=4096, n_gpu_layers=-2, tensor_split=[1.0, 1.0]))
    assert [(d.name, d.capacity) for d in e.devices] == [("RPC0", 48 * GiB), ("RPC1", None), (CPU, None)]
    assert (
        "memory of RPC1 (127.0.0.1:50053) is unknown: llama.cpp did not list that RPC host, so one device of "
        "unknown memory is assumed per host; per-device use is exact, capacity and free space cannot be checked"
    ) in e.notes
    only_known = estimate(tiny_llama, [known, unknown], LlamaSettings(n_ctx=4096, n_gpu_layers=-2, devices=["RPC0"]))
    assert [d.name for d in only_known.devices] == ["RPC0", CPU]
    assert not [n for n in only_known.notes if n.startswith("memory of")]  # -dev leaves RPC1 out: nothing to say


@pytest.fixture(scope="module")
def matrix_models(tiny_models, sparse_models):
    """The matrix's models, opened once (the session's tiny and sparse GGUFs)."""
    names = {c.model for c in CASES} | {f"tiny:{arch}" for arch, _, _ in SERVER_CASES}
    return {
        name: open_model(tiny_models[name[5:]] if name.startswith("tiny:") else sparse_models[name])
        for name in sorted(names)
    }


def test_no_case_of_the_accuracy_matrix_takes_the_approximate_path(matrix_models):
    """Every case of tests/memory/accuracy.py (fit-params) and of the server-mode matrix, on stand-in RPC
    devices: the compute graph builds for each, so no estimate carries the approximate note."""
    checked = []
    cases = [(c.id, c.model, c.n_rpc, list(c.args), "fit-params") for c in CASES]
    cases += [(f"server-{a}-{n}", f"tiny:{a}", n, args.split(), "server") for a, n, args in SERVER_CASES]
    for case_id, model, n_rpc, args, tool in cases:
        e = estimate(matrix_models[model], rpc_lanes(n_rpc), settings_from_args(args, tool=tool))
        assert not [n for n in e.notes if n.startswith(APPROXIMATE)], (case_id, e.notes)
        checked.append(case_id)
    assert checked and len(checked) == len(CASES) + len(SERVER_CASES)


def test_random_placements_of_full_size_models_take_the_exact_path(matrix_models):
    """Scattered expert placements (the board's drags) on the matrix's big models: still the real graph."""
    for name in ("qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"):
        model = matrix_models[name]
        devices = rpc_lanes(2)
        p = all_on_gpus(model, devices, LlamaSettings(n_ctx=8192))
        exps = [b.id for b in model.blocks if b.role.value == "experts"]
        for i, item in enumerate(exps[::3]):
            p.assign(item if i % 2 else f"{item}:down", [CPU, "RPC1"][i % 2])
        e = estimate(model, devices, p.settings, p.weight_placement())
        assert not [n for n in e.notes if n.startswith(APPROXIMATE)], (name, e.notes)


def test_the_matrix_decides_which_architectures_are_exact():
    """An architecture is marked exact (no 'not checked' note) iff the fit-print matrix compares it and no case
    of it has a known compute difference; and every exact architecture is in the matrix."""
    arch_of = {c.id: GGUF_ARCH[SPARSE_SPECS[c.model][0]] for c in CASES if not c.model.startswith("tiny:")}
    compared = set(arch_of.values())
    off = {arch_of[c.id] for c in CASES if c.compute_off}
    assert compared - off <= CHECKED_ARCHS, sorted((compared - off) - CHECKED_ARCHS)
    assert not off & CHECKED_ARCHS, sorted(off & CHECKED_ARCHS)
    # compared by modules of their own: deepseek4's fit-print and server-log cases, the EAGLE-3 head's and Gemma 4
    # assistant's server logs (draft heads llama-fit-params cannot load alone: they need the target's context)
    elsewhere = {"deepseek4": "test_deepseek4_cache.py", "eagle3": "test_eagle3.py", "dflash": "test_dflash.py",
                 "gemma4-assistant": "test_gemma4_assistant.py"}
    assert all((Path(__file__).parent / f).is_file() for f in elsewhere.values())
    assert CHECKED_ARCHS <= compared | set(elsewhere), sorted(CHECKED_ARCHS - compared - set(elsewhere))


@pytest.mark.llama
def test_the_dry_runs_missing_repack_buffer_is_said(tmp_path, llama_bin):
    """With repacking on, llama-fit-params leaves CPU_REPACK out of its Host figure; the fit-params estimate
    counts those weights (llama-server allocates them) and says so; with --no-repack both agree, no note."""
    from app.llamacpp.fit_print import run_fit_print
    from tests.gguf_factory import write_sparse_model

    path = write_sparse_model("qwen3-30b-a3b", tmp_path / "q30.gguf")
    model = open_model(path)
    on = estimate(model, [], settings_from_args(["-c", "4096"], tool="fit-params"))
    (note,) = [n for n in on.notes if "CPU_REPACK" in n]
    theirs = {r.name: r for r in run_fit_print(path, ["-c", "4096"], llama_dir=llama_bin, timeout=300)}
    gap = on.device(CPU).model / 2**20 - theirs[CPU].model
    said = float(note.split("up to ", 1)[1].split(" MiB", 1)[0])
    # an upper bound (which types a CPU repacks depends on its instruction sets; here 13433 of 17476 MiB)
    assert gap > 1000 and said >= gap, (note, gap)
    off = estimate(model, [], settings_from_args(["-c", "4096", "--no-repack"], tool="fit-params"))
    assert not [n for n in off.notes if "CPU_REPACK" in n]
    theirs = {r.name: r for r in run_fit_print(path, ["-c", "4096", "--no-repack"], llama_dir=llama_bin,
                                                timeout=300)}
    assert abs(off.device(CPU).model / 2**20 - theirs[CPU].model) < 1


@pytest.mark.llama
def test_looped_layers_are_said_not_sized(tmp_path, llama_bin):
    """nanbeige.num_loops > 1 runs the layers again with KV cells of their own (src/models/nanbeige.cpp): the
    estimate sizes one pass and says so; llama.cpp's dry run shows the KV it leaves out."""
    from app.llamacpp.fit_print import run_fit_print

    one = write_tiny_model("nanbeige", tmp_path / "one.gguf", n_vocab=20000)
    two = write_tiny_model("nanbeige", tmp_path / "two.gguf", n_vocab=20000, num_loops=2)
    args = ["-c", "65536", "--no-repack"]
    plain = estimate(open_model(one), [], settings_from_args(args, tool="fit-params"))
    looped = estimate(open_model(two), [], settings_from_args(args, tool="fit-params"))
    assert not [n for n in plain.notes if "looped" in n]
    (note,) = [n for n in looped.notes if "looped" in n]
    assert "runs its 4 layers 2 times" in note and note.startswith("compute buffers are not checked")
    theirs = {r.name: r for r in run_fit_print(two, args, llama_dir=llama_bin, timeout=300)}
    ours_mib = looped.device(CPU).kv / 2**20
    assert ours_mib == plain.device(CPU).kv / 2**20 >= 16
    assert theirs[CPU].context >= 2 * ours_mib - 1, (theirs[CPU], ours_mib)  # llama.cpp: a cache per pass


def test_a_diffusion_model_says_how_llama_cpp_runs_it(tmp_path):
    est = estimate(open_model(write_tiny_model("llada", tmp_path / "llada.gguf")), [],
                   settings_from_args(["-c", "4096"], tool="fit-params"))
    (note,) = [n for n in est.notes if "diffusion model" in n]
    assert "llama-diffusion-cli" in note and est.device(CPU).kv == 0
