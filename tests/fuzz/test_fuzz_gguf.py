"""Fuzzer for the GGUF door: structure-aware mutations of the tiny factory models.

Each input is a tiny model from :mod:`tests.gguf_factory` (several architectures) with one to three
mutations applied to its *structure* (not to random bytes only): metadata values replaced by hostile ones
(wrong types, NaN/inf/huge numbers, arrays, strings, arrays of arrays), keys deleted or duplicated, digits
flipped in tensor names, tensors renamed, shapes, types and data offsets edited, tensor/key counts off by
some, the file cut short, header bytes flipped. Every input goes through three paths and must end in a
result or a typed :class:`app.errors.LayerdeckError` within :data:`TIME_BUDGET_S` and
:data:`MEMORY_BUDGET_BYTES`:

* the core API: ``open_model`` and a :class:`app.session.Session` estimate on one planned GPU;
* the CLI in-process: ``inspect`` and ``estimate`` exit with 0 or 2 and never print a traceback, and they
  agree with the core (exit 2 exactly when the core refused the file);
* the GUI open path, for a small sample (``gui``): ``MainWindow.open_path_sync`` shows the error in a
  message box and keeps the model that was on screen.

For inputs that still load, the model's blocks add up to its tensor bytes and every tensor is in exactly
one block. A ``llama`` test replays a seeded sample of the mutations whose checks Layerdeck mirrors
(metadata types, gguf.cpp's structure rules, layer counts) through ``llama-fit-params`` and requires the
same verdict: Layerdeck's reader alone refuses exactly the files llama.cpp refuses. A second ``llama`` test
takes every mutation, mirrored or not, through the CLI with llama.cpp on the machine (so with the load check
of :mod:`app.llamacpp.load_check`, which asks llama.cpp about its per-architecture tensor tables) and
requires the same verdict and llama.cpp's reason.

Failing examples are kept as JSON files under ``regressions/gguf/`` (``{"arch", "mutations", "note"}``)
and replayed by :func:`test_regressions`. The editor is :mod:`tests.model.gguf_edit`. A mutation is a JSON
list, so a file can be written by hand:

``["meta", KEY, TYPE, VALUE]`` set a key (``{arch}`` in KEY is the model's architecture; TYPE a GGUF type
number; VALUE a scalar, or ``{"arr": ITEM_TYPE, "values": [...]}``, or ``{"arr": ITEM_TYPE, "fill": V}``
for one value per layer), ``["del", KEY]``, ``["dup", KEY]`` (the key again, at the end),
``["digit", TENSOR, POS, DIGIT]`` (set the POS-th digit of a tensor name), ``["rename", TENSOR, NAME]``,
``["dim", TENSOR, DIM, VALUE]`` (VALUE None drops the dimension; DIM past the end adds one),
``["offset", TENSOR, "prev"|"+a"|"-a"|N]``, ``["type", TENSOR, GGML_TYPE]``, ``["swap", I, J]``,
``["count", "tensors"|"kv", DELTA]``, ``["cut", FRACTION]``, ``["byte", FRACTION_OF_HEADER, VALUE]``.
TENSOR indices are taken modulo the number of tensors.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from app.errors import LayerdeckError
from app.llamacpp import load_check
from app.memory.device_adapter import parse_device_spec
from app.model import llama_keys, open_model
from app.session import Session
from tests.model.gguf_edit import (
    T_ARR,
    T_BOOL,
    T_F32,
    T_F64,
    T_I32,
    T_STR,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
    _replace_digit,
    apply,
    parse,
    serialize,
)

from .conftest import MEMORY_BUDGET_BYTES, TIME_BUDGET_S
from .harness import watchdog

REGRESSIONS = Path(__file__).parent / "regressions" / "gguf"

#: Architectures the fuzzer mutates (dense, MoE, MLA, SWA, NextN, hybrid).
FUZZ_ARCHS = (
    "llama", "qwen3moe", "deepseek2", "gpt-oss", "glm4moe", "granitehybrid", "hrm_text", "minimax-01", "graniteswitch",
    "dots3note", "t5",
)

NAN, INF = float("nan"), float("inf")
#: Hostile metadata values: (GGUF type, value as JSON).
HOSTILE: list[tuple[int, Any]] = [
    (T_STR, "4"), (T_STR, ""), (T_STR, "llamax"), (T_F32, NAN), (T_F64, INF), (T_F64, -INF), (T_F64, 1e30),
    (T_F32, 4.0), (T_U32, 0), (T_U32, 1), (T_U32, 2), (T_U32, 1 << 20), (T_U32, (1 << 31) - 1), (T_U32, 1 << 31),
    (T_U32, (1 << 32) - 1), (T_I32, -1), (T_I32, 4), (T_U64, 1 << 40), (T_U64, 4), (T_U16, 4), (T_U16, 3),
    (T_BOOL, True), (T_U8, 4),
    (T_ARR, {"arr": T_U32, "values": [4, 4]}), (T_ARR, {"arr": T_STR, "values": ["a", "b", "c", "d"]}),
    (T_ARR, {"arr": T_ARR, "values": [{"arr": T_U32, "values": [1]}]}), (T_ARR, {"arr": T_U32, "values": []}),
    (T_ARR, {"arr": T_F32, "fill": NAN}), (T_ARR, {"arr": T_U32, "fill": 2}), (T_ARR, {"arr": T_I32, "fill": -1}),
    (T_ARR, {"arr": T_U8, "fill": 2}), (T_ARR, {"arr": T_BOOL, "fill": True}),
]
#: Keys whose values the fuzzer replaces: every one app/model/hparams.py reads, plus split and layout keys.
KEYS = [
    "{arch}.block_count", "{arch}.context_length", "{arch}.embedding_length", "{arch}.attention.head_count",
    "{arch}.attention.head_count_kv", "{arch}.feed_forward_length", "{arch}.expert_count",
    "{arch}.expert_used_count", "{arch}.expert_feed_forward_length", "{arch}.expert_shared_count",
    "{arch}.attention.key_length", "{arch}.attention.value_length", "{arch}.rope.dimension_count",
    "{arch}.attention.sliding_window", "{arch}.attention.sliding_window_pattern", "{arch}.nextn_predict_layers",
    "{arch}.leading_dense_block_count", "{arch}.vocab_size", "{arch}.attention.kv_lora_rank",
    "{arch}.ssm.conv_kernel", "{arch}.ssm.inner_size", "{arch}.full_attention_interval",
    "{arch}.attention.recurrent_layers", "{arch}.hrm.layers_per_stack", "{arch}.hrm.h_cycles", "{arch}.hrm.l_cycles",
    "{arch}.adapters.count", "{arch}.adapters.lora_rank", "{arch}.adapters.token_ids_activate",
    "{arch}.adapters.token_ids_substitute", "{arch}.attention.kv_lora_rank_swa", "{arch}.attention.key_length_mla_swa",
    "{arch}.attention.indexer.types", "{arch}.attention.indexer.key_length", "{arch}.rope.freq_base_swa",
    "{arch}.attention.relative_buckets_count", "{arch}.decoder_block_count",
    "general.architecture", "general.name", "general.file_type", "general.alignment",
    "split.count", "split.no", "split.tensors.count", "tokenizer.ggml.tokens", "tokenizer.ggml.model",
    "tokenizer.ggml.merges",
]

_tensor = st.integers(0, 400)
meta_mutation = st.builds(lambda k, h: ["meta", k, HOSTILE[h][0], HOSTILE[h][1]], st.sampled_from(KEYS),
                          st.integers(0, len(HOSTILE) - 1))
key_mutation = st.builds(lambda kind, k: [kind, k], st.sampled_from(["del", "dup"]), st.sampled_from(KEYS))
name_mutation = st.one_of(
    st.builds(lambda t, p, d: ["digit", t, p, d], _tensor, st.integers(0, 3), st.integers(0, 9)),
    st.builds(lambda t, n: ["rename", t, n], _tensor, st.sampled_from(
        ["", "x" * 64, "blk.00.attn_norm.weight", "blk.-1.attn_norm.weight", "blk.4294967296.attn_norm.weight",
         "blk.x.attn_norm.weight", "blk.1", "token_embd.weight", "blk.٣.attn_norm.weight"])),
)
table_mutation = st.one_of(
    st.builds(lambda t, d, v: ["dim", t, d, v], _tensor, st.integers(0, 4),
              st.sampled_from([0, 1, 3, 31, 33, 64, 65, 4096, 1 << 32, 1 << 40, 1 << 62, (1 << 63) + 5,
                               (1 << 64) - 1, None])),
    st.builds(lambda t, h: ["offset", t, h], _tensor, st.sampled_from(["prev", "+a", "-a", 7, 1 << 40])),
    st.builds(lambda t, ty: ["type", t, ty], _tensor, st.sampled_from([0, 1, 2, 4, 8, 12, 14, 30, 39, 40, 255])),
    st.builds(lambda i, j: ["swap", i, j], _tensor, _tensor),
    st.builds(lambda w, d: ["count", w, d], st.sampled_from(["tensors", "kv"]), st.sampled_from([-2, -1, 1, 3])),
)
byte_mutation = st.one_of(
    st.builds(lambda f: ["cut", f], st.floats(0.0, 0.999)),
    st.builds(lambda f, v: ["byte", f, v], st.floats(0.0, 1.0), st.integers(0, 255)),
)
any_mutation = st.one_of(meta_mutation, key_mutation, name_mutation, table_mutation, byte_mutation)


# --------------------------------------------------------------------------- the three paths


LANES = parse_device_spec("CUDA0=24000")


@dataclass
class Outcome:
    loaded: bool
    message: str = ""
    seconds: float = 0.0
    peak: int = 0
    cli: dict[str, int] = field(default_factory=dict)


def run_core(path: Path) -> Outcome:
    """open_model, then a Session and its estimate: a result or a typed error, never anything else."""
    t0 = time.perf_counter()
    try:
        model = open_model(path)
    except LayerdeckError as exc:
        assert exc.message.strip(), "a typed error without a message"
        return Outcome(False, exc.message, time.perf_counter() - t0)
    # the property every loaded model keeps: blocks add up to its tensor bytes, each tensor in one block
    assert sum(b.nbytes for b in model.blocks) == model.tensor_bytes == sum(t.nbytes for t in model.tensors)
    assert sorted(t.name for b in model.blocks for t in b.tensors) == sorted(t.name for t in model.tensors)
    try:
        session = Session(model, LANES)
        # estimate_for raises what the session's own estimate caught (it also keeps untyped ValueErrors)
        est = session.estimate_for(session.placement)
        assert est.devices, "an estimate without devices"
    except LayerdeckError as exc:
        return Outcome(True, exc.message, time.perf_counter() - t0)
    return Outcome(True, "", time.perf_counter() - t0)


def run_cli(argv: list[str]) -> tuple[int, str, str, float]:
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def _status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


@contextlib.contextmanager
def rss_peak():
    """Yields a list that receives the growth of the process's peak RSS (bytes) over the block (Linux: VmHWM
    reset through /proc/self/clear_refs); stays empty where that cannot be measured. Cheap, unlike tracemalloc,
    so it watches the CLI paths; the core path is measured with tracemalloc."""
    out: list[int] = []
    base = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        base = None
    yield out
    peak = _status_kib("VmHWM")
    if base is not None and peak is not None:
        out.append(max(peak - base, 0) << 10)


def check_input(path: Path) -> Outcome:
    """All paths for one file, within the time and memory budgets; returns what the core said."""
    with watchdog(2 * TIME_BUDGET_S):
        tracemalloc.start()
        try:
            outcome = run_core(path)
            outcome.peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        with rss_peak() as cli_peak:
            for name, argv in (("inspect", ["inspect", str(path)]),
                               ("estimate", ["estimate", "--devices", "CUDA0=24000", "--", "-m", str(path)])):
                code, out, err, seconds = run_cli(argv)
                assert code in (0, 2), (name, code, err)
                assert "Traceback" not in err and "Traceback" not in out, err
                assert seconds <= TIME_BUDGET_S, f"{name} took {seconds:.1f} s"
                if not outcome.loaded:  # the CLI refuses what the core refused, with the same message
                    assert code == 2 and outcome.message.splitlines()[0] in err, (name, err, outcome.message)
                elif name == "inspect":
                    assert code == 0, err
                if code == 2:
                    assert err.startswith("layerdeck: "), err
                outcome.cli[name] = code
    assert outcome.seconds <= TIME_BUDGET_S, f"the core took {outcome.seconds:.1f} s"
    assert outcome.peak <= MEMORY_BUDGET_BYTES, f"peak memory {outcome.peak:,} bytes (core)"
    assert not cli_peak or cli_peak[0] <= MEMORY_BUDGET_BYTES, f"peak RSS grew by {cli_peak[0]:,} bytes (CLI)"
    return outcome


# --------------------------------------------------------------------------- fixtures


class Bases(dict):
    """The unmutated files by architecture; a short repr, so Hypothesis does not print megabytes on failure."""

    def __repr__(self) -> str:
        return f"Bases({', '.join(self)})"


@pytest.fixture(scope="module")
def bases(tiny_models) -> Bases:
    return Bases((arch, Path(tiny_models[arch]).read_bytes()) for arch in FUZZ_ARCHS)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf-fuzz")


def write_input(scratch: Path, bases: dict[str, bytes], arch: str, mutations: list[list]) -> Path:
    p = scratch / f"{arch}.gguf"
    p.write_bytes(apply(bases[arch], mutations))
    return p


def test_editor_round_trips_every_base(bases):
    """The editor writes an unmutated factory file back byte for byte (so a mutation is all that differs)."""
    for arch, data in bases.items():
        assert serialize(parse(data)) == data, arch
        assert apply(data, []) == data, arch


# --------------------------------------------------------------------------- the fuzzers


@given(arch=st.sampled_from(FUZZ_ARCHS), mutations=st.lists(meta_mutation, min_size=1, max_size=2))
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_U32, 1 << 31]])
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_U32, 1 << 20]])
@example(arch="qwen3moe", mutations=[["meta", "{arch}.block_count", T_STR, "4"]])
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_F32, NAN]])
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_F64, INF]])
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_F64, 1e30]])
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_ARR, {"arr": T_U32, "values": [4, 4]}]])
@example(arch="llama", mutations=[["meta", "{arch}.attention.head_count_kv", T_ARR,
                                   {"arr": T_STR, "values": ["a", "b", "c", "d"]}]])
@example(arch="llama", mutations=[["meta", "split.count", T_STR, "3"]])
@example(arch="gpt-oss", mutations=[["meta", "{arch}.block_count", T_U32, 2]])
@example(arch="glm4moe", mutations=[["del", "general.architecture"]])
@example(arch="hrm_text", mutations=[["meta", "{arch}.hrm.layers_per_stack", T_U32, (1 << 31) + 2]])  # wraps to 12
@example(arch="hrm_text", mutations=[["meta", "{arch}.hrm.l_cycles", T_U32, (1 << 32) - 1]])
@example(arch="minimax-01", mutations=[["meta", "{arch}.full_attention_interval", T_U32, 0]])
@example(arch="graniteswitch", mutations=[["meta", "{arch}.adapters.token_ids_substitute", T_ARR,
                                           {"arr": T_I32, "values": [-1, 3, 4]}]])
@example(arch="graniteswitch", mutations=[["meta", "{arch}.adapters.count", T_U32, 1 << 20]])
def test_hostile_metadata(arch, mutations, bases, scratch):
    check_input(write_input(scratch, bases, arch, mutations))


@given(arch=st.sampled_from(FUZZ_ARCHS),
       mutations=st.lists(st.one_of(name_mutation, table_mutation, key_mutation), min_size=1, max_size=3))
@example(arch="llama", mutations=[["digit", 3, 0, 7]])  # blk.0.attn_norm -> blk.7.attn_norm (4 layers)
@example(arch="llama", mutations=[["offset", 2, "prev"]])  # overlapping tensor data
@example(arch="llama", mutations=[["dim", 38, 1, 0]])  # a dimension of 0 elements (the last tensor)
@example(arch="llama", mutations=[["count", "tensors", -1]])
@example(arch="llama", mutations=[["count", "tensors", 1]])
@example(arch="llama", mutations=[["dup", "{arch}.context_length"]])
@example(arch="qwen3moe", mutations=[["rename", 5, "blk.00.attn_norm.weight"]])
def test_structural_mutations(arch, mutations, bases, scratch):
    check_input(write_input(scratch, bases, arch, mutations))


@given(arch=st.sampled_from(FUZZ_ARCHS), mutations=st.lists(any_mutation, min_size=1, max_size=3))
def test_any_mutation(arch, mutations, bases, scratch):
    check_input(write_input(scratch, bases, arch, mutations))


#: Keys of the draft heads (-md) the fuzzer replaces, beside the common ones: what llama_model_dflash /
#: llama_model_eagle3 and common_speculative_impl_draft_dflash read.
HEAD_KEYS = [
    "{arch}.target_layers", "{arch}.block_size", "{arch}.attention.causal", "{arch}.sample_from_anchor",
    "{arch}.has_confidence_head", "{arch}.hyper_connection.count", "{arch}.selector_top_k", "{arch}.selector_rank",
    "{arch}.conv_kernel_size", "{arch}.conv_group_size", "{arch}.logit_scale",
    "{arch}.target_hidden_size", "tokenizer.ggml.mask_token_id", "{arch}.block_count", "{arch}.embedding_length",
    "{arch}.attention.head_count", "{arch}.attention.head_count_kv", "{arch}.feed_forward_length",
    "general.architecture",
    # a DeepSeek-V4 DSpark head's stage keys
    "{arch}.attention.q_lora_rank", "{arch}.attention.output_group_count", "{arch}.attention.output_lora_rank",
    "{arch}.attention.sliding_window", "{arch}.attention.compress_ratios", "{arch}.expert_gating_func",
    "{arch}.expert_count", "{arch}.expert_used_count", "{arch}.hyper_connection.sinkhorn_iterations",
    "{arch}.attention.key_length",
]
head_meta_mutation = st.builds(lambda k, h: ["meta", k, HOSTILE[h][0], HOSTILE[h][1]], st.sampled_from(HEAD_KEYS),
                               st.integers(0, len(HOSTILE) - 1))


def cli_agrees(args: list[str], message: str) -> None:
    """``estimate -- ARGS`` in-process: exit 0 or 2 within the budget, no traceback, and where the core refused
    (``message``), exit 2 with the core's first line."""
    code, out, err, seconds = run_cli(["estimate", "--", *args])
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err + out, err
    assert seconds <= TIME_BUDGET_S, f"estimate took {seconds:.1f} s"
    if message:
        assert code == 2 and message.splitlines()[0] in err, (err, message)


