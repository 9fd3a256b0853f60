"""Open a model by its remote name: read every shard's header over HTTP into a header-only :class:`Model`.

The model is the one :func:`app.model.open_model` makes of the downloaded files (the same checks, the same
errors): only ``paths`` (the files' names, no folder: nothing is on disk), ``source`` (the canonical remote
name, which :func:`app.remote.names.model_arguments` turns into ``-hf ORG/REPO:QUANT``) and ``header_only``
differ.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

from ..model import Model
from ..model.gguf_reader import GGUFHeader
from ..model.model import model_from_headers, read_split_set
from .errors import RemoteNameError
from .header import RemoteHeader, read_remote_header
from .http import Fetcher
from .hub import RepoFile, find_best_model, list_files, no_such_quant, split_files
from .names import RemoteName, hub_token, parse_name, resolve_url

__all__ = ["RemoteOptions", "RemoteRead", "open_remote", "read_headers"]


@dataclass
class RemoteOptions:
    """How to reach the server: ``token`` (default: :func:`~app.remote.names.hub_token`; ``""`` sends none),
    timeouts, the header cache, a cancel flag, and ``progress(done, total)`` in bytes (``total`` grows as the
    headers demand more)."""

    token: str | None = None
    timeout: float = 20.0
    deadline: float = 300.0
    use_cache: bool = True
    cancel: Callable[[], bool] | threading.Event | None = None
    progress: Callable[[int, int], None] | None = None

    def fetcher(self) -> Fetcher:
        token = self.token if self.token is not None else hub_token()[0]
        cancel = self.cancel.is_set if isinstance(self.cancel, threading.Event) else self.cancel
        return Fetcher(token=token or None, timeout=self.timeout, deadline=self.deadline, cancel=cancel)


@dataclass
class RemoteRead:
    """What reading took: the headers (one per shard), the name, requests and bytes."""

    name: RemoteName
    headers: list[RemoteHeader] = field(default_factory=list)
    listing: list[RepoFile] | None = None

    @property
    def bytes_read(self) -> int:
        return sum(h.bytes_read for h in self.headers)

    @property
    def file_size(self) -> int:
        return sum(h.size for h in self.headers)


def _url_of(name: RemoteName, path: str) -> str:
    if name.kind == "url":
        parts = urlsplit(name.url)
        return urlunsplit(
            (parts.scheme, parts.netloc, posixpath.join(posixpath.dirname(parts.path), path.split("/")[-1]), "", "")
        )
    return resolve_url(name.repo, path, name.revision)


def _display(name: RemoteName, path: str) -> str:
    if name.kind == "url":
        return _url_of(name, path) if path.split("/")[-1] != name.url.split("/")[-1].split("?")[0] else name.url
    return f"hf://{name.repo}/{path}"


def read_headers(name: RemoteName | str, options: RemoteOptions | None = None) -> RemoteRead:
    """Every shard's header of the model ``name`` names, checked like a local split set."""
    if isinstance(name, str):
        parsed = parse_name(name)
        if parsed is None:
            raise RemoteNameError(f"{name!r} is not a remote model name (hf://..., ORG/REPO:QUANT or a URL).", name)
        name = parsed
    options = options or RemoteOptions()
    fetcher = options.fetcher()
    out = RemoteRead(name)
    sizes: dict[str, int | None] = {}
    if name.kind == "quant":
        files = list_files(name.repo, fetcher, name.revision)
        out.listing = files
        best = find_best_model(files, name.quant)
        if best is None:
            raise no_such_quant(name.repo, name.quant, files)
        shards = split_files(files, best)
        sizes = {f.path: f.size for f in shards}
        path = best.path
    elif name.kind == "file":
        path = name.file
    else:
        path = urlsplit(name.url).path.lstrip("/") or "model.gguf"

    done = [0]
    planned = [0]

    def on_bytes(n: int) -> None:
        done[0] += n
        if options.progress is not None:
            options.progress(done[0], max(planned[0], done[0]))

    fetcher.on_bytes = on_bytes
    read_by_id: dict[int, RemoteHeader] = {}

    def read(p, shard: int = 0) -> GGUFHeader:
        rel = str(p)
        planned[0] += 256 * 1024
        url = name.url if (name.kind == "url" and shard == 0 and rel == path) else _url_of(name, rel)
        h = read_remote_header(
            url, fetcher, name=_display(name, rel), shard=shard, size_hint=sizes.get(rel), use_cache=options.use_cache
        )
        read_by_id[id(h.header)] = h
        return h.header

    given = read(PurePosixPath(path))
    known = set(sizes) if name.kind == "quant" else None
    headers = read_split_set(
        PurePosixPath(path),
        given,
        None,
        read=read,
        exists=(lambda p: str(p) in known) if known is not None else (lambda p: True),
    )
    out.headers = [read_by_id[id(h)] for h in headers]  # in shard order, whichever shard was named
    return out


def open_remote(name: RemoteName | str, options: RemoteOptions | None = None) -> tuple[Model, RemoteRead]:
    """The header-only :class:`Model` of ``name`` and what reading it took."""
    read = read_headers(name, options)
    headers = [h.header for h in read.headers]
    model = model_from_headers(headers, read.name.display)
    model.paths = [Path(PurePosixPath(h.path).name) for h in headers]
    model.source = read.name.display
    return model, read
