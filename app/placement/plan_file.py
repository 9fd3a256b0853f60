"""Save and load plans (a placement plus its settings) as versioned JSON.

A plan records the model file (path, size and a fingerprint of its tensor
table) so that opening it against another file is detected and explained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from .. import __version__
from ..errors import ReadError
from ..lanes import Lane
from ..memory.settings import LlamaSettings
from ..model import Model
from .placement import CPU, Placement

FORMAT = "layerdeck-plan"
VERSION = 1


class PlanError(ReadError, ValueError):
    """The plan file cannot be used; the message says why."""


class PlanMismatch(PlanError):
    """The plan was made for a different model file."""


def fingerprint(model: Model) -> str:
    """A cheap identity of the model: architecture and every tensor's name, type and shape."""
    h = hashlib.sha256(model.params.arch.encode())
    for t in model.tensors:
        h.update(f"{t.name}|{t.type_id}|{t.shape}\n".encode())
    return h.hexdigest()[:32]


def to_dict(p: Placement) -> dict:
    default = p.default_tensor_devices()
    diffs = {t.name: dev for t, dev, d0 in zip(p.model.tensors, p.tensor_device, default) if dev != d0}
    settings = dataclasses.asdict(p.settings)
    settings["overrides"] = [list(x) for x in p.settings.overrides]
    return {
        "format": FORMAT,
        "version": VERSION,
        "saved_by": f"layerdeck {__version__}",
        "model": {
            "path": str(p.model.path),
            "size": p.model.file_size,
            "fingerprint": fingerprint(p.model),
            "architecture": p.model.params.arch,
            "tensors": len(p.model.tensors),
        },
        "devices": [dataclasses.asdict(d) for d in p.devices],
        "settings": settings,
        "layers": list(p.layer_device),
        "tensors": diffs,
        "pinned": sorted(p.pinned),
    }


def save_plan(p: Placement, path: str | os.PathLike) -> None:
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(to_dict(p), indent=1), encoding="utf-8")
    os.replace(tmp, path)  # never leave a half-written plan behind


def read_plan(path: str | os.PathLike) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"{path} does not exist.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path} is not a Layerdeck plan (not valid JSON: {exc}).") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PlanError(f"{path} is not a Layerdeck plan.")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION:
        raise PlanError(
            f"{path} was saved by a newer Layerdeck (plan version {data.get('version')}); update Layerdeck."
        )
    return data


def from_dict(data: dict, model: Model, *, check: bool = True) -> Placement:
    m = data.get("model", {})
    if check and m.get("fingerprint") != fingerprint(model):
        raise PlanMismatch(
            f"this plan was made for {Path(m.get('path', '?')).name} ({m.get('architecture', '?')}, "
            f"{m.get('tensors', '?')} tensors, {m.get('size', 0) / 2**30:.1f} GiB), but the open model is "
            f"{model.path.name} ({model.params.arch}, {len(model.tensors)} tensors, {model.file_size / 2**30:.1f} GiB): "
            "its tensors differ, so the placement would not mean the same. Open the model the plan was made for."
        )
    fields = {f.name for f in dataclasses.fields(LlamaSettings)}
    raw = {k: v for k, v in data.get("settings", {}).items() if k in fields}
    raw["overrides"] = [tuple(x) for x in raw.get("overrides", [])]
    settings = LlamaSettings(**raw)
    devices = [Lane(**d) for d in data.get("devices", [])]
    lanes = {d.name for d in devices} | {CPU}
    layers = list(data.get("layers", []))
    if len(layers) != model.params.n_layer + 1 or not set(layers) <= lanes:
        raise PlanError("the plan's layer list does not fit this model or names devices the plan does not list.")
    p = Placement(model, devices, layers, [], settings, set(data.get("pinned", [])))
    p.tensor_device = p.default_tensor_devices()
    index = {t.name: i for i, t in enumerate(model.tensors)}
    for name, dev in data.get("tensors", {}).items():
        if name not in index or dev not in lanes:
            raise PlanError(f"the plan places {name} on {dev}, which this model or device list does not have.")
        p.tensor_device[index[name]] = dev
    return p


def load_plan(path: str | os.PathLike, model: Model, *, check: bool = True) -> Placement:
    return from_dict(read_plan(path), model, check=check)
