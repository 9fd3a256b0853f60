"""Settings: llama.cpp folder (with its version and what it supports), GPU margin, theme and units.

Each setting is declared once (key, default, description) and stored in QSettings.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)
from shiboken6 import isValid

from app import units
from app.llamacpp.binaries import LlamaCppNotFound, find_tool
from app.llamacpp.capabilities import capabilities

from .worker import run_in_background


@dataclass(frozen=True)
class Setting:
    key: str
    default: object
    description: str


SETTINGS = (
    Setting("llama_dir", "", "folder with llama-server, llama-fit-params, llama-bench, ggml-rpc-server"),
    Setting("rpc_hosts", "", "host:port of each ggml-rpc-server, comma separated"),
    Setting("margin_mib", 1024, "MiB left free on each GPU by auto-fit and the over-capacity warning"),
    Setting("theme", "system", "system, light or dark"),
    Setting("units", "binary", "binary (GiB) or decimal (GB)"),
)


def value(settings: QSettings, key: str):
    s = next(x for x in SETTINGS if x.key == key)
    v = settings.value(key, s.default)
    return type(s.default)(v) if v not in (None, "") or not isinstance(s.default, int) else s.default


def _palette(dark: bool):
    from PySide6.QtGui import QColor, QPalette

    p = QPalette()
    R = QPalette.ColorRole
    if dark:
        colors = {R.Window: "#2b2d30", R.WindowText: "#e6e6e6", R.Base: "#1e1f22", R.AlternateBase: "#27292c",
                  R.ToolTipBase: "#3c3f41", R.ToolTipText: "#e6e6e6", R.Text: "#e6e6e6", R.Button: "#3c3f41",
                  R.ButtonText: "#e6e6e6", R.BrightText: "#ff6b6b", R.Highlight: "#4c8bd6",
                  R.HighlightedText: "#ffffff", R.Link: "#6aa7ff", R.PlaceholderText: "#9a9a9a", R.Mid: "#55585c",
                  R.Dark: "#1a1b1d", R.Light: "#4a4d50"}
    else:
        colors = {R.Window: "#efefef", R.WindowText: "#1e1e1e", R.Base: "#ffffff", R.AlternateBase: "#f6f6f6",
                  R.ToolTipBase: "#ffffdc", R.ToolTipText: "#1e1e1e", R.Text: "#1e1e1e", R.Button: "#efefef",
                  R.ButtonText: "#1e1e1e", R.BrightText: "#c00000", R.Highlight: "#3071c9",
                  R.HighlightedText: "#ffffff", R.Link: "#0b57d0", R.PlaceholderText: "#707070", R.Mid: "#b8b8b8",
                  R.Dark: "#a0a0a0", R.Light: "#ffffff"}
    for role, c in colors.items():
        p.setColor(role, QColor(c))
    grey = QColor("#7a7a7a" if dark else "#9a9a9a")
    for role in (R.WindowText, R.Text, R.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, grey)
    return p


def apply_appearance(settings: QSettings) -> None:
    """Theme and units take effect at once. "system" follows the platform; light and dark are explicit
    palettes on the Fusion style, so both stay readable wherever the platform has no dark theme."""
    from PySide6.QtWidgets import QApplication

    theme = value(settings, "theme")
    app = QApplication.instance()
    hints = QGuiApplication.styleHints()
    if hasattr(hints, "setColorScheme"):
        hints.setColorScheme({"dark": Qt.ColorScheme.Dark, "light": Qt.ColorScheme.Light}.get(
            theme, Qt.ColorScheme.Unknown))
    if app is not None and theme in ("dark", "light"):
        app.setStyle("Fusion")
        app.setPalette(_palette(theme == "dark"))
    units.set_binary(value(settings, "units") != "decimal")


def describe_llama(folder: str) -> str:
    """One line about the llama.cpp found for ``folder``: where, which version, what it supports.

    Runs ``llama-server --version`` and (uncached) ``--help``: call it off the GUI thread."""
    try:
        tool = find_tool("llama-server", folder or None)
    except LlamaCppNotFound as exc:
        return str(exc)
    try:
        out = subprocess.run([str(tool.path), "--version"], capture_output=True, text=True, timeout=20,
                             errors="replace")
        version = (out.stdout + out.stderr).strip().splitlines()
        version = next((ln for ln in version if "version" in ln), version[-1] if version else "?")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool.path} could not run: {exc}"
    caps = capabilities(tool.path)
    if not caps.known:  # --help did not run: what it supports is unknown, not "nothing"
        return f"{tool.path} ({tool.source}) — {version}; its --help could not be read, so its flags are unknown"
    have = [f for f in ("--fit", "-ot", "--n-cpu-moe", "--load-mode", "--rpc", "-kvu") if caps.has(f)]
    return f"{tool.path} ({tool.source}) — {version}; supports {', '.join(have) or 'none of --fit, -ot, --rpc'}"


class SettingsDialog(QDialog):
    def __init__(self, settings: QSettings, parent=None):
        super().__init__(parent)
        self.settings = settings
        self.setWindowTitle("Settings")
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.llama_dir = QLineEdit(value(settings, "llama_dir"))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.llama_dir, 1)
        row.addWidget(browse)
        form.addRow("llama.cpp folder", row)
        self.llama_info = QLabel()
        self.llama_info.setWordWrap(True)
        form.addRow("", self.llama_info)
        from .llama_builds import LlamaBuildsWidget  # every build found or installed: use, remove

        self.builds = LlamaBuildsWidget(lambda: self.llama_dir.text().strip(),
                                        lambda folder: (self.llama_dir.setText(folder), self._check()))
        form.addRow("Builds found", self.builds)
        self.llama_dir.editingFinished.connect(self._check)
        self.margin = QSpinBox()
        self.margin.setRange(0, 16384)
        self.margin.setSingleStep(256)
        self.margin.setSuffix(" MiB")
        self.margin.setValue(int(value(settings, "margin_mib")))
        form.addRow("GPU margin", self.margin)
        self.theme = QComboBox()
        self.theme.addItems(["system", "light", "dark"])
        self.theme.setCurrentText(value(settings, "theme"))
        form.addRow("Theme", self.theme)
        self.units = QComboBox()
        self.units.addItem("GiB (binary)", "binary")
        self.units.addItem("GB (decimal)", "decimal")
        self.units.setCurrentIndex(0 if value(settings, "units") != "decimal" else 1)
        form.addRow("Units", self.units)
        lay.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(640, 260)
        self._check_seq = 0
        self._check()

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "llama.cpp folder", self.llama_dir.text())
        if d:
            self.llama_dir.setText(d)
            self._check()

    def _check(self) -> None:
        """Describe the llama.cpp of the folder field off the GUI thread: ``--version`` and ``--help`` may take
        up to 20 s each (a slow disk, a hung binary); the dialog says "checking…" and stays usable."""
        folder = self.llama_dir.text().strip()
        self._check_seq += 1
        seq = self._check_seq
        self.llama_info.setText("checking llama.cpp…")

        def show(text) -> None:
            if seq == self._check_seq and isValid(self.llama_info):  # only the latest check, while the dialog is there
                self.llama_info.setText(str(text))

        run_in_background(lambda: describe_llama(folder), show, lambda exc: show(f"could not check llama.cpp: {exc}"))

    def _save(self) -> None:
        self.settings.setValue("llama_dir", self.llama_dir.text().strip())
        self.settings.setValue("margin_mib", self.margin.value())
        self.settings.setValue("theme", self.theme.currentText())
        self.settings.setValue("units", self.units.currentData())
        apply_appearance(self.settings)
        self.accept()