@pytest.fixture(scope="module")
def heads(tmp_path_factory) -> Bases:
    """A tiny llama target and unmutated draft heads for it: DFlash, DSpark (Markov and confidence heads), DFlash2
    (convolutions and selector), EAGLE-3, a DeepSeek-V4 DSpark head."""
    from tests import gguf_factory as gf
    from tests.factory_models.dflash import write_dflash_draft
    from tests.factory_models.eagle3 import write_eagle3_draft

    d = tmp_path_factory.mktemp("heads")
    return Bases(
        target=gf.write_tiny_model("llama", d / "t.gguf").read_bytes(),
        dflash=write_dflash_draft(d / "dflash.gguf").read_bytes(),
        dspark=write_dflash_draft(d / "dspark.gguf", markov_rank=8, d2t=200, own_output=True).read_bytes(),
        dflash2=write_dflash_draft(d / "dflash2.gguf", selector=(4, 16, 8, 4)).read_bytes(),
        eagle3=write_eagle3_draft(d / "eagle3.gguf").read_bytes(),
        dsv4=write_dflash_draft(d / "dsv4.gguf", markov_rank=8, dsv4={}).read_bytes(),
    )


@given(
    head=st.sampled_from(["dflash", "dspark", "dflash2", "eagle3", "dsv4"]),
    mutations=st.lists(st.one_of(head_meta_mutation, head_meta_mutation, any_mutation), min_size=1, max_size=2),
)
@example(head="dflash", mutations=[["meta", "{arch}.target_layers", T_ARR, {"arr": T_U32, "values": []}]])
@example(head="dflash", mutations=[["meta", "{arch}.target_layers", T_ARR, {"arr": T_I32, "fill": -1}]])
@example(head="dspark", mutations=[["meta", "{arch}.block_size", T_U32, 0]])
@example(head="dspark", mutations=[["meta", "{arch}.block_size", T_U32, (1 << 32) - 1]])
@example(head="dflash", mutations=[["meta", "{arch}.hyper_connection.count", T_U32, 4]])
@example(head="dflash2", mutations=[["meta", "{arch}.selector_top_k", T_U32, 1 << 20]])
@example(head="dsv4", mutations=[["meta", "{arch}.attention.output_group_count", T_U32, 0]])
@example(head="dsv4", mutations=[["meta", "{arch}.attention.q_lora_rank", T_U32, (1 << 32) - 1]])
@example(head="dflash2", mutations=[["meta", "{arch}.conv_group_size", T_U32, 0]])
def test_hostile_draft_heads(head, mutations, heads, scratch):
    """A mutated draft head given with -md and its --spec-type, through the core (open, estimate with the
    target) and the CLI: a result or a typed error, within the budgets; what the core refuses the CLI refuses
    with the same message."""
    from app.command.parse import settings_from_args
    from app.memory.estimator import estimate

    target = scratch / "target.gguf"
    target.write_bytes(heads["target"])
    draft = scratch / f"{head}.gguf"
    draft.write_bytes(apply(heads[head], mutations))
    spec = {
        "dflash": "draft-dflash",
        "dspark": "draft-dspark",
        "dflash2": "draft-dflash",
        "eagle3": "draft-eagle3",
        "dsv4": "draft-dspark",
    }[head]
    args = ["-m", str(target), "-md", str(draft), "--spec-type", spec, "-c", "4096"]
    with watchdog(2 * TIME_BUDGET_S):
        t0 = time.perf_counter()
        message = ""
        try:
            est = estimate(open_model(target), [], settings_from_args(args[2:], tool="server"), draft=open_model(draft))
            assert est.devices and est.draft is not None
        except LayerdeckError as exc:
            message = exc.message
            assert message.strip(), "a typed error without a message"
        assert time.perf_counter() - t0 <= TIME_BUDGET_S
        cli_agrees(args, message)


