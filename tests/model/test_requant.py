"""app.model.requant against the real llama-quantize of the pinned llama.cpp.

``llama-quantize --dry-run`` prints every tensor's target type and size without writing (and without reading
tensor data, so the full-size sparse headers of tests/gguf_factory.py work: their data is a hole); a real run
on a tiny model writes the file, whose header gives the exact per-tensor types, offsets and sizes and the
whole-file size. Every tensor of every case must match.

The suite runs a fixed subset (about a minute): every ftype llama-quantize lists, with and without an
importance matrix, on tiny models of 12 architectures; rule-heavy ftypes on full-size headers (the counters and
``use_more_bits`` depend on the layer count); a set of real quantizations. ``LAYERDECK_REQUANT_FULL=1`` runs
every architecture, full-size model and ftype both ways, dry and real.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as Q

from app.command.parse import settings_from_args
from app.memory.estimator import estimate
from app.model import open_model
from app.model import requant as rq
from tests import gguf_factory as gf
from tests.memory.accuracy import COMPUTE_SLACK, within_floor

pytestmark = pytest.mark.llama

FULL = os.environ.get("LAYERDECK_REQUANT_FULL") == "1"

#: tiny architectures of the suite: dense, MoE (8 experts: the n_expert == 8 rules), MLA, SWA, hybrid,
#: recurrent, NextN, tied embeddings, gated delta-net (attn_qkv)
TINY_ARCHS = (
    "llama",
    "mixtral",
    "qwen3",
    "qwen3moe",
    "qwen2moe",
    "deepseek2",
    "gpt-oss",
    "gemma3",
    "granitehybrid",
    "mamba2",
    "glm4moe",
    "qwen35",
)
ARCHS = gf.ARCHS if FULL else TINY_ARCHS

#: full-size headers (sparse) and the ftypes checked on each in the suite; the rules each exercises:
#: Q4_K_M/Q5_K_M use_more_bits over attn_v and ffn_down, Q3_K_M the first attn_v counter, Q2_K/IQ2/IQ1 GQA
#: and expert counts, IQ3_XS the ffn_gate/up band, 70B the bump of attn_v, MXFP4_MOE 3-D experts
FULL_SIZE: dict[str, tuple[str, ...]] = {
    "llama-3.1-8b": ("Q4_K_M", "Q3_K_M", "IQ2_M", "IQ3_XS"),
    "llama-3.1-70b": ("Q4_K_M", "Q3_K_S", "Q2_K"),
    "mixtral-8x7b": ("Q4_K_M", "IQ2_XXS", "Q3_K_S", "IQ3_M"),
    "qwen3-30b-a3b": ("Q4_K_M", "Q2_K_S", "IQ3_XXS+imatrix"),
    "deepseek-v3": ("Q4_K_M", "IQ1_M", "MXFP4_MOE"),
    "gpt-oss-20b": ("MXFP4_MOE", "Q4_K_S"),
    "glm-4.5-air": ("Q5_K_M", "IQ4_XS", "Q2_K"),
    "granite-4.0-h-small": ("Q3_K_L", "IQ3_XXS"),
    "gemma-3-4b": ("Q4_K_M", "IQ2_S", "Q4_0+imatrix"),
    "qwen3.5-27b": ("Q4_K_M", "IQ4_NL+imatrix"),
}

#: real quantizations in the suite: (architecture, width, ftype, with an imatrix); width 256 lets the K and IQ
#: types take the rows, 64 makes them fall back; "mixed" inputs are already quantized (--allow-requantize)
REAL: tuple[tuple[str, str, str, bool], ...] = (
    ("qwen3moe", "w256", "Q4_K_M", False),
    ("llama", "w256", "Q2_0", False),
    ("deepseek2", "w256", "IQ2_XXS", True),
    ("gpt-oss", "w256", "MXFP4_MOE", False),
    ("gemma3", "w256", "Q3_K_M", False),
    ("granitehybrid", "w256", "IQ4_NL", True),
    ("glm4moe", "w256", "Q6_K", False),
    ("mamba2", "w256", "BF16", False),
    ("mixtral", "mixed", "Q5_K_S", False),
    ("qwen2moe", "w64", "IQ3_S", True),
)

_LINE = re.compile(
    r"^\[\s*\d+/\s*\d+\] (\S+)\s+- \[([^\]]*)\], type =\s*(\S+), size =\s*([\d.]+) MiB"
    r"(?: ->\s*([\d.]+) MiB \((\S+)\))?$",
    re.M,
)
_TOTAL = re.compile(r"quant size  =\s*([\d.]+) MiB")


# --------------------------------------------------------------------------- helpers


def write_imatrix(model, path: Path) -> Path:
    """A legacy-format importance matrix (common/imatrix-loader.cpp) with ones for every 2-D/3-D tensor."""
    entries = []
    for t in model.tensors:
        if len(t.shape) >= 2:
            n = t.shape[0] * (t.shape[2] if len(t.shape) > 2 else 1)
            name = t.name.encode()
            entries.append(struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, n) + struct.pack(f"<{n}f", *[1.0] * n))
    path.write_bytes(struct.pack("<i", len(entries)) + b"".join(entries))
    return path


def tensor_table(path: Path) -> tuple[list[tuple[str, int, tuple[int, ...], int]], int, int]:
    """``([(name, type, shape, absolute offset)], data offset, file size)`` of a GGUF file, read here (the
    reader under test knows no Q2_0)."""
    buf = path.read_bytes()[: 64 << 20]
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def rstr():
        nonlocal pos
        n = rd("<Q")
        pos += n
        return buf[pos - n : pos].decode()

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t):
        nonlocal pos
        if t == 8:
            rstr()
        elif t == 9:
            it, n = rd("<I"), rd("<Q")
            for _ in range(n):
                skip(it)
        else:
            pos += sizes[t]

    assert buf[:4] == b"GGUF"
    pos = 8
    n_tensors, n_kv = rd("<Q"), rd("<Q")
    align = 32
    for _ in range(n_kv):
        key, t = rstr(), rd("<I")
        if key == "general.alignment":
            align = rd("<I")
        else:
            skip(t)
    table = []
    for _ in range(n_tensors):
        name = rstr()
        shape = tuple(rd("<Q") for _ in range(rd("<I")))
        typ, off = rd("<I"), rd("<Q")
        table.append((name, typ, shape, off))
    data = (pos + align - 1) // align * align
    return [(n, t, s, data + o) for n, t, s, o in table], data, path.stat().st_size


def dry_run(tool: Path, path: Path, ftype: str, imatrix: Path | None) -> tuple[int, dict, float | None, str]:
    args = [str(tool), "--dry-run", *(["--imatrix", str(imatrix)] if imatrix else []), str(path), ftype]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    rows = {m.group(1): m.groups()[1:] for m in _LINE.finditer(out)}
    total = _TOTAL.search(out)
    return proc.returncode, rows, float(total.group(1)) if total else None, out


def mib(n: int, digits: int) -> str:
    return f"{n / 1024 / 1024:.{digits}f}"


def check_dry(tool: Path, path: Path, ftype: str, imatrix: Path | None) -> int:
    """Compare one dry run with the prediction; return the number of tensors that matched (all, or it fails)."""
    model = open_model(path)
    rc, rows, total, out = dry_run(tool, path, ftype, imatrix)
    what = f"{path.name} as {ftype}{' with an imatrix' if imatrix else ''}"
    try:
        plan = rq.plan(model, ftype, imatrix=imatrix is not None)
    except rq.RequantError as exc:
        assert rc != 0, f"{what}: we refuse ({exc}) but llama-quantize did it"
        assert "no tensor type fallback is defined for type" in out and "no tensor type fallback" in str(exc), out[-800:]
        return 0
    assert rc == 0, f"{what}: llama-quantize failed:\n{out[-1500:]}"
    assert len(rows) == len(plan.tensors), what
    for c in plan.tensors:
        shape, old, old_mib, new_mib, new = rows[c.name]
        assert [int(x) for x in shape.split(",")][: len(c.shape)] == list(c.shape), (what, c.name)
        if new is None:  # kept: the tool prints one size, 3 decimals
            assert c.new_type == c.old_type, (what, c.name, rq.type_name(c.new_type), old)
            assert old_mib == mib(c.nbytes, 3), (what, c.name)
        else:
            assert rq.type_name(c.new_type) == rq.type_name(rq.parse_ggml_type(new)), (what, c.name, new)
            assert new_mib == mib(c.nbytes, 2), (what, c.name, new_mib, c.nbytes)
    assert total is not None and f"{total:.2f}" == mib(plan.tensor_bytes, 2), (what, total, plan.tensor_bytes)
    needs = "actually completing this quantization will require an imatrix" in out
    assert needs == bool(plan.needs_imatrix), (what, plan.needs_imatrix[:3])
    return len(plan.tensors)


def _parallel(fn, jobs):
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda j: fn(*j), jobs))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Tiny models per architecture: F16 with rows of 256 (``w256``, with ``general.file_type`` as converted
    files have it), F16 with the tiny 64 (``w64``, without), and the factory's quantized mix (``mixed``)."""
    d = tmp_path_factory.mktemp("requant")
    out = {}
    for arch in ARCHS:
        out[f"{arch}-w256"] = gf.write_tiny_model(arch, d / f"{arch}-w256.gguf", quant="f16", n_embd=256, file_type=1)
        out[f"{arch}-w64"] = gf.write_tiny_model(arch, d / f"{arch}-w64.gguf", quant="f16")
        out[f"{arch}-mixed"] = gf.write_tiny_model(arch, d / f"{arch}-mixed.gguf", quant="mixed")
    return out


