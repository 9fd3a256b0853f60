"""A fast GGUF header reader: metadata and tensor table, never tensor data.

``gguf.GGUFReader`` builds a numpy view for every array element, which takes
seconds on a file with a 150k-token vocabulary. Layerdeck only needs the
metadata scalars, the sizes of the big arrays and the tensor table, so this
reader walks the header once over an ``mmap`` with precompiled ``struct``
readers, decodes small arrays eagerly and leaves large ones as
:class:`LazyArray` (offset and count, decoded on demand). Every length and
count is checked against the bytes that remain, so corrupt or truncated files
raise a typed :mod:`app.model.errors` error instead of hanging or allocating.

Format reference: ``ggml/src/gguf.cpp`` and ``docs/gguf.md`` in llama.cpp.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from .errors import CorruptGGUFError, NotGGUFError, TruncatedGGUFError, UnsupportedVersionError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
GGML_MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32
#: Arrays with more elements than this are left undecoded (LazyArray).
EAGER_ARRAY_LIMIT = 4096
#: Longest string we accept anywhere in a header (keys, values, tensor names).
MAX_STRING = 1 << 30
MAX_NESTING = 8
MAX_TENSORS = 1_000_000
MAX_KV = 1_000_000
#: No real metadata array comes near this many elements.
MAX_ARRAY = 1 << 32

# GGUF value types (gguf.h enum gguf_type)
(
    T_UINT8,
    T_INT8,
    T_UINT16,
    T_INT16,
    T_UINT32,
    T_INT32,
    T_FLOAT32,
    T_BOOL,
    T_STRING,
    T_ARRAY,
    T_UINT64,
    T_INT64,
    T_FLOAT64,
) = range(13)

_SCALAR = {
    T_UINT8: struct.Struct("<B"),
    T_INT8: struct.Struct("<b"),
    T_UINT16: struct.Struct("<H"),
    T_INT16: struct.Struct("<h"),
    T_UINT32: struct.Struct("<I"),
    T_INT32: struct.Struct("<i"),
    T_FLOAT32: struct.Struct("<f"),
    T_BOOL: struct.Struct("<?"),
    T_UINT64: struct.Struct("<Q"),
    T_INT64: struct.Struct("<q"),
    T_FLOAT64: struct.Struct("<d"),
}
_NUMPY_DTYPE = {
    T_UINT8: "<u1",
    T_INT8: "<i1",
    T_UINT16: "<u2",
    T_INT16: "<i2",
    T_UINT32: "<u4",
    T_INT32: "<i4",
    T_FLOAT32: "<f4",
    T_BOOL: "?",
    T_UINT64: "<u8",
    T_INT64: "<i8",
    T_FLOAT64: "<f8",
}
TYPE_NAMES = {
    T_UINT8: "uint8",
    T_INT8: "int8",
    T_UINT16: "uint16",
    T_INT16: "int16",
    T_UINT32: "uint32",
    T_INT32: "int32",
    T_FLOAT32: "float32",
    T_BOOL: "bool",
    T_STRING: "string",
    T_ARRAY: "array",
    T_UINT64: "uint64",
    T_INT64: "int64",
    T_FLOAT64: "float64",
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_GGML_TYPES: dict[int, tuple[str, int, int]] = {
    int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES
}


@dataclass(frozen=True)
class LazyArray:
    """A large metadata array left undecoded: where it is and how long it is."""

    path: str
    offset: int  # first element
    item_type: int
    count: int
    end: int  # byte after the last element

    def __len__(self) -> int:
        return self.count

    def load(self) -> list[Any]:
        """Decode the elements (reads the file again)."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(self.end - self.offset)
        if self.item_type == T_STRING:
            out, pos, unpack = [], 0, _U64.unpack_from
            for _ in range(self.count):
                (n,) = unpack(data, pos)
                out.append(data[pos + 8 : pos + 8 + n].decode("utf-8", errors="replace"))
                pos += 8 + n
            return out
        import numpy as np

        return np.frombuffer(data, dtype=_NUMPY_DTYPE[self.item_type], count=self.count).tolist()


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    type_id: int
    type_name: str
    shape: tuple[int, ...]  # ggml order: ne0 (row length) first
    n_elements: int
    nbytes: int
    offset: int  # absolute byte offset of the data within its shard file
    shard: int = 0


