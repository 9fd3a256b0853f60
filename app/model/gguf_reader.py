"""A fast GGUF header reader: metadata and tensor table, never tensor data.

``gguf.GGUFReader`` builds a numpy view for every array element, which takes
seconds on a file with a 150k-token vocabulary. Layerdeck only needs the
metadata scalars, the sizes of the big arrays and the tensor table, so this
reader walks the header once over an ``mmap`` with precompiled ``struct``
readers, decodes small arrays eagerly and leaves large ones as
:class:`LazyArray` (offset and count, decoded on demand). Every length and
count is checked against the bytes that remain, so corrupt or truncated files
raise a typed :mod:`app.model.errors` error instead of hanging or allocating.

Format reference: ``ggml/src/gguf.cpp`` and ``docs/gguf.md`` in llama.cpp. What ``gguf.cpp``
(``gguf_init_from_reader``) refuses, this reader refuses too, and its messages quote llama.cpp's reason:
empty or duplicate keys, arrays of arrays, arrays over 2**30 elements, a ``general.alignment`` that is not
a uint32 power of two, tensor names of 64 bytes or more, more than 4 dimensions, negative or overflowing
dimensions, and tensor data offsets other than the running sum of the padded sizes before them (which is
what rules out overlapping or misplaced data). What it accepts (a tensor with 0 dimensions, a dimension of 0
elements), this reader accepts. Opening the path checks its file type first (a FIFO would block ``open``
forever) and turns every operating-system error into a typed error naming the path.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import stat
import struct
from dataclasses import dataclass, field
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from .errors import CorruptGGUFError, FileAccessError, NotGGUFError, TruncatedGGUFError, UnsupportedVersionError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
GGML_MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32
#: Arrays with more elements than this are left undecoded (LazyArray).
EAGER_ARRAY_LIMIT = 4096
#: Longest string we accept anywhere in a header (keys, values, tensor names): gguf.cpp's GGUF_MAX_STRING_LENGTH.
MAX_STRING = 1 << 30
MAX_TENSORS = 1_000_000
MAX_KV = 1_000_000
#: Most elements one metadata array may hold: gguf.cpp's GGUF_MAX_ARRAY_ELEMENTS.
MAX_ARRAY = 1 << 30
#: ggml's GGML_MAX_NAME: a tensor name must be shorter than this many bytes.
GGML_MAX_NAME = 64
_INT64_MAX = (1 << 63) - 1

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
#: gguf.cpp's ``gguf_type_name``: the names llama.cpp's messages use.
LLAMA_TYPE_NAMES = {
    T_UINT8: "u8",
    T_INT8: "i8",
    T_UINT16: "u16",
    T_INT16: "i16",
    T_UINT32: "u32",
    T_INT32: "i32",
    T_FLOAT32: "f32",
    T_BOOL: "bool",
    T_STRING: "str",
    T_ARRAY: "arr",
    T_UINT64: "u64",
    T_INT64: "i64",
    T_FLOAT64: "f64",
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_GGML_TYPES: dict[int, tuple[str, int, int]] = {
    int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES
}
#: Types of the pinned ggml (ggml/include/ggml.h, the block sizes of ggml-common.h) that the installed gguf
#: package may not know yet: without them a real Q1_0 or Q2_0 file would be refused as "ggml type 42 unknown".
for _id, _entry in {40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18)}.items():
    _GGML_TYPES.setdefault(_id, _entry)


@dataclass(frozen=True)
class LazyArray:
    """A large metadata array left undecoded: where it is and how long it is."""

    path: str
    offset: int  # first element
    item_type: int
    count: int
    end: int  # byte after the last element
    #: the header's bytes when it was parsed from memory (:func:`parse_header`): read from there, not the path
    source: bytes | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return self.count

    def load(self) -> list[Any]:
        """Decode the elements (reads the file again, or the bytes it was parsed from)."""
        if self.source is not None:
            data = self.source[self.offset : self.end]
        else:
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
    #: the element type of each array-valued key (``metadata_types`` says only ``T_ARRAY``)
    array_types: dict[str, int] = field(default_factory=dict)
    #: the name of a complete tensor entry after the declared table (the header's tensor count is short):
    #: gguf.cpp reads such a file, with every data offset shifted; :func:`app.model.open_model` decides
    stray_entry: str | None = None


class HeaderIncompleteError(TruncatedGGUFError):
    """The bytes given to :func:`parse_header` end before the header does, inside a file that is longer:
    ``needed`` is the byte the parser needs the bytes up to (read more and parse again)."""

    def __init__(self, message: str, path: str | None, offset: int, needed: int):
        self.needed = needed
        super().__init__(message, path, offset)


class _Cursor:
    """Bounds-checked reads over the mapped file (or the first ``avail`` bytes of a file of ``size`` bytes);
    knows which section it is in for messages."""

    __slots__ = ("buf", "pos", "size", "path", "section", "avail", "source")

    def __init__(self, buf, size: int, path: str, avail: int | None = None):
        self.buf = buf
        self.pos = 0
        self.size = size
        self.path = path
        self.section = "header"
        self.avail = size if avail is None else avail
        self.source = buf if avail is not None else None

    def truncated(self, need: int) -> TruncatedGGUFError:
        return TruncatedGGUFError(
            f"{os.path.basename(self.path)}: the file ends inside the {self.section} at byte {self.size:,} "
            f"(needed {need:,} more bytes at byte {self.pos:,}): the download is probably incomplete; "
            "download the file again.",
            self.path,
            self.pos,
        )

    def incomplete(self, end: int) -> HeaderIncompleteError:
        return HeaderIncompleteError(
            f"{os.path.basename(self.path)}: the header goes on past the {self.avail:,} bytes read "
            f"(the {self.section} needs the bytes up to {end:,})",
            self.path,
            self.pos,
            end,
        )

    def need(self, n: int) -> None:
        if self.pos + n > self.avail:
            if self.pos + n > self.size:
                raise self.truncated(self.pos + n - self.size)
            raise self.incomplete(self.pos + n)

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


def _read_value(cur: _Cursor, vtype: int, key: str) -> Any:
    sc = _SCALAR.get(vtype)
    if sc is not None:
        cur.need(sc.size)
        (v,) = sc.unpack_from(cur.buf, cur.pos)
        cur.pos += sc.size
        return v
    if vtype == T_STRING:
        return cur.string(f"the value of {key!r}")
    if vtype == T_ARRAY:
        return _read_array(cur, key)
    raise CorruptGGUFError(
        f"{os.path.basename(cur.path)}: metadata key {key!r} at byte {cur.pos - 4:,} has unknown value type {vtype} "
        f"(llama.cpp: \"key '{key}' has invalid GGUF type {vtype}\"): the file is corrupt or was written by a newer "
        "tool than this Layerdeck understands.",
        cur.path,
        cur.pos,
    )


def _read_array(cur: _Cursor, key: str) -> Any:
    start = cur.pos
    item_type = cur.u32()
    count = cur.u64()
    name = os.path.basename(cur.path)
    if item_type == T_ARRAY:
        # gguf.cpp reads the element type and then refuses GGUF_TYPE_ARRAY like any unknown type.
        raise CorruptGGUFError(
            f"{name}: metadata key {key!r} at byte {start:,} is an array of arrays, which llama.cpp refuses "
            f"(\"key '{key}' has invalid GGUF type {T_ARRAY}\"): the file is corrupt or was written by a broken "
            "tool; convert or download it again.",
            cur.path,
            start,
        )
    if count > MAX_ARRAY:
        raise CorruptGGUFError(
            f"{name}: array {key!r} at byte {start:,} claims {count:,} elements, more than llama.cpp reads "
            f"({MAX_ARRAY:,}, GGUF_MAX_ARRAY_ELEMENTS) and more than any model has: the file is corrupt.",
            cur.path,
            start,
        )
    remaining = cur.size - cur.pos
    sc = _SCALAR.get(item_type)
    if sc is not None:
        nbytes = count * sc.size
        if nbytes > remaining:
            raise cur.truncated(nbytes - remaining)
        cur.need(nbytes)
        first = cur.pos
        cur.pos += nbytes
        if count > EAGER_ARRAY_LIMIT:
            return LazyArray(cur.path, first, item_type, count, cur.pos, cur.source)
        if count == 0:
            return []
        return list(struct.unpack_from(f"<{count}{sc.format[-1]}", cur.buf, first))
    if item_type == T_STRING:
        # Each string needs at least its 8-byte length.
        if count * 8 > remaining:
            raise cur.truncated(count * 8 - remaining)
        first = cur.pos
        if count > EAGER_ARRAY_LIMIT:
            # Skip without decoding: one length read per element.
            pos, size, buf, unpack = cur.pos, cur.avail, cur.buf, _U64.unpack_from
            for _ in range(count):
                if pos + 8 > size:
                    cur.pos = pos
                    cur.need(8)
                n = unpack(buf, pos)[0]
                if n > MAX_STRING:
                    cur.pos = pos
                    raise CorruptGGUFError(
                        f"{name}: an element of {key!r} at byte {pos:,} claims a length of {n:,} bytes, "
                        "which cannot be right: the file is corrupt.",
                        cur.path,
                        pos,
                    )
                pos += 8 + n
            if pos > size:
                cur.pos, end = size, pos
                if end > cur.size:
                    cur.pos = cur.size
                    raise cur.truncated(end - cur.size)
                raise cur.incomplete(end)
            cur.pos = pos
            return LazyArray(cur.path, first, T_STRING, count, pos, cur.source)
        return [cur.string(f"an element of {key!r}") for _ in range(count)]
    raise CorruptGGUFError(
        f"{name}: array {key!r} at byte {start:,} has unknown element type {item_type} "
        f"(llama.cpp: \"key '{key}' has invalid GGUF type {item_type}\"): the file is corrupt or was written by a "
        "newer tool than this Layerdeck understands.",
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


_FILE_KINDS = (
    (stat.S_ISFIFO, "named pipe (FIFO)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _access_error(path: str, exc: OSError) -> FileAccessError:
    """A typed error, naming ``path``, for an operating-system error while opening or reading it."""
    if exc.errno == errno.ELOOP:
        msg = (
            f"{path} cannot be opened: it is a symbolic link that leads back to itself (a symlink loop); "
            "point the link at the model file or open the file itself."
        )
    elif isinstance(exc, FileNotFoundError):
        broken = os.path.islink(path)
        msg = f"{path} is a symbolic link to a file that does not exist." if broken else f"{path} does not exist."
    elif isinstance(exc, IsADirectoryError):
        msg = f"{path} is a folder, not a GGUF file."
    elif isinstance(exc, PermissionError):
        msg = (
            f"{path} cannot be read: permission denied; make the file readable for this user "
            "(or copy it somewhere you may read)."
        )
    elif exc.errno == errno.ENAMETOOLONG:
        msg = f"{path} cannot be opened: the file name is too long."
    else:
        msg = f"{path} cannot be read: {exc.strerror or exc}; check the disk, the network share or the file."
    return FileAccessError(msg, path)


def read_header(path: str | os.PathLike, shard: int = 0) -> GGUFHeader:
    """Read metadata and tensor table of one GGUF file. Raises :class:`~app.model.errors.GGUFError`.

    The file type is checked before opening (a FIFO would block ``open``; a device or socket is no model),
    and the file is opened non-blocking and checked again, so a swap between the two cannot hang either.
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _access_error(path, exc) from None
    except ValueError:  # a NUL byte in the name
        raise FileAccessError(f"{path!r} is not a valid file name.", path) from None
    _check_regular(path, st)
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _access_error(path, exc) from None
    try:
        try:
            st = os.fstat(fd)
            _check_regular(path, st)
            size = st.st_size
            head = os.read(fd, 16) if size >= 4 else b""
        except OSError as exc:
            raise _access_error(path, exc) from None
        name = os.path.basename(path)
        if size < 4:
            raise TruncatedGGUFError(
                f"{name} is {size} bytes long, too short to be a GGUF model: the download is probably incomplete.",
                path,
                0,
            )
        if head[:4] != GGUF_MAGIC:
            raise NotGGUFError(f"{name} is not a GGUF model: {_identify_other_format(head)}.", path, 0)
        try:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError, OverflowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise FileAccessError(
                f"{path}: the operating system refused to map the file into memory ({reason}); free some memory "
                "or raise the address-space limit (ulimit -v): llama.cpp maps model files the same way.",
                path,
            ) from None
        try:
            return _parse(mm, size, path, shard)
        finally:
            mm.close()
    finally:
        os.close(fd)


