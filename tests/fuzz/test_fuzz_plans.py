"""Fuzz the plan-file door: every file handed to Layerdeck as a plan ends in a placement or a PlanError.

Inputs start from a valid saved plan (a tiny MoE model, two planned GPUs, some moves and pins) and are
mutated structurally (keys dropped or added, types changed, values nested deeply, huge numbers, NaN and
Infinity -- non-standard JSON that Python's ``json`` accepts --, unicode, wrong device names, wrong
lengths) and at the byte level (truncation, stray or non-UTF-8 bytes, UTF-16), plus files that are no
plan at all (a folder, a FIFO, an empty, binary or huge file, the model itself, a symlink loop, a
missing path). Each goes through three doors -- the core (:func:`load_plan`, :meth:`Session.open_plan`),
the CLI (``layerdeck export MODEL --plan PATH``, in-process) and, for a sample, the GUI's crash recovery
(:meth:`MainWindow.offer_restore`) -- and must finish within :data:`TIME_BUDGET_S` and
:data:`MEMORY_BUDGET_BYTES`. A plan that loads must export a command that imports back to the same
assignment. Failing inputs found once are kept under ``regressions/plans/`` and replayed here.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main as cli_main
from app.command.formats import parse_command_text
from app.command.parse import parse_llama_args
from app.errors import ExportError
from app.lanes import CPU, Lane
from app.memory.settings import CACHE_TYPES
from app.model import Model, open_model
from app.placement.placement import Placement
from app.placement.plan_file import MAX_PLAN_BYTES, PlanError, load_plan
from app.session import Session
from tests.fuzz.harness import within_budget
from tests.gguf_factory import write_tiny_model

REGRESSIONS = Path(__file__).parent / "regressions" / "plans"
DEVICES = [
    Lane("CUDA0", "CUDA0", 8 << 30, 8 << 30, "planned", 1.0e12),
    Lane("CUDA1", "CUDA1", 4 << 30, 4 << 30, "planned", 0.5e12),
]
#: Settings the exported command carries and the importer reads back unchanged.
ROUND_TRIP_SETTINGS = ("n_ctx", "type_k", "type_v", "n_batch", "n_ubatch", "swa_full", "no_kv_offload")
#: Stands for a deeply nested array in the structure; replaced in the JSON text (json.dumps would recurse).
DEEP = "\x00deep\x00"


@dataclass
class Base:
    dir: Path
    model_path: Path
    model: Model
    plan: dict
    ids: list[str]
    tensor_names: list[str]


@dataclass
class Case:
    """One input: ``kind`` is how it is put on disk (file, dir, fifo, missing, huge, loop, model)."""

    kind: str
    content: bytes = b""
    what: str = ""


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    d = tmp_path_factory.mktemp("plans")
    model_path = write_tiny_model("qwen3moe", d / "tiny-moe.gguf")
    model = open_model(model_path)
    s = Session(model, DEVICES)
    assert s.move(["1:experts"], CPU) and s.move(["2:experts:up"], "CUDA1") and s.move(["3:attn"], "CUDA1")
    s.set_pinned(["1:experts", "2:experts:up"], True)
    s.set_settings(n_ctx=2048, type_k="q8_0", flash_attn="on")
    s.save_plan(d / "base.layerdeck.json")
    plan = json.loads((d / "base.layerdeck.json").read_text())
    assert plan["layers"] == ["CUDA0", "CUDA0", "CUDA0", "CUDA1", "CUDA1"] and len(plan["tensors"]) == 8
    return Base(d, model_path, model, plan, list(model.index.ids), [t.name for t in model.tensors])


# --------------------------------------------------------------------------- strategies

WEIRD: list[Any] = [
    "abc",
    "",
    [],
    {},
    5,
    -5,
    0,
    -1,
    1.5,
    True,
    False,
    None,
    10**30,
    -(10**30),
    2**63,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    "𝔘ñí©ødé",
    "\u0000",
    "\ud800",
    "CPU",
    "CUDA0",
    "GPU7",
    [1, 2],
    ["CPU"],
    {"a": 1},
    "x" * 3000,
    DEEP,
]
BAD_SETTINGS: dict[str, list[Any]] = {
    "n_ctx": [-5, "abc", 2**31, 1.0e9, 0, 4096, 131072],
    "n_parallel": [0, -2, 1, 4, None, "auto"],
    "type_k": ["bogus", "Q8_0", "q4_0", "f16", None],
    "type_v": ["bogus", "q8_0", 8],
    "flash_attn": ["maybe", "on", "off", "auto", True],
    "n_batch": [0, -1, 1, 512, 2**40],
    "n_ubatch": [0, 128, "512"],
    "n_gpu_layers": [-3, -2, 99, "all"],
    "tensor_split": [[3, 1], [float("nan")], "3,1", [-1], None],
    "devices": [["CUDA0"], ["a,b"], "CUDA0", None],
    "split_mode": ["row", "diagonal"],
    "overrides": [[["blk\\.0\\.", "CPU"]], [["(", "CPU"]], [["x"]], "x=CPU", [["a", "b,c"]]],
    "n_threads": [8, -1, -7, 0, None, "8"],
    "load_mode": ["mmap", "tape", None],
    "tool": ["bench", "server", "python"],
    "kv_unified": [True, None, "yes"],
    "swa_full": [True, 1],
    "main_gpu": [1, -1],
}
BAD_NAMES = ["GPU7", "cpu", "", "CUDA0,CUDA1", "CUDA0 ", "Cuda0", "RPC0[127.0.0.1:50052]", "ÇÜDÁ0", "CUDA1\n"]


def _paths(obj: Any, limit: int = 400) -> list[tuple]:
    """Every key/index path in ``obj`` (breadth first, at most ``limit``)."""
    out: list[tuple] = []
    todo: list[tuple[tuple, Any]] = [((), obj)]
    while todo and len(out) < limit:
        path, v = todo.pop(0)
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, child in items:
            out.append((*path, k))
            todo.append(((*path, k), child))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _parent(obj: Any, path: tuple) -> Any:
    return _get(obj, path[:-1])


@st.composite
def mutated_plans(draw, base: Base) -> Case:
    """A structurally mutated copy of the base plan, serialized (maybe damaged at the byte level)."""
    plan = copy.deepcopy(base.plan)
    notes = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(
            st.sampled_from(["drop", "add", "retype", "deep", "huge", "name", "length", "setting", "valid", "pin"])
        )
        paths = _paths(plan)
        if op == "drop" and paths:
            p = draw(st.sampled_from(paths))
            del _parent(plan, p)[p[-1]]
        elif op == "add":
            p = draw(st.sampled_from([()] + [p for p in paths if isinstance(_get(plan, p), dict)]))
            target = _get(plan, p)
            key = draw(st.sampled_from(["bogus", "n_ctx", "name", "layers", "𝔘", ""]) | st.text(max_size=8))
            target[key] = draw(st.sampled_from(WEIRD))
        elif op in ("retype", "deep", "huge") and paths:
            p = draw(st.sampled_from(paths))
            if op == "retype":
                value = draw(st.sampled_from(WEIRD))
            elif op == "deep":
                value = DEEP
            else:
                value = draw(st.sampled_from([10**18, -(10**18), 2**64, 10**4000, float("nan"), float("inf"), 1e308]))
            _parent(plan, p)[p[-1]] = value
        elif op == "name":
            where = draw(st.sampled_from(["layers", "tensors", "devices"]))
            name = draw(st.sampled_from(BAD_NAMES))
            if where == "layers" and isinstance(plan.get("layers"), list) and plan["layers"]:
                plan["layers"][draw(st.integers(0, len(plan["layers"]) - 1))] = name
            elif where == "tensors" and isinstance(plan.get("tensors"), dict):
                plan["tensors"][draw(st.sampled_from(base.tensor_names + ["blk.99.bogus", ""]))] = name
            elif isinstance(plan.get("devices"), list) and plan["devices"] and isinstance(plan["devices"][0], dict):
                plan["devices"][draw(st.integers(0, len(plan["devices"]) - 1))]["name"] = name
        elif op == "length" and isinstance(plan.get("layers"), list):
            how = draw(st.sampled_from(["append", "pop", "empty", "double"]))
            layers = plan["layers"]
            plan["layers"] = {
                "append": layers + ["CPU"],
                "pop": layers[:-1],
                "empty": [],
                "double": layers + layers,
            }[how]
        elif op == "setting" and isinstance(plan.get("settings"), dict):
            key = draw(st.sampled_from(sorted(BAD_SETTINGS)))
            plan["settings"][key] = draw(st.sampled_from(BAD_SETTINGS[key]))
        elif op == "valid" and isinstance(plan.get("layers"), list) and plan["layers"]:
            lanes = [CPU, "CUDA0", "CUDA1"]
            plan["layers"][draw(st.integers(0, len(plan["layers"]) - 1))] = draw(st.sampled_from(lanes))
            if isinstance(plan.get("tensors"), dict):
                plan["tensors"][draw(st.sampled_from(base.tensor_names))] = draw(st.sampled_from(lanes))
        elif op == "pin" and isinstance(plan.get("pinned"), list):
            plan["pinned"].append(draw(st.sampled_from(base.ids + ["99:experts", "1:experts:nope", "", "input"])))
        notes.append(op)
    text = json.dumps(plan, indent=draw(st.sampled_from([None, 1])))
    depth = draw(st.sampled_from([50, 990, 5000, 100_000]))
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    raw = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none"] * 6 + ["truncate", "insert", "non-utf8", "bom", "utf16"]))
    if damage == "truncate":
        raw = raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    elif damage == "insert":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    elif damage == "non-utf8":
        at = draw(st.integers(0, max(0, len(raw) - 1)))
        raw = raw[:at] + b"\xff\xfe" + raw[at + 1 :]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "utf16":
        raw = text.encode("utf-16", "surrogatepass")
    return Case("file", raw, "+".join(notes) + f" / {damage}")


GOOD_SETTINGS: dict[str, st.SearchStrategy] = {
    "n_ctx": st.sampled_from([0, 512, 4096, 32768, 2**31 - 1]),
    "n_parallel": st.sampled_from([-1, 1, 2, 8]),
    "kv_unified": st.sampled_from([None, True, False]),
    "type_k": st.sampled_from(CACHE_TYPES),
    "type_v": st.sampled_from(CACHE_TYPES),
    "flash_attn": st.sampled_from(["on", "off", "auto"]),
    "n_batch": st.sampled_from([1, 256, 2048, 8192]),
    "n_ubatch": st.sampled_from([1, 128, 512, 4096]),
    "swa_full": st.booleans(),
    "no_kv_offload": st.booleans(),
    "n_threads": st.sampled_from([None, -1, 1, 16]),
    "load_mode": st.sampled_from([None, "mmap", "none", "mlock"]),
}


@st.composite
def valid_plans(draw, base: Base) -> Case:
    """The base plan with valid edits only: layer runs, tensor moves, pins and settings llama.cpp accepts."""
    plan = copy.deepcopy(base.plan)
    n = len(plan["layers"])
    order = draw(st.permutations(["CUDA0", "CUDA1"]))
    cpu = draw(st.integers(0, n))
    split = draw(st.integers(cpu, n))
    plan["layers"] = [CPU] * cpu + [order[0]] * (split - cpu) + [order[1]] * (n - split)
    if draw(st.booleans()):  # now and then a layer out of order: llama.cpp cannot express it
        plan["layers"][draw(st.integers(0, n - 1))] = draw(st.sampled_from([CPU, "CUDA0", "CUDA1"]))
    loaded = [
        t for t, dev in zip(base.tensor_names, Placement(base.model, [], [CPU] * n, []).default_tensor_devices()) if dev
    ]
    moves = draw(st.dictionaries(st.sampled_from(loaded), st.sampled_from([CPU, "CUDA0", "CUDA1"]), max_size=12))
    plan["tensors"] = moves if draw(st.booleans()) else {**plan["tensors"], **moves}
    plan["pinned"] = draw(st.lists(st.sampled_from(base.ids), max_size=6, unique=True))
    for key in draw(st.lists(st.sampled_from(sorted(GOOD_SETTINGS)), max_size=5, unique=True)):
        plan["settings"][key] = draw(GOOD_SETTINGS[key])
    for dev in plan["devices"]:
        dev["free"] = dev["total"] = draw(st.sampled_from([0, 1 << 30, 80 << 30]))
    return Case("file", json.dumps(plan).encode(), "valid edits")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def non_plans() -> st.SearchStrategy[Case]:
    """Files that are no plan at all."""
    specials = st.sampled_from(
        ["dir", "missing", "huge", "loop", "model", "empty"] + (["fifo"] if hasattr(os, "mkfifo") else [])
    )
    return st.one_of(
        specials.map(lambda k: Case(k, what=k)),
        st.binary(max_size=200).map(lambda b: Case("file", b, "binary")),
        _json_values.map(lambda v: Case("file", json.dumps(v).encode(), "other JSON")),
        _json_values.map(
            lambda v: Case("file", json.dumps({"format": "layerdeck-plan", "version": v}).encode(), "version")
        ),
    )


def cases(base: Base) -> st.SearchStrategy[Case]:
    return st.one_of(mutated_plans(base), mutated_plans(base), valid_plans(base), non_plans())


def materialize(case: Case, path: Path, base: Base) -> Path:
    """Put ``case`` on disk at ``path`` (nothing there yet); the path to hand over as the plan."""
    if case.kind == "file" or case.kind == "empty":
        path.write_bytes(case.content)
    elif case.kind == "dir":
        path.mkdir()
        (path / "inside.json").write_text("{}")
    elif case.kind == "fifo":
        os.mkfifo(path)
    elif case.kind == "huge":
        with open(path, "wb") as f:  # sparse where the file system allows; never read
            f.truncate(MAX_PLAN_BYTES * 16)
    elif case.kind == "loop":
        os.symlink(path, path)
    elif case.kind == "model":
        return base.model_path
    return path  # "missing": nothing there


# --------------------------------------------------------------------------- the doors


def reimported(base: Base, argv: list[str], devices: list[Lane]) -> Placement:
    parsed = parse_llama_args(argv)
    q = Placement.from_settings(base.model, devices, parsed.settings)
    q.settings = parsed.settings
    return q


def through_core(base: Base, path: Path) -> Placement | PlanError:
    """load_plan and Session.open_plan agree; a loaded plan exports a command that imports back the same."""
    with within_budget("load_plan"):
        try:
            p: Placement | PlanError = load_plan(path, base.model)
        except PlanError as exc:
            p = exc
    s = Session(base.model, DEVICES)
    before = s.placement.snapshot()
    with within_budget("Session.open_plan"):
        try:
            s.open_plan(path)
        except PlanError as exc:
            assert isinstance(p, PlanError) and str(exc) == str(p)
            assert s.placement.snapshot() == before and not s.dirty  # a refused plan changes nothing
            return p
    assert isinstance(p, Placement), p
    assert s.placement.snapshot() == p.snapshot()
    with within_budget("export"):
        try:
            cmd = s.command()
        except ExportError:
            return p  # a placement llama.cpp cannot express: explained, not exported
    q = reimported(base, cmd.argv, s.devices)
    assert q.layer_device == p.layer_device
    assert q.tensor_device == p.tensor_device
    for key in ROUND_TRIP_SETTINGS:
        assert getattr(q.settings, key) == getattr(p.settings, key), key
    return p


def through_cli(base: Base, path: Path, core: Placement | PlanError) -> None:
    out, err = io.StringIO(), io.StringIO()
    with within_budget("layerdeck export"), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["export", str(base.model_path), "--plan", str(path)])
    assert "Traceback" not in err.getvalue()
    if isinstance(core, PlanError):
        assert rc == 2 and err.getvalue() == f"layerdeck: {core}\n"
    else:
        assert rc in (0, 2), rc
        if rc == 0:
            env, argv = parse_command_text(out.getvalue(), "bash")
            assert not env
            q = reimported(base, argv, core.devices)
            assert q.tensor_device == core.tensor_device and q.layer_device == core.layer_device
        else:
            assert err.getvalue().startswith("layerdeck: ") and err.getvalue().count("\n") == 1


def check_case(base: Base, case: Case, where: Path) -> Placement | PlanError:
    path = materialize(case, where / "plan.layerdeck.json", base)
    core = through_core(base, path)
    through_cli(base, path, core)
    return core


@given(data=st.data())
def test_every_plan_file_ends_in_a_placement_or_a_plan_error(base, data, tmp_path_factory):
    case = data.draw(cases(base))
    result = check_case(base, case, tmp_path_factory.mktemp("case"))
    assert isinstance(result, (Placement, PlanError))


def _regressions() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.json")) if REGRESSIONS.is_dir() else []


def regression_case(entry: dict, base: Base) -> Case:
    """A kept input: ``kind`` as in :class:`Case`; the file holds ``text`` (default ``@BASE@``), where
    ``@BASE@`` is the base plan with ``set`` (``[[key, ...], value]`` pairs) applied and ``"@DEEP@"`` an
    array nested 100,000 deep."""
    plan = copy.deepcopy(base.plan)
    for keys, value in entry.get("set", []):
        _parent(plan, tuple(keys))[keys[-1]] = value
    text = entry.get("text", "@BASE@").replace("@BASE@", json.dumps(plan))
    text = text.replace('"@DEEP@"', "[" * 100_000 + "]" * 100_000)
    return Case(entry["kind"], text.encode("utf-8", "surrogatepass"), entry["what"])


@pytest.mark.parametrize("path", _regressions(), ids=lambda p: p.stem)
def test_regression(base, path, tmp_path):
    """Inputs that crashed, hung, ran out of memory or were accepted wrongly before; ``expect`` is the outcome
    now: ``placement``, or the words the PlanError must contain."""
    entry = json.loads(path.read_text(encoding="utf-8"))
    if entry["kind"] == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    result = check_case(base, regression_case(entry, base), tmp_path)
    if entry["expect"] == "placement":
        assert isinstance(result, Placement)
    else:
        assert isinstance(result, PlanError), result
        assert entry["expect"] in str(result), str(result)


def test_cases_cover_both_outcomes(base, tmp_path):
    """The base plan loads, and the strategy's building blocks really reach both outcomes."""
    (tmp_path / "a").mkdir()
    ok = check_case(base, Case("file", json.dumps(base.plan).encode()), tmp_path / "a")
    assert isinstance(ok, Placement) and ok.pinned == {"1:experts", "2:experts:up"}
    assert ok.layer_device == ["CUDA0", "CUDA0", "CUDA0", "CUDA1", "CUDA1"]
    (tmp_path / "b").mkdir()
    bad = check_case(base, Case("file", json.dumps(base.plan).encode()[:-3]), tmp_path / "b")
    assert isinstance(bad, PlanError) and "not valid JSON" in str(bad)


