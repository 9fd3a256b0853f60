"""The projector in the window: chosen in the Projector tab, its block on the lane it runs on, its memory in
that lane's gauge, its flags in the command; where it runs is an undoable edit; a pasted --mmproj opens it."""

from __future__ import annotations

import pytest

from tests import gguf_factory as gf
from tests.projector_factory import write_gemma3_projector

pytestmark = pytest.mark.gui


@pytest.fixture
def files(tmp_path):
    main = gf.write_tiny_model("gemma3", tmp_path / "gemma3.gguf")
    proj = write_gemma3_projector(tmp_path / "mmproj.gguf")
    return main, proj


def _open(window, qtbot, path):
    from ui.main_window import DEMO_DEVICES

    window.devices = list(DEMO_DEVICES)
    assert window.open_path_sync(str(path))
    qtbot.wait(10)


def test_a_projector_goes_on_the_first_gpu_and_moves_with_its_flags(window, qtbot, files):
    main, proj = files
    _open(window, qtbot, main)
    panel = window.projector_panel
    assert panel.set_projector_path(str(proj)) is None
    pm = window.doc.estimate.projector
    assert pm is not None and pm.device == "CUDA0" and pm.weights > 0  # the first GPU-type device
    cuda0 = window.doc.estimate.device("CUDA0")
    assert cuda0.projector == pm.weights + pm.compute.get("CUDA0", 0)
    item = window.board.projector_item
    assert item is not None and "Projector" in item.toolTip() and "projector" in window.board.lanes[
        "CUDA0"].gauge.describe()
    argv = window.doc.session.command().argv
    assert argv[argv.index("--mmproj") + 1] == str(proj)
    # on the CPU: the block, the memory and the flag follow
    panel.where.setCurrentText("CPU (--no-mmproj-offload)")
    pm = window.doc.estimate.projector
    assert pm.device == "CPU" and window.doc.estimate.device("CUDA0").projector == 0
    assert "--no-mmproj-offload" in window.doc.session.command().argv
    panel.where.setCurrentText("CUDA1")
    assert window.doc.estimate.projector.device == "CUDA1"
    argv = window.doc.session.command().argv
    assert argv[argv.index("-mmdev") + 1] == "CUDA1"
    window.doc.undo()
    assert window.doc.estimate.projector.device == "CPU"
    panel.remove.click()
    assert window.doc.estimate.projector is None and window.board.projector_item is None
    window.doc.undo()
    assert window.doc.estimate.projector is not None


def test_a_pasted_mmproj_opens_the_projector_and_a_model_file_is_refused(window, qtbot, files):
    main, proj = files
    _open(window, qtbot, main)
    window.doc.session.import_command(f"llama-server -m {main} --mmproj {proj} -c 2048")
    assert window.doc.estimate.projector is not None
    assert window.doc.session.projector.proj_type == "gemma3"
    err = window.projector_panel.set_projector_path(str(main))  # a text model given as the projector
    assert err and "not a projector file" in err and "not a projector file" in window.projector_panel.info.text()


def test_a_file_with_both_encoders_shows_each_context_and_an_uncounted_audio_encoder_says_so(window, qtbot,
                                                                                              tmp_path):
    from tests.model.gguf_edit import apply
    from tests.projector_factory import write_qwen2vl_projector, write_whisper_projector

    main = gf.write_tiny_model("qwen2vl", tmp_path / "qwen2vl.gguf")
    both = write_whisper_projector(tmp_path / "omni.gguf", proj_type="qwen2a",
                                   vision_from=write_qwen2vl_projector(tmp_path / "v.gguf"))
    _open(window, qtbot, main)
    panel = window.projector_panel
    assert panel.set_projector_path(str(both)) is None
    pm = window.doc.estimate.projector
    assert pm.exact and [(k, t) for k, t, _ in pm.encoders] == [("vision", "qwen2.5vl_merger"), ("audio", "qwen2a")]
    text = panel.info.text()
    assert "vision (qwen2.5vl_merger): CUDA0" in text and "audio (qwen2a): CUDA0" in text
    # an audio encoder Layerdeck does not replay: counted as nothing, and said so in the panel
    other = tmp_path / "other.gguf"
    other.write_bytes(apply(both.read_bytes(), [["meta", "clip.audio.projector_type", 8, "gemma4a"]]))
    assert panel.set_projector_path(str(other)) is None
    text = panel.info.text()
    assert not window.doc.estimate.projector.exact
    assert "audio (gemma4a): not counted" in text and "'gemma4a' audio encoder's compute buffer is not counted" in text