def _check_regular(path: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise FileAccessError(f"{path} is a folder, not a GGUF file.", path)
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _FILE_KINDS if test(st.st_mode)), "special file")
        raise FileAccessError(
            f"{path} is a {kind}, not a regular file: open the model file itself (a GGUF file on disk).", path
        )


def _pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _stray_entry(mm, pos: int, size: int, expected: int) -> str | None:
    """The name of a complete tensor-table entry at ``pos`` (where the declared table ended) whose data offset is
    the next one expected, or None. A writer pads there with zeros; an entry means a header count that is short
    (gguf.cpp does not look, so llama.cpp then misses that tensor and reads the others from shifted offsets).
    """
    if pos + 8 > size:
        return None
    (n,) = _U64.unpack_from(mm, pos)
    if not 0 < n < GGML_MAX_NAME or pos + 8 + n + 4 > size:
        return None
    raw = bytes(mm[pos + 8 : pos + 8 + n])
    if not raw.isascii() or not raw.decode().isprintable():
        return None
    at = pos + 8 + n
    (n_dims,) = _U32.unpack_from(mm, at)
    end = at + 4 + 8 * n_dims + 12
    if not 1 <= n_dims <= GGML_MAX_DIMS or end > size:
        return None
    type_id, offset = struct.unpack_from("<IQ", mm, at + 4 + 8 * n_dims)
    if type_id not in _GGML_TYPES or offset != expected:
        return None
    return raw.decode()


