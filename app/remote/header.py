"""Read one GGUF file's header over HTTP: only its bytes, growing the range as the header demands.

The first request asks for :data:`FIRST_BYTES`; :func:`app.model.gguf_reader.parse_header` then either
returns the header or says up to which byte it needs (``HeaderIncompleteError.needed``), and the next request
asks for that much and at most one step (:data:`READ_AHEAD`) more. A server that answers ``200`` with the whole file
(ignoring ``Range``) is read from that one answer as far as the header needs, then the connection is closed.
Every answer is checked against the request (``Content-Range`` start, end and total, ``Content-Length``,
the same total and ETag on every request) and the header may take at most :data:`MAX_HEADER_BYTES`.

Headers are cached by ETag under the user cache folder (:mod:`app.remote.cache`): a later read sends
``If-None-Match`` and takes the cached bytes on ``304``, or on an answer with the same ETag.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from ..model.errors import NotGGUFError, TruncatedGGUFError
from ..model.gguf_reader import GGUFHeader, HeaderIncompleteError, parse_header
from . import cache as header_cache
from .errors import (
    HeaderTooLargeError,
    NotAModelError,
    RemoteProtocolError,
    RemoteTruncatedError,
)
from .http import Answer, Fetcher

log = logging.getLogger(__name__)

__all__ = ["RemoteHeader", "read_remote_header", "FIRST_BYTES", "READ_AHEAD", "MAX_HEADER_BYTES"]

#: The first request's length: most headers without a large vocabulary fit.
FIRST_BYTES = 256 * 1024
#: The most a request asks for beyond the byte the parser said it needs, and the step by which a long header
#: is read (a 152k-token vocabulary is ~4 MB: a few steps); past 4 MiB read the step is a quarter of what was
#: read, so a 20 MB header takes a few more requests, not twenty. The reads stop within one step of the
#: header's end.
READ_AHEAD = 1024 * 1024
#: The longest header read (the largest vocabularies with merges are ~20 MB); past it the file is refused.
MAX_HEADER_BYTES = 96 * 1024 * 1024

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


@dataclass
class RemoteHeader:
    """A header read over HTTP: the parsed header, the file's size and ETag, where the bytes came from."""

    header: GGUFHeader
    url: str
    size: int
    etag: str | None
    from_cache: bool
    bytes_read: int  # body bytes received for this header (0 from the cache)
    requests: int
    data: bytes = b""  # the header's bytes as read (what a sparse stand-in file for llama.cpp starts with)


def _etag(a: Answer) -> str | None:
    return a.header("x-linked-etag") or a.header("etag")


