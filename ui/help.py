"""Help: a short in-app guide to the board (F1) and About with the versions that matter."""

from __future__ import annotations

import platform

from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QTextBrowser, QVBoxLayout

from app import __version__

from .board import style
from .board.legend import _swatch
from .worker import run_in_background


def guide_html() -> str:
    blocks = "".join(f"<li>{_swatch(style.ROLE_COLORS[r], name)}</li>" for r, name in style.ROLE_LEGEND)
    gauge = "".join(f"<li>{_swatch(c, name, hatched=(c is style.GAUGE_MARGIN))}</li>" for c, name in style.GAUGE_LEGEND)
    return f"""
<h2>The board</h2>
<p>Each <b>lane</b> is a device: your GPUs, RPC hosts (other machines running <code>ggml-rpc-server</code>),
planned cards you don't own yet, and the CPU (host RAM) at the bottom. Each <b>block</b> is a part of a layer
of the model; its width is its size in bytes (one scale for all lanes, so a lane's width is its memory).</p>
<ul>{blocks}</ul>
<p>Drag blocks (or a rubber-band selection) to another lane, or use Alt+1, Alt+2, … A drop llama.cpp cannot run
is refused with the reason, and the nearest drop that works is offered. Double-click experts to split them
into gate/up/down.</p>
<h3>The gauge</h3>
<p>Next to each lane's name, the bar shows what llama.cpp will allocate there:</p>
<ul>{gauge}</ul>
<p>The black line is the device's capacity; the hatched part before it is the margin Layerdeck keeps free
(toolbar). A lane turns red when its use goes past the margin, and says which blocks to move.</p>
<h3>The numbers</h3>
<p><b>used / capacity</b>, then the predicted <b>ms per token</b> spent on that device and its <b>share</b> of
the time of each generated token (the slowest lanes are where to look). While dragging, the lanes show what the
drop would change ("-414 MiB, -19.4 tok/s if dropped").</p>
<h3>Buttons</h3>
<p><b>Auto-fit</b> (Ctrl+F) fills the GPUs the way llama.cpp's <code>--fit</code> would; <b>Fastest</b> looks
for the quickest placement that fits; <b>Verify</b> (Ctrl+R) runs llama.cpp's own dry run and shows its
numbers per lane; <b>Launch</b> (Ctrl+L) starts llama-server with this placement (Server tab: launch options
for the port, network, API key and extra arguments; Try it: a chat).</p>
<p>More: <code>docs/</code> in the Layerdeck folder (launch.md, memory-model.md, speed-model.md, cli.md).</p>
"""


class GuideDialog(QDialog):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Guide to the board")
        lay = QVBoxLayout(self)
        self.view = QTextBrowser()
        self.view.setOpenExternalLinks(True)
        self.view.setHtml(guide_html())
        lay.addWidget(self.view)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(640, 560)


def versions(llama: str) -> str:
    return (
        f"<b>Layerdeck</b> {__version__}<br><b>llama.cpp</b>: {llama}<br><b>Qt</b> {qVersion()}, "
        f"PySide6 {PYSIDE_VERSION}<br><b>Python</b> {platform.python_version()} on {platform.system()}"
    )


class AboutDialog(QDialog):
    """Versions of Layerdeck, the configured llama.cpp build (read off the GUI thread) and Qt."""

    def __init__(self, llama_dir: str | None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("About Layerdeck")
        lay = QVBoxLayout(self)
        head = QLabel(
            "<h3>Layerdeck</h3>Plans where llama.cpp puts each tensor across GPUs, RPC hosts and the "
            "CPU, estimates memory as llama.cpp allocates it, and launches it."
        )
        head.setWordWrap(True)
        lay.addWidget(head)
        self.info = QLabel(versions("checking…"))
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.info)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(520, 240)
        from .settings_dialog import describe_llama

        run_in_background(
            lambda: describe_llama(llama_dir or ""),
            lambda text: self.info.setText(versions(text)),
            lambda exc: self.info.setText(versions(f"could not be read ({exc})")),
        )
