"""Model summary: architecture, size, parameters, layers, experts, context, quantization mix."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.llamacpp.load_check import LoadCheck
from app.model import Model
from app.units import fmt_bytes, fmt_count


def summary_html(model: Model, verdict: LoadCheck | None = None) -> str:
    p = model.params
    rows = [
        ("Architecture", f"{escape(p.arch)}" + (f" — {escape(p.name)}" if p.name else "")),
        ("Size", f"{fmt_bytes(model.file_size)} · {escape(p.file_type_name)}" + (f" · {len(model.paths)} files" if len(model.paths) > 1 else "")),
        ("Parameters", f"{fmt_count(model.n_params)} total, {fmt_count(model.n_params_active)} active"),
        ("Layers", f"{p.n_layer}" + (f" ({p.n_layer_dense_lead} dense first)" if p.n_layer_dense_lead else "")
         + (f", {p.nextn_layers} MTP" if p.nextn_layers else "")),
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


class SummaryPanel(QLabel):
    def __init__(self, model: Model, parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setMargin(8)
        self.model = model
        self.verdict: LoadCheck | None = None
        self.show_model(model)

    def show_model(self, model: Model) -> None:
        self.model = model
        self.setText(summary_html(model, self.verdict))

    def set_load_check(self, verdict: LoadCheck | None) -> None:
        """Show llama.cpp's load verdict on the model (:mod:`app.llamacpp.load_check`)."""
        self.verdict = verdict
        self.setText(summary_html(self.model, verdict))
        self.setToolTip(verdict.note() or "" if verdict is not None else "")
