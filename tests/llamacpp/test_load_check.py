"""llama.cpp's own load verdict (app/llamacpp/load_check.py), with the real llama-fit-params.

The files here pass every check of Layerdeck's reader and are still refused by llama.cpp's per-architecture
tensor tables: the gap the load check closes. Each verdict is compared with what llama.cpp printed.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.llamacpp import load_check
from app.llamacpp.load_check import LOADS, REFUSED, UNCHECKED, LlamaRefusedModel, check_load, classify
from app.model import open_model
from tests.gguf_factory import write_tiny_model
from tests.model.gguf_edit import apply, parse

pytestmark = pytest.mark.llama

#: What a refusal says when llama.cpp's logger lost its reason at exit (a busy machine): still a refusal.
LOST = "lost its own reason"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Verdicts go to a cache of this test's own (the build cache is not touched)."""
    monkeypatch.setattr(load_check, "_cache_file", lambda: tmp_path / "cache" / "load-checks.json")
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> bytes:
    return write_tiny_model("qwen3", tmp_path_factory.mktemp("lc") / "base.gguf").read_bytes()


def _names(b: bytes) -> list[str]:
    return [t[0] for t in parse(b).tensors]


def _write(tmp_path: Path, b: bytes, name: str = "m.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(b)
    return p


def test_a_good_file_loads_and_the_verdict_is_cached(base, tmp_path, llama_bin):
    path = _write(tmp_path, base)
    first = check_load(path, llama_bin)
    assert first.status == LOADS and first.loads and not first.cached and first.note() is None
    assert first.build == str(llama_bin / ("llama-fit-params" + (".exe" if sys.platform == "win32" else "")))
    again = check_load(path, llama_bin)
    assert again.status == LOADS and again.cached
    path.write_bytes(apply(base, [["rename", _names(base).index("blk.0.attn_norm.weight"), "blk.0.bogus.weight"]]))
    changed = check_load(path, llama_bin)  # a new file at the same path is asked again, not served from the cache
    assert changed.status == REFUSED and not changed.cached


def test_a_missing_required_tensor_is_refused_with_llama_cpp_reason(base, tmp_path, llama_bin):
    i = _names(base).index("blk.1.attn_norm.weight")
    path = _write(tmp_path, apply(base, [["rename", i, "blk.1.attn_nrom.weight"]]))
    open_model(path)  # Layerdeck's reader alone accepts it: nothing in the GGUF structure is wrong
    v = check_load(path, llama_bin)
    assert v.status == REFUSED
    assert v.reason == "check_tensor_dims: tensor 'blk.1.attn_norm.weight' not found" or LOST in v.reason, v.reason
    with pytest.raises(LlamaRefusedModel) as info:
        v.raise_if_refused(path)
    assert "refuses to load m.gguf: check_tensor_dims" in info.value.message and info.value.hint


def test_a_wrong_shape_of_the_same_size_is_refused(base, tmp_path, llama_bin):
    g = parse(base)
    i, (name, dims, _, _) = next((i, t) for i, t in enumerate(g.tensors)
                                 if t[0] == "blk.0.ffn_up.weight")
    path = _write(tmp_path, apply(base, [["dim", i, 0, dims[1]], ["dim", i, 1, dims[0]]]))  # transposed
    open_model(path)
    v = check_load(path, llama_bin)
    assert v.status == REFUSED and (f"tensor '{name}' has wrong shape" in v.reason or LOST in v.reason), v.reason


def test_the_cli_refuses_what_llama_cpp_refuses(base, tmp_path, llama_bin, capsys):
    i = _names(base).index("output_norm.weight")
    path = _write(tmp_path, apply(base, [["rename", i, "output_nrom.weight"]]))
    for argv in (["inspect", "--llama-dir", str(llama_bin), str(path)],
                 ["estimate", "--llama-dir", str(llama_bin), "--devices", "CUDA0=8000", "--", "-m", str(path)],
                 ["import", "--llama-dir", str(llama_bin), "--devices", "CUDA0=8000", "--", "-m", str(path)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("layerdeck: llama.cpp refuses to load m.gguf: "), err
        assert "check_tensor_dims: tensor 'output_norm.weight' not found" in err or LOST in err, err
    good = _write(tmp_path, base, "good.gguf")
    assert main(["inspect", "--json", "--llama-dir", str(llama_bin), str(good)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["llama_check"]["status"] == "loads" and doc["llama_check"]["llama_cpp"].endswith(
        "llama-fit-params" + (".exe" if sys.platform == "win32" else ""))


def test_without_llama_cpp_every_door_says_it_did_not_check(base, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = _write(tmp_path, base)
    v = check_load(path)
    assert v.status == UNCHECKED and "layerdeck llama install" in v.reason
    assert main(["inspect", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["llama_check"]["status"] == "unchecked"
    assert main(["estimate", "--json", "--devices", "CUDA0=8000", "--", "-m", str(path)]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith("llama.cpp did not check that this file loads") for n in notes), notes
    assert main(["inspect", str(path)]) == 0
    assert "llama.cpp      not checked: no llama-fit-params found" in capsys.readouterr().out


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in for the tool")
def test_a_tool_that_hangs_or_fails_is_unchecked_not_a_verdict(base, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "llama-fit-params"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    path = _write(tmp_path, base)
    v = check_load(path, tools, timeout=0.5)
    assert v.status == UNCHECKED and "did not finish within" in v.reason, v
    fake.write_text("#!/bin/sh\necho 'error: invalid argument: -dev' >&2\nexit 1\n")
    v = check_load(path, tools)
    assert v.status == UNCHECKED and "exit status 1" in v.reason and "invalid argument: -dev" in v.reason, v
    assert not (tmp_path / "cache" / "load-checks.json").exists()  # an unchecked answer is never cached


def test_classify_reads_llama_cpp_logs():
    # an assertion (GGML_NO_BACKTRACE=1): its condition and file, from llama-model.cpp's expert checks
    assert classify(-6, "/src/llama-model.cpp:1362: GGML_ASSERT(n_expert_used_max <= hparams.n_expert) failed\n") == (
        REFUSED, "GGML_ASSERT(n_expert_used_max <= hparams.n_expert) failed (llama-model.cpp:1362)")
    # gguf.cpp's reason comes before the loader's wrapper lines
    log = ("0.00.006.314 E gguf_init_from_reader: tensor 'blk.0.attn_q.weight' has offset 63232, expected 63104\n"
           "0.00.006.333 E gguf_init_from_reader: failed to read tensor data\n"
           "0.00.006.496 E llama_model_load: error loading model: llama_model_loader: failed to load model from x\n"
           "0.00.006.518 E llama_model_load_from_file_impl: failed to load model\n")
    assert classify(1, log) == (REFUSED, "gguf_init_from_reader: tensor 'blk.0.attn_q.weight' has offset 63232, "
                                         "expected 63104")
    # it loaded, only the fit to this machine's free memory failed: that is not a refusal
    fit = ("0.01 W common_fit_params: failed to fit params to free device memory: n_gpu_layers already set\n"
           "0.00.010.000 E llama_fit_params: failed to fit CLI arguments to free memory, exiting...\n")
    assert classify(1, fit) == (LOADS, "")
    # an exception with nothing logged (llama.cpp's C++ runtime)
    assert classify(-6, "terminate called after throwing an instance of 'std::runtime_error'\n"
                        "  what():  failed to load model\n") == (REFUSED, "failed to load model")
    assert classify(-11, "")[0] == REFUSED and "crashed (signal 11)" in classify(-11, "")[1]
    assert classify(3, "something else went wrong\n") == (UNCHECKED, "llama-fit-params failed (exit status 3): "
                                                                     "something else went wrong")


def test_a_damaged_cache_is_ignored(base, tmp_path, llama_bin):
    cache = tmp_path / "cache" / "load-checks.json"
    cache.parent.mkdir(parents=True)
    for junk in ("{not json", "[1, 2]", json.dumps({"k": {"status": "refused"}}), "\xff"):
        cache.write_text(junk, errors="surrogateescape")
        assert check_load(_write(tmp_path, base), llama_bin).status == LOADS
    assert json.loads(cache.read_text())  # rewritten whole


def test_the_cache_stays_bounded(base, tmp_path, llama_bin, monkeypatch):
    monkeypatch.setattr(load_check, "MAX_ENTRIES", 3)
    for i in range(5):
        check_load(_write(tmp_path, base, f"m{i}.gguf"), llama_bin)
    assert len(json.loads((tmp_path / "cache" / "load-checks.json").read_text())) == 3


def test_split_sets_are_checked_whole(tmp_path, llama_bin):
    """llama.cpp is given the first shard and finds the rest; a missing shard is its refusal too."""
    from tests.gguf_factory import model_spec, write_spec

    write_spec(model_spec("llama"), tmp_path / "Split.gguf", split_max_tensors=10)
    shards = sorted(tmp_path.glob("Split-*-of-*.gguf"))
    assert len(shards) > 2
    model = open_model(shards[1])  # any shard opens the set; llama.cpp is given the first
    assert check_load(model.paths, llama_bin).status == LOADS
    os.unlink(shards[-1])
    v = check_load([shards[0]], llama_bin)
    assert v.status == REFUSED and (shards[-1].name in v.reason or LOST in v.reason), v.reason


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in for the tool")
def test_a_reason_lost_at_exit_still_gives_the_verdict(base, tmp_path):
    """llama.cpp's logger is never flushed at exit, so a refusal can come with no line at all. After the
    retries, the --fit-print run ends in std::terminate, whose message is written directly: still refused,
    and the message says the reason was lost and how to see it."""
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "llama-fit-params"
    count = tmp_path / "runs"
    fake.write_text(f'#!/bin/sh\necho x >> "{count}"\ncase "$*" in *--fit-print*) '
                    "echo \"terminate called after throwing an instance of 'std::runtime_error'\" >&2; "
                    'echo "  what():  failed to load model" >&2; kill -ABRT $$;; esac\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    v = check_load(_write(tmp_path, base), tools)
    assert v.status == REFUSED and v.reason.startswith("failed to load model (llama.cpp lost its own reason"), v
    assert len(count.read_text().split()) == load_check.ATTEMPTS + 1