#: Bytes past the tensor table :func:`_stray_entry` looks at: the longest entry (a 63-byte name, 4 dimensions).
_STRAY_WINDOW = 8 + (GGML_MAX_NAME - 1) + 4 + 8 * GGML_MAX_DIMS + 12


def parse_header(data: bytes, file_size: int, path: str, shard: int = 0) -> GGUFHeader:
    """Parse the header of a GGUF file of ``file_size`` bytes from its first bytes, ``data``.

    The checks and errors are :func:`read_header`'s, for a file named ``path`` (a URL or any name; messages
    use its last part). Where the header goes on past ``data`` (and the file is longer), a
    :class:`HeaderIncompleteError` says up to which byte it needs: read that much and parse again.
    """
    data = bytes(data[:file_size])
    name = os.path.basename(path)
    if file_size < 4:
        raise TruncatedGGUFError(
            f"{name} is {file_size} bytes long, too short to be a GGUF model: the file is incomplete.", path, 0
        )
    if len(data) < min(file_size, 16):
        raise HeaderIncompleteError(f"{name}: the first bytes are needed", path, 0, min(file_size, 16))
    if data[:4] != GGUF_MAGIC:
        raise NotGGUFError(f"{name} is not a GGUF model: {_identify_other_format(data[:16])}.", path, 0)
    return _parse(data, file_size, path, shard, avail=len(data))


