"""Plan files: the schema, refused files (folders, FIFOs, huge files, deep JSON) and what reaches a placement."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from app.cli import main as cli_main
from app.command import values
from app.lanes import CPU, Lane
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.placement import plan_file
from app.placement.plan_file import (
    MAX_PLAN_BYTES,
    PlanError,
    PlanMismatch,
    PlanSaveError,
    check_plan,
    load_plan,
    read_plan,
    save_plan,
    to_dict,
)
from app.placement.presets import all_on_gpus
from app.session import Session
from app.units import fmt_bytes
from tests.gguf_factory import write_sparse_model, write_tiny_model

DEVICES = [
    Lane("CUDA0", "CUDA0", 8 << 30, 8 << 30, "planned", 1.0e12),
    Lane("CUDA1", "CUDA1", 4 << 30, 4 << 30, "planned", 0.5e12),
]
TAIL = ". Correct it in the plan file, or open the model and save the plan again."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny MoE model and a plan for it on two planned GPUs, with moves and pins."""
    d = tmp_path_factory.mktemp("plan")
    path = write_tiny_model("qwen3moe", d / "tiny.gguf")
    model = open_model(path)
    s = Session(model, DEVICES)
    s.move(["1:experts"], CPU)
    s.move(["3:attn"], "CUDA1")
    s.set_pinned(["1:experts"], True)
    s.save_plan(d / "base.layerdeck.json")
    return model, json.loads((d / "base.layerdeck.json").read_text())


