"""The Qt-free session: every change is one labelled undoable edit, events say what changed, and a plain
script (no Qt importable at all) can open, move, set the context, undo and export."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.lanes import CPU, DeviceKind, Lane
from app.memory.device_adapter import parse_device_spec
from app.model.demo import load_demo
from app.session import Change, Session
from app.units import GiB, MiB
from tests.gguf_factory import write_tiny_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def session() -> Session:
    return Session(load_demo(), parse_device_spec("CUDA0=24576,CUDA1=12288"), host_capacity=64 * GiB, margin=GiB)


def test_a_plain_script_drives_a_session_without_qt(tmp_path):
    model = write_tiny_model("qwen3moe", tmp_path / "q.gguf")
    script = textwrap.dedent(f"""
        import sys
        class NoQt:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph", "ui"):
                    raise ImportError("no Qt here: " + name)
        sys.meta_path.insert(0, NoQt())
        from app.session import Session
        from app.memory.device_adapter import parse_device_spec
        s = Session.open({str(model)!r}, parse_device_spec("CUDA0=64"))
        assert s.move(["1:experts"], "CPU"), "move refused"
        assert s.set_settings(n_ctx=2048)
        ctx_after = s.estimate.shape.n_ctx
        s.undo()
        assert s.placement.settings.n_ctx != 2048 and s.placement.device_of("1:experts") == "CPU"
        s.undo()
        assert s.placement.device_of("1:experts") == "CUDA0"
        s.redo()
        print(ctx_after, s.undo_label)
        print(s.export("bash"))
        assert not [m for m in sys.modules if m.startswith(("PySide6", "pyqtgraph", "ui"))]
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, *rest = out.stdout.splitlines()
    assert first == "2048 Move 1:experts to CPU"
    command = "\n".join(rest)
    assert "-ot" in command and "blk\\.1\\.ffn_" in command and "--fit off" in command


def test_every_edit_is_one_labelled_undo_step(session):
    labels = []
    session.move(["12:experts"], CPU)
    labels.append(session.undo_label)
    session.set_pinned(["3:experts"], True)
    labels.append(session.undo_label)
    session.set_settings(n_ctx=16384)
    labels.append(session.undo_label)
    session.apply_preset("experts")
    labels.append(session.undo_label)
    assert labels == ["Move 12:experts to CPU", "Pin 3:experts", "Set context 16384", "Experts to CPU"]
    assert len(session.history.undo_stack) == 4 and session.dirty
    session.undo()
    assert session.placement.settings.n_ctx == 16384 and session.placement.device_of("20:experts") == "CUDA0"
    session.undo()
    assert session.placement.settings.n_ctx == 8192
    session.undo()
    assert "3:experts" not in session.placement.pinned
    session.undo()
    assert session.placement.device_of("12:experts") != CPU and not session.dirty


def test_settings_steps_merge_and_a_no_op_adds_nothing(session):
    for n in (9216, 10240, 11264):
        session.set_settings(n_ctx=n)
    assert len(session.history.undo_stack) == 1 and session.undo_label == "Set context 11264"
    assert not session.set_settings(n_ctx=11264)
    session.set_settings(n_ctx=8192)  # stepped back to where it started: no edit left
    assert not session.history.undo_stack and not session.dirty
    assert not session.apply_preset("all")  # the placement is already all on the GPUs
    assert not session.history.undo_stack


def test_settings_llama_cpp_refuses_are_not_applied(session):
    """The settings edit passes the same check as a parsed command: nothing changes, the reason is llama.cpp's."""
    from app.command.values import ArgsError

    before = session.placement.settings
    with pytest.raises(ArgsError, match="quantized V cache requires flash_attn"):
        session.set_settings(type_v="q8_0", flash_attn="off")
    assert session.placement.settings == before and not session.history.undo_stack
    assert session.set_settings(type_v="q8_0", flash_attn="on")  # with flash attention it is fine


def test_a_device_edit_is_undone_in_order_not_by_an_earlier_move(session):
    """Regression: the device list changed outside the history, so undoing an older move reverted it."""
    session.move(["12:experts"], CPU)
    bigger = [session.devices[0], Lane("CUDA1", "CUDA1", 16 * GiB, 16 * GiB, DeviceKind.PLANNED)]
    session.set_devices(bigger)
    assert session.undo_label == "Devices changed" and session.capacity("CUDA1") == 16 * GiB
    assert session.placement.device_of("12:experts") == CPU  # the placement still fits: kept
    session.undo()
    assert session.capacity("CUDA1") == 12 * GiB and session.placement.device_of("12:experts") == CPU
    session.redo()
    assert session.capacity("CUDA1") == 16 * GiB


