"""Time a drop on the real board (offscreen): from the drop to every gauge and the command being current.

Drives the real MainWindow with a 94-layer, 128-expert model (Qwen3-235B-A22B-shaped, sparse file) on three
planned 24 GiB GPUs; each drop moves one or ten expert blocks to another lane (one undo step each).
Target (issue "The board"): within one frame, 16 ms.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_board_drop.py [--drops 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app.lanes import Lane  # noqa: E402
from tests.gguf_factory import write_sparse_model  # noqa: E402

GiB = 1 << 30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drops", type=int, default=40)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    from ui.main_window import MainWindow

    with tempfile.TemporaryDirectory() as tmp:
        path = write_sparse_model("qwen3-235b-a22b", Path(tmp) / "q235.gguf")
        win = MainWindow(detect_devices=False)
        win.setProperty("ask_on_close", False)
        win.devices = [Lane(f"CUDA{i}", f"CUDA{i}", 24 * GiB, 24 * GiB) for i in range(3)]
        win.open_path_sync(str(path))
        win.resize(1920, 1080)
        win.show()
        app.processEvents()
        board = win.board
        print(f"{len(board.blocks)} blocks on {len(board.lanes)} lanes")
        results = {}
        for hover in (False, True):
            for label, size in (("1 block", 1), ("10 blocks", 10)):
                times, est_ms = [], []
                for k in range(args.drops):
                    first = (k * size) % 90
                    ids = [f"{il}:experts" for il in range(first, first + size)]
                    lane = "CPU" if win.doc.placement.device_of(ids[0]) != "CPU" else "CUDA2"
                    if hover:  # a real drag previews the target lane while the mouse is over it
                        win.doc.preview(ids, lane)
                        app.processEvents()
                    t0 = time.perf_counter()
                    ok = board.drop_mime(board.mime_for(ids), lane)
                    win.doc.preview([], None)
                    app.processEvents()  # repaint requests, queued signals
                    times.append((time.perf_counter() - t0) * 1000)
                    est_ms.append(win.doc.last_estimate_ms)
                    assert ok and win.doc.placement.device_of(ids[0]) == lane
                results[(hover, label)] = times
                how = "after hovering" if hover else "cold (no preview)"
                print(f"drop of {label:9s}, {how:18s}: median {statistics.median(times):6.2f} ms, p95 "
                      f"{sorted(times)[int(0.95 * len(times)) - 1]:6.2f} ms, worst {max(times):6.2f} ms "
                      f"(of which estimate {statistics.median(est_ms):.2f} ms)")
        t0 = time.perf_counter()
        win.grab()
        print(f"one full repaint of the window: {(time.perf_counter() - t0) * 1000:.1f} ms")
        win.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