def write(tmp_path: Path, data, name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def mutated(plan: dict, *edits) -> dict:
    out = copy.deepcopy(plan)
    for keys, value in edits:
        target = out
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return out


# --------------------------------------------------------------------------- wrong types and values


WRONG = [
    ((("model",), "abc"), "model", 'model: "abc" is not an object'),
    ((("settings",), []), "settings", "settings: an empty list is not an object"),
    ((("layers",), 5), "layers", "layers: 5 is not a list"),
    ((("pinned",), 5), "pinned", "pinned: 5 is not a list"),
    (
        (("devices",), [{"bogus": 1}]),
        "devices[0].bogus",
        "devices[0].bogus: not a device field (name, buft, free, total, kind, bandwidth, endpoint, max_tensor_bytes, "
        "refused_ops, alignment, max_buffer, host_alignment, host_max_buffer)",
    ),
    (
        (("devices", 0, "bandwidth"), float("nan")),
        "devices[0].bandwidth",
        "devices[0].bandwidth: NaN is not a bandwidth in bytes per second (0 or more)",
    ),
    ((("devices", 1, "name"), "CUDA0"), "devices[1].name", 'devices[1].name: "CUDA0" is listed twice'),
    ((("devices", 0, "name"), "CPU"), "devices[0].name", 'devices[0].name: "CPU" is the host'),
    (
        (("devices", 0, "name"), "CUDA0,CUDA1"),
        "devices[0].name",
        'devices[0].name: "CUDA0,CUDA1" is not a llama.cpp device name (letters, digits and . _ : - [ ] @ %)',
    ),
    ((("settings", "n_ctx"), -5), "settings.n_ctx", "settings.n_ctx: -5 is not a context size (0 or more)"),
    ((("settings", "n_ctx"), "abc"), "settings.n_ctx", 'settings.n_ctx: "abc" is not a context size (0 or more)'),
    ((("settings", "n_ctx"), 2**31), "settings.n_ctx", "settings.n_ctx: 2147483648 is not a context size (0 or more)"),
    ((("settings", "n_ctx"), True), "settings.n_ctx", "settings.n_ctx: true is not a context size (0 or more)"),
    (
        (("settings", "type_k"), "bogus"),
        "settings.type_k",
        'settings.type_k: "bogus" is not a KV cache type (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)',
    ),
    ((("settings", "n_batch"), 0), "settings.n_batch", "settings.n_batch: 0 is not a batch size (1 or more)"),
    (
        (("settings", "n_parallel"), 0),
        "settings.n_parallel",
        "settings.n_parallel: 0 is not a number of slots (-1 for auto, or 1 or more)",
    ),
    (
        (("settings", "flash_attn"), "maybe"),
        "settings.flash_attn",
        'settings.flash_attn: "maybe" is not a flash-attention mode (on, off, auto)',
    ),
    (
        (("settings", "overrides"), [["(", "CPU"]]),
        "settings.overrides[0][0]",
        'settings.overrides[0][0]: "(" is not a regular expression',
    ),
    (
        (("layers", 0), "GPU7"),
        "layers[0]",
        'layers[0]: "GPU7" is not CPU or one of the plan\'s devices (CPU, CUDA0, CUDA1)',
    ),
    (
        (("tensors", "blk.0.attn_q.weight"), "CUDA9"),
        'tensors["blk.0.attn_q.weight"]',
        'tensors["blk.0.attn_q.weight"]: "CUDA9" is not CPU or one of the plan\'s devices (CPU, CUDA0, CUDA1)',
    ),
    ((("version",), "1"), "version", 'version: "1" is not a plan version (a whole number, 1 or more)'),
    ((("model", "path"), None), "model.path", "model.path: null is not the model's file path"),
]


@pytest.mark.parametrize("edit,where,message", WRONG, ids=[w for _, w, _ in WRONG])
def test_wrong_types_and_values_name_the_field(tiny, tmp_path, edit, where, message):
    model, plan = tiny
    path = write(tmp_path, mutated(plan, edit))
    with pytest.raises(PlanError) as info:
        load_plan(path, model)
    assert str(info.value) == f"{path}: {message}{TAIL}"
    assert info.value.where == where


MODEL_CHECKS = [
    (
        lambda p: p["layers"].append("CPU"),
        "layers",
        "layers: 6 entries, but this model has 4 layers and the output layer (5 entries)",
    ),
    (
        lambda p: p["pinned"].append("9:experts"),
        "pinned[1]",
        'pinned[1]: "9:experts" is not a block or part of this model (such as 3:experts)',
    ),
    (
        lambda p: p["tensors"].update({"blk.9.attn_q.weight": "CPU"}),
        'tensors["blk.9.attn_q.weight"]',
        'tensors["blk.9.attn_q.weight"]: this model has no tensor of that name',
    ),
]


@pytest.mark.parametrize("edit,where,message", MODEL_CHECKS, ids=[w for _, w, _ in MODEL_CHECKS])
def test_what_must_match_the_model(tiny, tmp_path, edit, where, message):
    model, plan = tiny
    plan = copy.deepcopy(plan)
    edit(plan)
    path = write(tmp_path, plan)
    read_plan(path)  # fine on its own: only the model says it is wrong
    with pytest.raises(PlanError) as info:
        load_plan(path, model)
    assert str(info.value) == f"{path}: {message}{TAIL}" and info.value.where == where


def test_the_base_plan_loads_and_matches(tiny, tmp_path):
    model, plan = tiny
    check_plan(plan)
    p = load_plan(write(tmp_path, plan), model)
    assert p.layer_device == ["CUDA0", "CUDA0", "CUDA0", "CUDA1", "CUDA1"] and p.pinned == {"1:experts"}
    assert [d.name for d in p.devices] == ["CUDA0", "CUDA1"] and to_dict(p) == plan


def test_a_devices_refused_ops_survive_the_plan(tiny, tmp_path):
    """A Vulkan lane that refuses DSV4_HC_COMB (lavapipe's 8-lane subgroups) keeps it through save and load; a
    value that is not a list of ggml op names is refused with where it is."""
    model, plan = tiny
    plan = copy.deepcopy(plan)
    plan["devices"][0]["refused_ops"] = ["DSV4_HC_COMB"]
    p = load_plan(write(tmp_path, plan), model)
    assert p.devices[0].refused_ops == ("DSV4_HC_COMB",) and p.devices[1].refused_ops == ()
    assert to_dict(p) == plan
    for bad in ("DSV4_HC_COMB", ["rm -rf /"], [1], ["X"] * 65):
        plan["devices"][0]["refused_ops"] = bad
        with pytest.raises(PlanError, match=r"devices\[0\]\.refused_ops: .* is not a list of ggml op names"):
            load_plan(write(tmp_path, plan), model)


def test_unknown_settings_are_ignored_and_missing_ones_default(tiny, tmp_path):
    model, plan = tiny
    plan = copy.deepcopy(plan)
    plan["settings"] = {"n_ctx": 1024, "from_the_future": [1]}
    p = load_plan(write(tmp_path, plan), model)
    assert p.settings == LlamaSettings(n_ctx=1024)


def test_another_models_plan_is_a_mismatch(tiny, tmp_path):
    model, plan = tiny
    other = open_model(write_tiny_model("llama", tmp_path / "other.gguf"))
    path = write(tmp_path, plan)
    with pytest.raises(PlanMismatch, match="its tensors differ") as info:
        load_plan(path, other)
    assert str(info.value).startswith(f"{path}: this plan was made for tiny.gguf (qwen3moe, 51 tensors, 0.0 GiB)")


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "{not json",
            "is not a Layerdeck plan (not valid JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)).",
        ),
        ("[" * 100_000 + "]" * 100_000, "is not a Layerdeck plan (its JSON is nested far too deeply)."),
        ("", "is not a Layerdeck plan (not valid JSON: Expecting value: line 1 column 1 (char 0))."),
        (
            '{"format": "layerdeck-plan", "version": 99}',
            ": this plan was saved by a newer Layerdeck (plan version 99; this one reads up to 1): update Layerdeck.",
        ),
        (
            "[1, 2]",
            ': not a Layerdeck plan (it has no "format": "layerdeck-plan"); choose a file that Save plan wrote.',
        ),
    ],
    ids=["truncated", "deep", "empty", "newer", "list"],
)
def test_files_that_are_no_plan(tiny, tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(PlanError) as info:
        read_plan(path)
    sep = "" if message.startswith(":") else " "
    assert str(info.value) == f"{path}{sep}{message}"


def test_non_utf8_and_digits_beyond_pythons_limit(tmp_path):
    (tmp_path / "bin").write_bytes(b"\xff\xfe{}")
    with pytest.raises(PlanError, match=r"not text: a plan is UTF-8 JSON"):
        read_plan(tmp_path / "bin")
    (tmp_path / "digits").write_text('{"format": "layerdeck-plan", "version": ' + "9" * 5000 + "}")
    with pytest.raises(PlanError, match=r"not valid JSON: Exceeds the limit \(4300 digits\)"):
        read_plan(tmp_path / "digits")


def test_a_folder_a_missing_file_and_a_symlink_loop(tmp_path):
    with pytest.raises(PlanError) as info:
        read_plan(tmp_path)
    assert str(info.value) == f"{tmp_path} is a folder, not a plan: choose the .layerdeck.json file."
    with pytest.raises(PlanError) as info:
        read_plan(tmp_path / "nope.json")
    assert str(info.value) == f"{tmp_path / 'nope.json'} does not exist."
    if hasattr(os, "symlink"):
        loop = tmp_path / "loop.json"
        os.symlink(loop, loop)
        with pytest.raises(PlanError) as info:
            read_plan(loop)
        assert str(info.value) == (
            f"{loop} cannot be read (Too many levels of symbolic links); check the path and that you may read the file."
        )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def read():
        try:
            read_plan(fifo)
        except PlanError as exc:
            result.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "read_plan blocked on a FIFO"
    assert [str(e) for e in result] == [
        f"{fifo} is not a regular file (a pipe, socket or device), so it is not a plan: choose a .layerdeck.json file."
    ]


@pytest.fixture(scope="module")
def q30(tmp_path_factory):
    return write_sparse_model("qwen3-30b-a3b", tmp_path_factory.mktemp("q30") / "q30.gguf")


def test_a_model_file_given_as_the_plan_is_refused_without_reading_it(q30):
    """``layerdeck export MODEL --plan MODEL``: the old code read all 17 GB and was OOM-killed."""
    size = q30.stat().st_size
    assert size > 10 * 2**30
    message = (
        f"{q30} is {fmt_bytes(size)}; a Layerdeck plan is at most 4.00 MiB, so this is not one "
        "(a model file?). Choose the .layerdeck.json file that Save plan wrote."
    )
    tracemalloc.start()
    try:
        with pytest.raises(PlanError) as info:
            read_plan(q30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == message and peak < 1 << 20
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["export", str(q30), "--plan", str(q30)])
    assert rc == 2 and out.getvalue() == "" and err.getvalue() == f"layerdeck: {message}\n"


def test_plans_of_large_models_fit_the_size_cap(q30, tmp_path):
    """Every tensor overridden and every block pinned on Qwen3-30B (579 tensors): far below MAX_PLAN_BYTES.

    (Qwen3-235B, 1131 tensors, gives 52 KB the same way.)
    """
    model = open_model(q30)
    lanes = [Lane(f"CUDA{i}", f"CUDA{i}", 1 << 40, 1 << 40, "gpu", 1e12) for i in range(8)]
    p = all_on_gpus(model, lanes, LlamaSettings())
    p.tensor_device = ["CUDA7" if d else d for d in p.tensor_device]
    p.pinned = set(model.index.ids)
    save_plan(p, tmp_path / "big.json")
    assert (tmp_path / "big.json").stat().st_size * 100 < MAX_PLAN_BYTES
    assert load_plan(tmp_path / "big.json", model).tensor_device == p.tensor_device


# --------------------------------------------------------------------------- bad values never reach a command


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("n_ctx", "abc", 'settings.n_ctx: "abc" is not a context size (0 or more)'),
        ("n_ctx", -5, "settings.n_ctx: -5 is not a context size (0 or more)"),
        ("type_k", "bogus", 'settings.type_k: "bogus" is not a KV cache type'),
        ("n_batch", 0, "settings.n_batch: 0 is not a batch size (1 or more)"),
        ("n_threads", -7, "settings.n_threads: -7 is not a number of threads"),
    ],
)
def test_bad_values_are_not_exported(tiny, tmp_path, key, value, message):
    model, plan = tiny
    path = write(tmp_path, mutated(plan, (("settings", key), value)))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["export", str(model.path), "--plan", str(path)])
    assert rc == 2 and out.getvalue() == ""
    assert err.getvalue().startswith(f"layerdeck: {path}: {message}") and err.getvalue().endswith(f"{TAIL}\n")