@pytest.fixture(scope="module")
def imatrix_one(tmp_path_factory) -> Path:
    """An importance matrix with one entry: enough for a dry run, which only asks whether one is given."""
    path = tmp_path_factory.mktemp("imatrix") / "one.imatrix"
    name = b"blk.0.ffn_down.weight"
    path.write_bytes(struct.pack("<ii", 1, len(name)) + name + struct.pack("<ii4f", 1, 4, 1, 1, 1, 1))
    return path


def full_size_spec(name: str):
    """A full-size header in F16 (as converted, before quantization); ``llama-3.1-70b`` is the 70B shape the
    LLM_TYPE_70B rule keys on (80 layers, GQA)."""
    if name == "llama-3.1-70b":
        arch, hp = gf.SPARSE_SPECS["llama-3.1-8b"]
        hp = {**hp, "name": "Llama-3.1-70B", "n_layer": 80, "n_embd": 8192, "n_head": 64, "n_ff": 28672}
    else:
        arch, hp = gf.SPARSE_SPECS[name]
    return gf.model_spec(arch, **{**hp, "quant": "f16", "file_type": 1})


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("arch", ARCHS)
def test_dry_run_every_ftype(arch, models, imatrix_one, llama_quantize):
    """Every ftype llama-quantize lists, with and without an imatrix: rows of 256 (every rule applies) and
    the tiny 64 (the fallbacks); and from an already quantized header."""
    jobs = [(llama_quantize, models[f"{arch}-w256"], ft, im) for ft in rq.FTYPE_NAMES for im in (None, imatrix_one)]
    jobs += [(llama_quantize, models[f"{arch}-w64"], ft, None) for ft in rq.FTYPE_NAMES]
    if FULL:
        jobs += [(llama_quantize, models[f"{arch}-w64"], ft, imatrix_one) for ft in rq.FTYPE_NAMES]
        jobs += [(llama_quantize, models[f"{arch}-mixed"], ft, im) for ft in rq.FTYPE_NAMES for im in (None, imatrix_one)]
    else:
        jobs += [(llama_quantize, models[f"{arch}-mixed"], ft, None) for ft in ("Q4_K_M", "IQ3_XXS", "Q8_0")]
    matched = _parallel(check_dry, jobs)
    assert sum(matched) > 0


