"""Devices: what was detected, planned GPUs from the catalogue or typed in, and RPC hosts with their status."""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.devices import catalogue
from app.lanes import Lane
from app.units import GiB, fmt_bytes


class DevicesDialog(QDialog):
    """Edits a device list; ``detect(rpc)`` (run by the caller off the GUI thread) refreshes detected ones."""

    def __init__(self, devices: list[Lane], rpc_hosts: list[str], detect=None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Devices")
        self.devices = list(devices)
        self.detect = detect
        self.host_status: list = []
        lay = QVBoxLayout(self)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Kind", "Description", "Capacity", "Bandwidth"])
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        lay.addWidget(self.table)
        row = QHBoxLayout()
        self.remove_btn = QPushButton("Remove selected")
        self.remove_btn.clicked.connect(self._remove)
        row.addWidget(self.remove_btn)
        row.addStretch(1)
        lay.addLayout(row)

        planned = QGroupBox("Add a planned GPU (one you don't own yet)")
        form = QFormLayout(planned)
        self.card = QComboBox()
        self.card.setEditable(True)
        self.card.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        for e in catalogue.ENTRIES:
            self.card.addItem(f"{e.name} — {e.memory_gib:g} GB, {e.bandwidth_gb_s:g} GB/s", e.id)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("llama.cpp name, e.g. CUDA1")
        add_card = QPushButton("Add from catalogue")
        add_card.clicked.connect(self._add_catalogue)
        form.addRow("Card", self.card)
        form.addRow("Name", self.name_edit)
        form.addRow("", add_card)
        self.cap = QDoubleSpinBox()
        self.cap.setRange(0.0, 4096)  # below 0.5 GiB is refused with the reason, not clamped without a word
        self.cap.setDecimals(2)
        self.cap.setValue(24)
        self.cap.setSuffix(" GiB")
        self.bw = QDoubleSpinBox()
        self.bw.setRange(1, 20000)
        self.bw.setValue(900)
        self.bw.setSuffix(" GB/s")
        add_custom = QPushButton("Add custom")
        add_custom.clicked.connect(self._add_custom)
        typed = QHBoxLayout()
        typed.addWidget(self.cap)
        typed.addWidget(self.bw)
        typed.addWidget(add_custom)
        form.addRow("Or type it", typed)
        lay.addWidget(planned)

        rpc = QGroupBox("Remote hosts (llama.cpp RPC)")
        rl = QVBoxLayout(rpc)
        self.rpc_edit = QLineEdit(", ".join(rpc_hosts))
        self.rpc_edit.setPlaceholderText("host:port, host:port  (ggml-rpc-server on each machine)")
        probe = QPushButton("Probe and list their devices")
        probe.clicked.connect(self._probe)
        h = QHBoxLayout()
        h.addWidget(self.rpc_edit, 1)
        h.addWidget(probe)
        rl.addLayout(h)
        self.rpc_status = QPlainTextEdit()
        self.rpc_status.setReadOnly(True)
        self.rpc_status.setMaximumHeight(120)
        self.rpc_status.setPlaceholderText("Each host is checked on its own first: an unreachable host is reported, "
                                           "not fatal. The command to run on each host appears here.")
        rl.addWidget(self.rpc_status)
        lay.addWidget(rpc)
        self.message = QLabel()
        self.message.setWordWrap(True)
        lay.addWidget(self.message)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(820, 640)
        self._fill()

    @property
    def rpc_hosts(self) -> list[str]:
        return [x.strip() for x in self.rpc_edit.text().replace(";", ",").split(",") if x.strip()]

    def _fill(self) -> None:
        self.table.setRowCount(len(self.devices))
        for r, d in enumerate(self.devices):
            desc = d.endpoint or d.buft
            cells = [d.name, d.kind, desc, fmt_bytes(d.total) if d.total else "?",
                     f"{d.bandwidth / 1e9:.0f} GB/s" if d.bandwidth else "unknown"]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.table.setItem(r, c, item)

    def _next_name(self) -> str:
        used = {d.name for d in self.devices}
        i = 0
        while f"CUDA{i}" in used:
            i += 1
        return f"CUDA{i}"

    def _add(self, name: str, total: int, bandwidth: float) -> None:
        name = name.strip() or self._next_name()
        if any(d.name == name for d in self.devices):
            self.message.setText(f"There is already a device called {name}; pick another name.")
            return
        if not name.replace("_", "").isalnum() or not name[0].isalpha():
            self.message.setText("A device name is letters and digits, like CUDA1 or Vulkan0.")
            return
        self.devices.append(Lane(name, name, total, total, "planned", bandwidth))
        self.message.setText(f"Added {name}.")
        self._fill()

    def _add_catalogue(self) -> None:
        entry_id = self.card.currentData()
        if entry_id is None:
            found = catalogue.search(self.card.currentText())
            if not found:
                self.message.setText(f"No card in the catalogue matches {self.card.currentText()!r}.")
                return
            entry_id = found[0].id
        e = catalogue.get(entry_id)
        self._add(self.name_edit.text(), e.memory_bytes, e.bandwidth_bytes_per_s)

    #: the smallest card Layerdeck plans with
    MIN_CARD_GIB = 0.5

    def _add_custom(self) -> None:
        gib = self.cap.value()
        if gib < self.MIN_CARD_GIB:
            self.message.setText(
                f"{gib:g} GiB is too small for a planned card: Layerdeck plans cards of at least "
                f"{self.MIN_CARD_GIB:g} GiB (llama.cpp's compute buffers alone take a few hundred MiB, and no "
                "GPU worth offloading to has less). The size is in GiB: type 8 for an 8 GB card.")
            return
        self._add(self.name_edit.text(), int(self.cap.value() * GiB), self.bw.value() * 1e9)

    def _remove(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        for r in rows:
            del self.devices[r]
        self._fill()

    def _probe(self) -> None:
        if self.detect is None:
            self.message.setText("Device detection is not available here.")
            return
        self.rpc_status.setPlainText("Probing…")
        self.detect(self.rpc_hosts, self.show_detection)

    def show_detection(self, result, devices: list[Lane]) -> None:
        """Called with a DetectionResult (on the GUI thread): replace RPC devices, report each host."""
        self.devices = [d for d in self.devices if d.kind != "rpc"] + [d for d in devices if d.kind == "rpc"]
        lines = []
        for h in getattr(result, "rpc_hosts", ()):
            state = "ok" if h.status == "ok" else h.status
            lines.append(f"{h.endpoint}: {state}" + (f" — {h.error}" if h.error else "")
                         + (f" — devices {', '.join(h.devices)}" if h.devices else ""))
            if h.server_command:
                lines.append("   run there: " + shlex.join(h.server_command))
        self.rpc_status.setPlainText("\n".join(lines) or "No RPC hosts given.")
        self._fill()