class _Source:
    """The first ``len(data)`` bytes of the file at ``url``, grown on demand by range requests (or from one
    streamed ``200`` answer)."""

    def __init__(self, fetcher: Fetcher, url: str, what: str, size_hint: int | None) -> None:
        self.f, self.url, self.what = fetcher, url, what
        self.data = bytearray()
        self.size: int | None = size_hint
        self.etag: str | None = None
        self.stream: Answer | None = None  # a 200 answer being read to its needed part
        self.content_type = ""
        self.storage_url = url
        self.storage_etag: str | None = None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None

    def first(self, end: int, if_none_match: str | None) -> bool:
        """Read the first bytes; False on ``304 Not Modified``."""
        headers = {"Range": f"bytes=0-{end - 1}"}
        if if_none_match:
            headers["If-None-Match"] = if_none_match
        a = self.f.request(self.url, headers, self.what)
        self.etag = _etag(a)
        self.storage_url = a.url  # where the redirects led: the next ranges go there directly
        self.storage_etag = a.headers.get("etag")  # that host's own ETag (the Hub's X-Linked-Etag differs)
        if a.status == 304:
            a.close()
            return False
        self._take(a, 0, end)
        return True

    def grow(self, end: int) -> None:
        have = len(self.data)
        if end <= have:
            return
        if self.stream is not None:
            self._read_into(self.stream, end - have)
            return
        a = self.f.request(self.storage_url, {"Range": f"bytes={have}-{end - 1}"}, self.what)
        if a.status == 304:  # no If-None-Match was sent: a broken server
            a.close()
            raise RemoteProtocolError(
                f"{self.what}: the server answered 304 Not Modified to a plain request.", self.url
            )
        etag = a.headers.get("etag")
        if self.storage_etag and etag and etag != self.storage_etag:
            a.close()
            raise RemoteProtocolError(
                f"{self.what}: the file changed while its header was being read (ETag {self.storage_etag} became "
                f"{etag}); "
                "try again.",
                self.url,
            )
        self._take(a, have, end)

    def _take(self, a: Answer, start: int, end: int) -> None:
        """Check an answer to ``Range: bytes=start-(end-1)`` and add its bytes."""
        self.content_type = (a.header("content-type") or "").lower()
        length = a.headers.get("content-length")
        try:
            clen = int(length) if length is not None else None
        except ValueError:
            clen = None
        if clen is not None and clen < 0:
            clen = None
        linked = a.header("x-linked-size")
        if a.status == 200:
            if start:
                a.close()
                raise RemoteProtocolError(
                    f"{self.what}: the server answered a range request with the whole file (200) after honouring "
                    "ranges before; try again.",
                    self.url,
                )
            # Range ignored: the whole file follows. Read only what the header needs, then close.
            total = clen if clen is not None else (int(linked) if linked and linked.isdigit() else None)
            self._set_size(total, "Content-Length")
            self.stream = a
            self._read_into(a, end)
            return
        try:
            cr = a.headers.get("content-range")
            m = _CONTENT_RANGE.match(cr or "")
            if m is None:
                raise RemoteProtocolError(
                    f"{self.what}: the server answered 206 (partial content) with Content-Range {cr!r}, which is not "
                    "a byte range; the server is broken.",
                    self.url,
                )
            first, last, total_s = int(m.group(1)), int(m.group(2)), m.group(3)
            if first != start or last < first or last > end - 1:
                raise RemoteProtocolError(
                    f"{self.what}: asked for bytes {start}-{end - 1}, the server sent {first}-{last}: the server is "
                    "broken; try again or use another mirror.",
                    self.url,
                )
            if clen is not None and clen != last - first + 1:
                raise RemoteProtocolError(
                    f"{self.what}: Content-Length {clen:,} disagrees with Content-Range {cr} "
                    f"({last - first + 1:,} bytes): the server is broken.",
                    self.url,
                )
            self._set_size(int(total_s) if total_s != "*" else None, "Content-Range")
            if self.size is not None and last >= self.size:
                raise RemoteProtocolError(
                    f"{self.what}: the server sent bytes up to {last:,} of a file it says is {self.size:,} bytes long.",
                    self.url,
                )
            want = last - first + 1
            got = self.f.read_body(a, want, self.what)
            if len(got) < want:
                raise RemoteTruncatedError(
                    f"{self.what}: the server's answer ended after {len(got):,} of the {want:,} bytes it announced; "
                    "try again.",
                    self.url,
                )
            self.data += got
        finally:
            a.close()

    def _set_size(self, total: int | None, source: str) -> None:
        if total is None:
            if self.size is None:
                raise RemoteProtocolError(
                    f"{self.what}: the server does not say how large the file is (no length in {source}), so its "
                    "header cannot be checked; download the file instead.",
                    self.url,
                )
            return
        if self.size is not None and total != self.size:
            raise RemoteProtocolError(
                f"{self.what}: the server gives the file's size as {total:,} bytes, but said {self.size:,} before "
                "(the file changed, or the server is broken); try again.",
                self.url,
            )
        self.size = total

    def _read_into(self, a: Answer, n: int) -> None:
        assert self.size is not None
        n = min(n, self.size - len(self.data))
        got = self.f.read_body(a, n, self.what)
        self.data += got
        if len(got) < n:
            raise RemoteTruncatedError(
                f"{self.what}: the server's answer ended after {len(self.data):,} bytes of a file it says is "
                f"{self.size:,} bytes long; try again.",
                self.url,
            )


