"""The GGUF reader: agreement with gguf.GGUFReader, speed-relevant laziness, and every kind of bad input."""

from __future__ import annotations

import os
import random
import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

from app.model import (CorruptGGUFError, GGUFError, MissingShardError, NotGGUFError, TruncatedGGUFError,
                       UnsupportedVersionError, open_model)
from app.model.gguf_reader import EAGER_ARRAY_LIMIT, LazyArray, read_header

from .craft import craft, kv_str, kv_u32, s, small_model


def write(tmp_path, data: bytes, name: str = "m.gguf"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def writer_model(path, n_vocab=10, n_layer=2, quant=True):
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(n_layer)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv([2] * n_layer)
    w.add_tokenizer_model("llama")  # llama.cpp requires a tokenizer (llama_vocab::impl::load)
    w.add_token_list([f"t{i}" for i in range(n_vocab)])
    w.add_token_scores([0.5] * n_vocab)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, 64)).astype(np.float16))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float16))
        if quant:
            raw = np.zeros((64, 64 // 32 * 34), dtype=np.uint8)
            w.add_tensor(f"blk.{i}.ffn_up.weight", raw, raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("output.weight", rng.standard_normal((n_vocab, 64)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_agrees_with_gguf_reader(tmp_path):
    path = writer_model(tmp_path / "a.gguf", n_vocab=EAGER_ARRAY_LIMIT + 50)
    ours = read_header(path)
    ref = GGUFReader(path)
    assert [t.name for t in ours.tensors] == [t.name for t in ref.tensors]
    for mine, theirs in zip(ours.tensors, ref.tensors):
        assert mine.shape == tuple(int(x) for x in theirs.shape)
        assert mine.type_id == int(theirs.tensor_type)
        assert mine.nbytes == int(theirs.n_bytes)
        assert mine.offset == int(theirs.data_offset)
    assert ours.metadata["general.architecture"] == "llama"
    assert ours.metadata["llama.attention.head_count_kv"] == [2, 2]
    tokens = ours.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, LazyArray) and len(tokens) == EAGER_ARRAY_LIMIT + 50
    assert tokens.load()[:3] == ["t0", "t1", "t2"] and tokens.load()[-1] == f"t{EAGER_ARRAY_LIMIT + 49}"
    scores = ours.metadata["tokenizer.ggml.scores"]
    assert isinstance(scores, LazyArray) and scores.load()[5] == pytest.approx(0.5)
    assert ours.version == 3


def test_version_2_reads_like_3(tmp_path):
    data, _ = small_model(version=2)
    h = read_header(write(tmp_path, data))
    assert h.version == 2 and [t.name for t in h.tensors] == ["blk.0.attn_norm.weight", "blk.0.attn_q.weight"]
    assert h.tensors[1].nbytes == 64 * 4 * 4 and h.tensors[1].shape == (64, 4)


def test_model_view_sums_and_params(tmp_path):
    path = writer_model(tmp_path / "a.gguf")
    m = open_model(path)
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes == sum(t.nbytes for t in m.tensors)
    assert m.params.arch == "llama" and m.params.n_layer == 2 and m.params.n_head_kv == [2, 2]
    assert m.params.head_dim_k == 16 and m.params.n_vocab == 10
    assert {q.type_name for q in m.quant_mix()} == {"F16", "F32", "Q8_0"}


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("content,needle", [
    (b"", "too short"),
    (b"GG", "too short"),
    (b"hello world, this is text", "not a GGUF"),
    (b"{\"error\": \"not found\"}", "text file"),
    (struct.pack("<Q", 1234) + b"{\"__metadata__\":{}}", "safetensors"),
    (b"PK\x03\x04" + b"\0" * 40, "zip"),
    (b"ggjt" + b"\0" * 40, "GGML"),
])
def test_not_a_gguf(tmp_path, content, needle):
    with pytest.raises(GGUFError) as exc:
        read_header(write(tmp_path, content))
    assert needle in str(exc.value)


def test_directory_and_missing_file(tmp_path):
    with pytest.raises(NotGGUFError, match="folder"):
        read_header(tmp_path)
    with pytest.raises(NotGGUFError, match="does not exist"):
        read_header(tmp_path / "nope.gguf")


@pytest.mark.parametrize("version,needle", [(1, "version 1"), (4, "newer"), (0x03000000, "big-endian")])
def test_unsupported_versions(tmp_path, version, needle):
    data, _ = small_model(version=version)
    with pytest.raises(UnsupportedVersionError, match=needle):
        read_header(write(tmp_path, data))


def test_truncated_at_every_header_byte(tmp_path):
    """Cutting the file anywhere in the header gives a typed error, never a crash or a hang."""
    data, off = small_model()
    p = tmp_path / "cut.gguf"
    sections = set()
    for cut in range(0, off["data"]):
        p.write_bytes(data[:cut])
        with pytest.raises((TruncatedGGUFError, NotGGUFError)) as exc:
            read_header(p)
        msg = str(exc.value)
        if cut >= 4:
            assert isinstance(exc.value, TruncatedGGUFError), (cut, msg)
            assert "download" in msg
            for section in ("header", "metadata", "tensor table", "data region"):
                if section in msg:
                    sections.add(section)
    assert {"header", "metadata", "tensor table", "data region"} <= sections


def test_data_region_shorter_than_table(tmp_path):
    data, off = small_model()
    with pytest.raises(TruncatedGGUFError) as exc:
        read_header(write(tmp_path, data[:-10]))
    assert "blk.0.attn_q.weight" in str(exc.value) and "data region is shorter" in str(exc.value)


def test_absurd_counts_and_lengths(tmp_path):
    data, off = small_model(n_tensors=1 << 40)
    with pytest.raises(CorruptGGUFError, match="claims 1,099,511,627,776 tensors, more than any model"):
        read_header(write(tmp_path, data))
    data, off = small_model(n_kv=1 << 50)
    with pytest.raises(CorruptGGUFError, match="metadata entries"):
        read_header(write(tmp_path, data))
    good, off = small_model()
    bad = bytearray(good)
    bad[off["metadata"]:off["metadata"] + 8] = struct.pack("<Q", 1 << 62)  # first key length
    with pytest.raises(CorruptGGUFError, match="length"):
        read_header(write(tmp_path, bytes(bad)))
    # an array that claims 2**40 elements
    kv = s("big") + struct.pack("<IIQ", 9, 4, 1 << 40)  # uint32 array
    data, _ = craft([kv], [], 0)
    with pytest.raises(CorruptGGUFError, match="more than any model has"):
        read_header(write(tmp_path, data))


def test_unknown_types_and_duplicates(tmp_path):
    data, _ = craft([s("weird") + struct.pack("<I", 77) + b"\0" * 8], [], 0)
    with pytest.raises(CorruptGGUFError, match="unknown value type 77"):
        read_header(write(tmp_path, data))
    data, _ = craft([kv_str("general.architecture", "llama")], [("a.weight", (32,), 250, 0)], 64)
    with pytest.raises(CorruptGGUFError, match="ggml type 250"):
        read_header(write(tmp_path, data))
    data, _ = craft([], [("a.weight", (32,), 0, 0), ("a.weight", (32,), 0, 128)], 512)
    with pytest.raises(CorruptGGUFError, match="appears twice"):
        read_header(write(tmp_path, data))
    data, _ = craft([], [("a.weight", (32, 1, 1, 1, 1), 0, 0)], 512)
    with pytest.raises(CorruptGGUFError, match="5 dimensions"):
        read_header(write(tmp_path, data))
    data, _ = craft([], [("a.weight", (33,), 8, 0)], 512)  # Q8_0 rows must be a multiple of 32
    with pytest.raises(CorruptGGUFError, match="block size"):
        read_header(write(tmp_path, data))
    data, _ = craft([], [("a.weight", (32,), 0, 7)], 512)
    with pytest.raises(CorruptGGUFError, match="not aligned"):
        read_header(write(tmp_path, data))
    data, _ = craft([kv_u32("general.alignment", 48)], [], 0)
    with pytest.raises(CorruptGGUFError, match="power of two"):
        read_header(write(tmp_path, data))


def test_random_corruption_only_raises_typed_errors(tmp_path):
    """Seeded byte flips over the header: either it still parses, or a GGUFError explains why."""
    path = writer_model(tmp_path / "a.gguf")
    good = path.read_bytes()
    header_end = read_header(path).header_size
    rng = random.Random(1234)
    p = tmp_path / "fuzz.gguf"
    typed = 0
    for _ in range(400):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(4, header_end)] = rng.randrange(256)
        p.write_bytes(bytes(bad))
        try:
            read_header(p)
        except GGUFError:
            typed += 1
    assert typed > 50  # the mutations do hit structure, and each such hit was typed


# ---------------------------------------------------------------- split sets

def write_split(tmp_path, n_layer=6):
    w = GGUFWriter(str(tmp_path / "big.gguf"), "llama", split_max_tensors=5)
    w.add_tokenizer_model("llama")
    w.add_token_list(["a", "b"])
    w.add_block_count(n_layer)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_head_count(4)
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_up.weight", np.ones((32, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(tmp_path.glob("big-*-of-*.gguf"))


def test_split_set_opens_from_any_shard(tmp_path):
    shards = write_split(tmp_path)
    assert len(shards) == 3
    totals = set()
    for shard in shards:
        m = open_model(shard)
        assert [p.name for p in m.paths] == [p.name for p in shards]
        assert len(m.tensors) == 12 and m.params.n_layer == 6
        totals.add(m.tensor_bytes)
        assert {t.shard for t in m.tensors} == {0, 1, 2}
    assert totals == {6 * (64 * 4 + 32 * 64 * 2)}


def test_split_missing_shard_is_named(tmp_path):
    shards = write_split(tmp_path)
    shards[1].unlink()
    with pytest.raises(MissingShardError) as exc:
        open_model(shards[0])
    assert shards[1].name in str(exc.value) and "download" in str(exc.value)


def test_renamed_shard_is_detected(tmp_path):
    shards = write_split(tmp_path)
    lone = tmp_path / "renamed.gguf"
    os.rename(shards[0], lone)
    with pytest.raises(MissingShardError, match="3-part model"):
        open_model(lone)
