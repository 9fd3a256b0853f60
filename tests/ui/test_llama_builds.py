"""The Settings list of llama.cpp builds: its "Build from source" row (backend, estimate, what is missing, log)."""

from __future__ import annotations

import os
from pathlib import Path

from app.llamacpp import build


def _widget(qtbot):
    from ui.llama_builds import LlamaBuildsWidget

    used = []
    w = LlamaBuildsWidget(lambda: "", used.append)
    qtbot.addWidget(w)
    w.resize(1100, 340)
    w.show()
    qtbot.waitUntil(lambda: bool(w.choices), timeout=60000)
    return w, used


def test_backends_offered_with_what_is_missing(qtbot, tmp_path, monkeypatch):
    # a PATH without ROCm, so the ROCm choice is one that cannot be built, whatever this machine has
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not (Path(p) / "hipcc").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    monkeypatch.setattr(build, "_which", lambda name, extra=None: None if name in ("hipcc", "hipconfig") else
                        (Path(p) if (p := __import__("shutil").which(name)) else None))
    w, _ = _widget(qtbot)
    backends = [w.backend_box.itemData(i) for i in range(w.backend_box.count())]
    assert backends[:4] == ["cpu", "vulkan", "cuda", "rocm"]
    w.backend_box.setCurrentIndex(backends.index("cpu"))
    assert w.build_btn.isEnabled()
    assert w.build_note.text() == f"CPU build from source: {build.estimate_text('cpu')}."
    w.backend_box.setCurrentIndex(backends.index("rocm"))
    assert w.backend_box.currentText() == "ROCm (cannot build here)"
    assert not w.build_btn.isEnabled()
    assert "needs AMD's hipcc and hipconfig" in w.build_note.text() and "Install ROCm" in w.build_note.text()
    shots = os.environ.get("LAYERDECK_SHOTS")
    if shots:
        w.grab().save(str(Path(shots) / "settings-build-rocm-missing.png"))


def test_log_button_opens_the_log(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    w, _ = _widget(qtbot)
    w.backend_box.setCurrentIndex(w.backend_box.findData("cpu"))
    log = build.cache_root() / build.build_key() / "build.log"
    w.log_btn.click()
    assert "No build log yet" in w.log_dialog.text.toPlainText() and str(log) in w.log_dialog.text.toPlainText()
    log.parent.mkdir(parents=True)
    log.write_text("$ cmake --build x\n[ 42%] Building CXX object y.o\n")
    qtbot.waitUntil(lambda: "[ 42%] Building" in w.log_dialog.text.toPlainText(), timeout=5000)  # followed
