"""``layerdeck inspect MODEL [--json]``: what is in a GGUF file, per layer and block.

JSON schema ``layerdeck.inspect/1`` is documented in ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import dataclasses

from ..llamacpp.load_check import LoadCheck
from ..model import Model, Role
from ..model.blocks import LAYER_ROLES
from ..units import fmt_count
from .as_type import add_requant_options, predicted
from .common import ERRORS, fail, fmt_bytes, load_model, print_json

SCHEMA = "layerdeck.inspect/1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="show a GGUF model's architecture, sizes and blocks",
        description="Read a GGUF model's header (never its weights) and print its blocks.",
    )
    p.add_argument("model", help="GGUF file (any shard of a split model opens the whole set)")
    p.add_argument("--json", action="store_true", help="print the layerdeck.inspect/1 JSON document")
    p.add_argument(
        "--llama-dir",
        help="llama.cpp binaries folder that checks the file loads (default: settings, LAYERDECK_LLAMA_CPP_DIR, PATH)",
    )
    add_requant_options(p)
    p.set_defaults(func=run)


def to_json(model: Model, verdict: LoadCheck | None = None) -> dict:
    p = model.params
    hp = dataclasses.asdict(p)
    hp["file_type_name"] = p.file_type_name
    layers = []
    for il in range(p.n_layer):
        row = {"layer": il, **{r.value: 0 for r in LAYER_ROLES}}
        for b in model.layer_blocks(il):
            row[b.role.value] += b.nbytes
        row["total"] = sum(row[r.value] for r in LAYER_ROLES)
        layers.append(row)
    return {
        "schema": SCHEMA,
        "files": [  # file_sizes: a model read over HTTP (app.remote) has no files here to stat
            {"path": str(pth), "size": model.file_sizes[i] if i < len(model.file_sizes) else pth.stat().st_size}
            for i, pth in enumerate(model.paths)
        ],
        "file_size": model.file_size,
        "gguf_version": model.version,
        "architecture": p.arch,
        "name": p.name,
        "file_type": p.file_type_name,
        "parameters": {"total": model.n_params, "active": model.n_params_active},
        "tensor_bytes": model.tensor_bytes,
        "hparams": hp,
        "quantization": [{"type": q.type_name, "tensors": q.n_tensors, "bytes": q.nbytes} for q in model.quant_mix()],
        "blocks": [
            {
                "id": b.id,
                "layer": b.layer,
                "role": b.role.value,
                "bytes": b.nbytes,
                "nextn": b.nextn,
                "parts": {part: b.part_bytes(part) for part in b.parts},
                "tensors": [
                    {"name": t.name, "type": t.type_name, "shape": list(t.shape), "bytes": t.nbytes} for t in b.tensors
                ],
            }
            for b in model.blocks
        ],
        "layers": layers,
        "warnings": model.warnings,
        "predicted_from": model.predicted_from or None,
        "llama_check": verdict.to_json() if verdict is not None else None,
    }


def render_text(model: Model, verdict: LoadCheck | None = None) -> str:
    p = model.params
    out = []
    out.append(f"{model.path.name}" + (f" (+{len(model.paths) - 1} more parts)" if len(model.paths) > 1 else ""))
    out.append(f"  architecture   {p.arch}" + (f"  ({p.name})" if p.name else ""))
    out.append(f"  file size      {fmt_bytes(model.file_size)}  (GGUF v{model.version}, {p.file_type_name})")
    notes = [w for w in model.warnings if model.predicted_from and w.startswith("predicted: ")]
    out += [f"  predicted      {w.removeprefix('predicted: ')}" for w in notes]
    out.append(
        f"  parameters     {fmt_count(model.n_params)} total, {fmt_count(model.n_params_active)} active per token"
    )
    out.append(
        f"  layers         {p.layer_note or p.n_layer}"
        + (f" ({p.nextn_layers} NextN/MTP)" if p.nextn_layers else "")
        + (f", {p.n_layer_dense_lead} leading dense" if p.n_layer_dense_lead else "")
    )
    out.append(f"  context        {p.n_ctx_train:,} tokens trained; embedding {p.n_embd}, vocabulary {p.n_vocab:,}")
    heads = f"{max(p.n_head, default=0)} heads, {max(p.n_head_kv, default=0)} KV heads, head dim {p.head_dim_k}/{p.head_dim_v}"
    out.append(
        f"  attention      {heads}"
        + (f", MLA kv_lora_rank {p.kv_lora_rank}" if p.is_mla else "")
        + (f", sliding window {p.n_swa} on {sum(p.swa_layers)} layers" if p.has_swa else "")
    )
    if p.is_moe:
        out.append(
            f"  experts        {p.n_expert} routed, {p.n_expert_used} used per token"
            + (f", {p.n_expert_shared} shared" if p.n_expert_shared else "")
            + (f"; expert FFN {p.n_ff_exp}" if p.n_ff_exp else "")
        )
    if any(p.recurrent_layers):
        out.append(
            f"  recurrent      {sum(p.recurrent_layers)} SSM layers (d_inner {p.ssm_d_inner}, d_state {p.ssm_d_state})"
        )
    mix = ", ".join(f"{q.type_name} {100 * q.nbytes / max(model.tensor_bytes, 1):.1f}%" for q in model.quant_mix())
    out.append(f"  quantization   {mix}")
    for w in model.warnings:
        if w not in notes:
            out.append(f"  warning        {w}")
    if verdict is not None:
        out.append(
            "  llama.cpp      "
            + ("loads this file (" + verdict.build + ")" if verdict.loads else "not checked: " + verdict.reason)
        )
    out.append("")
    cols = [r.value for r in LAYER_ROLES]
    present = [c for c in cols if any(b.role.value == c for b in model.blocks)]
    out.append("  " + "block".ljust(8) + "".join(c.rjust(12) for c in present) + "total".rjust(12))
    for b in model.blocks:
        if b.layer is None and b.role is Role.INPUT:
            out.append("  " + "input".ljust(8) + "".rjust(12 * len(present)) + fmt_bytes(b.nbytes).rjust(12))
    for il in range(p.n_layer):
        by_role = {b.role.value: b.nbytes for b in model.layer_blocks(il)}
        cells = "".join((fmt_bytes(by_role[c]) if c in by_role else "-").rjust(12) for c in present)
        tag = "*" if il >= p.n_layer - p.nextn_layers else "r" if il == p.router_layer else " "
        out.append("  " + f"{il}{tag}".ljust(8) + cells + fmt_bytes(sum(by_role.values())).rjust(12))
    for b in model.blocks:
        if b.layer is None and b.role is not Role.INPUT:
            out.append("  " + b.role.value.ljust(8) + "".rjust(12 * len(present)) + fmt_bytes(b.nbytes).rjust(12))
    if p.nextn_layers:
        out.append("  * NextN/MTP layer: in the file, loaded only for MTP speculative decoding")
    if p.router_layer >= 0:
        out.append("  r the adapter router's attention layer: llama.cpp adds it, with a KV cache and no weights")
    out.append(f"  all tensors: {len(model.tensors)}, {fmt_bytes(model.tensor_bytes)}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    try:
        model, verdict = load_model(args.model, args.llama_dir)
        model = predicted(model, args)
    except ERRORS as exc:
        return fail(exc)
    if args.json:
        print_json(to_json(model, verdict))
    else:
        print(render_text(model, verdict))
    return 0
