"""The draft model in the window: chosen in the Draft model tab, its blocks on the lanes, its memory in the
gauges, its flags in the command, its speed in the panel; undo, removal and a pasted -md."""

from __future__ import annotations

import pytest

from tests import gguf_factory as gf

pytestmark = pytest.mark.gui


@pytest.fixture
def pair(tmp_path):
    """A tiny qwen3 as the model and a tinier llama (same vocabulary) as its draft."""
    main = gf.write_tiny_model("qwen3", tmp_path / "main.gguf", n_layer=6)
    draft = gf.write_tiny_model("llama", tmp_path / "draft.gguf", n_layer=2, n_embd=32, n_ff=64)
    return main, draft


def _open(window, qtbot, path):
    from ui.main_window import DEMO_DEVICES

    window.devices = list(DEMO_DEVICES)  # two planned GPUs, so the draft has lanes to go to
    assert window.open_path_sync(str(path))
    qtbot.wait(10)


def test_choosing_a_draft_counts_it_on_every_lane_and_writes_its_flags(window, qtbot, pair):
    main, draft = pair
    _open(window, qtbot, main)
    before = {d.name: (d.model, d.context) for d in window.doc.estimate.devices}
    assert not window.board.drafts
    panel = window.draft_panel
    assert panel.set_draft_path(str(draft)) is None
    est = window.doc.estimate
    assert est.draft is not None
    # the draft's memory is added where llama.cpp puts it: every device its layers and buffers use
    for d in est.devices:
        mine = next((x for x in est.draft.devices if x.name == d.name), None)
        assert d.draft == (mine.total if mine else 0)
        # the model's own weights and cache stay (its compute grows by the drafted tokens' output rows)
        assert (d.model, d.context) == before.get(d.name, (0, 0))
        assert d.total == d.model + d.context + d.compute + d.output + d.draft
    on = {d.name for d in est.draft.devices if d.model}
    assert on and set(window.board.drafts) == on  # a hatched draft block on each lane holding its weights
    item = window.board.drafts[sorted(on)[0]]
    assert "Draft model draft.gguf" in item.toolTip() and item.label.startswith("draft")
    lane = window.board.lanes["CUDA0"]
    assert "draft model" in lane.gauge.describe()
    argv = window.doc.session.command().argv
    assert argv[argv.index("-md") + 1] == str(draft) and argv[argv.index("--spec-type") + 1] == "draft-simple"
    assert "draft.gguf" in panel.file.text()
    # the speed with the draft is shown, and the acceptance rate changes it
    spec = window.doc.session.speculative
    assert spec is not None and "acceptance rate of 70%" in panel.info.text()
    panel.accept.setValue(0.9)
    assert window.doc.session.speculative.tokens_per_s > spec.tokens_per_s
    assert "acceptance rate of 90%" in panel.info.text()


def test_draft_flags_are_edits_that_undo(window, qtbot, pair):
    main, draft = pair
    _open(window, qtbot, main)
    panel = window.draft_panel
    panel.set_draft_path(str(draft))
    panel.dev.setCurrentText("none (CPU)")
    s = window.doc.placement.settings
    assert s.draft_devices == ["none"]
    est = window.doc.estimate
    assert [d.name for d in est.draft.devices if d.model] == ["CPU"]
    assert set(window.board.drafts) == {"CPU"}
    panel.ctk.setCurrentText("q8_0")
    assert window.doc.placement.settings.draft_type_k == "q8_0"
    argv = window.doc.session.command().argv
    assert argv[argv.index("-devd") + 1] == "none" and argv[argv.index("-ctkd") + 1] == "q8_0"
    window.doc.undo()
    assert window.doc.placement.settings.draft_type_k == "f16"
    # removing the draft takes its blocks and memory away; undo brings them back
    panel.remove.click()
    assert window.doc.estimate.draft is None and not window.board.drafts
    assert "-md" not in window.doc.session.command().argv
    window.doc.undo()
    assert window.doc.estimate.draft is not None and window.board.drafts


def test_a_pasted_command_with_a_draft_opens_it(window, qtbot, pair):
    main, draft = pair
    _open(window, qtbot, main)
    window.doc.session.import_command(f"llama-server -m {main} -md {draft} -ngld 1 --spec-type draft-simple -c 2048")
    est = window.doc.estimate
    assert est.draft is not None and window.doc.session.draft_model.path.name == "draft.gguf"
    assert window.doc.placement.settings.draft_n_gpu_layers == 1
    # a draft that cannot be read is said, and not counted
    window.doc.session.import_command(f"llama-server -m {main} -md {main.parent / 'missing.gguf'} -c 2048")
    est = window.doc.estimate
    assert est.draft is None and any("missing.gguf (-md) is not open" in n for n in est.notes)
    assert "not open" in window.draft_panel.info.text()