@dataclass
class GGUFHeader:
    """Everything in one GGUF file except tensor data."""

    path: str
    file_size: int
    version: int
    metadata: dict[str, Any]
    metadata_types: dict[str, int]
    tensors: list[TensorInfo]
    alignment: int
    data_offset: int
    header_size: int = 0
    warnings: list[str] = field(default_factory=list)


class _Cursor:
    """Bounds-checked reads over the mapped file; knows which section it is in for messages."""

    __slots__ = ("buf", "pos", "size", "path", "section")

    def __init__(self, buf, size: int, path: str):
        self.buf = buf
        self.pos = 0
        self.size = size
        self.path = path
        self.section = "header"

    def truncated(self, need: int) -> TruncatedGGUFError:
        return TruncatedGGUFError(
            f"{os.path.basename(self.path)}: the file ends inside the {self.section} at byte {self.size:,} "
            f"(needed {need:,} more bytes at byte {self.pos:,}): the download is probably incomplete; "
            "download the file again.",
            self.path,
            self.pos,
        )

    def need(self, n: int) -> None:
        if self.pos + n > self.size:
            raise self.truncated(self.pos + n - self.size)

    def u32(self) -> int:
        self.need(4)
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self) -> int:
        self.need(8)
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, what: str) -> str:
        start = self.pos
        n = self.u64()
        if n > MAX_STRING:
            raise CorruptGGUFError(
                f"{os.path.basename(self.path)}: {what} at byte {start:,} claims a length of {n:,} bytes, "
                "which cannot be right: the file is corrupt.",
                self.path,
                start,
            )
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")


def _read_value(cur: _Cursor, vtype: int, key: str, depth: int = 0) -> Any:
    sc = _SCALAR.get(vtype)
    if sc is not None:
        cur.need(sc.size)
        (v,) = sc.unpack_from(cur.buf, cur.pos)
        cur.pos += sc.size
        return v
    if vtype == T_STRING:
        return cur.string(f"the value of {key!r}")
    if vtype == T_ARRAY:
        return _read_array(cur, key, depth)
    raise CorruptGGUFError(
        f"{os.path.basename(cur.path)}: metadata key {key!r} at byte {cur.pos - 4:,} has unknown value type {vtype}: "
        "the file is corrupt or was written by a newer tool than this Layerdeck understands.",
        cur.path,
        cur.pos,
    )


def _read_array(cur: _Cursor, key: str, depth: int) -> Any:
    if depth >= MAX_NESTING:
        raise CorruptGGUFError(
            f"{os.path.basename(cur.path)}: metadata key {key!r} nests arrays more than "
            f"{MAX_NESTING} deep: the file is corrupt.",
            cur.path,
            cur.pos,
        )
    start = cur.pos
    item_type = cur.u32()
    count = cur.u64()
    remaining = cur.size - cur.pos
    sc = _SCALAR.get(item_type)
    if sc is not None:
        nbytes = count * sc.size
        if nbytes > remaining:
            if count > MAX_ARRAY:
                raise CorruptGGUFError(
                    f"{os.path.basename(cur.path)}: array {key!r} at byte {start:,} claims {count:,} elements, "
                    "more than any model has: the file is corrupt.",
                    cur.path,
                    start,
                )
            raise cur.truncated(nbytes - remaining)
        first = cur.pos
        cur.pos += nbytes
        if count > EAGER_ARRAY_LIMIT:
            return LazyArray(cur.path, first, item_type, count, cur.pos)
        if count == 0:
            return []
        return list(struct.unpack_from(f"<{count}{sc.format[-1]}", cur.buf, first))
    if item_type == T_STRING:
        # Each string needs at least its 8-byte length.
        if count * 8 > remaining:
            if count > MAX_ARRAY:
                raise CorruptGGUFError(
                    f"{os.path.basename(cur.path)}: string array {key!r} at byte {start:,} claims {count:,} "
                    "strings, more than any model has: the file is corrupt.",
                    cur.path,
                    start,
                )
            raise cur.truncated(count * 8 - remaining)
        first = cur.pos
        if count > EAGER_ARRAY_LIMIT:
            # Skip without decoding: one length read per element.
            pos, size, buf, unpack = cur.pos, cur.size, cur.buf, _U64.unpack_from
            for _ in range(count):
                if pos + 8 > size:
                    cur.pos = pos
                    raise cur.truncated(pos + 8 - size)
                pos += 8 + unpack(buf, pos)[0]
            if pos > size:
                cur.pos = size
                raise cur.truncated(pos - size)
            cur.pos = pos
            return LazyArray(cur.path, first, T_STRING, count, pos)
        return [cur.string(f"an element of {key!r}") for _ in range(count)]
    if item_type == T_ARRAY:
        if count > MAX_ARRAY:
            raise CorruptGGUFError(
                f"{os.path.basename(cur.path)}: nested array {key!r} at byte {start:,} claims {count:,} "
                "elements, more than any model has: the file is corrupt.",
                cur.path,
                start,
            )
        if count * 12 > remaining:
            raise cur.truncated(count * 12 - remaining)
        return [_read_array(cur, key, depth + 1) for _ in range(count)]
    raise CorruptGGUFError(
        f"{os.path.basename(cur.path)}: array {key!r} at byte {start:,} has unknown element type {item_type}: "
        "the file is corrupt or was written by a newer tool than this Layerdeck understands.",
        cur.path,
        start,
    )