def _not_gguf(what: str, data: bytes, content_type: str, exc: NotGGUFError) -> NotAModelError:
    if "html" in content_type or data.lstrip()[:1] == b"<":
        kind = "an HTML page (an error or login page?), not a GGUF file"
    elif len(data) >= 9 and data[8:9] == b"{":
        kind = (
            "a safetensors file, not GGUF: llama.cpp reads GGUF; look for a GGUF version of the model "
            "(often a repository named ...-GGUF) or convert it with llama.cpp's convert_hf_to_gguf.py"
        )
    elif data.lstrip()[:1] in (b"{", b"["):
        kind = "JSON, not a GGUF file (an API answer or a config file?)"
    else:
        kind = str(exc).split(": ", 1)[-1].rstrip(".")
    return NotAModelError(f"{what}: the server sent {kind}. Check the name or URL.", what)


def _parse(src: _Source, data: bytes, size: int, name: str, shard: int) -> GGUFHeader:
    try:
        return parse_header(data, size, name, shard)
    except HeaderIncompleteError:
        raise
    except NotGGUFError as exc:
        raise _not_gguf(name, data[:64], src.content_type, exc) from None
    except TruncatedGGUFError as exc:
        raise RemoteTruncatedError(
            f"{exc} (The file on the server is {size:,} bytes long and ends inside its header: it is cut short "
            "there; tell the repository's owner.)",
            src.url,
        ) from None


def read_remote_header(
    url: str, fetcher: Fetcher, *, name: str, shard: int = 0, size_hint: int | None = None, use_cache: bool = True
) -> RemoteHeader:
    """The header of the GGUF file at ``url`` (``name``: how messages and ``GGUFHeader.path`` call it).

    Raises :class:`~app.remote.errors.RemoteError` subclasses for what the server does and
    :class:`~app.model.errors.GGUFError` subclasses for what the header holds.
    """
    before_bytes, before_req = fetcher.stats.bytes_read, len(fetcher.stats.requests)
    cached = header_cache.load(url) if use_cache else None
    src = _Source(fetcher, url, name, size_hint)
    try:
        if not src.first(FIRST_BYTES, cached.etag if cached else None) or (
            cached is not None and src.etag == cached.etag and src.size in (None, cached.size)
        ):
            if cached is None:
                raise RemoteProtocolError(f"{name}: the server answered 304 Not Modified to a plain request.", url)
            h = _parse(src, cached.data, cached.size, name, shard)
            return RemoteHeader(
                h,
                url,
                cached.size,
                cached.etag,
                True,
                fetcher.stats.bytes_read - before_bytes,
                len(fetcher.stats.requests) - before_req,
                cached.data,
            )
        assert src.size is not None
        while True:
            try:
                h = _parse(src, bytes(src.data), src.size, name, shard)
                break
            except HeaderIncompleteError as exc:
                have = len(src.data)
                if exc.needed > MAX_HEADER_BYTES:
                    raise HeaderTooLargeError(
                        f"{name}: the header goes on past {MAX_HEADER_BYTES // (1024 * 1024)} MiB (the parser needs "
                        f"the bytes up to {exc.needed:,}); no real model's header is that large: the file is corrupt "
                        "or not a model.",
                        url,
                    ) from None
                step = min(max(have, FIRST_BYTES), max(READ_AHEAD, have // 4))  # few parses of a long header
                end = min(src.size, MAX_HEADER_BYTES, max(exc.needed, have + step))
                if end <= have:  # the parser needs nothing new: cannot happen with a consistent parser
                    raise RemoteProtocolError(
                        f"{name}: the header cannot be read from the server's answers.", url
                    ) from None
                src.grow(end)
    finally:
        src.close()
    if use_cache and src.etag:
        header_cache.store(url, src.etag, src.size, bytes(src.data))
    return RemoteHeader(
        h,
        url,
        src.size,
        src.etag,
        False,
        fetcher.stats.bytes_read - before_bytes,
        len(fetcher.stats.requests) - before_req,
        bytes(src.data),
    )
