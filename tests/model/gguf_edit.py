"""A structure-aware GGUF editor for tests: parse a valid file into parts, change any of them, write it back.

:func:`parse` reads a file the factory wrote (``tests/gguf_factory.py``) into a :class:`Gguf` (metadata,
tensor table, data region) that :func:`serialize` writes back byte for byte; :func:`apply` runs a list of
mutations (JSON lists, described in ``tests/fuzz/test_fuzz_gguf.py``) on the way, so a test or a fuzzer can
set a key to any type (arrays of arrays included), duplicate keys, rename tensors, edit shapes, types and
offsets, get the counts wrong or cut the file.
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass
from typing import Any

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_FMT = {T_U8: "B", T_I8: "b", T_U16: "H", T_I16: "h", T_U32: "I", T_I32: "i", T_F32: "f", T_BOOL: "?",
        T_U64: "Q", T_I64: "q", T_F64: "d"}


@dataclass
class Arr:
    item: int
    values: list


@dataclass
class Gguf:
    """A GGUF file as editable parts: metadata, tensor table, data region (written back byte-exact)."""

    version: int
    kvs: list[list]  # [key, vtype, value]
    tensors: list[list]  # [name, dims, ggml type, offset]
    data: bytes
    align: int = 32
    n_tensors: int | None = None  # None: the real count
    n_kv: int | None = None

    @property
    def arch(self) -> str:
        return next((str(v) for k, t, v in self.kvs if k == "general.architecture"), "")

    def n_layer(self) -> int:
        v = next((v for k, t, v in self.kvs if k == f"{self.arch}.block_count"), 4)
        return v if isinstance(v, int) and 0 < v < 4096 else 4


def _read_value(b: bytes, pos: int, vt: int) -> tuple[Any, int]:
    if vt in _FMT:
        f = "<" + _FMT[vt]
        return struct.unpack_from(f, b, pos)[0], pos + struct.calcsize(f)
    if vt == T_STR:
        (n,) = struct.unpack_from("<Q", b, pos)
        return b[pos + 8:pos + 8 + n].decode(), pos + 8 + n
    if vt == T_ARR:
        item, n = struct.unpack_from("<IQ", b, pos)
        pos += 12
        values = []
        for _ in range(n):
            v, pos = _read_value(b, pos, item)
            values.append(v)
        return Arr(item, values), pos
    raise ValueError(f"value type {vt}")


def parse(b: bytes) -> Gguf:
    """Parse a *valid* file (the factory's); mutations are applied to the result."""
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    pos, kvs = 24, []
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", b, pos)
        key = b[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (vt,) = struct.unpack_from("<I", b, pos)
        v, pos = _read_value(b, pos + 4, vt)
        kvs.append([key, vt, v])
    align = next((v for k, t, v in kvs if k == "general.alignment"), 32)
    tensors = []
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", b, pos)
        name = b[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (nd,) = struct.unpack_from("<I", b, pos)
        dims = list(struct.unpack_from(f"<{nd}Q", b, pos + 4))
        pos += 4 + 8 * nd
        ty, off = struct.unpack_from("<IQ", b, pos)
        pos += 12
        tensors.append([name, dims, ty, off])
    start = (pos + align - 1) // align * align
    return Gguf(version, kvs, tensors, b[start:], align)


def _s(text: str) -> bytes:
    raw = text.encode("utf-8", errors="surrogatepass")
    return struct.pack("<Q", len(raw)) + raw


def _write_value(vt: int, v: Any) -> bytes:
    if vt in _FMT:
        if vt in (T_F32, T_F64):
            return struct.pack("<" + _FMT[vt], float(v))
        if vt == T_BOOL:
            return struct.pack("<?", bool(v))
        return struct.pack("<" + _FMT[vt], int(v))
    if vt == T_STR:
        return _s(str(v))
    if vt == T_ARR:
        return struct.pack("<IQ", v.item, len(v.values)) + b"".join(_write_value(v.item, x) for x in v.values)
    raise ValueError(f"value type {vt}")


def serialize(g: Gguf) -> bytes:
    out = [b"GGUF", struct.pack("<IQQ", g.version, len(g.tensors) if g.n_tensors is None else g.n_tensors,
                                 len(g.kvs) if g.n_kv is None else g.n_kv)]
    for key, vt, v in g.kvs:
        out.append(_s(key) + struct.pack("<I", vt) + _write_value(vt, v))
    for name, dims, ty, off in g.tensors:
        out.append(_s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                   + struct.pack("<IQ", ty, off))
    body = b"".join(out)
    return body + b"\0" * ((-len(body)) % g.align) + g.data


# --------------------------------------------------------------------------- mutations


def _value(spec: Any, g: Gguf) -> Any:
    if isinstance(spec, dict) and "arr" in spec:
        if "fill" in spec:
            return Arr(spec["arr"], [spec["fill"]] * g.n_layer())
        return Arr(spec["arr"], [_value(x, g) for x in spec["values"]])
    return spec


def _replace_digit(name: str, pos: int, digit: str) -> str:
    spots = [i for i, c in enumerate(name) if c.isdigit()]
    if not spots:
        return name
    i = spots[pos % len(spots)]
    return name[:i] + digit + name[i + 1:]


def apply(base: bytes, mutations: list[list]) -> bytes:
    """The file ``base`` with ``mutations`` applied (structural ones first, then byte-level ones in order)."""
    g = parse(base)
    byte_level = []
    for mut in mutations:
        kind, args = mut[0], mut[1:]
        nt = len(g.tensors)
        if kind == "meta":
            key, vt, spec = args[0].replace("{arch}", g.arch), args[1], args[2]
            value = _value(spec, g)
            for kv in g.kvs:
                if kv[0] == key:
                    kv[1], kv[2] = vt, value
                    break
            else:
                g.kvs.append([key, vt, value])
        elif kind == "del":
            key = args[0].replace("{arch}", g.arch)
            g.kvs = [kv for kv in g.kvs if kv[0] != key]
        elif kind == "dup":
            key = args[0].replace("{arch}", g.arch)
            g.kvs += [copy.deepcopy(kv) for kv in g.kvs if kv[0] == key][:1]
        elif kind == "digit" and nt:
            t = g.tensors[args[0] % nt]
            t[0] = _replace_digit(t[0], args[1], str(args[2]))
        elif kind == "rename" and nt:
            g.tensors[args[0] % nt][0] = args[1]
        elif kind == "dim" and nt:
            dims = g.tensors[args[0] % nt][1]
            i, v = args[1], args[2]
            if v is None:
                if dims:
                    dims.pop(i % len(dims))
            elif i >= len(dims):
                dims.append(v)
            else:
                dims[i] = v
        elif kind == "offset" and nt:
            i = args[0] % nt
            t = g.tensors[i]
            how = args[1]
            if how == "prev":
                t[3] = g.tensors[i - 1][3] if i else 32
            elif how == "+a":
                t[3] += g.align
            elif how == "-a":
                t[3] = max(t[3] - g.align, 0) if t[3] else g.align
            else:
                t[3] = int(how)
        elif kind == "type" and nt:
            g.tensors[args[0] % nt][2] = args[1]
        elif kind == "swap" and nt:
            i, j = args[0] % nt, args[1] % nt
            g.tensors[i], g.tensors[j] = g.tensors[j], g.tensors[i]
        elif kind == "count":
            if args[0] == "tensors":
                g.n_tensors = max(len(g.tensors) + args[1], 0)
            else:
                g.n_kv = max(len(g.kvs) + args[1], 0)
        elif kind in ("cut", "byte"):
            byte_level.append(mut)
        else:
            raise ValueError(f"unknown mutation {mut!r}")
    out = bytearray(serialize(g))
    header_end = len(out) - len(g.data)
    for kind, frac, *rest in byte_level:
        if kind == "cut":
            del out[int(frac * len(out)):]
        elif out:
            pos = 4 + int(frac * max(header_end - 4, 1))
            if pos < len(out):
                out[pos] = rest[0]
    return bytes(out)