@pytest.mark.parametrize("name", list(gf.SPARSE_SPECS) + ["llama-3.1-70b"] if FULL else list(FULL_SIZE))
def test_dry_run_full_size(name, tmp_path, imatrix_one, llama_quantize):
    path = gf.write_spec(full_size_spec(name), tmp_path / f"{name}.gguf", sparse=True)
    if FULL:
        cases = [(ft, im) for ft in rq.FTYPE_NAMES for im in (None, imatrix_one)]
    else:
        cases = [(ft.split("+")[0], imatrix_one if ft.endswith("+imatrix") else None) for ft in FULL_SIZE[name]]
    matched = _parallel(check_dry, [(llama_quantize, path, ft, im) for ft, im in cases])
    assert all(matched), (name, matched)
    if name == "llama-3.1-70b":  # the 70B rule: Q3_K_S's attn_v is Q5_K there (Q3_K on other models)
        plan = rq.plan(open_model(path), "Q3_K_S")
        assert {rq.type_name(c.new_type) for c in plan.tensors if c.name.endswith("attn_v.weight")} == {"Q5_K"}


def check_real(tool: Path, src: Path, ftype: str, with_imatrix: bool, tmp: Path) -> int:
    """Quantize ``src`` for real and compare the file with the prediction; return the tensors matched."""
    out = tmp / f"{src.stem}-{ftype}-{int(with_imatrix)}.gguf"
    try:
        return _check_real(tool, src, out, ftype, with_imatrix, tmp)
    finally:
        out.unlink(missing_ok=True)


