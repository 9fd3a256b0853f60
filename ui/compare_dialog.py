"""Placements side by side: the current one, auto-fit, fastest and llama.cpp's own --fit choice.

For each: memory per device and predicted generation and prompt speed; any of them can be applied (one
undo step). llama.cpp's choice comes from llama-fit-params, run off the GUI thread.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.lanes import CPU
from app.placement.autofit import FitError, auto_fit
from app.placement.fastest import fastest
from app.units import fmt_bytes

from .document import Document
from .worker import run_in_background


def llama_reason(text: str, lines: int = 4) -> str:
    """llama.cpp's reason from an error text: everything before a usage dump, at most ``lines`` lines."""
    head = text.split("\nusage:", 1)[0]
    kept = [ln for ln in head.splitlines() if ln.strip()][:lines]
    return "\n".join(kept)


class CompareDialog(QDialog):
    def __init__(self, doc: Document, margin: int, llama_dir: str | None, rpc: list[str], parent=None):
        super().__init__(parent)
        self.doc = doc
        self.margin = margin
        self.setWindowTitle("Compare placements")
        self.rows: list[tuple[str, object]] = []
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"Memory per device (margin {fmt_bytes(margin)} on GPUs) and expected speed."))
        names = [d.name for d in doc.devices] + ["CPU"]
        self.table = QTableWidget(0, len(names) + 3)
        self.table.setHorizontalHeaderLabels(["Placement"] + names + ["generation", "prompt"])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        lay.addWidget(self.table)
        self.note = QLabel()
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(900, 320)
        s = doc.placement.settings
        self.add("Current", doc.placement.copy())
        try:
            self.add("Auto-fit", auto_fit(doc.model, doc.devices, s, margin=margin, pinned_from=doc.placement).placement)
            self.add("Fastest", fastest(doc.model, doc.devices, s, doc.speed_params, margin=margin,
                                        pinned_from=doc.placement).placement)
        except FitError as exc:
            self.note.setText(str(exc))
        planned = [d.name for d in doc.devices if d.kind == "planned"]
        if doc.model.is_demo:
            self.note.setText("llama.cpp's --fit needs the real model file; the demo has none.")
        elif planned:
            self.note.setText(f"llama.cpp's --fit is not shown: it only fits devices this machine has, and "
                              f"{', '.join(planned)} {'is' if len(planned) == 1 else 'are'} planned.")
        else:
            from app.placement.llama_fit import llama_fit

            self.note.setText("Running llama.cpp's --fit…")
            run_in_background(lambda: llama_fit(doc.model, str(doc.model.path), doc.devices, s, rpc=rpc,
                                                 margin=margin, llama_dir=llama_dir),
                              lambda res: (self.add("llama.cpp --fit", res[1]), self.note.setText(
                                  "llama.cpp's choice: " + " ".join(res[0])[:400])),
                              lambda exc: self.note.setText(f"llama.cpp --fit: {llama_reason(str(exc))}"))

    def add(self, label: str, placement) -> None:
        doc = self.doc
        est = doc.estimate_for(placement)
        decode, prompt = doc.speed_for(placement)
        r = self.table.rowCount()
        self.table.insertRow(r)
        self.table.setItem(r, 0, QTableWidgetItem(label))
        for c, d in enumerate([x.name for x in doc.devices] + [CPU], start=1):
            m = next((x for x in est.devices if x.name == d), None)
            cap = doc.capacity(d)
            text = fmt_bytes(m.total if m else 0) + (f" / {fmt_bytes(cap)}" if cap else "")
            self.table.setItem(r, c, QTableWidgetItem(text))
        n = self.table.columnCount()
        self.table.setItem(r, n - 2, QTableWidgetItem(f"{decode.tokens_per_s:.1f} tok/s" if decode else "?"))
        self.table.setItem(r, n - 1, QTableWidgetItem(f"{prompt.tokens_per_s:.0f} tok/s" if prompt else "?"))
        self.rows.append((label, placement))
        if label != "Current":
            btn = QPushButton(f"Apply {label}")
            btn.clicked.connect(lambda _=False, p=placement, lab=label: (self.doc.replace(p.copy(), lab), self.accept()))
            self.layout().insertWidget(self.layout().count() - 1, btn)