@pytest.mark.parametrize("case", sorted(REGRESSIONS.glob("*.json")), ids=lambda p: p.stem)
def test_regressions(case, bases, scratch):
    doc = json.loads(case.read_text())
    outcome = check_input(write_input(scratch, bases, doc["arch"], doc["mutations"]))
    if "refused_with" in doc:
        assert not outcome.loaded and doc["refused_with"] in outcome.message, outcome.message


# --------------------------------------------------------------------------- llama.cpp agrees


def llama_refuses(llama_bin: Path, path: Path) -> tuple[bool, str]:
    """(refused, reason) from ``llama-fit-params -m PATH`` (a no-allocation load of the model)."""
    reason = ""
    for _ in range(3):  # its log thread sometimes loses the last lines at exit: ask again for the reason
        # errors="replace": llama.cpp echoes mutated names and values, which need not be UTF-8
        r = subprocess.run([str(llama_bin / "llama-fit-params"), "-m", str(path)], capture_output=True, text=True,
                           errors="replace", timeout=60)
        if r.returncode == 0:
            return False, ""
        errors = [ln for ln in (r.stdout + r.stderr).splitlines() if " E " in ln]
        if errors:
            return True, errors[0]
        reason = f"exit status {r.returncode}"
    return True, reason


#: Keys llama.cpp reads for every architecture (llama_model_base::load_hparams, llama-model-loader, gguf.cpp).
#: Other keys it reads only for the architectures that use them; the fuzzer's base files carry exactly those.
GENERIC_KEYS = {
    "{arch}.block_count", "{arch}.context_length", "{arch}.embedding_length", "{arch}.attention.head_count",
    "{arch}.attention.head_count_kv", "{arch}.feed_forward_length", "{arch}.expert_count",
    "{arch}.expert_used_count", "{arch}.nextn_predict_layers", "{arch}.attention.key_length",
    "{arch}.attention.value_length", "{arch}.rope.dimension_count", "general.architecture", "general.name",
    "general.file_type", "general.alignment", "split.count",
}


