"""Opening a model refuses, with a typed error and llama.cpp's reason, every file llama.cpp refuses for a
reason its header shows: layer counts, metadata types, structure, split sets, and the file itself (OS errors).

Each test is the regression test of one finding of the "no crash, no hang, no silent wrong answer" review;
the messages are compared exactly where a user reads them.
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import re
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from app.cli import main as cli_main
from app.errors import ReadError
from app.model import (CorruptGGUFError, MissingShardError, TruncatedGGUFError, UnsupportedArchitectureError,
                       open_model)
from app.model.errors import FileAccessError, LayerCountError, MetadataError
from app.model.gguf_reader import read_header
from tests.model.gguf_edit import (T_ARR, T_F32, T_F64, T_I32, T_STR, T_U8, T_U16, T_U32, T_U64, apply,
                                   parse, serialize)


@pytest.fixture(scope="module")
def llama(tiny_models) -> bytes:
    return Path(tiny_models["llama"]).read_bytes()


def edited(tmp_path: Path, base: bytes, mutations: list, name: str = "m.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(apply(base, mutations))
    return p


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    return code, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- 1. a huge block_count


@pytest.mark.parametrize("count", [1 << 20, 1 << 24, (1 << 31) - 1, 1 << 31, (1 << 32) - 1])
def test_huge_block_count_is_refused_at_once(tmp_path, llama, count):
    """It took 20-60 s and up to 3.5 GB (inspect) or died of MemoryError (estimate); now one typed error."""
    p = edited(tmp_path, llama, [["meta", "{arch}.block_count", T_U32, count]])
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(LayerCountError) as exc:
        open_model(p)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(exc.value) == (
        f"m.gguf: metadata key llama.block_count is {count:,}, but llama.cpp loads 1 to 512 layers "
        "(LLAMA_MAX_LAYERS; it aborts on anything else): the file is corrupt; convert or download it again."
    )
    assert seconds < 1.0 and peak < 4 << 20, (seconds, peak)
    for argv in (["inspect", str(p)], ["estimate", "--devices", "CUDA0=8000", "--", "-m", str(p)]):
        code, out, err = cli(argv)
        assert (code, out) == (2, "") and err == f"layerdeck: {exc.value}\n"


def test_block_count_above_the_tensor_table(tmp_path, llama):
    p = edited(tmp_path, llama, [["meta", "{arch}.block_count", T_U32, 9]])
    with pytest.raises(LayerCountError) as exc:
        open_model(p)
    assert str(exc.value) == (
        "m.gguf: metadata key llama.block_count is 9, but the tensor table holds layers 0 to 3: llama.cpp would "
        "miss the tensors of the other layers (\"missing tensor 'blk.4....'\"): the file is corrupt or "
        "incomplete; convert or download it again."
    )


def test_nextn_layers_may_be_stripped_but_not_more(tmp_path, tiny_models):
    """glm4moe counts its NextN/MTP layer in block_count; a file without that layer's tensors still loads."""
    g = parse(Path(tiny_models["glm4moe"]).read_bytes())
    last = max(int(t[0].split(".")[1]) for t in g.tensors if t[0].startswith("blk."))
    assert last == 3  # 3 layers + 1 NextN layer (blk.3)
    stripped = tmp_path / "stripped.gguf"
    g2 = parse(Path(tiny_models["glm4moe"]).read_bytes())
    kept, offset = [], 0
    data = bytearray()
    for t in g2.tensors:
        if t[0].startswith("blk.3."):
            continue
        size = _nbytes(g2, t)
        data += g2.data[t[3]:t[3] + size] + b"\0" * ((-size) % 32)
        kept.append([t[0], t[1], t[2], offset])
        offset += size + (-size) % 32
    g2.tensors, g2.data = kept, bytes(data)
    stripped.write_bytes(serialize(g2))
    m = open_model(stripped)
    assert (m.params.n_layer, m.params.nextn_layers) == (4, 1)
    assert not any(t.name.startswith("blk.3.") for t in m.tensors)
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes
    bad = edited(tmp_path, stripped.read_bytes(), [["meta", "{arch}.block_count", T_U32, 5]], "bad.gguf")
    with pytest.raises(LayerCountError, match=r"is 5, but the tensor table holds layers 0 to 2 \(\+ 1 NextN layer\)"):
        open_model(bad)


