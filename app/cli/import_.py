"""``layerdeck import [--json] [--devices ...] -- LLAMA_ARGS...``: the placement a llama.cpp command means.

JSON schema ``layerdeck.placement/1`` is documented in ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
from collections import Counter

from ..command.parse import parse_llama_args
from ..errors import CommandError
from ..lanes import CPU
from ..model import BlockId, Role
from ..placement import Placement
from .common import (
    ERRORS,
    check_notes,
    detection_problems,
    device_options,
    devices,
    fail,
    fmt_mib,
    llama_args,
    load_model,
    print_json,
)

SCHEMA = "layerdeck.placement/1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", parents=[device_options()], help="print the placement a llama.cpp command means")
    p.add_argument("--json", action="store_true")
    p.add_argument("llama_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def imported(argv: list[str], devices_spec: str | None, llama_dir: str | None):
    """``(parsed, model, placement, notes)`` for a llama.cpp command line (shared with ``canonical``).

    ``notes`` say where detection failed or assumed something (:func:`app.cli.common.detection_problems`).
    """
    parsed = parse_llama_args(argv)
    if not parsed.model:
        raise CommandError("the command has no -m MODEL.")
    model, verdict = load_model(parsed.model, llama_dir)
    lanes, detection = devices(devices_spec, parsed.rpc, llama_dir, parsed.settings, parsed.fit)
    notes = check_notes(verdict) + detection_problems(detection)
    return parsed, model, Placement.from_settings(model, lanes, parsed.settings), notes


def placement_json(p: Placement) -> dict:
    blocks = []
    for b in p.model.blocks:
        entry = {"id": b.id, "device": p.device_of(b.id), "bytes": b.nbytes}
        if b.role is Role.EXPERTS:
            entry["parts"] = {part: p.device_of(str(BlockId(b.layer, b.role, part))) for part in b.parts}
        blocks.append(entry)
    return {
        "schema": SCHEMA,
        "devices": [d.name for d in p.devices] + [CPU],
        "layers": p.layer_device,
        "blocks": blocks,
        "tensors": {t.name: d for t, d in zip(p.model.tensors, p.tensor_device) if d},
    }


def placement_text(p: Placement) -> str:
    out = []
    n = p.model.params.n_layer
    runs: list[tuple[str, int, int]] = []
    for il, dev in enumerate(p.layer_device):
        if runs and runs[-1][0] == dev:
            runs[-1] = (dev, runs[-1][1], il)
        else:
            runs.append((dev, il, il))
    for dev, a, b in runs:
        last = "output" if b == n else str(b)
        out.append(f"layers {a}-{last}: {dev}" if a != b else f"layer {a if a < n else 'output'}: {dev}")
    default = p.default_tensor_devices()
    moved: Counter[tuple[str, str]] = Counter()
    for t, d, d0 in zip(p.model.tensors, p.tensor_device, default):
        if d != d0:
            moved[(p.model.block_of(t.name).role.value, d)] += t.nbytes
    for (role, dev), nbytes in sorted(moved.items()):
        out.append(f"moved by overrides: {role} tensors, {fmt_mib(nbytes)} -> {dev}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    try:
        parsed, model, p, notes = imported(llama_args(args.llama_args), args.devices, args.llama_dir)
    except ERRORS as exc:
        return fail(exc)
    if args.json:
        doc = placement_json(p)
        doc["warnings"] = parsed.warnings
        doc["notes"] = notes
        print_json(doc)
    else:
        print(placement_text(p))
        for w in parsed.warnings:
            print(f"warning: {w}")
        for n in notes:
            print(f"note: {n}")
    return 0