def _parse(mm, size: int, path: str, shard: int, avail: int | None = None) -> GGUFHeader:
    name = os.path.basename(path)
    cur = _Cursor(mm, size, path, avail)
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
    # A tensor entry takes at least 8+4+4+8 bytes and a key/value pair at least 8+1+4+1.
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
    if n_tensors * 24 + n_kv * 13 > size - cur.pos:
        cur.section = "metadata" if n_kv else "tensor table"
        raise cur.truncated(n_tensors * 24 + n_kv * 13 - (size - cur.pos))

    cur.section = "metadata"
    metadata: dict[str, Any] = {}
    types: dict[str, int] = {}
    array_types: dict[str, int] = {}
    warnings: list[str] = []
    for i in range(n_kv):
        key_at = cur.pos
        key = cur.string("a metadata key")
        if not key:
            raise CorruptGGUFError(
                f"{name}: metadata entry {i} at byte {key_at:,} has an empty key, which llama.cpp refuses "
                f'("key {i} is empty"): the file is corrupt.',
                path,
                key_at,
            )
        if key in metadata:
            raise CorruptGGUFError(
                f"{name}: metadata key {key!r} appears twice (again at byte {key_at:,}), which llama.cpp refuses "
                f"(\"duplicate key '{key}' for KV pair {i}\"): the file is corrupt or was edited by a broken tool; "
                "convert or download it again.",
                path,
                key_at,
            )
        vtype = cur.u32()
        if vtype == T_ARRAY:
            cur.need(4)
            array_types[key] = _U32.unpack_from(mm, cur.pos)[0]
        metadata[key] = _read_value(cur, vtype, key)
        types[key] = vtype

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if "general.alignment" in types and types["general.alignment"] != T_UINT32:
        found = LLAMA_TYPE_NAMES.get(types["general.alignment"], str(types["general.alignment"]))
        raise CorruptGGUFError(
            f"{name}: general.alignment is stored as {found}, but llama.cpp requires a u32 "
            f"(\"key 'general.alignment' must be of type u32 but is {found}\"): the file is corrupt.",
            path,
        )
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise CorruptGGUFError(
            f"{name}: general.alignment is {alignment!r}, not a power of two "
            f'(llama.cpp: "alignment {alignment} is not a power of 2"): the file is corrupt.',
            path,
        )

    cur.section = "tensor table"
    raw: list[tuple[str, tuple[int, ...], int, int, int]] = []
    seen: set[str] = set()
    for i in range(n_tensors):
        entry_at = cur.pos
        tname = cur.string("a tensor name")
        if len(tname.encode("utf-8", errors="surrogateescape")) >= GGML_MAX_NAME:
            raise CorruptGGUFError(
                f"{name}: tensor {i} at byte {entry_at:,} has a name of {len(tname.encode()):,} bytes "
                f"({tname[:80]!r}{'...' if len(tname) > 80 else ''}); llama.cpp allows fewer than {GGML_MAX_NAME} "
                f'("tensor name {i} is too long"): the file is corrupt.',
                path,
                entry_at,
            )
        if tname in seen:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} appears twice in the tensor table "
                f"(llama.cpp: \"duplicate tensor name '{tname}' for tensor {i}\"): the file is corrupt "
                "(a bad conversion or merge); convert or download it again.",
                path,
                entry_at,
            )
        seen.add(tname)
        n_dims = cur.u32()
        if n_dims > GGML_MAX_DIMS:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} at byte {entry_at:,} has {n_dims} dimensions "
                f"(ggml allows at most {GGML_MAX_DIMS}; llama.cpp: \"tensor '{tname}' has invalid number of "
                f'dimensions: {n_dims} > {GGML_MAX_DIMS}"): the file is corrupt.',
                path,
                entry_at,
            )
        cur.need(8 * n_dims)
        dims = struct.unpack_from(f"<{n_dims}Q", mm, cur.pos)
        cur.pos += 8 * n_dims
        for j, d in enumerate(dims):
            if d > _INT64_MAX:  # gguf.cpp reads int64: this is negative
                raise CorruptGGUFError(
                    f"{name}: tensor {tname!r} at byte {entry_at:,} has a negative size in dimension {j} "
                    f'({d - (1 << 64):,}; llama.cpp: "dimension {j} has invalid number of elements"): '
                    "the file is corrupt.",
                    path,
                    entry_at,
                )
        n_el = 1
        for d in dims:
            n_el *= d
        if n_el > _INT64_MAX:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} at byte {entry_at:,} has shape {tuple(dims)}, more elements than fit "
                f"in 64 bits (llama.cpp: \"incorrect shape for a tensor '{tname}' may cause overflow errors\"): "
                "the file is corrupt.",
                path,
                entry_at,
            )
        type_id = cur.u32()
        offset = cur.u64()
        # ggml pads a tensor with fewer dimensions with 1s (a 0-dimensional tensor is one element)
        shape = tuple(dims) if dims else (1,)
        raw.append((tname, shape, type_id, offset, entry_at))
    header_size = cur.pos
    data_offset = _pad(cur.pos, alignment)
    if n_tensors and data_offset > size:
        cur.section = "data region"
        cur.pos = size
        raise cur.truncated(data_offset - size)

    tensors: list[TensorInfo] = []
    data_size = size - data_offset
    expected = 0  # gguf.cpp: each tensor's data starts where the previous one's padded data ended
    for tname, shape, type_id, offset, entry_at in raw:
        info = _GGML_TYPES.get(type_id)
        if info is None:
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} uses ggml type {type_id}, which this Layerdeck does not know "
                f"(llama.cpp: \"tensor '{tname}' has invalid ggml type {type_id}\"): the file is corrupt or uses "
                "a newer quantization; update Layerdeck.",
                path,
                entry_at,
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
                entry_at,
            )
        nbytes = n_el // block * type_size
        if nbytes > (1 << 48):
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} claims {nbytes:,} bytes: the file is corrupt.", path, entry_at
            )
        if offset != expected:
            what = "overlaps the tensor before it" if offset < expected else "leaves a gap after the tensor before it"
            if offset % alignment:
                what = f"is not aligned to {alignment} bytes"
            raise CorruptGGUFError(
                f"{name}: tensor {tname!r} starts at data offset {offset:,} but llama.cpp expects {expected:,} "
                f"(each tensor's data follows the one before, padded to {alignment} bytes): its data {what}, "
                f"which llama.cpp refuses (\"tensor '{tname}' has offset {offset}, expected {expected}\"): the "
                "tensor table is corrupt; convert or download the file again.",
                path,
                entry_at,
            )
        expected += _pad(nbytes, alignment)
        if offset + nbytes > data_size:
            raise TruncatedGGUFError(
                f"{name}: the data region is shorter than the tensor table says: tensor {tname!r} needs bytes up to "
                f"{data_offset + offset + nbytes:,} but the file ends at byte {size:,}: the download is probably "
                "incomplete; download the file again.",
                path,
                size,
            )
        tensors.append(TensorInfo(tname, type_id, tname_type, shape, n_el, nbytes, data_offset + offset, shard))
    if cur.avail < min(size, header_size + _STRAY_WINDOW):
        cur.pos, cur.section = header_size, "tensor table"
        raise cur.incomplete(min(size, header_size + _STRAY_WINDOW))
    stray = _stray_entry(mm, header_size, cur.avail, expected)
    return GGUFHeader(
        path, size, version, metadata, types, tensors, alignment, data_offset, header_size, warnings, array_types, stray
    )
