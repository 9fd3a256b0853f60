"""Fuzz the release doors: the release JSON (and the asset choice made from it) and the archives unpacked.

* Release JSON: arbitrary JSON values, release-shaped objects with wrong types, odd names (paths, NUL,
  unicode, very long), digests of every shape, sizes that are negative, booleans or huge, and raw bytes.
  :func:`app.llamacpp.releases.parse_release` returns a :class:`Release` or raises
  :class:`ReleaseError`; a parsed release then goes through :func:`choose` for several machines, which
  returns a :class:`Choice` whose assets belong to the release and to that OS and architecture, or raises
  :class:`NoMatchingAsset`.
* Archives: tar.gz and zip files built from random members (regular files, folders, symbolic and hard
  links, FIFOs) with names drawn from traversal, absolute, backslash and ordinary paths, and link targets
  inside and outside. :func:`app.llamacpp.install.safe_extract` unpacks into an empty folder or raises
  :class:`InstallError`; either way nothing appears outside that folder, and on success every link found
  inside resolves inside and no more bytes were written than the bound.

Each input must finish within the fuzz time and memory budget (:mod:`tests.fuzz.harness`).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.errors import LayerdeckError
from app.llamacpp import install, releases
from tests.fuzz.harness import within_budget

MACHINES = [
    releases.Machine("linux", "x64", ()),
    releases.Machine("linux", "x64", ("nvidia",), (12, 4)),
    releases.Machine("windows", "x64", ("nvidia",), None),
    releases.Machine("windows", "x64", ("amd",)),
    releases.Machine("macos", "arm64", ("apple",)),
]

NAMES = st.one_of(
    st.sampled_from([
        "llama-b1-bin-ubuntu-x64.tar.gz", "llama-b1-bin-ubuntu-vulkan-x64.tar.gz", "llama-b1-bin-win-cuda-12.4-x64.zip",
        "cudart-llama-bin-win-cuda-12.4-x64.zip", "llama-b1-bin-win-cuda-13.1-x64.zip", "llama-b1-bin-macos-arm64.zip",
        "llama-b1-bin-ubuntu-cuda-12.8-x64.tar.gz", "cudart-llama-b1-bin-ubuntu-cuda-12.8-x64.tar.gz",
        "llama-b1-bin-win-hip-radeon-x64.zip", "../../etc/passwd", "/abs.zip", "a\x00b", "", "x" * 300,
        "llama-b1-bin-ubuntu-cuda-x64.tar.gz", "llama-b1-bin-ubuntu--x64.tar.gz", "llama-bin-win-cuda-99.99-x64.zip",
    ]),
    st.text(max_size=40),
)
DIGESTS = st.one_of(st.none(), st.just("sha256:" + "a" * 64), st.just("SHA256:" + "B" * 64), st.text(max_size=80),
                    st.integers(), st.just("sha256:" + "g" * 64), st.just("md5:" + "0" * 32))
SIZES = st.one_of(st.integers(min_value=-5, max_value=1 << 40), st.booleans(), st.none(), st.text(max_size=5),
                  st.floats(allow_nan=True))
URLS = st.one_of(st.just("https://github.com/ggml-org/llama.cpp/releases/download/b1/x"), st.text(max_size=30),
                 st.none(), st.integers())
ASSET = st.fixed_dictionaries({"name": NAMES, "browser_download_url": URLS, "size": SIZES, "digest": DIGESTS})
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                    max_leaves=20)
RELEASE = st.one_of(
    st.fixed_dictionaries({"tag_name": st.one_of(st.just("b1"), st.text(max_size=12), st.integers()),
                           "assets": st.lists(ASSET, max_size=12)}),
    st.fixed_dictionaries({"tag_name": st.just("b1"), "assets": st.lists(st.one_of(ASSET, JSON), max_size=6)}),
    JSON,
)


def _check_release(data) -> None:
    try:
        rel = releases.parse_release(data, releases.OFFICIAL_RELEASE_URL)
    except releases.ReleaseError as exc:
        assert isinstance(exc, LayerdeckError) and str(exc)
        return
    for a in rel.assets:
        assert "/" not in a.name and "\\" not in a.name and a.size >= 0
        assert a.sha256 is None or (len(a.sha256) == 64 and set(a.sha256) <= set("0123456789abcdef"))
    for m in MACHINES:
        for backend in (None, "cpu", "cuda", "vulkan"):
            try:
                c = releases.choose(rel, m, backend)
            except releases.NoMatchingAsset as exc:
                assert str(exc)
                continue
            assert c.asset in rel.assets and (c.runtime is None or c.runtime in rel.assets)
            k = releases.parse_asset_name(c.asset.name)
            assert k is not None and (k.os, k.arch) == (m.os, m.arch) and not k.runtime
            assert c.version and "/" not in c.version


@given(RELEASE)
@example({"tag_name": "b1", "assets": [{"name": "llama-b1-bin-win-cuda-12.4-x64.zip", "browser_download_url": "u",
                                        "size": 1, "digest": None}]})
@example({"tag_name": "b1", "assets": [{"name": "llama-b1-bin-ubuntu-x64.tar.gz", "browser_download_url": "u",
                                        "size": True, "digest": "sha256:" + "a" * 64}]})
def test_release_json(data):
    with within_budget("release json"):
        _check_release(data)
        _check_release(json.dumps(data, default=str))


@given(st.binary(max_size=2000))
def test_release_bytes(data):
    with within_budget("release bytes"):
        _check_release(data)


# --------------------------------------------------------------------------- archives

MEMBER_NAMES = st.one_of(
    st.sampled_from(["bin/llama-server", "a", "a/b", "../x", "../../x", "/abs", "C:/x", "..\\x", "a/../../x",
                     "./ok", "a//b", ".", "dir/", "link/inside"]),
    st.text(alphabet="ab./\\:", min_size=1, max_size=12),
)
TARGETS = st.sampled_from(["a", "../a", "/etc", ".", "..", "a/b", "../../../../tmp", "b/../a", "bin/llama-server"])
MEMBER = st.tuples(st.sampled_from(["file", "dir", "sym", "hard", "fifo"]), MEMBER_NAMES, TARGETS,
                   st.integers(min_value=0, max_value=3000))


def _tar(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for kind, name, target, size in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = size
                tar.addfile(info, io.BytesIO(b"x" * size))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = target if kind in ("sym", "hard") else ""
            tar.addfile(info)
    return buf.getvalue()


def _zip(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for kind, name, target, size in members:
            info = zipfile.ZipInfo(name)
            mode = {"file": 0o100644, "dir": 0o040755, "sym": 0o120777, "hard": 0o100644, "fifo": 0o010644}[kind]
            info.external_attr = mode << 16
            zf.writestr(info, target.encode() if kind == "sym" else b"y" * size)
    return buf.getvalue()


def _inside(root: str, p: str) -> bool:
    return p == root or p.startswith(root + os.sep)


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # zipfile warns when writing such archives
@given(st.lists(MEMBER, max_size=10), st.booleans())
@example([("file", "bin/llama-server", "a", 0), ("dir", "bin/llama-server", "a", 0)], False)  # found by the long run
@example([("sym", "a", ".", 0), ("file", "a/../x", "a", 1)], False)
@example([("sym", "l", "..", 0), ("file", "l/x", "a", 1)], True)
def test_archives(tmp_path_factory, members, as_zip):
    base = tmp_path_factory.mktemp("fuzz-archive")
    arc = base / ("a.zip" if as_zip else "a.tar.gz")
    try:
        arc.write_bytes(_zip(members) if as_zip else _tar(members))
    except (ValueError, OSError, UnicodeEncodeError):
        return  # the library cannot even write such an archive
    dest = base / "out" / "dest"
    dest.mkdir(parents=True)
    before = sorted(str(p) for p in base.rglob("*"))
    bound = 8000
    with within_budget("archive"):
        try:
            used = install.safe_extract(arc, dest, max_bytes=bound, max_members=50)
        except install.InstallError as exc:
            assert str(exc)
            used = None
    after = sorted(str(p) for p in base.rglob("*") if not _inside(str(dest), str(p)))
    assert after == [p for p in before if not _inside(str(dest), p)], "something was written outside the folder"
    if used is not None:
        assert used <= bound
        root = os.path.realpath(dest)
        for p in Path(dest).rglob("*"):
            if p.is_symlink():
                assert _inside(root, os.path.realpath(p)), p