#: Keys llama.cpp requires for every architecture.
REQUIRED_KEYS = {"{arch}.block_count", "{arch}.context_length", "{arch}.embedding_length", "general.architecture",
                 # llama_vocab::impl::load: the tokenizer, its vocabulary and (for BPE) its merges
                 "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"}
#: Keys that may hold one value per layer (a u32/i32/bool array of block_count values is of the right type).
PER_LAYER_KEYS = {
    "{arch}.attention.head_count", "{arch}.attention.head_count_kv", "{arch}.feed_forward_length",
    "{arch}.expert_used_count", "{arch}.expert_feed_forward_length", "{arch}.attention.sliding_window_pattern",
}


def mirrored(mutation: list, base: bytes) -> bool:
    """Whether Layerdeck decides a mutation's verdict exactly as llama.cpp does.

    Mirrored: every structural rule of gguf.cpp and llama-model-loader, layer counts and layer names (see
    :func:`_digit_is_mirrored`), wrong
    metadata types of the keys llama.cpp reads, missing required keys, and (for the architectures whose
    K/V projections it checks) head counts, and wrong types of architecture-specific keys (refused where
    llama.cpp reads them, ignored where it does not: app/model/llama_keys.py). Not mirrored: llama.cpp's
    per-architecture tables of required keys and tensor shapes, so a type-correct new value of another
    hyperparameter, a deleted optional key, or a tensor moved to another existing layer is outside what this
    test compares.
    """
    kind = mutation[0]
    if kind == "dup":
        return True
    if kind == "digit":
        return _digit_is_mirrored(mutation, base)
    if kind == "del":
        return mutation[1] in REQUIRED_KEYS
    if kind != "meta":
        return True
    key, vtype, value = mutation[1:]
    g = parse(base)
    specific = key.startswith("{arch}.") and key[len("{arch}."):] in llama_keys.KEYS  # read per llama_keys
    if key not in GENERIC_KEYS and not specific and key.replace("{arch}", g.arch) not in {k for k, _, _ in g.kvs}:
        return False
    if key in ("{arch}.block_count", "general.alignment") or key.startswith("split."):
        return True
    if key in ("general.architecture", "general.name"):
        return vtype != T_STR
    if key == "tokenizer.ggml.tokens":  # the vocabulary's types are checked; its length only by the shapes
        return not (vtype == T_ARR and value.get("arr") == T_STR)
    if key == "{arch}.attention.head_count_kv" and vtype == T_U32:
        return True
    if vtype == T_ARR:
        return not (key in PER_LAYER_KEYS and value.get("arr") in (T_U32, T_I32, T_BOOL))
    return vtype != T_U32


