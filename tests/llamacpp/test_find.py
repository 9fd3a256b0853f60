"""Finding every llama.cpp on the machine and probing what each can do (real test build, real processes).

Where a build Layerdeck cannot get for real is needed (an old release without ``-ot``, one that hangs),
a small script stands in for ``llama-server`` and prints what such a build prints; those tests say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.llamacpp import find, store


@pytest.fixture
def clean(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "llama-server").exists()))
    return home


VERSIONS = [
    ("version: 0.5.0-dev (build 0, commit unknown)\nbuilt with GNU 12.2.0 for Linux x86_64\n",
     None, None, "GNU 12.2.0 for Linux x86_64"),
    ("version: 0.4.1-dev (build 10991, commit 930e2fa59)\nbuilt with AppleClang 21.0.0.21000334 for Darwin arm64",
     10991, "930e2fa59", "AppleClang 21.0.0.21000334 for Darwin arm64"),
    ("ggml_cuda_init: found 1 ROCm devices\nversion: 8763 (ff5ef8278)\nbuilt with GNU 15.2.1 for Linux x86_64",
     8763, "ff5ef8278", "GNU 15.2.1 for Linux x86_64"),
    ("version: 10114 (ed7adbfef)", 10114, "ed7adbfef", ""),
    ("not llama.cpp at all", None, None, ""),
]


@pytest.mark.parametrize("text, build, commit, built", VERSIONS)
def test_parse_version(text, build, commit, built):
    v = find.parse_version(text)
    assert (v.build, v.commit, v.built_with) == (build, commit, built)


def test_parse_devices():
    text = ("ggml_cuda_init: found 2 CUDA devices\nAvailable devices:\n"
            "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)\n"
            "  Vulkan0: AMD Radeon RX 7900 XTX (RADV NAVI31) (24560 MiB, 24000 MiB free)\n")
    devices, header = find.parse_devices(text)
    assert header and [d.name for d in devices] == ["CUDA0", "Vulkan0"]
    assert devices[1].description == "AMD Radeon RX 7900 XTX (RADV NAVI31)" and devices[1].free_mib == 24000
    assert [find.backend_of_device(d.name) for d in devices] == ["cuda", "vulkan"]
    assert find.parse_devices("Available devices:\n  (none)\n") == ([], True)
    assert find.parse_devices("error: invalid argument: --list-devices") == ([], False)


def test_the_real_test_build(clean, llama_bin, monkeypatch):
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(llama_bin))
    builds = find.find_all()
    b = next(b for b in builds if b.folder == llama_bin)
    assert b.sources == ["environment"]
    assert b.usable and b.supported and b.missing() == []
    assert b.build is None and b.version.semver == "0.5.0-dev"  # the sdist's CMake has no git
    assert "no build number" in b.label()
    assert b.backends == ["cpu", "rpc"] and b.devices == []
    assert b.features == {"list_devices": True, "override_tensor": True, "fit": True, "fit_print": True,
                          "verbosity": True, "load_mode": True}
    assert set(b.tools) >= {"llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server"}
    assert find.is_current(b, find.current_folder())


def test_every_place_is_searched_and_duplicates_merge(clean, llama_bin, tmp_path, monkeypatch):
    home = clean
    (home / "llama.cpp" / "build").mkdir(parents=True)
    (home / "llama.cpp" / "build" / "bin").symlink_to(llama_bin, target_is_directory=True)
    (home / "src" / "llama.cpp" / "build").mkdir(parents=True)
    (home / "src" / "llama.cpp" / "build" / "bin").symlink_to(llama_bin, target_is_directory=True)
    onpath = tmp_path / "onpath"
    onpath.mkdir()
    (onpath / "llama-server").symlink_to(llama_bin / "llama-server")
    monkeypatch.setenv("PATH", str(onpath) + os.pathsep + os.environ["PATH"])
    store.set_current(llama_bin)
    builds = find.find_all(configured=str(llama_bin))
    by_folder = {b.folder: b for b in builds}
    real = by_folder[llama_bin]
    # one real folder, every way it was found
    assert real.sources == ["configured", "current", "built under home"]
    assert by_folder[onpath].sources == ["PATH"]  # a link to the binary alone is another folder
    assert len([b for b in builds if b.folder.resolve() == llama_bin.resolve()]) == 1


def test_probe_is_cached_by_path_size_and_mtime(clean, llama_bin, tmp_path, monkeypatch):
    folder = tmp_path / "copy"
    folder.mkdir()
    for t in ("llama-server", "llama-fit-params"):
        (folder / t).symlink_to(llama_bin / t)
    first = find.probe(folder)
    assert first.usable
    calls = []
    real_run = subprocess.run

    def counting(*a, **k):
        calls.append(a[0])
        return real_run(*a, **k)

    monkeypatch.setattr(subprocess, "run", counting)
    again = find.probe(folder)
    assert calls == [] and again.features == first.features and again.version == first.version
    find.probe(folder, use_cache=False)
    assert [Path(c[0]).name for c in calls][:2] == ["llama-server", "llama-server"]


def _fake_server(folder: Path, version: str, help_text: str, sleep: float = 0.0) -> Path:
    """A stand-in llama-server printing what an old or broken build prints (not a real llama.cpp)."""
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "llama-server"
    p.write_text(f"#!{sys.executable}\nimport sys, time\ntime.sleep({sleep})\n"
                 f"a = sys.argv[1:]\n"
                 f"if a == ['--version']: print({version!r}, file=sys.stderr)\n"
                 f"elif a == ['--list-devices']: print('error: invalid argument: --list-devices'); sys.exit(1)\n"
                 f"else: print({help_text!r})\n")
    p.chmod(0o755)
    return p


def test_an_old_build_is_found_and_said_unsupported(clean, tmp_path):
    old = tmp_path / "old"
    _fake_server(old, "version: 4000 (abcdef1)\nbuilt with cc for x86_64",
                 "-m,    --model FNAME   model path\n--no-mmap      do not memory-map model\n-ngl N   layers")
    b = find.probe(old)
    assert b.usable and b.build == 4000 and not b.supported
    text = "\n".join(b.missing())
    assert "build 4000 is older than b9284" in text
    assert "no override tensor (-ot in --help): placements that move single tensors cannot be exported" in text
    assert "no fit print (llama-fit-params with --fit-print): Verify" in text
    assert "no list devices" in text and b.features["load_mode"]  # --no-mmap counts


def test_a_hanging_build_times_out(clean, tmp_path):
    slow = tmp_path / "slow"
    _fake_server(slow, "version: 11312 (0c1e570)", "", sleep=30)
    t0 = time.monotonic()
    b = find.probe(slow, timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert not b.usable and "did not finish within 1 s" in b.problems[0]


def test_a_folder_without_llama_server(clean, tmp_path):
    b = find.probe(tmp_path)
    assert not b.usable and b.problems == [f"no runnable llama-server in {tmp_path}"]
    assert find.find_all(extra=[(tmp_path, "test")]) == []


def test_backends_from_library_files(tmp_path):
    for n in ("libggml-cuda.so", "libggml-vulkan.so.0", "ggml-hip.dll", "libggml-base.so", "libggml-cpu-haswell.so",
              "ggml-rpc.dll", "notes.txt"):
        (tmp_path / n).write_bytes(b"")
    assert find.backends_in(tmp_path) == {"cuda", "vulkan", "rocm", "rpc"}


def test_a_broken_store_manifest_is_a_note(clean, llama_bin):
    bad = store.store_root() / "b1-ubuntu-x64"
    bad.mkdir(parents=True)
    (bad / store.MANIFEST).write_text("{not json")
    notes: list[str] = []
    assert store.installed(notes) == []
    assert "is not a usable Layerdeck install" in notes[0]
    (store.store_root() / "current.json").write_text("[]")
    notes = []
    assert store.current_dir(notes) is None and "wrong shape" in notes[0]


def test_the_vulkan_build(clean, llama_vulkan_bin):
    """The real Vulkan build on lavapipe (Mesa's CPU Vulkan driver): its backend and device are found."""
    from tests.llama_fixtures import VULKAN_ENV

    b = find.probe(llama_vulkan_bin, env=VULKAN_ENV)
    assert b.usable and b.supported
    assert "vulkan" in b.backends and "cpu" in b.backends
    assert [d.name for d in b.devices] == ["Vulkan0"] and "llvmpipe" in b.devices[0].description
    hidden = find.probe(llama_vulkan_bin)  # without the variable ggml-vulkan skips the CPU-type device
    assert hidden.devices == [] and hidden.usable  # and the cache kept the two apart
