"""Build GGUF bytes by hand, so tests can corrupt any field at a known offset."""

from __future__ import annotations

import struct

T_UINT32, T_STRING, T_ARRAY, T_UINT64 = 4, 8, 9, 10


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv_u32(key: str, value: int) -> bytes:
    return s(key) + struct.pack("<II", T_UINT32, value)


def kv_str(key: str, value: str) -> bytes:
    return s(key) + struct.pack("<I", T_STRING) + s(value)


def kv_str_array(key: str, values: list[str]) -> bytes:
    return s(key) + struct.pack("<IIQ", T_ARRAY, T_STRING, len(values)) + b"".join(s(v) for v in values)


def tensor_entry(name: str, shape: tuple[int, ...], type_id: int, offset: int) -> bytes:
    return s(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape) + struct.pack("<IQ", type_id, offset)


def craft(kvs: list[bytes], tensors: list[tuple[str, tuple[int, ...], int, int]], data_bytes: int,
          version: int = 3, magic: bytes = b"GGUF", n_tensors: int | None = None, n_kv: int | None = None) -> tuple[bytes, dict]:
    """Return (file bytes, offsets) for a GGUF with the given metadata and tensor table.

    ``tensors`` entries are (name, shape, ggml type id, data offset). The data
    region is ``data_bytes`` zero bytes after 32-byte alignment.
    """
    head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    meta = b"".join(kvs)
    table = b"".join(tensor_entry(*t) for t in tensors)
    body = head + meta + table
    pad = (-len(body)) % 32
    offsets = {"metadata": len(head), "table": len(head) + len(meta), "data": len(body) + pad}
    return body + b"\0" * pad + b"\0" * data_bytes, offsets


def small_model(**kw) -> tuple[bytes, dict]:
    """A tiny valid 'llama' header with two F32 tensors (64 and 4x64 elements)."""
    kvs = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 1),
           kv_u32("llama.embedding_length", 64), kv_str_array("tokenizer.ggml.tokens", ["a", "b", "c"])]
    tensors = [("blk.0.attn_norm.weight", (64,), 0, 0), ("blk.0.attn_q.weight", (64, 4), 0, 256)]
    return craft(kvs, tensors, 256 + 1024, **kw)
