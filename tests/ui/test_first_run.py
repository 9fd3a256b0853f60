"""The first-run flow with pytest-qt: no llama.cpp → banner → Download from the local release server → the
installed build is current → a llama-server from it loads a tiny model and answers a prompt.

The release server and the archives (packed from the real test build) are the ones of
tests/llamacpp/test_install.py. "No llama.cpp" is made real: HOME is an empty folder, the data folder
is empty, ``LAYERDECK_LLAMA_CPP_DIR`` is unset and PATH holds no llama-server.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from app.llamacpp import store
from app.llamacpp.binaries import find_tool
from tests.llamacpp.test_install import ReleaseServer, archives, recorded  # noqa: F401 - fixture

SHOTS = os.environ.get("LAYERDECK_SHOTS")  # a folder: the banner's pictures are saved there to look at


@pytest.fixture
def no_llama(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LAYERDECK_LLAMA_CPP_DIR", raising=False)
    monkeypatch.delenv("LAYERDECK_LLAMA_RELEASE_URL", raising=False)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "llama-server").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert shutil.which("llama-server") is None
    return home


@pytest.fixture
def server(archives):  # noqa: F811 - the fixture imported above
    srv = ReleaseServer()
    rec = recorded("b10107.json")
    # every Linux x64 build name gets the real archive, so whatever GPU this machine has, the choice installs
    srv.publish(rec["tag_name"], {n: archives["tar"] if "-bin-ubuntu-" in n and n.endswith("-x64.tar.gz")
                                  else b"not a build\n" for n in rec["assets"]})
    yield srv
    srv.close()


def _window(qtbot, server_url):
    from ui.first_run import attach_first_run
    from ui.main_window import MainWindow

    win = MainWindow(detect_devices=False)
    win.setProperty("ask_on_close", False)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    win.show()
    banner = attach_first_run(win, release_url=server_url)
    return win, banner


def _shot(widget, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(Path(SHOTS) / f"{name}.png"))


def test_first_run_download_then_launch(qtbot, no_llama, server, tiny_models, tmp_path):
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(banner.isVisible, timeout=30000)
    assert win.first_run_toolbar.isVisible()
    assert "llama.cpp was not found" in banner.title.text()
    qtbot.waitUntil(lambda: banner.download_btn.isEnabled() and "b10107" in banner.download_btn.text(), timeout=30000)
    assert banner.choice is not None and banner.choice.asset.name in banner.detail.text()
    assert "Build from source (about" in banner.build_btn.text()
    _shot(win, "first-run-banner")
    assert not (win.settings.value("llama_dir") or "")
    with qtbot.waitSignal(banner.installed, timeout=120000) as sig:
        banner.download_btn.click()
        qtbot.waitUntil(banner.progress_row.isVisible, timeout=5000)
    folder = Path(sig.args[0])
    _shot(win, "first-run-installed")
    assert win.settings.value("llama_dir") == str(folder)
    assert store.current_dir() == folder
    assert "llama.cpp is ready" in banner.title.text()
    tool = find_tool("llama-server", win.settings.value("llama_dir"))
    assert tool.path == folder / "llama-server"
    # then, without leaving the window: open a model, Launch, ask, stop (the Launch panel's own path)
    assert win.open_path_sync(str(tiny_models["llama"]))
    win.doc.set_settings(n_ctx=256, n_parallel=1)
    panel = win.launch
    try:
        assert panel.launch_btn.isEnabled(), panel.launch_btn.toolTip()
        panel.launch_btn.click()
        qtbot.waitUntil(lambda: panel.state_label.text() == "ready", timeout=90000)
        assert panel.server.argv[0] == str(folder / "llama-server")  # the build the banner installed
        panel.prompt.setText("Hello")
        panel.n_predict.setValue(4)
        panel.send_btn.click()
        qtbot.waitUntil(lambda: "generation" in panel.try_speed.text(), timeout=60000)
        assert panel.last_completion is not None and panel.last_completion.timings.predicted_n >= 1
        _shot(win, "first-run-launched")
        panel.stop_btn.click()
        qtbot.waitUntil(lambda: panel.state_label.text() == "stopped", timeout=30000)
    finally:
        panel.shutdown()


def test_first_run_cancel_keeps_everything(qtbot, no_llama, server):
    server.delay = 0.01
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(lambda: banner.download_btn.isEnabled() and banner.choice is not None, timeout=30000)
    banner.download_btn.click()
    qtbot.waitUntil(lambda: banner.bar.value() > 0, timeout=30000)
    _shot(win, "first-run-downloading")
    banner.cancel_btn.click()
    qtbot.waitUntil(lambda: "was cancelled" in banner.detail.text(), timeout=30000)
    _shot(win, "first-run-cancelled")
    assert banner.download_btn.isEnabled() and not banner.progress_row.isVisible()
    assert not (win.settings.value("llama_dir") or "") and store.current_dir() is None
    assert store.installed() == []


def test_first_run_release_not_readable(qtbot, no_llama, server):
    server.fail["/repos/ggml-org/llama.cpp/releases/latest"] = (403, {"X-RateLimit-Remaining": "0"})
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(lambda: "could not be read" in banner.detail.text(), timeout=30000)
    assert "rate limit" in banner.detail.text()
    assert banner.download_btn.text() == "Download (try again)"
    del server.fail["/repos/ggml-org/llama.cpp/releases/latest"]
    banner.download_btn.click()
    qtbot.waitUntil(lambda: banner.choice is not None, timeout=30000)


def test_no_banner_when_llama_cpp_is_there(qtbot, no_llama, server, llama_bin):
    from PySide6.QtCore import QSettings

    QSettings().setValue("llama_dir", str(llama_bin))
    win, banner = _window(qtbot, server.release_url)
    done = []
    banner.check(on_done=done.append)
    qtbot.waitUntil(lambda: len(done) == 1, timeout=30000)
    assert any(b.usable for b in done[0])
    qtbot.wait(300)
    assert not banner.isVisible() and not win.first_run_toolbar.isVisible()
    assert server.requests == []  # nothing is downloaded, or even asked for, without the user's click


def test_choose_folder_from_the_banner(qtbot, no_llama, server, llama_bin):
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(banner.isVisible, timeout=30000)
    with qtbot.waitSignal(banner.installed, timeout=30000):
        banner.use_folder(str(llama_bin))
    assert win.settings.value("llama_dir") == str(llama_bin)
    banner2_errors = []
    with qtbot.waitSignal(banner.installed, timeout=3000, raising=False):
        banner.use_folder(str(no_llama))
        qtbot.waitUntil(lambda: "cannot be used" in banner.detail.text(), timeout=30000)
        banner2_errors.append(banner.detail.text())
    assert win.settings.value("llama_dir") == str(llama_bin)  # the failure changed nothing


def test_settings_lists_builds_with_use_and_remove(qtbot, no_llama, server, llama_bin, archives):  # noqa: F811
    from app.llamacpp import install, releases
    from ui.settings_dialog import SettingsDialog

    rel = releases.fetch_release(server.release_url)
    inst = install.install(releases.choose(rel, releases.Machine("linux", "x64", ()))).installed
    store.set_current(llama_bin)  # the installed one is not current, so it can be removed
    from PySide6.QtCore import QSettings

    s = QSettings()
    s.setValue("llama_dir", str(llama_bin))
    dlg = SettingsDialog(s)
    qtbot.addWidget(dlg)
    dlg.resize(980, 560)
    dlg.show()
    w = dlg.builds
    qtbot.waitUntil(lambda: w.table.rowCount() == 2, timeout=30000)
    _shot(dlg, "settings-builds")
    rows = {w.table.item(r, 5).text(): r for r in range(2)}
    assert w.table.item(rows[str(llama_bin)], 0).text() == "●"
    r_inst = rows[str(inst.bin_dir)]
    assert "cpu" in w.table.item(r_inst, 3).text()
    assert "installed by Layerdeck" in w.table.item(r_inst, 2).text()
    w.table.selectRow(r_inst)
    assert w.use_btn.isEnabled() and w.remove_btn.isEnabled()
    w.table.selectRow(rows[str(llama_bin)])
    assert not w.remove_btn.isEnabled()  # not an install of Layerdeck's, and current
    w.table.selectRow(r_inst)
    w.remove_btn.click()
    qtbot.waitUntil(lambda: w.table.rowCount() == 1, timeout=30000)
    assert store.installed() == []


def test_build_from_source_button(qtbot, no_llama, server, llama_bin, monkeypatch):
    """The button runs app.llamacpp.build.ensure_built; LAYERDECK_LLAMA_CPP_DIR (set after the banner
    appeared) points it at the pinned build the llama_bin fixture made, so this checks the flow, not a
    15-minute compile."""
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(banner.isVisible, timeout=30000)
    qtbot.waitUntil(lambda: bool(banner.choices), timeout=30000)  # the toolchains were looked for
    banner.backend_box.setCurrentIndex(banner.backend_box.findData("cpu"))
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(llama_bin))
    with qtbot.waitSignal(banner.installed, timeout=60000) as sig:
        banner.build_btn.click()
    assert Path(sig.args[0]) == llama_bin and win.settings.value("llama_dir") == str(llama_bin)
    assert store.current_dir() == llama_bin


def test_build_from_source_progress_log_and_cancel(qtbot, no_llama, server, tmp_path, monkeypatch):
    """A real CMake build from the banner (the cache's src/ is the small project of tests/llamacpp/cmake_project.py,
    with a step that sleeps): the bar follows CMake's percentages, "Build log" shows the log, Cancel stops every
    process of the build and says that what was compiled is kept."""
    import psutil

    from app.llamacpp import build
    from tests.llamacpp.cmake_project import write_project

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = build.cache_root() / build.build_key()
    write_project(root / "src", n_files=6, sleep_s=120)
    win, banner = _window(qtbot, server.release_url)
    qtbot.waitUntil(lambda: bool(banner.choices), timeout=30000)
    banner.backend_box.setCurrentIndex(banner.backend_box.findData("cpu"))
    assert banner.build_btn.text() == f"Build from source (about {build.estimate_minutes('cpu')} min, CPU)"
    assert "measured" in banner.build_btn.toolTip()
    try:
        banner.build_btn.click()
        assert banner.cancel_btn.isVisible() and not banner.backend_box.isEnabled()
        qtbot.waitUntil(lambda: banner.bar.maximum() == 1000 and banner.bar.value() > 0, timeout=120000)
        assert banner.log_btn.isVisible() and banner.build_log_path == root / "build.log"
        me = psutil.Process()
        def named(proc) -> str:  # a build's short-lived processes can end between the listing and the question
            try:
                return proc.name()
            except psutil.Error:
                return ""

        qtbot.waitUntil(lambda: any(named(p) == "sleep" for p in me.children(recursive=True)), timeout=120000)
        tree = me.children(recursive=True)
        assert "compile" in banner.status.text()
        _shot(win, "first-run-building")
        banner.log_btn.click()
        dlg = banner.log_dialog
        qtbot.waitUntil(lambda: "Built target parts" in dlg.text.toPlainText(), timeout=10000)
        assert "$ cmake -S" in dlg.text.toPlainText() and dlg.where.text() == str(root / "build.log")
        _shot(dlg, "first-run-build-log")
        dlg.close()
        banner.cancel_btn.click()
        qtbot.waitUntil(lambda: "cancelled" in banner.detail.text(), timeout=30000)
        assert f"kept in {root / 'build'}" in banner.detail.text() and "resumes" in banner.detail.text()
        assert banner.build_btn.isEnabled() and banner.log_btn.isVisible() and not banner.progress_row.isVisible()
        _shot(win, "first-run-build-cancelled")
        qtbot.wait(500)
        alive = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert alive == []
        assert not (win.settings.value("llama_dir") or "") and store.current_dir() is None
    finally:
        # a failure above must not leave the build running past the test: it would finish after the
        # environment is restored and make a pytest folder the user's current llama.cpp
        if banner.cancel_event is not None:
            banner.cancel_event.set()
        from PySide6.QtCore import QThreadPool

        assert QThreadPool.globalInstance().waitForDone(120000), "the cancelled build did not stop"