def _digit_is_mirrored(mutation: list, base: bytes) -> bool:
    """A flipped digit is mirrored when it makes a duplicate name, a layer past block_count or a number llama.cpp
    never writes; one that moves a tensor to another existing layer (say the router of a MoE layer into a dense
    one) is refused by llama.cpp's per-architecture tensor list, which Layerdeck does not mirror."""
    g = parse(base)
    names = [t[0] for t in g.tensors]
    old = names[mutation[1] % len(names)]
    new = _replace_digit(old, mutation[2], str(mutation[3]))
    if new == old or new in names or not new.startswith("blk."):
        return True
    number = new.split(".")[1]
    return (len(number) > 1 and number[0] == "0") or int(number) >= g.n_layer()


#: Mutations whose verdict Layerdeck mirrors exactly (with :func:`mirrored` for the metadata ones).
mirrored_mutation = st.one_of(
    meta_mutation,
    key_mutation,
    st.builds(lambda t, p, d: ["digit", t, p, d], _tensor, st.integers(0, 3), st.integers(0, 9)),
    st.builds(lambda t, h: ["offset", t, h], _tensor, st.sampled_from(["prev", "+a", "-a", 7])),
    st.builds(lambda w, d: ["count", w, d], st.sampled_from(["tensors", "kv"]), st.sampled_from([-2, -1, 1, 3])),
    st.builds(lambda t, d: ["dim", t, d, 0], _tensor, st.integers(0, 1)),
    st.builds(lambda f: ["cut", f], st.floats(0.0, 0.999)),
)


