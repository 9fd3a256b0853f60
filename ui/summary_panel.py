"""Model summary: architecture, size, parameters, layers, experts, context, quantization mix."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.llamacpp.load_check import LoadCheck
from app.model import Model
from app.units import fmt_bytes, fmt_count


def _layers(p) -> str:
    if p.layer_note:  # HRM-Text's cache slots, Granite Switch's router layer
        return p.layer_note
    return (f"{p.n_layer}" + (f" ({p.n_layer_dense_lead} dense first)" if p.n_layer_dense_lead else "")
            + (f", {p.nextn_layers} MTP" if p.nextn_layers else ""))


def summary_html(model: Model, verdict: LoadCheck | None = None) -> str:
    p = model.params
    rows = [
        ("Architecture", f"{escape(p.arch)}" + (f" — {escape(p.name)}" if p.name else "")),
        ("Size", f"{fmt_bytes(model.file_size)} · {escape(p.file_type_name)}" + (f" · {len(model.paths)} files" if len(model.paths) > 1 else "")),
        ("Parameters", f"{fmt_count(model.n_params)} total, {fmt_count(model.n_params_active)} active"),
        ("Layers", _layers(p)),
    ]
    if p.is_moe:
        rows.append(("Experts", f"{p.n_expert} routed, {p.n_expert_used} used" +
                     (f", {p.n_expert_shared} shared" if p.n_expert_shared else "")))
    attn = f"{max(p.n_head, default=0)} heads, {max(p.n_head_kv, default=0)} KV heads"
    if p.is_mla:
        attn += f", MLA (rank {p.kv_lora_rank})"
    if p.has_swa:
        attn += f", sliding window {p.n_swa}"
    rows.append(("Attention", attn))
    rows.append(("Context", f"{p.n_ctx_train:,} tokens"))
    mix = ", ".join(f"{q.type_name} {100 * q.nbytes / max(model.tensor_bytes, 1):.0f}%" for q in model.quant_mix()[:5])
    rows.append(("Quantization", mix))
    if verdict is not None and not model.is_demo:
        if verdict.loads:
            rows.append(("llama.cpp", "<span style='color:#3A9E5C'>loads this file</span>"))
        else:  # refused files never reach the board; this is a check that could not be made
            rows.append(("llama.cpp", f"<span style='color:#E8833A'>not checked: {escape(verdict.reason)}</span>"))
    head = f"<b>{escape(model.title or model.path.name)}</b>"
    if model.is_demo:
        head += "<br><span style='color:#E8833A'>Demo model: no weights; launching is disabled.</span>"
    elif model.source:  # read over HTTP (app.remote): its header only
        head += (f"<br><span style='color:#E8833A'>Header only, read from {escape(model.source)}: download the "
                 "file to launch it (the exported command's -hf lets llama.cpp download it).</span>")
    body = "".join(f"<tr><td style='padding-right:8px;color:gray'>{k}</td><td>{v}</td></tr>" for k, v in rows)
    return f"{head}<table>{body}</table>"


def verification_html(session, state: str = "", llama_missing: str | None = None) -> str:
    """Whether the memory figures are llama.cpp's own ("verified by llama.cpp": a dry run of this placement, or
    learned figures that apply to it, :mod:`app.memory.learned`) or estimated, per device, and what the last
    dry run corrected (MiB per device)."""
    green, amber, gray = "#3A9E5C", "#E8833A", "gray"
    lines = []
    v = session.verification
    est = session.estimate
    if session.model.is_demo:
        lines.append(f"<span style='color:{gray}'>estimated (the demo model has no file for llama.cpp)</span>")
    elif llama_missing:
        lines.append(f"<span style='color:{amber}'>estimated: llama.cpp was not found, so nothing was checked "
                     f"({escape(llama_missing)})</span>")
    elif est is None:
        lines.append(f"<span style='color:{gray}'>no estimate</span>")
    elif v is None or not v.verified:
        lines.append(f"<span style='color:{gray}'>estimated (no dry run of llama.cpp covers this placement "
                     "yet: Verify, or keep the board still)</span>")
    else:
        for d in est.devices:
            status = v.status(d.name)
            color = green if status == "verified" else amber if status == "partly" else gray
            mark = "✓ " if status == "verified" else ""
            lines.append(f"{escape(d.name)}: <span style='color:{color}'>{mark}{escape(v.describe(d.name))}</span>")
    if v is not None and v.verified and v.note:
        lines.append(f"<span style='color:{gray}'>{escape(v.note)}</span>")
    corr = session.last_correction
    if corr is not None and corr.deltas:
        moved = [f"{escape(dev)} {'+' if n > 0 else ''}{n} MiB"
                 + (" (" + ", ".join(f"{k} {'+' if x > 0 else ''}{x}" for k, x in kinds.items() if x) + ")"
                    if any(kinds.values()) else "")
                 for dev, kinds in corr.deltas.items() for n in [sum(kinds.values())]]
        lines.append(f"<span style='color:{gray}'>last dry run corrected the estimate by: {'; '.join(moved)}</span>")
    if state:
        lines.append(f"<span style='color:{gray}'>{escape(state)}</span>")
    return "<br>".join(lines)


class SummaryPanel(QLabel):
    def __init__(self, model: Model, parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setMargin(8)
        self.model = model
        self.verdict: LoadCheck | None = None
        self.verification = ""  # verification_html() of the current placement
        self.show_model(model)

    def _render(self) -> None:
        html = summary_html(self.model, self.verdict)
        if self.verification:
            html += f"<p style='margin-top:6px'><b>Memory figures</b><br>{self.verification}</p>"
        self.setText(html)

    def show_model(self, model: Model) -> None:
        self.model = model
        self._render()

    def set_verification(self, html: str) -> None:
        """Show which figures are llama.cpp's and which are estimated (:func:`verification_html`)."""
        if html != self.verification:
            self.verification = html
            self._render()

    def set_load_check(self, verdict: LoadCheck | None) -> None:
        """Show llama.cpp's load verdict on the model (:mod:`app.llamacpp.load_check`)."""
        self.verdict = verdict
        self._render()
        self.setToolTip(verdict.note() or "" if verdict is not None else "")