def _nbytes(g, t) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(t[2])]
    n = 1
    for d in t[1]:
        n *= d
    return n // block * size


# ---------------------------------------------------------------- 2. a layer index past block_count


@pytest.mark.parametrize("mutations,error,message", [
    ([["meta", "{arch}.block_count", T_U32, 2]], LayerCountError,
     "m.gguf: tensor 'blk.2.attn_norm.weight' belongs to layer 2, but llama.block_count is 2 (layers 0 to 1): "
     "llama.cpp does not load such a file (\"done_getting_tensors: wrong number of tensors\"): the file is "
     "corrupt; convert or download it again."),
    ([["digit", 3, 0, 7]], LayerCountError,  # blk.0.attn_norm.weight -> blk.7.attn_norm.weight
     "m.gguf: tensor 'blk.7.attn_norm.weight' belongs to layer 7, but llama.block_count is 4 (layers 0 to 3): "
     "llama.cpp does not load such a file (\"done_getting_tensors: wrong number of tensors\"): the file is "
     "corrupt; convert or download it again."),
    ([["meta", "{arch}.block_count", T_U32, 0]], LayerCountError,
     "m.gguf: metadata key llama.block_count is 0, but llama.cpp loads 1 to 512 layers (LLAMA_MAX_LAYERS; it "
     "aborts on anything else): the file is corrupt; convert or download it again."),
    ([["meta", "{arch}.block_count", T_I32, -1]], MetadataError,
     "m.gguf: metadata key llama.block_count holds i32 (-1), but llama.cpp reads it as u32 (llama.cpp: \"key "
     "llama.block_count has wrong type i32 but expected type u32\"): the file is corrupt or was written by a "
     "broken converter; convert or download it again."),
    ([["del", "{arch}.block_count"]], MetadataError,
     "m.gguf: metadata key llama.block_count is missing, and llama.cpp requires it (llama.cpp: \"key not found "
     "in model: llama.block_count\"): the file is corrupt or was written by a broken converter; convert or "
     "download it again."),
    ([["del", "general.architecture"]], MetadataError,
     "m.gguf: metadata key general.architecture is missing, so the file names no architecture and llama.cpp "
     "refuses it (llama.cpp: \"unknown model architecture: ''\"): the file is corrupt or was written by a "
     "broken converter; convert or download it again."),
    # llama.cpp resolves the architecture's name before it reads a key (checked: its log says so)
    ([["meta", "general.architecture", T_STR, "llamx"]], UnsupportedArchitectureError,
     "m.gguf: general.architecture is 'llamx', which is not one this llama.cpp knows (a typo, or a model newer "
     "than this llama.cpp), so llama.cpp refuses the file (llama.cpp: \"unknown model architecture: 'llamx'\"): "
     "use a llama.cpp that runs this architecture, or a GGUF converted for one this llama.cpp runs."),
    ([["meta", "general.architecture", T_STR, "gptj"]], UnsupportedArchitectureError,
     "m.gguf: general.architecture is 'gptj', which is in llama.cpp's table, but this llama.cpp builds no model "
     "for it, so llama.cpp refuses the file (llama.cpp: \"unsupported model architecture: 'gptj'\"): use a "
     "llama.cpp that runs this architecture, or a GGUF converted for one this llama.cpp runs."),
    ([["rename", 4, "blk.00.attn_q.weight"]], LayerCountError,
     "m.gguf: tensor 'blk.00.attn_q.weight' is not named like a layer tensor llama.cpp writes (blk.N.NAME with "
     "N = 0, 1, 2, ...), so llama.cpp would not load it (\"wrong number of tensors\"): the tensor table is "
     "corrupt; convert or download the file again."),
    ([["rename", 0, "blk.1"]], LayerCountError,
     "m.gguf: tensor 'blk.1' is not named like a layer tensor llama.cpp writes (blk.N.NAME with N = 0, 1, 2, "
     "...), so llama.cpp would not load it (\"wrong number of tensors\"): the tensor table is corrupt; convert "
     "or download the file again."),
])
def test_layers_outside_block_count_are_refused_at_open(tmp_path, llama, mutations, error, message):
    """These gave IndexError in app/memory/layout.py (a traceback from the CLI, nothing from the window)."""
    p = edited(tmp_path, llama, mutations)
    with pytest.raises(error) as exc:
        open_model(p)
    assert type(exc.value) is error and str(exc.value) == message
    code, out, err = cli(["inspect", str(p)])
    assert (code, out, err) == (2, "", f"layerdeck: {message}\n")