@pytest.mark.llama
@given(arch=st.sampled_from(FUZZ_ARCHS), mutations=st.lists(mirrored_mutation, min_size=1, max_size=2))
@example(arch="llama", mutations=[["meta", "{arch}.block_count", T_U64, 4]])
@example(arch="llama", mutations=[["dup", "{arch}.context_length"]])
@example(arch="llama", mutations=[["meta", "x.nested", T_ARR, {"arr": T_ARR, "values": [{"arr": T_U32,
                                                                                              "values": [1]}]}]])
@example(arch="llama", mutations=[["dim", 38, 1, 0]])
@example(arch="llama", mutations=[["meta", "{arch}.attention.sliding_window", T_STR, "4"]])  # llama never reads it
@example(arch="glm4moe", mutations=[["count", "tensors", -1]])  # leaves out an optional NextN tensor: loads
@example(arch="glm4moe", mutations=[["count", "tensors", -2]])  # found by the long run: a required one, refused
@example(arch="llama", mutations=[["del", "tokenizer.ggml.model"]])  # llama.cpp: "key not found in model"
@example(arch="qwen3moe", mutations=[["del", "tokenizer.ggml.merges"]])  # a BPE vocabulary without merges
def test_verdict_matches_llama_cpp(arch, mutations, bases, scratch, llama_bin):
    assume(all(mirrored(m, bases[arch]) for m in mutations))
    path = write_input(scratch, bases, arch, mutations)
    outcome = check_input(path)
    refused, reason = llama_refuses(llama_bin, path)
    assert refused == (not outcome.loaded), (mutations, reason, outcome.message)


@pytest.mark.llama
@given(arch=st.sampled_from(FUZZ_ARCHS), mutations=st.lists(any_mutation, min_size=1, max_size=2))
@example(arch="qwen3moe", mutations=[["rename", 3, "blk.0.attn_nrom.weight"]])  # a required tensor missing
@example(arch="llama", mutations=[["dim", 4, 0, 32]])  # a shape llama.cpp's table does not expect
@example(arch="qwen3moe", mutations=[["digit", 12, 0, 1]])  # a tensor moved to another existing layer
@example(arch="llama", mutations=[["del", "{arch}.attention.head_count"]])  # a key llama.cpp requires for llama
def test_with_llama_cpp_the_cli_refuses_exactly_what_it_refuses(arch, mutations, bases, scratch, llama_bin):
    """Every mutation, mirrored or not: with llama.cpp on the machine, ``inspect`` and ``estimate`` refuse a
    file exactly when llama.cpp does (Layerdeck's reader never stricter, llama.cpp's load check covering its
    per-architecture tables), and say llama.cpp's reason."""
    path = write_input(scratch, bases, arch, mutations)
    refused, reason = llama_refuses(llama_bin, path)
    for argv in (["inspect", "--llama-dir", str(llama_bin), str(path)],
                 ["estimate", "--llama-dir", str(llama_bin), "--devices", "CUDA0=24000", "--", "-m", str(path)]):
        with watchdog(2 * TIME_BUDGET_S):
            code, out, err, _ = run_cli(argv)
        assert "Traceback" not in err, err
        if argv[0] == "inspect":
            assert code == (2 if refused else 0), (mutations, reason, err)
        else:  # an estimate may also stop on its settings for a file that loads (e.g. a context too large)
            assert code in (0, 2) and (code == 2 or not refused), (mutations, reason, err)
        if refused and "refuses to load" in err and " E " in reason:  # llama.cpp's first error line, said
            said = reason.split(" E ", 1)[1].split("error loading model: ", 1)[-1].strip()
            assert (said in err.replace("\n", " ") or any(w in said for w in load_check._WRAPPERS)
                    or "lost its own reason" in err), (reason, err)


# --------------------------------------------------------------------------- the GUI open path


@pytest.fixture
def gui_window(qtbot, tmp_path, monkeypatch):
    """A main window with settings in a temporary folder and message boxes recorded instead of shown."""
    from PySide6.QtCore import QCoreApplication, QSettings
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAYERDECK_CONFIG_DIR", str(tmp_path / "config"))
    QCoreApplication.setOrganizationName("LayerdeckTests")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    shown: list[tuple[str, str]] = []

    def warning(parent, title, text, *args, **kwargs):
        shown.append((title, text))
        return QMessageBox.StandardButton.Ok

    monkeypatch.setattr(QMessageBox, "warning", staticmethod(warning))
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    return win, shown


#: A few corrupt files for the window (each was an uncaught exception or a hang before).
GUI_CASES = [
    ("llama", [["digit", 3, 0, 7]], "belongs to layer 7"),
    ("llama", [["meta", "{arch}.block_count", T_U32, 2]], "belongs to layer"),
    ("llama", [["meta", "{arch}.block_count", T_U32, 1 << 31]], "2,147,483,648"),
    ("qwen3moe", [["meta", "{arch}.attention.head_count_kv", T_ARR, {"arr": T_STR, "values": list("abcd")}]],
     "head_count_kv"),
    ("llama", [["del", "general.architecture"]], "general.architecture"),
    ("llama", [["offset", 2, "prev"]], "overlaps"),
]