def test_events_name_what_changed(session):
    seen: list[Change] = []
    session.subscribe(lambda ev: seen.append(ev.changes))
    session.set_settings(n_ctx=4096)
    assert seen[-1] & Change.SETTINGS and not seen[-1] & Change.PLACEMENT
    session.move(["5:experts"], CPU)
    assert any(c & Change.PLACEMENT and not c & Change.SETTINGS for c in seen)
    session.mark_saved()
    assert seen[-1] == Change.HISTORY  # nothing to recompute
    session.preview(["6:experts"], CPU)
    assert seen[-1] == Change.PREVIEW and session.preview_state.estimate is not None
    session.preview([], None)
    assert session.preview_state is None


def test_import_is_one_edit_with_its_settings_and_warnings(session):
    warnings = session.import_command("llama-server -m x.gguf -ngl 99 -ts 3,1 -c 4096 -ctk q8_0 --bogus 7")
    assert session.undo_label == "Import command" and len(session.history.undo_stack) == 1
    assert session.placement.settings.n_ctx == 4096 and session.placement.settings.type_k == "q8_0"
    assert any("bogus" in w for w in warnings)
    session.undo()
    assert session.placement.settings.n_ctx == 8192


def test_one_over_capacity_rule_with_the_margin(session):
    assert not session.overflows()
    small = [Lane("CUDA0", "CUDA0", 4 * GiB, 4 * GiB, DeviceKind.PLANNED),
             Lane("CUDA1", "CUDA1", 2 * GiB, 2 * GiB, DeviceKind.PLANNED)]
    session.set_devices(small)
    over = {o.lane: o for o in session.overflows()}
    assert set(over) == {"CUDA0", "CUDA1"}
    o = over["CUDA0"]
    assert o.excess == o.used - (4 * GiB - GiB) and "experts of layers" in o.hint
    session.set_margin(0)
    assert session.overflow_of("CUDA0").excess == o.excess - GiB


def test_plans_round_trip_through_the_session(session, tmp_path):
    session.move(["7:experts"], CPU)
    session.set_settings(n_ctx=12288)
    path = tmp_path / "p.layerdeck.json"
    session.save_plan(path)
    assert not session.dirty and session.plan_path == str(path)
    fresh = Session(session.model, parse_device_spec("CUDA0=24576,CUDA1=12288"))
    fresh.open_plan(path)
    assert fresh.placement.device_of("7:experts") == CPU and fresh.placement.settings.n_ctx == 12288
    assert fresh.undo_label == "Open plan p.layerdeck.json"


def test_refused_moves_say_why(session):
    assert not session.move(["3:attn"], CPU)  # a CPU layer after GPU layers cannot be expressed
    _, why = session.check_move(["3:attn"], CPU)
    assert why and "CPU" in why
    pv = session.preview(["3:attn"], CPU)
    assert pv.estimate is None and pv.reason == why
    _, why = session.check_move(["nope:attn"], CPU)
    assert "not a block" in why


def test_proof_candidates_and_commands(session):
    labels = [label for label, _ in session.proof_candidates()]
    assert labels[:3] == ["current", "auto-fit", "fastest"] and any(x.startswith("--n-cpu-moe") for x in labels)
    cmd = session.command(rpc=[])
    assert cmd.argv[0].endswith("llama-server") and "-ngl" in cmd.argv
    assert "llama-server" in session.export("powershell")


def test_caches_belong_to_the_session_not_the_model(session):
    model = session.model
    assert "index" in vars(model)  # the one typed per-model index
    assert not [k for k in vars(model) if k.startswith("_")]
    session.move(["9:experts"], CPU)
    other = Session(model, session.devices)
    assert other.estimator is not session.estimator
    assert other.estimate.devices[0].total == session.estimate_for(other.placement).devices[0].total
    assert MiB < session.estimate.devices[0].total


def test_a_calibration_file_of_the_wrong_shape_is_a_note_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path))
    (tmp_path / "speed-calibration.json").write_text('["not", "a", "calibration"]', encoding="utf-8")
    s = Session(load_demo(), parse_device_spec("CUDA0=24576"), host_capacity=64 * GiB)
    assert s.decode is not None and s.decode.tokens_per_s > 0
    assert any("calibration" in n for n in s.machine_notes)
    assert any("calibration" in n for n in s.estimate.notes)