def _identify_other_format(head: bytes) -> str:
    if head[:4] in (b"lmgg", b"fmgg", b"tjgg", b"ggml", b"ggmf", b"ggjt"):
        return (
            "it is an old GGML/GGJT model from before GGUF existed; convert it with llama.cpp's "
            "convert scripts or download a GGUF version"
        )
    if head[:4] == b"FUGG":
        return "it is a big-endian GGUF file, which Layerdeck and most llama.cpp builds cannot read"
    if head[:2] == b"PK":
        return "it looks like a zip archive (a PyTorch checkpoint?); convert the model to GGUF first"
    if len(head) >= 9 and head[8:9] == b"{":
        return "it looks like a safetensors file; convert it with llama.cpp's convert_hf_to_gguf.py first"
    if head[:1] in (b"{", b"[", b"<"):
        return "it looks like a text file (JSON or HTML), perhaps an error page saved instead of the model"
    return "it does not start with the GGUF magic bytes"


def read_header(path: str | os.PathLike, shard: int = 0) -> GGUFHeader:
    """Read metadata and tensor table of one GGUF file. Raises :class:`~app.model.errors.GGUFError`."""
    path = os.fspath(path)
    try:
        fh = open(path, "rb")
    except IsADirectoryError:
        raise NotGGUFError(f"{path} is a folder, not a GGUF file.", path) from None
    except FileNotFoundError:
        raise NotGGUFError(f"{path} does not exist.", path) from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        name = os.path.basename(path)
        if size < 4:
            raise TruncatedGGUFError(
                f"{name} is {size} bytes long, too short to be a GGUF model: the download is probably incomplete.",
                path,
                0,
            )
        head = fh.read(16)
        if head[:4] != GGUF_MAGIC:
            raise NotGGUFError(f"{name} is not a GGUF model: {_identify_other_format(head)}.", path, 0)
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return _parse(mm, size, path, shard)
        finally:
            mm.close()