@pytest.mark.gui
def test_gui_open_keeps_the_old_model(gui_window, bases, scratch, tiny_models, qtbot, tmp_path):
    win, shown = gui_window
    good = Path(tiny_models["llama"])
    assert win.open_path_sync(str(good)) and win.doc.model.path == good
    for i, (arch, mutations, needle) in enumerate(GUI_CASES):
        bad = tmp_path / f"bad{i}.gguf"
        bad.write_bytes(apply(bases[arch], mutations))
        assert win.open_path_sync(str(bad)) is False
        title, text = shown[-1]
        assert len(shown) == i + 1 and title == "Cannot open model" and needle in text, text
        assert win.doc.model.path == good  # the model on screen stays
    fifo = tmp_path / "pipe.gguf"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
        with watchdog(2 * TIME_BUDGET_S):
            assert win.open_path_sync(str(fifo)) is False
        assert "named pipe" in shown[-1][1] and win.doc.model.path == good
    # the background path (the menu, drag and drop) reports the same way
    n = len(shown)
    bad = tmp_path / "bad-bg.gguf"
    bad.write_bytes(apply(bases["llama"], [["digit", 3, 0, 9]]))
    win.open_path(str(bad))
    qtbot.waitUntil(lambda: len(shown) > n, timeout=10000)
    assert "belongs to layer 9" in shown[-1][1] and win.doc.model.path == good


def test_hostile_values_are_json(tmp_path):
    """Regression files hold mutations as JSON: NaN and infinity survive a round trip."""
    doc = {"arch": "llama", "mutations": [["meta", KEYS[0], t, v] for t, v in HOSTILE]}
    back = json.loads(json.dumps(doc))
    assert len(back["mutations"]) == len(HOSTILE)
    assert math.isnan(back["mutations"][3][3]) and back["mutations"][4][3] == INF


#: the projector keys clip.cpp's load_hparams reads and Layerdeck's projector memory depends on
PROJ_KEYS = [
    "clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type", "clip.has_vision_encoder",
    "clip.has_audio_encoder", "clip.vision.image_size", "clip.vision.patch_size", "clip.vision.embedding_length",
    "clip.vision.feed_forward_length", "clip.vision.block_count", "clip.vision.attention.head_count",
    "clip.vision.attention.head_count_kv", "clip.vision.attention.head_dim", "clip.vision.projector.scale_factor",
    "clip.vision.spatial_merge_size", "clip.vision.n_wa_pattern", "clip.audio.num_mel_bins",
    "clip.audio.embedding_length", "clip.audio.feed_forward_length", "clip.audio.block_count",
    "clip.audio.attention.head_count", "clip.audio.attention.head_count_kv", "clip.audio.attention.head_dim",
    "clip.audio.projector.stack_factor", "general.architecture", "clip.vision.feature_layer",
    "clip.vision.image_min_pixels", "clip.vision.image_max_pixels", "clip.vision.wa_layer_indexes",
    "clip.vision.projector.spatial_offsets", "clip.vision.projector.window_side", "clip.vision.projector.query_side",
    "clip.vision.sam.block_count", "clip.vision.sam.head_count", "clip.vision.sam.embedding_length",
    "clip.vision.window_size", "clip.vision.preproc_min_tiles", "clip.vision.preproc_max_tiles",
    "clip.audio.subsampling_factor", "clip.audio.conv_kernel_size", "clip.audio.wa_pattern_mode",
    "clip.audio.rvq.num_quantizers", "clip.audio.rvq.codebook_size", "clip.audio.local_block_count",
    "clip.audio.local_group_size", "clip.audio.chunk_size", "clip.audio.projector.window_size",
    "clip.audio.projector.downsample_rate", "clip.audio.projector.head_count", "clip.audio.feature_layer",
]
proj_meta_mutation = st.builds(lambda k, h: ["meta", k, HOSTILE[h][0], HOSTILE[h][1]], st.sampled_from(PROJ_KEYS),
                               st.integers(0, len(HOSTILE) - 1))


@pytest.fixture(scope="module")
def projectors(tmp_path_factory) -> Bases:
    """A tiny text model and unmutated projectors for it: gemma3, Qwen2.5-VL, LLaVA with feature layers, Kimi
    K2.5, MiniCPM-V, MiniCPM-V 4.6, Granite Vision 4.1, DeepSeek-OCR 1/2 and Gemma 3n vision, Ultravox, Voxtral, Gemma 4, LFM2, Parakeet, MiMo-Audio and Granite Speech audio, and a file with both encoders."""
    from tests import gguf_factory as gf
    from tests.projector_factory import (
        write_deepseekocr_projector,
        write_gemma3_projector,
        write_gemma3nv_projector,
        write_gemma4a_projector,
        write_granite4_vision_projector,
        write_granite_speech_projector,
        write_kimik25_projector,
        write_lfm2a_projector,
        write_llava_projector,
        write_mimo_audio_projector,
        write_minicpmv4_6_projector,
        write_minicpmv_projector,
        write_parakeet_projector,
        write_qwen2vl_projector,
        write_whisper_projector,
    )

    d = tmp_path_factory.mktemp("projectors")
    return Bases(
        target=gf.write_tiny_model("llama", d / "t.gguf").read_bytes(),
        gemma3=write_gemma3_projector(d / "gemma3.gguf").read_bytes(),
        qwen25vl=write_qwen2vl_projector(d / "qwen25vl.gguf").read_bytes(),
        ultravox=write_whisper_projector(d / "ultravox.gguf").read_bytes(),
        voxtral=write_whisper_projector(d / "voxtral.gguf", proj_type="voxtral", stack_factor=4).read_bytes(),
        omni=write_whisper_projector(d / "omni.gguf", proj_type="qwen2a",
                                     vision_from=write_qwen2vl_projector(d / "v.gguf")).read_bytes(),
        gemma4a=write_gemma4a_projector(d / "gemma4a.gguf").read_bytes(),
        lfm2a=write_lfm2a_projector(d / "lfm2a.gguf").read_bytes(),
        llava=write_llava_projector(d / "llava.gguf", feature_layers=(0, 2)).read_bytes(),
        kimik25=write_kimik25_projector(d / "kimik25.gguf").read_bytes(),
        minicpmv=write_minicpmv_projector(d / "minicpmv.gguf", n_embd_text=128).read_bytes(),
        minicpmv4_6=write_minicpmv4_6_projector(d / "minicpmv4_6.gguf").read_bytes(),
        granite4_vision=write_granite4_vision_projector(d / "granite4_vision.gguf").read_bytes(),
        deepseekocr=write_deepseekocr_projector(d / "deepseekocr.gguf").read_bytes(),
        deepseekocr2=write_deepseekocr_projector(d / "deepseekocr2.gguf", version=2).read_bytes(),
        gemma3nv=write_gemma3nv_projector(d / "gemma3nv.gguf").read_bytes(),
        parakeet=write_parakeet_projector(d / "parakeet.gguf").read_bytes(),
        mimo_audio=write_mimo_audio_projector(d / "mimo_audio.gguf").read_bytes(),
        granite_speech=write_granite_speech_projector(d / "granite_speech.gguf", feature_layers=(0, 1)).read_bytes(),
    )