def _check_real(tool: Path, src: Path, out: Path, ftype: str, with_imatrix: bool, tmp: Path) -> int:
    model = open_model(src)
    im = write_imatrix(model, tmp / f"{src.stem}-{ftype}.imatrix") if with_imatrix else None
    args = [str(tool), "--allow-requantize", *(["--imatrix", str(im)] if im else []), str(src), str(out), ftype, "1"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    what = f"{src.name} as {ftype}{' with an imatrix' if im else ''}"
    try:
        predicted = rq.predict_model(model, ftype, imatrix=with_imatrix)
    except rq.RequantError as exc:
        assert proc.returncode != 0, f"{what}: we refuse ({exc}) but llama-quantize wrote it"
        reason = "requires an imatrix" if "importance matrix" in str(exc) else "no tensor type fallback is defined"
        assert reason in str(exc).replace("requires an imatrix!", "requires an imatrix")
        assert reason in proc.stdout + proc.stderr, (what, (proc.stdout + proc.stderr)[-800:])
        return 0
    assert proc.returncode == 0, f"{what}: llama-quantize failed:\n{(proc.stdout + proc.stderr)[-1500:]}"
    table, data, size = tensor_table(out)
    assert [t.name for t in predicted.tensors] == [n for n, *_ in table], what  # the order it writes
    shift = 0 if im is None else data - predicted.tensors[0].offset  # the imatrix keys in its header
    for t, (name, typ, shape, offset) in zip(predicted.tensors, table):
        assert (t.type_id, t.shape, t.offset + shift) == (typ, shape, offset), (what, name, t.type_name)
        assert t.nbytes == rq.tensor_nbytes(typ, shape), (what, name)
    ends = [o for *_, o in table[1:]] + [size]
    for t, (_, _, _, offset), end in zip(predicted.tensors, table, ends):
        assert offset + t.nbytes <= end < offset + t.nbytes + 32, (what, t.name)  # the data is that size, padded
    if im is None:
        assert predicted.file_size == size, (what, predicted.file_size, size)
        assert predicted.file_size == data + sum((t.nbytes + 31) // 32 * 32 for t in predicted.tensors)
    else:
        assert 0 < shift < 1024 and size == predicted.file_size + shift, what
    return len(table)


@pytest.mark.parametrize(
    "arch,width,ftype,imatrix",
    [(a, w, f, i) for a in gf.ARCHS for w in ("w256", "w64", "mixed") for f in rq.FTYPE_NAMES for i in (False, True)]
    if FULL
    else REAL,
)
def test_real_quantization(arch, width, ftype, imatrix, models, tmp_path, llama_quantize):
    """The file llama-quantize writes: every tensor's type, shape, offset and size, and the file size."""
    check_real(llama_quantize, models[f"{arch}-{width}"], ftype, imatrix, tmp_path)


def test_refusals_are_llama_quantize_s(models, tmp_path, llama_quantize):
    """IQ2_XXS without an imatrix and Q1_0 on rows of 64: llama-quantize refuses both, and so does the
    prediction, with its reason."""
    src = models["qwen3-w256"]
    model = open_model(src)
    proc = subprocess.run([str(llama_quantize), str(src), str(tmp_path / "o.gguf"), "IQ2_XXS"], capture_output=True, text=True)
    assert proc.returncode != 0 and "this quantization requires an imatrix" in proc.stdout + proc.stderr
    with pytest.raises(rq.RequantError, match="requires an imatrix"):
        rq.predict_model(model, "IQ2_XXS")
    assert rq.plan(model, "IQ2_XXS").needs_imatrix and not rq.plan(model, "IQ2_XXS", imatrix=True).needs_imatrix
    proc = subprocess.run([str(llama_quantize), str(models["qwen3-w64"]), str(tmp_path / "o.gguf"), "Q1_0"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode != 0 and "no tensor type fallback is defined for type q1_0" in proc.stdout + proc.stderr
    with pytest.raises(rq.RequantError, match="no tensor type fallback is defined for type q1_0"):
        rq.predict_model(open_model(models["qwen3-w64"]), "Q1_0")


def test_options_match_llama_quantize(models, imatrix_one, llama_quantize):
    """--tensor-type, --output-tensor-type, --token-embedding-type, --pure and --leave-output-tensor."""
    src = models["qwen3moe-w256"]
    model = open_model(src)
    cases = [
        (["--pure"], dict(pure=True), "Q4_K_M"),
        (["--leave-output-tensor"], dict(leave_output_tensor=True), "Q4_K_M"),
        (["--output-tensor-type", "q8_0", "--token-embedding-type", "iq4_nl"], dict(output_tensor_type="q8_0",
                                                                                    token_embedding_type="IQ4_NL"), "Q3_K_M"),  # fmt: skip
        (["--tensor-type", "ffn_down_exps=q8_0", "--tensor-type", "attn_v=q5_1"],
         dict(tensor_type_overrides=[("ffn_down_exps", "q8_0"), ("attn_v", "q5_1")]), "Q4_K_M"),  # fmt: skip
        (["--tensor-type", "blk\\.[0-1]\\.ffn_.*=iq4_xs"], dict(tensor_type_overrides=[("blk\\.[0-1]\\.ffn_.*", "iq4_xs")]), "IQ3_M"),
    ]
    for flags, options, ftype in cases:
        proc = subprocess.run([str(llama_quantize), "--dry-run", *flags, str(src), ftype], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-800:]
        rows = {m.group(1): m.group(6) or m.group(3) for m in _LINE.finditer(proc.stdout + proc.stderr)}
        ours = {n: rq.type_name(t) for n, t in rq.target_types(model, ftype, **options)}
        assert ours == {n: rq.type_name(rq.parse_ggml_type(t)) for n, t in rows.items()}, flags


def test_estimate_of_predicted_is_llama_cpp_s(tmp_path, llama_bin, llama_quantize):
    """``estimate --as Q4_K_M`` on an F16 header: the estimate of the predicted model is llama-fit-params' for
    a file with the types llama-quantize --dry-run prints (Qwen3-30B-A3B, full size, CPU)."""
    from app.llamacpp.fit_print import run_fit_print

    spec = full_size_spec("qwen3-30b-a3b")
    f16 = gf.write_spec(spec, tmp_path / "f16.gguf", sparse=True)
    rc, rows, _, out = dry_run(llama_quantize, f16, "Q4_K_M", None)
    assert rc == 0, out[-800:]
    for t in spec.tensors:
        t.qtype = Q(rq.parse_ggml_type(rows[t.name][4] or rows[t.name][1]))
    spec.set("general.file_type", 15)
    quantized = gf.write_spec(spec, tmp_path / "q4_k_m.gguf", sparse=True)
    predicted = rq.predict_model(open_model(f16), "Q4_K_M")
    assert predicted.predicted_from and predicted.header_only
    assert [(t.name, t.type_id, t.nbytes) for t in sorted(predicted.tensors, key=lambda t: t.name)] == [
        (t.name, t.type_id, t.nbytes) for t in sorted(open_model(quantized).tensors, key=lambda t: t.name)
    ]
    theirs = {r.name: r for r in run_fit_print(quantized, ["-c", "4096", "--no-repack"], llama_dir=llama_bin)}
    ours = estimate(predicted, [], settings_from_args(["-c", "4096"], tool="fit-params"))
    host, row = ours.device("CPU"), theirs["CPU"]
    assert row.model > 16000  # the Q4_K_M experts, not F16's 58 GB
    assert within_floor(host.model, row.model) and within_floor(host.context, row.context), (host, row)
    assert within_floor(host.compute, row.compute, COMPUTE_SLACK), (host, row)


def test_split_input_becomes_one_file(tmp_path, llama_quantize):
    """A split set in: llama-quantize reads every shard and writes one file (every tensor entry in its header,
    the split.* keys gone)."""
    first = gf.write_spec(gf.model_spec("qwen3moe", quant="f16", n_embd=256), tmp_path / "s.gguf", split_max_tensors=20)
    assert len(open_model(first).paths) > 1
    assert check_real(llama_quantize, first, "Q4_K_M", False, tmp_path) > 20


def test_cli_as_type(tmp_path, llama_bin, llama_quantize):
    """``inspect --as`` and ``estimate --as`` on an F16 header: the note, the predicted sizes, llama.cpp's
    figures for the file llama-quantize would write; a type that needs an imatrix is refused (exit 2)."""
    from app.llamacpp.fit_print import run_fit_print
    from tests.test_cli import layerdeck

    spec = full_size_spec("qwen3-30b-a3b")
    f16 = gf.write_spec(spec, tmp_path / "q30-f16.gguf", sparse=True)
    env = {"LAYERDECK_LLAMA_CPP_DIR": str(llama_bin)}
    r = layerdeck("inspect", "--json", "--as", "q4_k_m", str(f16), env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    predicted = rq.predict_model(open_model(f16), "Q4_K_M")
    assert doc["predicted_from"] == "q30-f16.gguf as Q4_K_M" and doc["file_type"] == "Q4_K_M"
    assert doc["file_size"] == predicted.file_size and doc["tensor_bytes"] == predicted.tensor_bytes
    types = {t["name"]: t["type"] for b in doc["blocks"] for t in b["tensors"]}
    rc, rows, _, out = dry_run(llama_quantize, f16, "Q4_K_M", None)
    assert types == {n: rq.type_name(rq.parse_ggml_type(row[4] or row[1])) for n, row in rows.items()}
    note = "predicted: q30-f16.gguf as Q4_K_M by llama-quantize's rules of the pinned llama.cpp"
    text = layerdeck("inspect", "--as", "Q4_K_M", str(f16), env=env).stdout
    assert "  predicted      q30-f16.gguf as Q4_K_M by llama-quantize's rules of the pinned llama.cpp" in text
    for t in spec.tensors:  # the file llama-quantize would write, as a sparse stand-in
        t.qtype = Q(rq.parse_ggml_type(rows[t.name][4] or rows[t.name][1]))
    quantized = gf.write_spec(spec, tmp_path / "q30-q4_k_m.gguf", sparse=True)
    theirs = run_fit_print(quantized, ["-c", "4096", "--no-repack"], llama_dir=llama_bin)
    r = layerdeck("estimate", "--tool", "fit-params", "--as", "Q4_K_M", "--", "-m", str(f16), "-c", "4096",
                  "--no-repack", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    host = r.stdout.splitlines()[0].split()
    assert host[0] == "Host" and [int(x) for x in host[1:3]] == [theirs[0].model, theirs[0].context]
    assert f"note: {note}" in r.stdout
    r = layerdeck("inspect", "--as", "IQ2_XXS", str(f16), env=env)
    assert r.returncode == 2 and "refuses IQ2_XXS without an importance matrix" in r.stderr
    assert layerdeck("inspect", "--as", "IQ2_XXS", "--imatrix", str(f16), env=env).returncode == 0


@pytest.mark.parametrize("ftype,name", [("Q1_0", "Q1_0"), ("Q2_0", "Q2_0")])
def test_files_of_the_newest_types_open_and_estimate_as_llama_cpp(ftype, name, llama_quantize, llama_bin, tmp_path):
    """Q1_0 and Q2_0 (ggml types 41 and 42, newer than the installed gguf package's table) are read with the pinned
    ggml's block sizes: the file opens, its file type is named, and its estimate equals llama.cpp's dry run."""
    from app.llamacpp.fit_print import run_fit_print

    src = gf.write_tiny_model("llama", tmp_path / "f16.gguf", quant="f16", n_embd=256, n_ff=512)
    out = tmp_path / f"{ftype}.gguf"
    subprocess.run([str(llama_quantize), str(src), str(out), ftype], check=True, capture_output=True, timeout=120)
    model = open_model(out)
    assert model.params.file_type_name == name and any(t.type_name == name for t in model.tensors)
    # every tensor's size as the pinned ggml computes it: the data offsets llama-quantize wrote step by exactly
    # that much (padded to the alignment), and the last one ends at the end of the file
    by_offset = sorted(model.tensors, key=lambda t: t.offset)
    for t, nxt in zip(by_offset, by_offset[1:]):
        assert nxt.offset - t.offset == (t.nbytes + 31) // 32 * 32, t.name
    assert by_offset[-1].offset + by_offset[-1].nbytes == out.stat().st_size
    args = ["-c", "512", "-ngl", "0", "--no-repack"]
    theirs = {r.name: r for r in run_fit_print(out, args, llama_dir=llama_bin)}
    ours = estimate(model, [], settings_from_args(args, tool="fit-params"))
    for q in ("model", "context", "compute"):
        assert within_floor(getattr(ours.device("CPU"), q), getattr(theirs["CPU"], q)), q