@pytest.mark.llama
@pytest.mark.parametrize("name,said", [("llamx", "unknown"), ("gptj", "unsupported")])
def test_architectures_llama_cpp_cannot_build_are_refused_as_it_refuses_them(tmp_path, llama, llama_bin, name,
                                                                             said):
    p = edited(tmp_path, llama, [["meta", "general.architecture", T_STR, name]])
    quote = f"{said} model architecture: '{name}'"
    with pytest.raises(UnsupportedArchitectureError, match=re.escape(quote)):
        open_model(p)
    _llama_server_refuses(llama_bin, p, quote)


def _llama_server_refuses(llama_bin: Path, path: Path, quote: str) -> None:
    """llama-server stops on the file and logs ``quote`` (llama-fit-params aborts at once, and its logging thread
    loses the line: checked, 0 of 9 runs printed it)."""
    out = subprocess.run([str(llama_bin / "llama-server"), "-m", str(path), "--host", "127.0.0.1", "--port", "0",
                          "-c", "512"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and quote in out.stdout + out.stderr, (out.stdout + out.stderr)[-2000:]


def _required_cases():
    from app.model.hparams import _REQUIRED_KEYS

    return [(arch, key) for arch, keys in sorted(_REQUIRED_KEYS.items()) for key in keys]


@pytest.mark.llama
@pytest.mark.parametrize("arch,key", _required_cases())
def test_keys_an_architecture_requires_are_required(tmp_path, tiny_models, llama_bin, arch, key):
    """Each key of hparams._REQUIRED_KEYS, deleted from the factory's tiny model: refused at open, as llama.cpp
    refuses it ("key not found in model")."""
    p = edited(tmp_path, Path(tiny_models[arch]).read_bytes(), [["del", "{arch}." + key]])
    quote = f"key not found in model: {arch}.{key}"
    with pytest.raises(MetadataError, match=re.escape(quote)):
        open_model(p)
    _llama_server_refuses(llama_bin, p, quote)


# ---------------------------------------------------------------- 3. metadata of the wrong type


@pytest.mark.parametrize("key,vtype,value,found,wanted", [
    ("{arch}.block_count", T_STR, "4", "str ('4')", "u32"),
    ("{arch}.block_count", T_F32, float("nan"), "f32 (nan)", "u32"),
    ("{arch}.block_count", T_F64, float("inf"), "f64 (inf)", "u32"),
    ("{arch}.block_count", T_F64, 1e30, "f64 (1e+30)", "u32"),
    ("{arch}.block_count", T_ARR, {"arr": T_U32, "values": [4, 4]}, "arr (2 items)", "u32"),
    ("{arch}.block_count", T_U64, 4, "u64 (4)", "u32"),
    ("{arch}.context_length", T_STR, "4096", "str ('4096')", "u32"),
    ("{arch}.attention.head_count_kv", T_ARR, {"arr": T_STR, "values": ["a", "b", "c", "d"]}, "arr of str",
     "u32 or arr of u32/i32"),
    ("{arch}.attention.head_count_kv", T_ARR, {"arr": T_U8, "fill": 2}, "arr of u8", "u32 or arr of u32/i32"),
    ("{arch}.attention.head_count_kv", T_ARR, {"arr": T_U32, "values": [2, 2, 2]}, "arr (3 items)", "4 values"),
    ("{arch}.attention.head_count", T_F32, 4.0, "f32 (4.0)", "u32"),
    ("{arch}.feed_forward_length", T_ARR, {"arr": T_I32, "fill": -1}, "i32 (-1)", "u32"),
    ("split.count", T_STR, "3", "str ('3')", "u16"),
    ("split.count", T_U32, 3, "u32 (3)", "u16"),
    ("general.architecture", T_U32, 7, "u32 (7)", "str"),
    ("general.name", T_U32, 3, "u32 (3)", "str"),
    ("general.file_type", T_STR, "Q4_K_M", "str ('Q4_K_M')", "u32"),
    ("tokenizer.ggml.tokens", T_U32, 5, "u32 (5)", "arr of str"),
    ("tokenizer.ggml.tokens", T_ARR, {"arr": T_U32, "values": [4, 4]}, "arr of u32", "arr of str"),
    ("tokenizer.ggml.scores", T_ARR, {"arr": T_STR, "values": ["a"]}, "arr of str", "arr of f32 or arr of i32"),
    ("tokenizer.ggml.token_type", T_ARR, {"arr": T_I32, "values": [1]}, "arr (1 items)", "320 values"),
])
def test_wrong_metadata_types_name_key_found_and_wanted(tmp_path, llama, key, vtype, value, found, wanted):
    """These were ValueError/TypeError/OverflowError tracebacks (int('a'), int(nan), int(inf), int([...]))."""
    p = edited(tmp_path, llama, [["meta", key, vtype, value]])
    with pytest.raises(MetadataError) as exc:
        open_model(p)
    e = exc.value
    assert (e.key, e.found, e.wanted) == (key.replace("{arch}", "llama"), found, wanted), str(e)
    assert str(e).startswith(f"m.gguf: metadata key {e.key} ") and "convert or download it again" in str(e)
    assert isinstance(e, ReadError) and e.path == str(p)


def test_wrong_type_message_quotes_llama_cpp(tmp_path, llama):
    p = edited(tmp_path, llama, [["meta", "{arch}.attention.head_count_kv", T_ARR,
                                  {"arr": T_U32, "values": [2, 2, 2]}]])
    with pytest.raises(MetadataError) as exc:
        open_model(p)
    assert str(exc.value) == (
        "m.gguf: metadata key llama.attention.head_count_kv holds 3 values, but block_count says 4 layers "
        "(llama.cpp: \"key llama.attention.head_count_kv has wrong array length; expected 4, got 3\"): the file "
        "is corrupt or was written by a broken converter; convert or download it again."
    )


@pytest.mark.parametrize("item", [T_U32, T_I32])
def test_per_layer_arrays_llama_cpp_accepts_still_load(tmp_path, llama, item):
    p = edited(tmp_path, llama, [["meta", "{arch}.attention.head_count_kv", T_ARR, {"arr": item, "fill": 2}]])
    assert open_model(p).params.n_head_kv == [2, 2, 2, 2]


def test_head_counts_that_disagree_with_the_kv_tensors(tmp_path, llama):
    """head_count_kv 1 for K/V projections made for 2 heads: llama.cpp refuses it; the KV cache would be halved."""
    p = edited(tmp_path, llama, [["meta", "{arch}.attention.head_count_kv", T_U32, 1]])
    with pytest.raises(LayerCountError) as exc:
        open_model(p)
    assert str(exc.value) == (
        "m.gguf: tensor 'blk.0.attn_k.weight' has shape (64, 32), but the metadata gives (64, 16) "
        "(llama.embedding_length, and llama.attention.head_count_kv times the head size): llama.cpp refuses the "
        "file (\"check_tensor_dims: tensor 'blk.0.attn_k.weight' has wrong shape\"), and the KV cache could not "
        "be sized from it; convert or download it again."
    )


def test_llama_rope_dimensions_must_equal_the_head_size(tmp_path, llama):
    p = edited(tmp_path, llama, [["meta", "{arch}.rope.dimension_count", T_U32, 8]])
    with pytest.raises(MetadataError, match=r'\(llama.cpp: "invalid n_rot: 8, expected 16"\)'):
        open_model(p)


@pytest.mark.parametrize("mutations,needle", [
    ([["meta", "{arch}.expert_count", T_U32, 2000]], "more than llama.cpp's 1024 (LLAMA_MAX_EXPERTS)"),
    ([["meta", "{arch}.expert_used_count", T_U32, 9]], "expert_used_count is 9, more than the 8 experts"),
    ([["meta", "{arch}.expert_used_count", T_U32, 0]], "has 8 experts but qwen3moe.expert_used_count is 0"),
])
def test_expert_counts_llama_cpp_aborts_on(tmp_path, tiny_models, mutations, needle):
    p = edited(tmp_path, Path(tiny_models["qwen3moe"]).read_bytes(), mutations)
    with pytest.raises(LayerCountError) as exc:
        open_model(p)
    assert needle in str(exc.value) and "llama.cpp aborts on such a file" in str(exc.value)


@pytest.mark.llama
def test_one_expert_is_no_experts_for_hunyuan_dense(tmp_path, tiny_models, llama_bin):
    """Hunyuan's dense configs may say num_experts = 1: llama_model_base::load_hparams then sets n_expert (and
    expert_used_count) to 0 for hunyuan-dense and hunyuan_vl, and the model loads as dense; so does ours."""
    from app.llamacpp.fit_print import run_fit_print

    p = edited(tmp_path, Path(tiny_models["hunyuan-dense"]).read_bytes(),
               [["meta", "{arch}.expert_count", T_U32, 1], ["meta", "{arch}.expert_used_count", T_U32, 1]])
    m = open_model(p)
    assert (m.params.n_expert, m.params.n_expert_used, m.params.is_moe) == (0, 0, False)
    assert run_fit_print(p, ["-c", "512"], llama_dir=llama_bin, timeout=120)  # llama.cpp loads it too
    q = edited(tmp_path, Path(tiny_models["qwen3"]).read_bytes(),
               [["meta", "{arch}.expert_count", T_U32, 1], ["meta", "{arch}.expert_used_count", T_U32, 1]], "q.gguf")
    assert open_model(q).params.n_expert == 1  # other architectures keep what the file says


# ---------------------------------------------------------------- 4. the file itself


def _in_time(fn, seconds: float = 5.0):
    """fn() on a thread; fails the test instead of hanging it."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no answer after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(FileAccessError) as exc:
        _in_time(lambda: open_model(fifo))
    assert str(exc.value) == f"{fifo} is a named pipe (FIFO), not a regular file: open the model file itself (a GGUF file on disk)."
    assert exc.value.path == str(fifo)


def test_symlink_loop_and_broken_link(tmp_path):
    loop = tmp_path / "loop.gguf"
    os.symlink(loop, loop)
    with pytest.raises(FileAccessError) as exc:
        open_model(loop)
    assert str(exc.value) == (f"{loop} cannot be opened: it is a symbolic link that leads back to itself (a "
                              "symlink loop); point the link at the model file or open the file itself.")
    broken = tmp_path / "broken.gguf"
    os.symlink(tmp_path / "gone.gguf", broken)
    with pytest.raises(FileAccessError, match="is a symbolic link to a file that does not exist"):
        open_model(broken)


def test_directory_missing_and_bad_names(tmp_path):
    with pytest.raises(FileAccessError) as exc:
        open_model(tmp_path)
    assert str(exc.value) == f"{tmp_path} is a folder, not a GGUF file."
    with pytest.raises(FileAccessError) as exc:
        open_model(tmp_path / "nope.gguf")
    assert str(exc.value) == f"{tmp_path / 'nope.gguf'} does not exist."
    with pytest.raises(FileAccessError, match="is not a valid file name"):
        open_model("bad\0name.gguf")
    if hasattr(os, "mkfifo"):
        with pytest.raises(FileAccessError, match="is a character device, not a regular file"):
            open_model("/dev/null")


def test_unreadable_file(tmp_path, llama, monkeypatch):
    p = tmp_path / "m.gguf"
    p.write_bytes(llama)
    real_open = os.open

    def denied(path, flags, *a, **k):
        if os.fspath(path) == str(p):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(FileAccessError) as exc:
        open_model(p)
    assert str(exc.value) == (f"{p} cannot be read: permission denied; make the file readable for this user "
                              "(or copy it somewhere you may read).")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads files without permission")
def test_unreadable_file_for_real(tmp_path, llama):
    p = tmp_path / "m.gguf"
    p.write_bytes(llama)
    p.chmod(0)
    try:
        with pytest.raises(FileAccessError, match="permission denied"):
            open_model(p)
    finally:
        p.chmod(0o644)


def test_mmap_refused(tmp_path, llama, monkeypatch):
    p = tmp_path / "m.gguf"
    p.write_bytes(llama)

    def refuse(*a, **k):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", refuse)
    with pytest.raises(FileAccessError) as exc:
        open_model(p)
    assert str(exc.value) == (
        f"{p}: the operating system refused to map the file into memory (Cannot allocate memory); free some "
        "memory or raise the address-space limit (ulimit -v): llama.cpp maps model files the same way."
    )


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_AS is POSIX")
def test_mmap_refused_under_an_address_space_limit(tmp_path, sparse_models):
    """A real refusal: a 17 GB (sparse) model in a process limited to 2 GiB of address space."""
    big = sparse_models["qwen3-30b-a3b"]
    script = (
        "import resource, sys\n"
        "from app.model import open_model\n"
        "from app.errors import LayerdeckError\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "try:\n"
        "    open_model(sys.argv[1])\n"
        "except LayerdeckError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(big)], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith(f"FileAccessError {big}: the operating system refused to map the file into memory")


# ---------------------------------------------------------------- 5. split names


def _shard(path: Path, count: int, no: int, n_layer: int = 1) -> Path:
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(n_layer)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_uint16("split.no", no)
    w.add_uint16("split.count", count)
    w.add_int32("split.tensors.count", 1)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_many_missing_shards_are_counted_not_listed(tmp_path):
    p = _shard(tmp_path / "x-00001-of-00300.gguf", 300, 0)
    with pytest.raises(MissingShardError) as exc:
        open_model(p)
    assert str(exc.value) == (
        f"x-00001-of-00300.gguf is part of a 300-part model, but 299 parts are missing (x-00002-of-00300.gguf, "
        f"x-00003-of-00300.gguf, x-00004-of-00300.gguf and 296 more) from {tmp_path}: download the missing parts "
        "into the same folder."
    )


def test_a_split_name_without_split_metadata_is_one_file(tmp_path, llama):
    """x-00001-of-99999.gguf printed 99,998 missing names; llama.cpp loads such a file alone (no split.count)."""
    p = tmp_path / "x-00001-of-99999.gguf"
    p.write_bytes(llama)
    m = open_model(p)
    assert m.paths == [p] and m.params.n_layer == 4


def test_a_split_name_that_disagrees_with_split_count(tmp_path):
    p = _shard(tmp_path / "x-00001-of-99999.gguf", 3, 0)
    with pytest.raises(CorruptGGUFError) as exc:
        open_model(p)
    assert str(exc.value) == (
        "x-00001-of-99999.gguf: its name says 99,999 parts, but its split.count says 3: the file was renamed "
        "(llama.cpp: \"invalid split file name\"); restore the original file name."
    )


# ---------------------------------------------------------------- 6. structure llama.cpp refuses


@pytest.mark.parametrize("mutations,error,message", [
    ([["meta", "x.nested", T_ARR, {"arr": T_ARR, "values": [{"arr": T_U32, "values": [1]}]}]], CorruptGGUFError,
     "is an array of arrays, which llama.cpp refuses (\"key 'x.nested' has invalid GGUF type 9\")"),
    ([["dup", "{arch}.context_length"]], CorruptGGUFError,
     "metadata key 'llama.context_length' appears twice"),
    ([["meta", "", T_U32, 1]], CorruptGGUFError, "has an empty key, which llama.cpp refuses (\"key 21 is empty\")"),
    ([["meta", "general.alignment", T_U64, 32]], CorruptGGUFError,
     "general.alignment is stored as u64, but llama.cpp requires a u32"),
    ([["offset", 2, "prev"]], CorruptGGUFError,
     "tensor 'output.weight' starts at data offset 21,760 but llama.cpp expects 22,016 (each tensor's data "
     "follows the one before, padded to 32 bytes): its data overlaps the tensor before it, which llama.cpp "
     "refuses (\"tensor 'output.weight' has offset 21760, expected 22016\")"),
    ([["offset", 2, "+a"]], CorruptGGUFError, "its data leaves a gap after the tensor before it"),
    ([["swap", 1, 2]], CorruptGGUFError, "has offset"),
    ([["dim", 38, 1, 0]], CorruptGGUFError,
     "tensor 'blk.3.ffn_up.weight' has shape (64, 0), with a dimension of 0 elements: llama.cpp checks every "
     "tensor against the shape the model needs and refuses the file (\"check_tensor_dims: tensor "
     "'blk.3.ffn_up.weight' has wrong shape\")"),
    ([["dim", 3, 0, (1 << 63) + 5]], CorruptGGUFError, "has a negative size in dimension 0"),
    ([["dim", 4, 2, 1 << 40], ["dim", 4, 3, 1 << 40]], CorruptGGUFError, "more elements than fit in 64 bits"),
    ([["dim", 3, 4, 1], ["dim", 3, 5, 1], ["dim", 3, 6, 1], ["dim", 3, 7, 1]], CorruptGGUFError,
     "has 5 dimensions (ggml allows at most 4"),
    ([["rename", 3, "blk.0." + "a" * 60]], CorruptGGUFError, "llama.cpp allows fewer than 64"),
    ([["rename", 3, ""]], CorruptGGUFError, "m.gguf: a tensor has an empty name; llama.cpp looks tensors up by name"),
    ([["count", "tensors", 1]], TruncatedGGUFError, "the download is probably incomplete"),
])
def test_structure_llama_cpp_refuses(tmp_path, llama, mutations, error, message):
    p = edited(tmp_path, llama, mutations)
    with pytest.raises(error) as exc:
        open_model(p)
    assert message in str(exc.value), str(exc.value)


def test_structure_llama_cpp_accepts_is_read(tmp_path, llama):
    """gguf.cpp takes a 0-dimensional tensor (one element); so does the reader (whether the model then loads is
    llama.cpp's tensor check's business)."""
    g = parse(llama)
    p = edited(tmp_path, llama, [["dim", 1, 0, None]])  # output_norm.weight: (64,) -> ()
    with pytest.raises(CorruptGGUFError, match="has offset"):  # its size changed, so the next offset is wrong
        read_header(p)
    last = len(g.tensors) - 1  # the last tensor: nothing follows it
    p = edited(tmp_path, llama, [["dim", last, 0, None], ["dim", last, 0, None], ["type", last, 0]])
    h = read_header(p)
    assert h.tensors[-1].shape == (1,) and h.tensors[-1].nbytes == 4


@pytest.mark.parametrize("delta,stray", [(-1, "blk.3.ffn_up.weight"), (-2, "blk.3.ffn_down.weight")])
def test_a_header_count_short_of_the_table(tmp_path, llama, delta, stray):
    """gguf.cpp reads the shorter table and takes the next entry for data; llama.cpp then misses that tensor."""
    p = edited(tmp_path, llama, [["count", "tensors", delta]])
    with pytest.raises(CorruptGGUFError) as exc:
        open_model(p)
    assert str(exc.value) == (
        f"m.gguf: the header says {39 + delta} tensors, but another tensor entry ({stray!r}) follows the last one: "
        "the tensor count in the header is too small, so llama.cpp would read every tensor's data from the wrong "
        "place and miss that tensor (\"check_tensor_dims: tensor ... not found\"): the file is corrupt; convert or "
        "download it again."
    )


# ---------------------------------------------------------------- 6. split sets whose shards disagree


def _split(path: Path, n_layer: int = 6, max_tensors: int = 5, dtype=np.float16) -> list[Path]:
    w = GGUFWriter(str(path), "llama", split_max_tensors=max_tensors)
    w.add_tokenizer_model("llama")
    w.add_token_list(["a", "b"])
    w.add_block_count(n_layer)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_head_count(4)
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_up.weight", np.ones((32, 64), dtype=dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(path.parent.glob(f"{path.stem}-*-of-*.gguf"))


def test_a_shard_of_another_quantization_with_the_same_layout_loads(tmp_path):
    """llama-model-loader checks split.no, duplicates and the tensor count, not the types: the mix loads."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _split(tmp_path / "a" / "m.gguf")
    b = _split(tmp_path / "b" / "m.gguf", dtype=np.float32)
    os.replace(b[1], a[1])
    m = open_model(a[0])
    assert {t.type_name for t in m.tensors if t.shard == 1 and "ffn_up" in t.name} == {"F32"}
    assert {t.type_name for t in m.tensors if t.shard != 1 and "ffn_up" in t.name} == {"F16"}
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes


def test_a_shard_of_another_layout_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "c").mkdir()
    a = _split(tmp_path / "a" / "m.gguf")  # 5 + 5 + 2 tensors
    c = _split(tmp_path / "c" / "m.gguf", max_tensors=4)  # 4 + 4 + 4
    assert len(a) == len(c) == 3
    os.replace(c[1], a[1])
    with pytest.raises(CorruptGGUFError) as exc:
        open_model(a[0])
    assert str(exc.value) == ("tensor 'blk.2.attn_norm.weight' appears in more than one shard (llama.cpp: "
                              "\"invalid model: tensor 'blk.2.attn_norm.weight' is duplicated\"): the split set is "
                              "mixed up.")


def test_a_shard_without_split_no_is_refused(tmp_path):
    a = _split(tmp_path / "m.gguf")
    a[1].write_bytes(apply(a[1].read_bytes(), [["del", "split.no"]]))
    with pytest.raises(CorruptGGUFError, match="has no split.no, so it is not a part of this split model"):
        open_model(a[0])
    a = _split(tmp_path / "n.gguf")
    a[0].write_bytes(apply(a[0].read_bytes(), [["del", "split.tensors.count"]]))
    with pytest.raises(MetadataError, match='"key not found in model: split.tensors.count"'):
        open_model(a[0])


def test_a_shard_that_says_another_part_number(tmp_path):
    a = _split(tmp_path / "m.gguf")
    a[2].write_bytes(apply(a[2].read_bytes(), [["meta", "split.no", T_U16, 1]]))
    with pytest.raises(CorruptGGUFError) as exc:
        open_model(a[0])
    assert str(exc.value) == ("m-00003-of-00003.gguf says it is part 2, but its name says part 3: the files were "
                              "renamed or mixed up (llama.cpp: \"invalid split file idx: 1 (file: "
                              "m-00003-of-00003.gguf), expected 2\").")


def test_a_header_count_that_leaves_out_a_nextn_tensor_loads_with_a_warning(tmp_path, tiny_models):
    """llama.cpp skips NextN/MTP tensors, so it loads such a file (its data offsets shifted): Layerdeck too."""
    base = Path(tiny_models["glm4moe"]).read_bytes()
    last = parse(base).tensors[-1][0]
    assert last.startswith("blk.3.nextn.")  # the factory writes the NextN layer last
    m = open_model(edited(tmp_path, base, [["count", "tensors", -1]]))
    assert last not in {t.name for t in m.tensors}
    # the one before it is required: llama.cpp refuses ("check_tensor_dims: tensor 'blk.3.nextn.hnorm.weight'
    # not found"), and so does Layerdeck
    with pytest.raises(CorruptGGUFError, match="another tensor entry .'blk.3.nextn.hnorm.weight'. follows"):
        open_model(edited(tmp_path, base, [["count", "tensors", -2]], "two.gguf"))
    assert m.warnings == [
        f"m.gguf: the header says {len(parse(base).tensors) - 1} tensors, but another tensor entry ({last!r}) "
        "follows the last one: the tensor count in the header is too small; llama.cpp does without that optional "
        "NextN tensor and loads the file, with every tensor's data read from shifted offsets (the sizes planned here are right, the "
        "weights are not: download the file again)"
    ]



@pytest.mark.parametrize(
    "edit,llama",
    [
        ([["del", "tokenizer.ggml.model"]], "key not found in model: tokenizer.ggml.model"),
        ([["del", "tokenizer.ggml.tokens"]], "cannot find tokenizer vocab in model file"),
        ([["meta", "tokenizer.ggml.model", T_STR, "sentencepiece-ish"]], "unknown tokenizer: 'sentencepiece-ish'"),
    ],
    ids=["no-tokenizer", "no-vocabulary", "unknown-tokenizer"],
)
def test_a_file_without_a_usable_tokenizer_is_refused_as_llama_cpp_refuses_it(tmp_path, edit, llama):
    """llama_vocab::impl::load stops on these (src/llama-vocab.cpp), so no plan is made for such a file."""
    from app.model.errors import MetadataError
    from tests.gguf_factory import write_tiny_model

    path = write_tiny_model("llama", tmp_path / "t.gguf")
    path.write_bytes(apply(path.read_bytes(), edit))
    with pytest.raises(MetadataError) as exc:
        open_model(path)
    assert llama in str(exc.value)
