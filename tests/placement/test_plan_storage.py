"""The small files Layerdeck writes besides plans: one-step writes, careful reads, set-aside, calibration, caches."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys

import pytest

from app import paths
from app.lanes import Lane
from app.llamacpp import capabilities as caps_mod
from app.paths import FileTooLarge, NotARegularFile, atomic_write_text, read_small_file, set_aside
from app.speed import params

LANES = [Lane("CUDA0", "CUDA0", 24 << 30, 24 << 30, "gpu", 1e12)]
FITTED = {"CUDA0": {"eff_bandwidth": 0.8}, "_overhead": {"token_overhead": 0.002}}


# --------------------------------------------------------------------------- app.paths


def test_atomic_write_replaces_in_one_step_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "f.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two ✓")
    assert target.read_text(encoding="utf-8") == "two ✓" and os.listdir(tmp_path) == ["f.json"]
    if sys.platform != "win32":
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    target.write_text("old")

    def fail(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="Input/output error"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["f.json"]


def test_read_small_file_refuses_what_it_must_not_read(tmp_path):
    (tmp_path / "small").write_bytes(b"12345")
    assert read_small_file(tmp_path / "small", 5) == b"12345"
    with pytest.raises(FileTooLarge) as info:
        read_small_file(tmp_path / "small", 4)
    assert (info.value.size, info.value.limit) == (5, 4)
    with pytest.raises(IsADirectoryError):
        read_small_file(tmp_path, 100)
    with pytest.raises(FileNotFoundError):
        read_small_file(tmp_path / "none", 100)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(NotARegularFile):
            read_small_file(tmp_path / "fifo", 100)


def test_set_aside_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setattr(paths.time, "strftime", lambda fmt: "20260101-120000")
    for text in ("a", "b"):
        (tmp_path / "autosave.layerdeck.json").write_text(text)
        set_aside(tmp_path / "autosave.layerdeck.json")
    (tmp_path / "autosave.layerdeck.json").write_text("c")
    kept = set_aside(tmp_path / "autosave.layerdeck.json", "unrestored", keep_extension=True)
    assert kept.name == "autosave.unrestored-20260101-120000.layerdeck.json"
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "autosave.layerdeck.json.corrupt-20260101-120000": "a",
        "autosave.layerdeck.json.corrupt-20260101-120000-2": "b",
        "autosave.unrestored-20260101-120000.layerdeck.json": "c",
    }


# --------------------------------------------------------------------------- speed-calibration.json


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path))
    return tmp_path


def test_calibration_round_trip_is_written_in_one_step(data_dir):
    notes: list[str] = []
    path = params.save_calibration(LANES, FITTED, notes)
    assert path == data_dir / "speed-calibration.json" and os.listdir(data_dir) == ["speed-calibration.json"]
    assert params.load_calibration(LANES, notes) == FITTED and notes == []
    assert params.load_calibration([Lane("CUDA1", "CUDA1", 8 << 30, 8 << 30)]) is None


DEFAULTS = "; the speed model uses its default figures"


@pytest.mark.parametrize(
    "content,note",
    [
        (
            b"{not json",
            " cannot be used (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))" + DEFAULTS,
        ),
        (
            b"\xff\xfe",
            " cannot be used ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)" + DEFAULTS,
        ),
        (b"[1, 2]", " is not a calibration file (not a JSON object); the speed model uses its defaults"),
        (
            b"[" * 100_000,
            " cannot be used (maximum recursion depth exceeded while decoding a JSON array from a "
            "unicode string)" + DEFAULTS,
        ),
    ],
    ids=["not-json", "not-utf8", "list", "deep"],
)
def test_an_unreadable_calibration_is_ignored_with_a_note(data_dir, caplog, content, note):
    path = data_dir / "speed-calibration.json"
    path.write_bytes(content)
    notes: list[str] = []
    with caplog.at_level(logging.WARNING, logger="app.speed.params"):
        assert params.load_calibration(LANES, notes) is None
    assert notes == [f"{path}{note}"]
    assert [r.getMessage() for r in caplog.records] == notes
    assert params.load_calibration(LANES) is None  # existing call sites: no notes argument, same result


@pytest.mark.parametrize(
    "entry",
    [
        "abc",
        {"CUDA0": "fast"},
        {"CUDA0": {"eff_bandwidth": "0.8"}},
        {"CUDA0": {"eff_bandwidth": float("nan")}},
        {"CUDA0": {"eff_bandwidth": -1}},
        {"CUDA0": {"bogus": 1.0}},
        {"_overhead": {"token_overhead": True}},
    ],
)
def test_a_calibration_entry_of_the_wrong_shape_is_ignored_with_a_note(data_dir, entry):
    path = data_dir / "speed-calibration.json"
    path.write_text(json.dumps({params.machine_key(LANES): entry}))
    notes: list[str] = []
    assert params.load_calibration(LANES, notes) is None
    assert notes == [
        f"the calibration for this machine in {path} has the wrong shape; it is ignored (run the speed proof "
        "again to recalibrate)"
    ]
    # and speed_params, fed what load_calibration returns, works as before
    assert params.speed_params(LANES, None, params.load_calibration(LANES)).token_overhead == 1.5e-3


def test_saving_over_an_unreadable_calibration_sets_it_aside(data_dir, monkeypatch):
    monkeypatch.setattr(paths.time, "strftime", lambda fmt: "20260101-120000")
    (data_dir / "speed-calibration.json").write_text("{half")
    notes: list[str] = []
    params.save_calibration(LANES, FITTED, notes)
    assert notes[-1] == "the unreadable calibration file was kept as speed-calibration.json.corrupt-20260101-120000"
    assert (data_dir / "speed-calibration.json.corrupt-20260101-120000").read_text() == "{half"
    assert params.load_calibration(LANES) == FITTED


# --------------------------------------------------------------------------- the capabilities cache


@pytest.fixture
def fake_binary(tmp_path, monkeypatch):
    if sys.platform == "win32":
        pytest.skip("needs a shell script as the binary")
    cache = tmp_path / "cache" / "capabilities.json"
    monkeypatch.setattr(caps_mod, "_cache_file", lambda: cache)
    exe = tmp_path / "llama-server"
    exe.write_text(
        "#!/bin/sh\necho '  -c,    --ctx-size N       size'\necho '  -fa,   --flash-attn [on|off|auto]   fa'\n"
    )
    exe.chmod(0o755)
    return exe, cache


def test_capabilities_are_cached_in_one_step(fake_binary, monkeypatch):
    exe, cache = fake_binary
    notes: list[str] = []
    caps = caps_mod.capabilities(exe, notes=notes)
    assert caps.flags == frozenset({"-c", "--ctx-size", "-fa", "--flash-attn"}) and caps.fa_value and notes == []
    assert os.listdir(cache.parent) == ["capabilities.json"]
    (entry,) = json.loads(cache.read_text()).values()
    assert entry == {"flags": ["--ctx-size", "--flash-attn", "-c", "-fa"], "fa_value": True}

    def no_run(*a, **k):
        raise AssertionError("a cache hit runs nothing")

    monkeypatch.setattr(caps_mod.subprocess, "run", no_run)
    assert caps_mod.capabilities(exe) == caps


@pytest.mark.parametrize("content", ["{half", "[]", '"x"', "[" * 100_000])
def test_a_corrupt_capabilities_cache_is_rebuilt_with_a_note(fake_binary, content):
    exe, cache = fake_binary
    cache.parent.mkdir(parents=True)
    cache.write_text(content)
    notes: list[str] = []
    caps = caps_mod.capabilities(exe, notes=notes)
    assert caps.flags == frozenset({"-c", "--ctx-size", "-fa", "--flash-attn"})
    assert len(notes) == 1 and notes[0].startswith(f"the capabilities cache {cache} ")
    assert notes[0].endswith("it will be rebuilt")
    assert list(json.loads(cache.read_text()).values()) == [
        {"flags": ["--ctx-size", "--flash-attn", "-c", "-fa"], "fa_value": True}
    ]


def test_a_cache_entry_of_the_wrong_shape_reads_help_again(fake_binary):
    exe, cache = fake_binary
    caps_mod.capabilities(exe)
    key = next(iter(json.loads(cache.read_text())))
    cache.write_text(json.dumps({key: {"flags": "-c", "fa_value": True}}))
    notes: list[str] = []
    assert caps_mod.capabilities(exe, notes=notes).flags == frozenset({"-c", "--ctx-size", "-fa", "--flash-attn"})
    assert notes == [f"the capabilities cache entry for {exe} has the wrong shape; reading --help again"]
    assert json.loads(cache.read_text())[key]["flags"] == ["--ctx-size", "--flash-attn", "-c", "-fa"]