@given(
    proj=st.sampled_from(
        ["gemma3", "qwen25vl", "ultravox", "voxtral", "omni", "gemma4a", "lfm2a", "llava", "kimik25", "minicpmv",
         "minicpmv4_6", "granite4_vision", "parakeet", "mimo_audio", "deepseekocr", "deepseekocr2", "gemma3nv",
         "granite_speech"]
    ),
    mutations=st.lists(st.one_of(proj_meta_mutation, proj_meta_mutation, any_mutation), min_size=1, max_size=2),
)
@example(proj="ultravox", mutations=[["meta", "clip.audio.block_count", T_U32, (1 << 32) - 1]])
@example(proj="gemma3", mutations=[["meta", "clip.vision.block_count", T_U32, 1 << 20]])
@example(proj="ultravox", mutations=[["meta", "clip.audio.num_mel_bins", T_U32, 0]])
@example(proj="voxtral", mutations=[["meta", "clip.audio.projector.stack_factor", T_U32, (1 << 31) - 1]])
@example(proj="ultravox", mutations=[["meta", "clip.audio.embedding_length", T_STR, "4"]])
@example(proj="omni", mutations=[["meta", "clip.audio.attention.head_count", T_U32, 0]])
@example(proj="gemma3", mutations=[["meta", "clip.vision.image_size", T_U32, (1 << 32) - 1]])
@example(proj="minicpmv", mutations=[["meta", "clip.minicpmv_query_num", T_U32, (1 << 32) - 1]])
@example(proj="minicpmv", mutations=[["meta", "clip.minicpmv_version", T_STR, "4"]])
@example(proj="minicpmv4_6", mutations=[["meta", "clip.vision.wa_layer_indexes", T_STR, "1"]])
@example(proj="granite4_vision", mutations=[["meta", "clip.vision.projector.window_side", T_U32, 5]])
@example(proj="deepseekocr", mutations=[["meta", "clip.vision.sam.head_count", T_U32, 0]])
@example(proj="deepseekocr2", mutations=[["meta", "clip.vision.preproc_max_tiles", T_U32, 1]])
@example(proj="gemma3nv", mutations=[["meta", "clip.vision.embedding_length", T_U32, 48]])
@example(proj="parakeet", mutations=[["meta", "clip.audio.conv_kernel_size", T_U32, 0]])
@example(proj="parakeet", mutations=[["meta", "clip.audio.num_mel_bins", T_U32, 80]])
@example(proj="mimo_audio", mutations=[["meta", "clip.audio.local_group_size", T_U32, 1 << 20]])
@example(proj="mimo_audio", mutations=[["meta", "clip.audio.block_count", T_U32, 2]])
@example(proj="granite_speech", mutations=[["meta", "clip.audio.chunk_size", T_U32, 1]])
@example(proj="granite_speech", mutations=[["meta", "clip.audio.projector.downsample_rate", T_U32, 0]])
@example(proj="ultravox", mutations=[["meta", "clip.audio.local_block_count", 9, {"arr": 6, "fill": float("nan")}]])
def test_hostile_projectors(proj, mutations, projectors, scratch):
    """A mutated projector given with --mmproj, through the core (open, its memory on the CPU and on a planned
    GPU) and the CLI: a result or a typed error, within the budgets; what the core refuses the CLI refuses with
    the same message."""
    from app.command.parse import settings_from_args
    from app.memory.estimator import Estimator
    from app.model.projector import open_projector

    target = scratch / "target.gguf"
    target.write_bytes(projectors["target"])
    path = scratch / f"mmproj-{proj}.gguf"
    path.write_bytes(apply(projectors[proj], mutations))
    args = ["-m", str(target), "--mmproj", str(path), "-c", "4096"]
    with watchdog(2 * TIME_BUDGET_S):
        t0 = time.perf_counter()
        message = ""
        try:
            p = open_projector(path)
            est = Estimator(open_model(target), projector=p)
            for lanes in ([], LANES):
                e = est.estimate(lanes, settings_from_args(args[2:], tool="server"))
                assert e.projector is not None and e.projector.weights >= 0
                assert all(v >= 0 for v in e.projector.compute.values())
        except LayerdeckError as exc:
            message = exc.message
            assert message.strip(), "a typed error without a message"
        assert time.perf_counter() - t0 <= TIME_BUDGET_S
        cli_agrees(args, message)