def test_good_values_are_exported(tiny, tmp_path):
    model, plan = tiny
    path = write(tmp_path, mutated(plan, (("settings", "n_ctx"), 8192), (("settings", "type_k"), "q8_0")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli_main(["export", str(model.path), "--plan", str(path)])
    assert rc == 0
    argv = out.getvalue().split()
    assert argv[argv.index("-c") + 1] == "8192" and argv[argv.index("-ctk") + 1] == "q8_0"


def test_choices_match_the_llama_cpp_converters():
    assert set(plan_file.SPLIT_MODES) == values.split_mode.choices
    assert set(plan_file.LOAD_MODES) == values.load_mode.choices
    assert {values.on_off_auto(v, "-fa") for v in plan_file.FLASH_ATTN} == set(plan_file.FLASH_ATTN)


# --------------------------------------------------------------------------- saving


def test_the_model_path_is_stored_absolute(tmp_path, monkeypatch):
    write_tiny_model("qwen3moe", tmp_path / "rel.gguf")
    monkeypatch.chdir(tmp_path)
    model = open_model("rel.gguf")
    assert model.path == tmp_path / "rel.gguf"
    s = Session(model, DEVICES)
    s.save_plan("p.json")
    monkeypatch.chdir(tmp_path.parent)
    assert json.loads((tmp_path / "p.json").read_text())["model"]["path"] == str(tmp_path / "rel.gguf")


def test_a_failed_save_keeps_the_old_plan_and_no_temporary_file(tiny, tmp_path, monkeypatch):
    model, plan = tiny
    p = load_plan(write(tmp_path, plan), model)
    target = tmp_path / "saved.json"
    target.write_text("old")

    def boom(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="No space left"):
        save_plan(p, target)
    monkeypatch.undo()
    assert target.read_text() == "old" and sorted(x.name for x in tmp_path.iterdir()) == ["plan.json", "saved.json"]
    save_plan(p, target)
    assert json.loads(target.read_text()) == plan
    assert sorted(x.name for x in tmp_path.iterdir()) == ["plan.json", "saved.json"]


def test_a_value_json_cannot_hold_is_refused_at_save(tiny, tmp_path):
    model, plan = tiny
    p = load_plan(write(tmp_path, plan), model)
    p.devices = [Lane("CUDA0", "CUDA0", 1, 1, "planned", float("nan")), p.devices[1]]
    with pytest.raises(PlanSaveError, match="not a finite number"):
        save_plan(p, tmp_path / "nan.json")
    assert not (tmp_path / "nan.json").exists()


def test_settings_llama_cpp_refuses_as_a_whole_are_refused_with_its_reason(tiny, tmp_path):
    """Each value alone is fine; together llama.cpp refuses them (the one check the parser applies too)."""
    model, plan = tiny
    path = write(tmp_path, mutated(plan, (("settings", "type_v"), "q8_0"), (("settings", "flash_attn"), "off")))
    read_plan(path)  # every field is of the right type and range
    with pytest.raises(PlanError) as info:
        load_plan(path, model)
    assert info.value.where == "settings"
    assert "a quantized V cache (q8_0) needs flash attention" in str(info.value)