# --------------------------------------------------------------------------- the GUI's crash recovery


@pytest.mark.gui
@settings(max_examples=max(10, settings.default.max_examples // 5))
@given(data=st.data())
def test_gui_restore_keeps_every_autosave_it_cannot_offer(base, data, qtbot, tmp_path_factory, monkeypatch):
    from PySide6.QtCore import QCoreApplication, QSettings
    from PySide6.QtWidgets import QMessageBox

    from ui.main_window import MainWindow

    root = tmp_path_factory.mktemp("gui")
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("LAYERDECK_CONFIG_DIR", str(root / "config"))
    QCoreApplication.setOrganizationName("LayerdeckTests")
    QCoreApplication.setApplicationName("Layerdeck")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(root / "settings"))
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda _p, title, text, *a, **k: shown.append(text)))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.StandardButton.Yes))
    case = data.draw(st.one_of(mutated_plans(base), non_plans().filter(lambda c: c.kind not in ("missing", "model"))))
    (root / "data").mkdir()
    autosave = MainWindow.autosave_path()
    assert autosave.parent == root / "data"
    materialize(case, autosave, base)
    core: Placement | None = None
    with contextlib.suppress(PlanError):
        core = load_plan(autosave, base.model)
    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.devices = list(DEVICES)
    with within_budget("offer_restore", native_threads=True):  # the window's jobs run on Qt's pool
        restored = win.offer_restore()
    if restored:
        assert core is not None and win.doc.placement.snapshot() == core.snapshot()
        assert not shown and autosave.exists()
        return
    kept = [p for p in (root / "data").iterdir() if p.name != autosave.name]
    assert not (autosave.exists() or autosave.is_symlink()), "the autosave stays where the next start finds it"
    assert len(kept) == 1 and kept[0].name in shown[-1]  # said so (after the reader's own message, if any)
    if case.kind == "file":
        assert kept[0].read_bytes() == case.content  # set aside, byte for byte: never deleted
