"""A Hub repository's GGUF files: the tree listing, and llama.cpp's way of picking a quantization's file.

The listing is the Hub API's ``/api/models/{repo}/tree/{revision}?recursive=true`` (entries with ``type``,
``path``, ``size`` and ``lfs``), followed through its ``Link: <...>; rel="next"`` pages. Which file
``ORG/REPO:QUANT`` means is decided as llama.cpp's ``common/download.cpp`` decides it for ``-hf``
(``find_best_model``, ``get_split_files``, ``get_gguf_split_info``, ``gguf_filename_is_model``): the first
model file (not ``mmproj``, ``imatrix``, ``mtp-``, ``eagle3-``, ``dflash-``, ``dspark-``) whose path contains
``QUANT`` followed by ``.`` or ``-`` (any case), the first shard of a split set; with no quant, ``Q4_K_M``,
then ``Q8_0``, then the first model file; a split set is every file with the same prefix and part count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from .errors import RemoteNotFoundError, RemoteProtocolError
from .http import Fetcher
from .names import endpoint

__all__ = ["RepoFile", "QuantGroup", "list_files", "split_info", "is_model_file", "find_best_model", "group_quants"]

#: The most listing pages followed (the Hub sends 1000 entries a page).
MAX_PAGES = 50
MAX_LISTING_BYTES = 32 * 1024 * 1024
DEFAULT_TAGS = ("Q4_K_M", "Q8_0")

_SPLIT = re.compile(r"^(.+)-([0-9]{5})-of-([0-9]{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)
_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?', re.IGNORECASE)
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_SIDECARS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")


@dataclass(frozen=True)
class RepoFile:
    """A file of the listing: its path in the repository, its size, and the SHA-256 of its content where the
    listing gives it (``lfs.oid`` of a file kept in Git LFS, which every GGUF file on the Hub is)."""

    path: str
    size: int | None
    sha256: str | None = None


@dataclass(frozen=True)
class SplitInfo:
    prefix: str  # tag included
    tag: str  # upper case, "" when the name has none
    index: int
    count: int


@dataclass
class QuantGroup:
    """One quantization of a repository: its tag and its file (or every shard of its split set)."""

    tag: str
    files: list[RepoFile]

    @property
    def size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    @property
    def primary(self) -> RepoFile:
        return self.files[0]


def split_info(path: str) -> SplitInfo | None:
    """llama.cpp's ``get_gguf_split_info``: None for a name that does not end in ``.gguf``."""
    if not path.endswith(".gguf"):
        return None
    prefix = path[: -len(".gguf")]
    index = count = 1
    m = _SPLIT.match(prefix)
    if m:
        index, count, prefix = int(m.group(2)), int(m.group(3)), m.group(1)
    t = _TAG.search(prefix)
    return SplitInfo(prefix, t.group(1).upper() if t else "", index, count)


def is_model_file(path: str) -> bool:
    """llama.cpp's ``gguf_filename_is_model``: a ``.gguf`` that is not a projector, imatrix or draft sidecar."""
    if not path.endswith(".gguf"):
        return False
    name = path.rsplit("/", 1)[-1]
    return not any(s in name for s in _SIDECARS)


def _first_shard(path: str) -> bool:
    s = split_info(path)
    return s is not None and not (s.count > 1 and s.index != 1)


def find_best_model(files: list[RepoFile], tag: str) -> RepoFile | None:
    """llama.cpp's ``find_best_model``: the file ``-hf ORG/REPO:TAG`` downloads (its first shard)."""
    for t in [tag] if tag else list(DEFAULT_TAGS):
        pattern = re.compile(re.escape(t) + "[.-]", re.IGNORECASE)
        for f in files:
            if is_model_file(f.path) and pattern.search(f.path) and _first_shard(f.path):
                return f
    if not tag:
        for f in files:
            if is_model_file(f.path) and _first_shard(f.path):
                return f
    return None


def split_files(files: list[RepoFile], primary: RepoFile) -> list[RepoFile]:
    """llama.cpp's ``get_split_files``: every shard of ``primary``'s split set, in listing order."""
    s = split_info(primary.path)
    if s is None or s.count <= 1:
        return [primary]
    out = []
    for f in files:
        o = split_info(f.path)
        if o is not None and o.count == s.count and o.prefix == s.prefix:
            out.append(f)
    return sorted(out, key=lambda f: split_info(f.path).index)  # type: ignore[union-attr]


def group_quants(files: list[RepoFile]) -> list[QuantGroup]:
    """Every model file of the listing as one group per file or split set, in listing order."""
    groups = []
    for f in files:
        if is_model_file(f.path) and _first_shard(f.path):
            s = split_info(f.path)
            assert s is not None
            tag = s.tag or s.prefix.rsplit("/", 1)[-1]
            groups.append(QuantGroup(tag, split_files(files, f)))
    return groups


def tree_url(repo: str, revision: str = "main") -> str:
    return f"{endpoint()}/api/models/{repo}/tree/{quote(revision, safe='')}?recursive=true"


def list_files(repo: str, fetcher: Fetcher, revision: str = "main") -> list[RepoFile]:
    """Every file of ``repo`` at ``revision`` (the Hub API's recursive tree listing, all pages)."""
    url: str | None = tree_url(repo, revision)
    out: list[RepoFile] = []
    what = f"the file list of {repo}"
    for _ in range(MAX_PAGES):
        if url is None:
            return out
        doc, answer = fetcher.get_json(url, MAX_LISTING_BYTES, what)
        if not isinstance(doc, list):
            raise RemoteProtocolError(
                f"{what}: the Hub API answered with {type(doc).__name__}, not a list of files; check HF_ENDPOINT.",
                url,
            )
        for item in doc:
            if not isinstance(item, dict) or item.get("type") != "file" or not isinstance(item.get("path"), str):
                continue
            size = item.get("size")
            lfs = item.get("lfs")
            sha = None
            if isinstance(lfs, dict):
                if isinstance(lfs.get("size"), int):
                    size = lfs["size"]
                oid = lfs.get("oid")
                if isinstance(oid, str) and _SHA256.match(oid):
                    sha = oid.lower()
            out.append(RepoFile(item["path"], size if isinstance(size, int) and size >= 0 else None, sha))
        m = _LINK_NEXT.search(answer.headers.get("link", ""))
        url = m.group(1) if m else None
    raise RemoteProtocolError(f"{what}: more than {MAX_PAGES} pages; Layerdeck stops there.", tree_url(repo, revision))


def no_such_quant(repo: str, tag: str, files: list[RepoFile]) -> RemoteNotFoundError:
    groups = group_quants(files)
    have = ", ".join(g.tag for g in groups[:30]) + (f" and {len(groups) - 30} more" if len(groups) > 30 else "")
    what = f"no GGUF file of quantization {tag}" if tag else "no GGUF model file"
    return RemoteNotFoundError(
        f"{repo}: {what} in the repository"
        + (
            f"; it has {have}."
            if groups
            else "; it holds no .gguf model files (a safetensors repository? look for "
            "a ...-GGUF repository of the model)."
        )
        + (f" Open one as {repo}:{groups[0].tag}." if groups else ""),
        repo,
        404,
    )
