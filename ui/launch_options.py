"""The launch options of a model: a fixed port, this computer or the local network, an API key and extra
llama-server arguments. They form the model's launch profile, saved with the plan and remembered per model.

Extra arguments are split like a POSIX shell splits them (:func:`app.session.parse_extra_args`), never run
by one; placement flags are refused with the reason (they belong to the board).
"""

from __future__ import annotations

import json
import shlex
from html import escape

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from app.errors import LayerdeckError
from app.launch.network import lan_urls
from app.placement.plan_file import LaunchProfile, PlanError, check_launch
from app.session import Change, LaunchArgsError, parse_extra_args

from .document import Document

LAN_HOST = "0.0.0.0"
LAN_WARNING = (
    "Anyone on your local network can use this server (and see what is typed into it). Set an API "
    "key, and only do this on a network you trust."
)


def _key(model_path) -> str:
    return "launch_profiles/" + str(model_path).replace("/", "|").replace("\\", "|")


def remembered_profile(settings: QSettings, model_path) -> LaunchProfile | None:
    """The launch profile last used with this model file (checked like a plan's ``launch`` section)."""
    raw = settings.value(_key(model_path))
    if not raw:
        return None
    try:
        return check_launch(json.loads(str(raw)))
    except (ValueError, PlanError):
        return None


def remember_profile(settings: QSettings, model_path, profile: LaunchProfile) -> None:
    settings.setValue(_key(model_path), json.dumps(profile.to_dict()))


class LaunchOptions(QWidget):
    def __init__(self, document: Document, settings: QSettings | None = None, parent=None):
        super().__init__(parent)
        self.doc = document
        self.settings = settings
        self.last_error = ""
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setSpecialValueText("any free port (a new one each launch)")
        self.port.setToolTip("A fixed port keeps frontends (SillyTavern, Open WebUI, …) pointed at the same URL")
        form.addRow("Port", self.port)
        self.network = QComboBox()
        self.network.addItem("This computer only (127.0.0.1)", "127.0.0.1")
        self.network.addItem("Local network (0.0.0.0)", LAN_HOST)
        form.addRow("Network", self.network)
        self.lan_warning = QLabel(LAN_WARNING)
        self.lan_warning.setWordWrap(True)
        self.lan_warning.setStyleSheet("QLabel { color: #B26B00; }")
        self.lan_warning.setVisible(False)
        form.addRow("", self.lan_warning)
        key_row = QHBoxLayout()
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("none (anyone who can reach the port may use it)")
        self.show_key = QPushButton("Show")
        self.show_key.setCheckable(True)
        self.show_key.toggled.connect(
            lambda on: self.api_key.setEchoMode(QLineEdit.EchoMode.Normal if on else QLineEdit.EchoMode.Password)
        )
        key_row.addWidget(self.api_key, 1)
        key_row.addWidget(self.show_key)
        form.addRow("API key", key_row)
        self.extra = QLineEdit()
        self.extra.setPlaceholderText("more llama-server arguments, e.g. --temp 0.7 --jinja")
        self.extra.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        form.addRow("Extra arguments", self.extra)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        form.addRow("", self.error)
        self.note = QLabel("Saved with the plan, and remembered for this model.")
        self.note.setWordWrap(True)
        form.addRow("", self.note)
        self.port.editingFinished.connect(self.apply)
        self.network.currentIndexChanged.connect(self.apply)
        self.api_key.editingFinished.connect(self.apply)
        self.extra.editingFinished.connect(self.apply)
        self.doc.session_changed.connect(lambda ev: self.refresh() if ev.changes & Change.SETTINGS else None)
        self.refresh()

    def refresh(self) -> None:
        """Show the document's profile (an import or an opened plan may have changed it)."""
        p = self.doc.launch_profile
        widgets = (self.port, self.network, self.api_key, self.extra)
        for w in widgets:
            w.blockSignals(True)
        self.port.setValue(p.port or 0)
        i = self.network.findData(p.host)
        if i < 0:
            self.network.addItem(f"{p.host} (from the plan)", p.host)
            i = self.network.count() - 1
        self.network.setCurrentIndex(i)
        self.api_key.setText(p.api_key or "")
        if not self.error.isVisible() and not self.extra.hasFocus():
            self.extra.setText(shlex.join(p.extra))
        for w in widgets:
            w.blockSignals(False)
        self._show_lan(p)

    def _show_lan(self, p: LaunchProfile) -> None:
        """The warning, and the addresses other devices use, whenever the server is opened to the network."""
        if p.lan:
            self.lan_warning.setText(LAN_WARNING + " " + lan_urls(p.port))
        self.lan_warning.setVisible(p.lan)

    def profile(self) -> LaunchProfile:
        """The profile the boxes describe; raises LaunchArgsError for extra arguments that cannot be used."""
        key = self.api_key.text().strip() or None
        if key is not None and (any(c.isspace() for c in key) or not key.isprintable() or not key.isascii()):
            raise LaunchArgsError("the API key has spaces or characters an HTTP header cannot carry")
        return LaunchProfile(
            port=self.port.value() or None,
            host=self.network.currentData() or "127.0.0.1",
            api_key=key,
            extra=parse_extra_args(self.extra.text()),
        )

    def apply(self) -> bool:
        try:
            prof = self.profile()
        except LayerdeckError as exc:
            self.last_error = str(exc)
            self.error.setText(f"<span style='color:#D64541'>{escape(str(exc))}</span>")
            self.error.setVisible(True)
            return False
        self.error.setVisible(False)
        self.last_error = ""
        self._show_lan(prof)
        self.doc.set_launch_profile(prof)
        if self.settings is not None and not self.doc.model.is_demo:
            remember_profile(self.settings, self.doc.model.path, prof)
        return True