def test_an_unreadable_draft_file_is_refused_with_the_reason(window, qtbot, pair, tmp_path):
    main, _ = pair
    _open(window, qtbot, main)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    err = window.draft_panel.set_draft_path(str(bad))
    assert err and "could not be opened" in window.draft_panel.info.text()
    assert window.doc.estimate.draft is None and window.doc.placement.settings.draft_model is None


def test_the_models_own_mtp_layers_draft_from_the_panel(window, qtbot, tmp_path):
    """A model with an MTP block: the panel's check box turns on --spec-type draft-mtp, which counts the NextN
    weights, the snapshots' state and the MTP context's share on the lanes, and writes the flags; a model without
    one leaves the box off and disabled; undo takes it back."""
    path = gf.write_tiny_model("qwen35", tmp_path / "q.gguf", n_nextn=1)
    _open(window, qtbot, path)
    panel = window.draft_panel
    assert panel.mtp.isEnabled() and not panel.mtp.isChecked() and not panel.n_max.isEnabled()
    before = window.doc.estimate
    nextn = [it for it in window.board.blocks.values() if it.info.nextn]
    assert nextn and all(it.color.alpha() < 255 for it in nextn)  # drawn faded: llama.cpp skips them
    panel.mtp.setChecked(True)
    assert all(it.color.alpha() == 255 for it in nextn)  # loaded now (load_mtp)
    assert "loaded for MTP speculation" in window.board._tooltip(nextn[0].info)
    est = window.doc.estimate
    assert est.draft is not None and est.shape.n_rs_seq == 3
    assert sum(d.model for d in est.devices) > sum(d.model for d in before.devices)  # the NextN weights
    assert sum(d.draft for d in est.devices) == sum(d.total for d in est.draft.devices) > 0
    assert panel.n_max.isEnabled() and "MTP draft context needs" in panel.info.text()
    # the speed with MTP drafting (app.speed.speculative.mtp_decode) at the acceptance rate set in the panel
    assert panel.accept.isEnabled() and "with MTP drafting" in panel.info.text()
    panel.accept.setValue(0.9)
    assert "acceptance rate of 90%" in panel.info.text() and window.doc.session.speculative.mtp
    panel.n_max.setValue(5)
    assert window.doc.placement.settings.spec_draft_n_max == 5 and window.doc.estimate.shape.n_rs_seq == 5
    argv = window.doc.session.command().argv
    assert argv[argv.index("--spec-type") + 1] == "draft-mtp" and argv[argv.index("--spec-draft-n-max") + 1] == "5"
    window.doc.undo()
    window.doc.undo()
    qtbot.wait(10)
    assert "draft-mtp" not in window.doc.placement.settings.spec_types and not panel.mtp.isChecked()
    assert window.doc.estimate.draft is None
    plain = gf.write_tiny_model("qwen3", tmp_path / "plain.gguf")
    _open(window, qtbot, plain)
    assert not window.draft_panel.mtp.isEnabled()  # the window builds its panels anew for the new model


def test_gemma4_assistant_drafts_through_draft_mtp_with_no_cache_of_its_own(window, qtbot, tmp_path):
    """Gemma 4's assistant as the draft: the command drafts with it (--spec-type draft-mtp), the MTP checkbox shows
    that type but is not the user's to change, the draft cache types (which it has no cache to use) are off, and the
    panel says it reads the model's caches and gives its speed, saying it was not measured against llama-server."""
    from tests.factory_models.gemma4_assistant import write_gemma4_assistant

    hp = gf.tiny_hparams("gemma4")
    main = gf.write_tiny_model("gemma4", tmp_path / "g4.gguf")
    draft = write_gemma4_assistant(tmp_path / "assistant.gguf", n_embd_tgt=hp["n_embd"], n_vocab=gf._n_vocab(hp))
    _open(window, qtbot, main)
    panel = window.draft_panel
    assert panel.set_draft_path(str(draft)) is None
    argv = window.doc.session.command().argv
    assert argv[argv.index("--spec-type") + 1] == "draft-mtp" and "draft-simple" not in argv
    assert panel.mtp.isChecked() and not panel.mtp.isEnabled()
    assert not panel.ctk.isEnabled() and not panel.ctv.isEnabled() and panel.ngl.isEnabled()
    text = panel.info.text()
    assert "no KV cache of its own" in text and "tok/s" in text and "not measured against llama-server" in text
    assert all(d.context == 0 for d in window.doc.estimate.draft.devices)
    assert window.board.drafts  # its hatched blocks on the lanes holding its weights
    window.doc.session.set_draft(None)
    qtbot.wait(10)
    assert not panel.mtp.isChecked() and "assistant" not in panel.mtp.toolTip()  # no reason left from the file