def test_a_prepared_import_changes_nothing_until_applied_and_not_after_the_devices_changed(session):
    """prepare_import is the part that may run off the GUI thread: it reads, it never edits."""
    from app.session import ImportChanged

    before = session.placement.snapshot()
    prep = session.prepare_import("llama-server -m x.gguf -ngl 99 -c 16384 -ot exps=CPU")
    assert session.placement.snapshot() == before and not session.history.undo_stack
    res = session.apply_import(prep)
    assert session.placement.settings.n_ctx == 16384 and session.history.undo_label == "Import command"
    assert res.model == "x.gguf"
    prep = session.prepare_import("llama-server -m x.gguf -c 4096")
    session.set_devices(parse_device_spec("CUDA0=24576"))
    with pytest.raises(ImportChanged, match="paste it again"):
        session.apply_import(prep)


def test_a_draft_file_brings_the_spec_type_it_drafts_with(tmp_path):
    """Choosing a draft file sets the --spec-type that drafts with it: Gemma 4's assistant draft-mtp (it is the MTP
    driver's model), a plain model draft-simple; replacing or dropping the file takes its type away, not a type the
    user chose apart."""
    from app.model import open_model
    from tests.factory_models.gemma4_assistant import write_gemma4_assistant
    from tests.gguf_factory import _n_vocab, tiny_hparams

    hp = tiny_hparams("gemma4")
    s = Session(open_model(write_tiny_model("gemma4", tmp_path / "g4.gguf")), parse_device_spec("CUDA0=8192"))
    assistant = open_model(write_gemma4_assistant(tmp_path / "a.gguf", n_embd_tgt=hp["n_embd"], n_vocab=_n_vocab(hp)))
    plain = open_model(write_tiny_model("llama", tmp_path / "plain.gguf"))
    s.set_draft(assistant)
    assert s.placement.settings.spec_types == ["draft-mtp"]
    assert s.estimate.draft is not None and all(d.context == 0 for d in s.estimate.draft.devices)
    argv = s.command().argv
    assert argv[argv.index("--spec-type") + 1] == "draft-mtp"
    s.set_draft(plain)
    assert s.placement.settings.spec_types == ["draft-simple"]
    s.set_draft(None)
    assert s.placement.settings.spec_types == [] and s.placement.settings.draft_model is None
    s.set_settings(spec_types=["draft-mtp"])  # the MTP checkbox (the model's own NextN layers) stays with a file
    s.set_draft(plain)
    assert s.placement.settings.spec_types == ["draft-mtp", "draft-simple"]


def test_undo_goes_back_to_the_draft_and_projector_chosen_before(tmp_path):
    """Each file chosen is an undo step of its own (a slider's drag merges; a file choice does not), and undoing
    back to a draft or projector opened before finds it open again: its blocks and buffers are counted, no note
    says it is not open."""
    from app.model import open_model
    from app.model.projector import open_projector
    from tests.projector_factory import write_gemma3_projector

    s = Session(open_model(write_tiny_model("gemma3", tmp_path / "g3.gguf")), parse_device_spec("CUDA0=8192"))
    a = open_model(write_tiny_model("llama", tmp_path / "a.gguf", n_layer=2))
    b = open_model(write_tiny_model("llama", tmp_path / "b.gguf", n_layer=3))
    s.set_draft(a)
    s.set_draft(b)
    assert s.undo() and s.placement.settings.draft_model == str(tmp_path / "a.gguf")
    assert s.draft_model is a and s.estimate.draft is not None
    assert not [n for n in s.estimate.notes if "is not open" in n]
    assert s.undo() and s.placement.settings.draft_model is None and s.estimate.draft is None
    assert s.redo() and s.redo() and s.draft_model is b
    p1 = open_projector(write_gemma3_projector(tmp_path / "p1.gguf"))
    p2 = open_projector(write_gemma3_projector(tmp_path / "p2.gguf", n_layer=3))
    s.set_projector(p1)
    s.set_projector(p2)
    assert s.undo() and s.projector is p1 and s.estimate.projector is not None


def test_a_preview_leaves_the_export_self_check_to_the_drop(session, monkeypatch):
    """A drag's preview asks whether llama.cpp can express the placement without the export's self-check and
    computes the weight placement once; the drop runs the check. The preview's figures are the drop's."""
    from app.placement import export

    checks: list[int] = []
    real = export._verify
    monkeypatch.setattr(export, "_verify", lambda p, args, m: (checks.append(1), real(p, args, m))[1])
    pv = session.preview(["6:experts"], CPU)
    assert pv.estimate is not None and pv.decode is not None and not checks
    trial, _ = session.check_move(["6:experts"], CPU)
    assert len(checks) == 1  # asked with the check: run on the result the preview kept
    assert pv.decode.tokens_per_s == session.speed_for(trial)[0].tokens_per_s
    session.preview([], None)
    assert session.move(["6:experts"], CPU) and len(checks) == 1  # the same placement: checked already
    assert session.estimate.host.model == pv.estimate.host.model > 0
