"""Regenerate the README screenshots (offscreen Qt): the demo on two planned GPUs + CPU, an over-capacity
state, and the command panel, at 1024x700, 1280x800 and 1920x1080 (light), the demo in the dark theme, and
the server's launch options and chat, a draft model, MTP drafting and a vision projector at 1280x800.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QCoreApplication, QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def settle(app: QApplication, rounds: int = 5) -> None:
    for _ in range(rounds):
        app.processEvents()


def extras(app: QApplication, out: Path, size: str, w: int, h: int) -> list[Path]:
    """A draft model, MTP drafting and a projector on the demo's two planned GPUs: Qwen3-4B with Qwen3-0.6B as its
    draft, Qwen3.5-27B drafting with its own MTP layer, and Gemma 3 4B with its vision projector (full-size headers written as sparse files by the test factory)."""
    import tempfile

    from tests import gguf_factory as gf
    from tests.projector_factory import write_gemma3_projector
    from ui.main_window import DEMO_DEVICES, MainWindow

    work = Path(tempfile.mkdtemp(prefix="layerdeck-shots-"))
    shots = []
    for name, model, attach in (
        ("draft", "qwen3-4b", lambda win: win.draft_panel.set_draft_path(
            str(gf.write_sparse_model("qwen3-0.6b", work / "Qwen3-0.6B-Q4_K_M.gguf")))),
        ("mtp", "qwen3.5-27b", lambda win: win.draft_panel.mtp.setChecked(True)),
        ("projector", "gemma-3-4b", lambda win: win.projector_panel.set_projector_path(str(write_gemma3_projector(
            work / "mmproj-gemma-3-4b.gguf", n_embd_text=2560, n_embd=1152, n_ff=4304, n_layer=27, n_head=16,
            image_size=896)))),
    ):
        path = gf.write_sparse_model(model, work / f"{model}.gguf")
        win = MainWindow(detect_devices=False)
        win.setProperty("ask_on_close", False)
        win.resize(w, h)
        win.devices = list(DEMO_DEVICES)
        win.show()
        settle(app)
        win.open_path_sync(str(path))
        attach(win)
        win.bottom.setCurrentWidget(win.projector_panel if name == "projector" else win.draft_panel)
        settle(app)
        win.board.relayout()
        settle(app)
        p = out / f"{name}-{size}.png"
        win.grab().save(str(p))
        shots.append(p)
        win.close()
    return shots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/screenshots")
    ap.add_argument("--sizes", default="1024x700,1280x800,1920x1080")
    ap.add_argument("--dark", default="1280x800", help="sizes also shot in the dark theme (comma-separated)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    QCoreApplication.setOrganizationName("LayerdeckScreenshots")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    app = QApplication.instance() or QApplication([])
    from ui.main_window import MainWindow
    from ui.settings_dialog import apply_appearance

    settings = QSettings()
    written = []
    shots = [(size, "light") for size in args.sizes.split(",")]
    shots += [(size, "dark") for size in args.dark.split(",") if size]
    for size, theme in shots:
        settings.setValue("theme", theme)
        apply_appearance(settings)
        w, h = (int(x) for x in size.split("x"))
        if theme == "dark":
            win = MainWindow(detect_devices=False)
            win.setProperty("ask_on_close", False)
            win.resize(w, h)
            win.show()
            settle(app)
            win.board.relayout()
            settle(app)
            p = out / f"demo-dark-{size}.png"
            win.grab().save(str(p))
            written.append(p)
            win.close()
            continue
        win = MainWindow(detect_devices=False)
        win.setProperty("ask_on_close", False)
        win.resize(w, h)
        win.show()
        settle(app)
        win.board.relayout()
        settle(app)
        # 1. the demo as it opens: all on the two planned GPUs, split by capacity
        p = out / f"demo-{size}.png"
        win.grab().save(str(p))
        written.append(p)
        # 2. over capacity: a 256k context pushes the GPUs over
        win.doc.set_settings(n_ctx=262144, n_parallel=4, kv_unified=False)
        settle(app)
        p = out / f"over-capacity-{size}.png"
        win.grab().save(str(p))
        written.append(p)
        # 3. auto-fit a 128k context back into memory: experts spill to the second card and RAM; the command shows it
        win.doc.set_settings(n_ctx=131072, n_parallel=-1, kv_unified=None)
        win._preset("experts")
        win._auto_fit()
        settle(app)
        p = out / f"command-{size}.png"
        win.grab().save(str(p))
        written.append(p)
        if size == "1280x800":
            # 4. the server tab: launch options (fixed port, network, API key, extra arguments) and the chat
            opts = win.launch.options_tab
            opts.port.setValue(8080)
            opts.extra.setText("--temp 0.7 --jinja")
            opts.apply()
            win.bottom.setCurrentWidget(win.launch)
            split = win.centralWidget()
            total = sum(split.sizes())
            split.setSizes([int(total * 0.45), total - int(total * 0.45)])
            win.launch.tabs.setCurrentIndex(0)
            settle(app)
            p = out / f"server-options-{size}.png"
            win.grab().save(str(p))
            written.append(p)
            win.close()
            written += extras(app, out, size, w, h)
            continue
        win.close()
    settings.setValue("theme", "light")
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