def _parse(mm, size: int, path: str, shard: int) -> GGUFHeader:
    name = os.path.basename(path)
    cur = _Cursor(mm, size, path)
    cur.pos = 4
    version = cur.u32()
    if version not in SUPPORTED_VERSIONS:
        if version == 1:
            msg = "GGUF version 1 (from 2023) is no longer supported by llama.cpp; download a newer conversion"
        elif version & 0xFFFF == 0 and version >> 16:
            msg = f"the version field reads {version:#x}, which means a big-endian file; use a little-endian GGUF"
        else:
            msg = f"GGUF version {version} is newer than this Layerdeck understands (it reads versions 2 and 3); update Layerdeck"
        raise UnsupportedVersionError(f"{name}: {msg}.", path, 4)
    n_tensors = cur.u64()
    n_kv = cur.u64()
    # A tensor entry takes at least 8+4+8+4+8 bytes and a key/value pair at least 8+4+1.
    # Counts beyond any real model are corruption; plausible counts that don't fit mean a cut file.
    if n_tensors > MAX_TENSORS:
        raise CorruptGGUFError(
            f"{name}: the header claims {n_tensors:,} tensors, more than any model has: the file is corrupt.", path, 8
        )
    if n_kv > MAX_KV:
        raise CorruptGGUFError(
            f"{name}: the header claims {n_kv:,} metadata entries, more than any model has: the file is corrupt.",
            path,
            16,
        )
    if n_tensors * 32 + n_kv * 13 > size - cur.pos:
        cur.section = "metadata" if n_kv else "tensor table"
        raise cur.truncated(n_tensors * 32 + n_kv * 13 - (size - cur.pos))

    cur.section = "metadata"
    metadata: dict[str, Any] = {}
    types: dict[str, int] = {}
    warnings: list[str] = []
    for _ in range(n_kv):
        key = cur.string("a metadata key")
        vtype = cur.u32()
        value = _read_value(cur, vtype, key)
        if key in metadata:
            warnings.append(f"metadata key {key!r} appears twice; the last value is used")
        metadata[key] = value
        types[key] = vtype

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise CorruptGGUFError(
            f"{name}: general.alignment is {alignment!r}, not a power of two: the file is corrupt.", path
        )

    cur.section = "tensor table"
    raw: list[tuple[str, tuple[int, ...], int, int]] = []
    seen: set[str] = set()
    for _ in range(n_tensors):
        entry_at = cur.pos
        tname = cur.string("a tensor name")
        n_dims = cur.u32()
        if n_dims == 0 or n_dims > GGML_MAX_DIMS:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} at byte {entry_at:,} has {n_dims} dimensions "
                f"(ggml allows 1 to {GGML_MAX_DIMS}): the file is corrupt.",
                path,
                entry_at,
            )
        cur.need(8 * n_dims)
        shape = struct.unpack_from(f"<{n_dims}Q", mm, cur.pos)
        cur.pos += 8 * n_dims
        type_id = cur.u32()
        offset = cur.u64()
        if tname in seen:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} appears twice in the tensor table: the file is corrupt "
                "(a bad conversion or merge); convert or download it again.",
                path,
                entry_at,
            )
        seen.add(tname)
        raw.append((tname, shape, type_id, offset))
    header_size = cur.pos
    data_offset = (cur.pos + alignment - 1) // alignment * alignment

    tensors: list[TensorInfo] = []
    data_size = size - data_offset
    for tname, shape, type_id, offset in raw:
        info = _GGML_TYPES.get(type_id)
        if info is None:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} uses ggml type {type_id}, which this Layerdeck does not know: "
                "the file is corrupt or uses a newer quantization; update Layerdeck.",
                path,
            )
        tname_type, block, type_size = info
        n_el = 1
        for d in shape:
            n_el *= d
        if shape[0] % block:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} has rows of {shape[0]} elements, not a multiple of "
                f"the {tname_type} block size {block}: the file is corrupt.",
                path,
            )
        nbytes = n_el // block * type_size
        if nbytes > (1 << 48):
            raise CorruptGGUFError(f"{name}: tensor {tname!r} claims {nbytes:,} bytes: the file is corrupt.", path)
        if offset % alignment:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} starts at data offset {offset:,}, not aligned to "
                f"{alignment} bytes: the file is corrupt.",
                path,
            )
        if offset + nbytes > data_size:
            raise TruncatedGGUFError(
                f"{name}: the data region is shorter than the tensor table says: tensor {tname!r} needs bytes up to "
                f"{data_offset + offset + nbytes:,} but the file ends at byte {size:,}: the download is probably "
                "incomplete; download the file again.",
                path,
                size,
            )
        tensors.append(TensorInfo(tname, type_id, tname_type, tuple(shape), n_el, nbytes, data_offset + offset, shard))
    return GGUFHeader(path, size, version, metadata, types, tensors, alignment, data_offset, header_size, warnings)
