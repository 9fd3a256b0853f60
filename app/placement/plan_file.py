"""Save and load plans (a placement plus its settings) as versioned JSON.

A plan records the model file (absolute path, size and a fingerprint of its tensor table) so that
opening it against another file is detected and explained.

Reading is defensive, because a plan is a file the user hands us: :func:`read_plan` refuses folders,
pipes (a FIFO would block ``open`` forever) and anything larger than :data:`MAX_PLAN_BYTES` without
reading it, and :func:`check_plan` -- the schema, as code -- checks every field's type, range and
allowed values before any of it reaches a :class:`Placement`, raising :class:`PlanError` with the JSON
path of the first bad field (``settings.n_ctx: -5 is not a context size (0 or more)``). What depends on
the model (layer count, tensor names, block ids) is checked by :func:`from_dict`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from .. import __version__
from ..command.values import ArgsError, check_settings
from ..errors import ExportError, ReadError
from ..lanes import DeviceKind, Lane
from ..memory.settings import CACHE_TYPES, SPEC_TYPES, TOOLS, LlamaSettings
from ..model import Model
from ..paths import FileTooLarge, NotARegularFile, atomic_write_text, read_small_file
from ..units import fmt_bytes
from .placement import CPU, Placement

__all__ = [
    "FORMAT",
    "VERSION",
    "MAX_PLAN_BYTES",
    "PlanError",
    "PlanMismatch",
    "PlanSaveError",
    "fingerprint",
    "to_dict",
    "save_plan",
    "read_plan",
    "check_plan",
    "from_dict",
    "load_plan",
    "LaunchProfile",
    "launch_from_dict",
    "check_launch",
]

FORMAT = "layerdeck-plan"
VERSION = 1
#: The largest file :func:`read_plan` reads. A plan for the largest models is well under 1 MiB (one
#: device name per layer plus the tensors that differ from their layer's device).
MAX_PLAN_BYTES = 4 << 20

#: llama.cpp reads numeric arguments with ``std::stoi`` (a 32-bit int).
_INT_MAX = 2**31 - 1
_BYTES_MAX = 2**62
FLASH_ATTN = ("on", "off", "auto")
#: ``-sm`` and ``-lm`` values (the converters of :mod:`app.command.values`; a test keeps them equal).
SPLIT_MODES = ("none", "layer", "row", "tensor")
LOAD_MODES = ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")
#: What a device name or buffer type may contain: what llama.cpp names devices with (``CUDA0``,
#: ``RPC0[10.0.0.2:50052]``, ``RPC0[[::1]:50052]``), and nothing that would split a ``-dev``, ``-ts``
#: or ``-ot`` list (``,`` ``/`` ``=`` ``;`` or spaces).
_DEVICE_NAME = re.compile(r"[A-Za-z0-9_.:\[\]@%-]{1,128}", re.ASCII)
_LANE_FIELDS = tuple(f.name for f in dataclasses.fields(Lane))


def _lane_dict(d: Lane) -> dict:
    """A lane as the plan stores it: its fields, ``refused_ops`` only when the device refuses some."""
    out = dataclasses.asdict(d)
    if d.refused_ops:
        out["refused_ops"] = list(d.refused_ops)
    else:
        del out["refused_ops"]
    return out


_OP = re.compile(r"[A-Z][A-Z0-9_]{0,39}")  # a ggml op name (GGML_OP_* without the prefix)
_MAX_PATTERN = 4096


#: What ``launch.host`` may be: an IPv4/IPv6 address or a host name (what llama-server's ``--host`` takes).
_HOST = re.compile(r"[A-Za-z0-9_.:\[\]%-]{1,255}", re.ASCII)
#: An API key: printable ASCII without spaces (it travels in an HTTP header).
_API_KEY = re.compile(r"[!-~]{1,512}", re.ASCII)
_MAX_EXTRA = 256
_MAX_ARG = 4096
_LAUNCH_FIELDS = ("port", "host", "api_key", "extra")


@dataclasses.dataclass
class LaunchProfile:
    """How llama-server is started for this model, besides the placement: saved with the plan (``launch``).

    ``port`` None: a free port each launch. ``host`` other than 127.0.0.1 serves the local network.
    ``extra``: further llama-server arguments (sampling, templates...), one argv item each.
    """

    port: int | None = None
    host: str = "127.0.0.1"
    api_key: str | None = None
    extra: list[str] = dataclasses.field(default_factory=list)

    @property
    def lan(self) -> bool:
        return self.host not in ("127.0.0.1", "localhost", "::1")

    def is_default(self) -> bool:
        return self == LaunchProfile()

    def to_dict(self) -> dict:
        return {"port": self.port, "host": self.host, "api_key": self.api_key, "extra": list(self.extra)}

    def argv(self) -> list[str]:
        """The arguments this profile adds to the command (port and host only when set)."""
        out: list[str] = []
        if self.host != "127.0.0.1":
            out += ["--host", self.host]
        if self.port is not None:
            out += ["--port", str(self.port)]
        if self.api_key:
            out += ["--api-key", self.api_key]
        return out + list(self.extra)


class PlanError(ReadError, ValueError):
    """The plan file cannot be used; the message says why. ``where`` is the JSON path of the bad field."""

    where: str | None = None


class PlanMismatch(PlanError):
    """The plan was made for a different model file."""


class PlanSaveError(ExportError, ValueError):
    """The placement cannot be written as a plan (a value JSON cannot hold)."""


def fingerprint(model: Model) -> str:
    """A cheap identity of the model: architecture and every tensor's name, type and shape."""
    h = hashlib.sha256(model.params.arch.encode())
    for t in model.tensors:
        h.update(f"{t.name}|{t.type_id}|{t.shape}\n".encode())
    return h.hexdigest()[:32]


def to_dict(p: Placement, launch: LaunchProfile | None = None) -> dict:
    default = p.default_tensor_devices()
    diffs = {t.name: dev for t, dev, d0 in zip(p.model.tensors, p.tensor_device, default) if dev != d0}
    settings = dataclasses.asdict(p.settings)
    settings["overrides"] = [list(x) for x in p.settings.overrides]
    settings["draft_overrides"] = [list(x) for x in p.settings.draft_overrides]
    return {
        "format": FORMAT,
        "version": VERSION,
        "saved_by": f"layerdeck {__version__}",
        "model": {
            # absolute, so that the plan (and the autosave) finds the model from any working folder
            "path": str(Path(p.model.path).absolute()),
            "size": p.model.file_size,
            "fingerprint": fingerprint(p.model),
            "architecture": p.model.params.arch,
            "tensors": len(p.model.tensors),
        },
        "devices": [_lane_dict(d) for d in p.devices],
        "settings": settings,
        "layers": list(p.layer_device),
        "tensors": diffs,
        "pinned": sorted(p.pinned),
        # optional (plan version 1 readers that predate it ignore it): how llama-server is started
        **({"launch": launch.to_dict()} if launch is not None and not launch.is_default() else {}),
    }


def save_plan(p: Placement, path: str | os.PathLike, launch: LaunchProfile | None = None) -> None:
    """Write the plan in one step (never half a file). Raises ``OSError`` or :class:`PlanSaveError`.

    ``launch``: the model's launch profile, saved as the plan's optional ``launch`` section."""
    try:
        text = json.dumps(to_dict(p, launch), indent=1, allow_nan=False)
    except ValueError as exc:
        raise PlanSaveError(
            f"the placement cannot be saved as a plan ({exc}): a setting or device figure is not a finite "
            "number. Correct it (the device list or the settings) and save again."
        ) from None
    atomic_write_text(path, text)


# --------------------------------------------------------------------------- reading


def read_plan(path: str | os.PathLike) -> dict:
    """The plan at ``path``, read (at most :data:`MAX_PLAN_BYTES`) and checked by :func:`check_plan`.

    Raises :class:`PlanError` for anything that is not a usable plan file.
    """
    name = os.fspath(path)
    try:
        raw = read_small_file(path, MAX_PLAN_BYTES)
    except FileNotFoundError:
        raise PlanError(f"{name} does not exist.") from None
    except IsADirectoryError:
        raise PlanError(f"{name} is a folder, not a plan: choose the .layerdeck.json file.") from None
    except NotARegularFile:
        raise PlanError(
            f"{name} is not a regular file (a pipe, socket or device), so it is not a plan: choose a "
            ".layerdeck.json file."
        ) from None
    except FileTooLarge as exc:
        raise PlanError(
            f"{name} is {fmt_bytes(exc.size)}; a Layerdeck plan is at most {fmt_bytes(MAX_PLAN_BYTES)}, so "
            "this is not one (a model file?). Choose the .layerdeck.json file that Save plan wrote."
        ) from None
    except (OSError, ValueError) as exc:  # permissions, I/O errors; ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PlanError(f"{name} cannot be read ({reason}); check the path and that you may read the file.") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise PlanError(f"{name} is not a Layerdeck plan (not text: a plan is UTF-8 JSON).") from None
    except RecursionError:
        raise PlanError(f"{name} is not a Layerdeck plan (its JSON is nested far too deeply).") from None
    except ValueError as exc:  # JSONDecodeError, or a number with thousands of digits
        raise PlanError(f"{name} is not a Layerdeck plan (not valid JSON: {_clip(str(exc), 160)}).") from None
    try:
        check_plan(data)
    except PlanError as exc:
        raise _in_file(exc, name) from None
    return data


def _in_file(exc: PlanError, name: str) -> PlanError:
    out = type(exc)(f"{name}: {exc}")
    out.where = exc.where
    return out


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _show(v: Any) -> str:
    """A short, ASCII, non-recursive picture of a JSON value for a message."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        digits = len(str(abs(v))) if v.bit_length() < 14000 else None
        if digits is None or digits > 20:
            return f"a {'negative ' if v < 0 else ''}number of {digits or 'thousands of'} digits"
        return str(v)
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _clip(json.dumps(v), 60)
    if isinstance(v, list):
        return f"a list of {len(v)} item{'s' if len(v) > 1 else ''}" if v else "an empty list"
    if isinstance(v, dict):
        return f"an object with {len(v)} keys" if v else "an empty object"
    return type(v).__name__


def _key(k: str) -> str:
    return _clip(json.dumps(k), 80)


class _Checker:
    """One pass over a parsed plan; the first problem raises :class:`PlanError` naming its JSON path."""

    def bad(self, where: str, problem: str) -> PlanError:
        exc = PlanError(f"{where}: {problem}. Correct it in the plan file, or open the model and save the plan again.")
        exc.where = where
        return exc

    def obj(self, parent: dict, key: str, where: str, *, required: bool = True) -> dict | None:
        if key not in parent:
            if required:
                raise self.bad(where, "missing (an object)")
            return None
        v = parent[key]
        if not isinstance(v, dict):
            raise self.bad(where, f"{_show(v)} is not an object")
        return v

    def list_(self, parent: dict, key: str, where: str, *, required: bool = False) -> list | None:
        if key not in parent:
            if required:
                raise self.bad(where, "missing (a list)")
            return None
        v = parent[key]
        if not isinstance(v, list):
            raise self.bad(where, f"{_show(v)} is not a list")
        return v

    def string(self, v: Any, where: str, what: str = "a text", *, nonempty: bool = True) -> str:
        if not isinstance(v, str) or (nonempty and not v):
            raise self.bad(where, f"{_show(v)} is not {what}")
        return v

    def whole(self, v: Any, where: str, what: str, lo: int, hi: int = _INT_MAX, *, also: tuple = ()) -> None:
        if v in also and not isinstance(v, bool) and (v is None or type(v) is int):
            return
        if type(v) is not int or not lo <= v <= hi:
            raise self.bad(where, f"{_show(v)} is not {what}")

    def number(self, v: Any, where: str, what: str) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1e30:
            raise self.bad(where, f"{_show(v)} is not {what}")

    def flag(self, v: Any, where: str, *, nullable: bool = False) -> None:
        if not isinstance(v, bool) and not (nullable and v is None):
            raise self.bad(where, f"{_show(v)} is not true or false{' (or null)' if nullable else ''}")

    def one_of(self, v: Any, where: str, what: str, allowed: tuple[str, ...], *, nullable: bool = False) -> None:
        if (nullable and v is None) or (isinstance(v, str) and v in allowed):
            return
        raise self.bad(where, f"{_show(v)} is not {what} ({', '.join(allowed)}{' or null' if nullable else ''})")

    # ------------------------------------------------------------------ sections

    def plan(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PlanError(
                f'not a Layerdeck plan (it has no "format": "{FORMAT}"); choose a file that Save plan wrote.'
            )
        version = data.get("version")
        if type(version) is not int or version < 1:
            raise self.bad("version", f"{_show(version)} is not a plan version (a whole number, 1 or more)")
        if version > VERSION:
            raise PlanError(
                f"this plan was saved by a newer Layerdeck (plan version {version}; this one reads up to "
                f"{VERSION}): update Layerdeck."
            )
        if "saved_by" in data and not isinstance(data["saved_by"], str):
            raise self.bad("saved_by", f"{_show(data['saved_by'])} is not a text")
        self.model(self.obj(data, "model", "model") or {})
        lanes = self.devices(self.list_(data, "devices", "devices") or [])
        self.settings(self.obj(data, "settings", "settings", required=False) or {})
        layers = self.list_(data, "layers", "layers", required=True) or []
        for i, dev in enumerate(layers):
            self.lane(dev, f"layers[{i}]", lanes)
        tensors = self.obj(data, "tensors", "tensors", required=False) or {}
        for name, dev in tensors.items():
            self.lane(dev, f"tensors[{_key(name)}]", lanes)
        for i, item in enumerate(self.list_(data, "pinned", "pinned") or []):
            self.string(item, f"pinned[{i}]", "a block or part id (such as 12:experts)")
        launch = self.obj(data, "launch", "launch", required=False)
        if launch is not None:
            self.launch(launch)

    def launch(self, s: dict) -> None:
        for key in s:
            if key not in _LAUNCH_FIELDS:
                raise self.bad(f"launch.{_clip(key, 40)}", f"not a launch field ({', '.join(_LAUNCH_FIELDS)})")
        if "port" in s:
            self.whole(s["port"], "launch.port", "a TCP port (1-65535) or null", 1, 65535, also=(None,))
        if "host" in s:
            v = s["host"]
            if not isinstance(v, str) or not _HOST.fullmatch(v):
                raise self.bad("launch.host", f"{_show(v)} is not an address or host name (such as 127.0.0.1)")
        if "api_key" in s:
            v = s["api_key"]
            if v is not None and (not isinstance(v, str) or not _API_KEY.fullmatch(v)):
                raise self.bad("launch.api_key", "is not an API key (printable characters without spaces) or null")
        extra = self.list_(s, "extra", "launch.extra") or []
        if len(extra) > _MAX_EXTRA:
            raise self.bad("launch.extra", f"{len(extra)} arguments; at most {_MAX_EXTRA}")
        for i, a in enumerate(extra):
            if not isinstance(a, str) or len(a) > _MAX_ARG or "\0" in a:
                raise self.bad(f"launch.extra[{i}]", f"{_show(a)} is not an argument (a text without NUL)")

    def model(self, m: dict) -> None:
        path = self.string(m.get("path"), "model.path", "the model's file path")
        if "\0" in path:
            raise self.bad("model.path", "contains a NUL character, so it is not a file path")
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            raise self.bad("model.path", f"{_show(path)} cannot be a file name on this system") from None
        self.string(m.get("fingerprint"), "model.fingerprint", "a model fingerprint")
        if "architecture" in m:
            self.string(m["architecture"], "model.architecture", "an architecture name", nonempty=False)
        for key in ("size", "tensors"):
            if key in m:
                self.whole(m[key], f"model.{key}", "a count (0 or more)", 0, _BYTES_MAX)

    def devices(self, devices: list) -> set[str]:
        lanes = {CPU}
        for i, d in enumerate(devices):
            where = f"devices[{i}]"
            if not isinstance(d, dict):
                raise self.bad(where, f"{_show(d)} is not a device (an object with name and buft)")
            for key in d:
                if key not in _LANE_FIELDS:
                    raise self.bad(f"{where}.{_clip(key, 40)}", f"not a device field ({', '.join(_LANE_FIELDS)})")
            for key in ("name", "buft"):
                if key not in d:
                    raise self.bad(f"{where}.{key}", "missing")
                v = d[key]
                if not isinstance(v, str) or not _DEVICE_NAME.fullmatch(v):
                    raise self.bad(
                        f"{where}.{key}",
                        f"{_show(v)} is not a llama.cpp device name (letters, digits and . _ : - [ ] @ %)",
                    )
            name = d["name"]
            if name == CPU or name in lanes:
                raise self.bad(f"{where}.name", f"{_show(name)} is {'the host' if name == CPU else 'listed twice'}")
            lanes.add(name)
            for key in ("free", "total"):
                if key in d:
                    self.whole(d[key], f"{where}.{key}", "a size in bytes (0 or more)", 0, _BYTES_MAX)
            if "kind" in d:
                self.one_of(d["kind"], f"{where}.kind", "a device kind", tuple(k.value for k in DeviceKind))
            if "bandwidth" in d:
                self.number(d["bandwidth"], f"{where}.bandwidth", "a bandwidth in bytes per second (0 or more)")
            ep = d.get("endpoint")
            if ep is not None and (not isinstance(ep, str) or not _DEVICE_NAME.fullmatch(ep)):
                raise self.bad(f"{where}.endpoint", f"{_show(ep)} is not an RPC endpoint (host:port) or null")
            if d.get("max_tensor_bytes") is not None:
                self.whole(
                    d["max_tensor_bytes"], f"{where}.max_tensor_bytes", "a size in bytes (1 or more)", 1, _BYTES_MAX
                )
            for key in ("alignment", "max_buffer", "host_alignment", "host_max_buffer"):
                if key in d:
                    self.whole(d[key], f"{where}.{key}", "a size in bytes (0 or more)", 0, _BYTES_MAX)
            ops = d.get("refused_ops", [])
            if (
                not isinstance(ops, list)
                or len(ops) > 64
                or not all(isinstance(o, str) and _OP.fullmatch(o) for o in ops)
            ):
                raise self.bad(f"{where}.refused_ops", f"{_show(ops)} is not a list of ggml op names (DSV4_HC_COMB)")
        return lanes

    def settings(self, s: dict) -> None:
        def at(key: str) -> str:
            return f"settings.{key}"

        # keys Layerdeck does not know (a newer minor release) are ignored, like llama.cpp's defaults
        for key, v in s.items():
            w = at(key)
            if key == "n_ctx":
                self.whole(v, w, "a context size (0 or more)", 0)
            elif key == "n_parallel":
                self.whole(v, w, "a number of slots (-1 for auto, or 1 or more)", 1, also=(-1, None))
            elif key in ("n_batch", "n_ubatch"):
                self.whole(v, w, "a batch size (1 or more)", 1)
            elif key in ("n_gpu_layers", "draft_n_gpu_layers"):
                self.whole(v, w, "a number of layers (-1 auto, -2 all, or 0 or more)", -2)
            elif key == "main_gpu":
                self.whole(v, w, "a device index (0 or more)", 0)
            elif key == "n_threads":
                self.whole(v, w, "a number of threads (-1 for the default, or 0 or more) or null", -1, also=(None,))
            elif key in ("type_k", "type_v", "draft_type_k", "draft_type_v"):
                self.one_of(v, w, "a KV cache type", CACHE_TYPES)
            elif key == "flash_attn":
                self.one_of(v, w, "a flash-attention mode", FLASH_ATTN)
            elif key == "split_mode":
                self.one_of(v, w, "a split mode", SPLIT_MODES)
            elif key == "load_mode":
                self.one_of(v, w, "a load mode", LOAD_MODES, nullable=True)
            elif key == "tool":
                self.one_of(v, w, "a llama.cpp tool", TOOLS)
            elif key == "kv_unified":
                self.flag(v, w, nullable=True)
            elif key in (
                "swa_full",
                "no_kv_offload",
                "repack",
                "use_host",
                "op_offload",
                "mmproj_offload",
                "spec_draft_backend_sampling",
            ):
                self.flag(v, w)
            elif key == "tensor_split":
                if v is not None:
                    if not isinstance(v, list) or len(v) > 256:
                        raise self.bad(w, f"{_show(v)} is not a list of proportions (or null)")
                    for i, x in enumerate(v):
                        self.number(x, f"{w}[{i}]", "a proportion (0 or more)")
            elif key in ("devices", "draft_devices"):
                if v is not None:
                    if not isinstance(v, list):
                        raise self.bad(w, f"{_show(v)} is not a list of device names (or null)")
                    for i, x in enumerate(v):
                        if not isinstance(x, str) or not _DEVICE_NAME.fullmatch(x):
                            raise self.bad(f"{w}[{i}]", f"{_show(x)} is not a llama.cpp device name")
            elif key in ("overrides", "draft_overrides"):
                if not isinstance(v, list):
                    raise self.bad(w, f"{_show(v)} is not a list of [pattern, buffer type] pairs")
                for i, pair in enumerate(v):
                    self.override(pair, f"{w}[{i}]")
            elif key in ("draft_model", "mmproj"):
                if v is not None and (not isinstance(v, str) or not v or len(v) > 4096 or "\0" in v):
                    what = "a draft model" if key == "draft_model" else "a projector"
                    raise self.bad(w, f"{_show(v)} is not the path of {what} file (or null)")
            elif key == "mmproj_device":
                if v is not None and (not isinstance(v, str) or not _DEVICE_NAME.fullmatch(v)):
                    raise self.bad(w, f"{_show(v)} is not a llama.cpp device name (or null)")
            elif key in ("image_min_tokens", "image_max_tokens"):
                self.whole(v, w, "a number of image tokens (or null)", 1, also=(None,))
            elif key == "spec_types":
                if not isinstance(v, list) or len(v) > 64:
                    raise self.bad(w, f"{_show(v)} is not a list of speculative decoding types")
                for i, x in enumerate(v):
                    self.one_of(x, f"{w}[{i}]", "a speculative decoding type", SPEC_TYPES[1:])
            elif key == "spec_draft_n_max":
                self.whole(v, w, "a number of drafted tokens (0 or more)", 0)

    def override(self, pair: Any, where: str) -> None:
        if not isinstance(pair, list) or len(pair) != 2:
            raise self.bad(where, f"{_show(pair)} is not a [pattern, buffer type] pair")
        pattern, buft = pair
        if not isinstance(pattern, str) or not pattern or len(pattern) > _MAX_PATTERN:
            raise self.bad(f"{where}[0]", f"{_show(pattern)} is not a tensor name pattern")
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError, ValueError):
            raise self.bad(f"{where}[0]", f"{_show(pattern)} is not a regular expression") from None
        if not isinstance(buft, str) or not _DEVICE_NAME.fullmatch(buft):
            raise self.bad(f"{where}[1]", f"{_show(buft)} is not a buffer type (such as CPU or CUDA0)")

    def lane(self, dev: Any, where: str, lanes: set[str]) -> None:
        if not isinstance(dev, str) or dev not in lanes:
            raise self.bad(where, f"{_show(dev)} is not CPU or one of the plan's devices ({', '.join(sorted(lanes))})")


def check_plan(data: Any) -> None:
    """The plan schema (version 1): every field's type, range and allowed values; raises :class:`PlanError`.

    Checks what a plan says on its own; :func:`from_dict` checks it against the model.
    """
    _Checker().plan(data)


def check_launch(section: Any) -> LaunchProfile:
    """A ``launch`` section (as a plan holds it) checked and read; raises :class:`PlanError` naming the field."""
    c = _Checker()
    if not isinstance(section, dict):
        raise c.bad("launch", f"{_show(section)} is not an object")
    c.launch(section)
    return LaunchProfile(
        port=section.get("port"),
        host=section.get("host", "127.0.0.1"),
        api_key=section.get("api_key") or None,
        extra=list(section.get("extra", [])),
    )


def launch_from_dict(data: dict) -> LaunchProfile | None:
    """The launch profile of a checked plan, or None when it has none."""
    return check_launch(data["launch"]) if "launch" in data else None


def from_dict(data: dict, model: Model, *, check: bool = True) -> Placement:
    """The placement a plan describes, on ``model``. ``check``: refuse a plan made for another model file.

    Raises :class:`PlanError` (:class:`PlanMismatch` for another model).
    """
    check_plan(data)
    c = _Checker()
    m = data["model"]
    if check and m["fingerprint"] != fingerprint(model):
        size = m.get("size")
        gib = f"{size / 2**30:.1f} GiB" if isinstance(size, int) and not isinstance(size, bool) else "? GiB"
        raise PlanMismatch(
            f"this plan was made for {Path(m['path']).name} ({m.get('architecture', '?')}, "
            f"{m.get('tensors', '?')} tensors, {gib}), but the open model is "
            f"{model.path.name} ({model.params.arch}, {len(model.tensors)} tensors, {model.file_size / 2**30:.1f} GiB): "
            "its tensors differ, so the placement would not mean the same. Open the model the plan was made for."
        )
    fields = {f.name for f in dataclasses.fields(LlamaSettings)}
    raw = {k: v for k, v in data.get("settings", {}).items() if k in fields}
    raw["overrides"] = [tuple(x) for x in raw.get("overrides", [])]
    raw["draft_overrides"] = [tuple(x) for x in raw.get("draft_overrides", [])]
    settings = LlamaSettings(**raw)
    try:
        check_settings(settings)  # what llama.cpp refuses as a whole (a quantized V cache without flash attention)
    except ArgsError as exc:
        raise c.bad("settings", str(exc)) from None
    devices = [Lane(**d) for d in data.get("devices", [])]
    layers = list(data["layers"])
    want = model.params.n_layer + 1
    if len(layers) != want:
        raise c.bad(
            "layers",
            f"{len(layers)} entries, but this model has {model.params.n_layer} layers and the output layer "
            f"({want} entries)",
        )
    index = model.index
    pinned = data.get("pinned", [])
    for i, item in enumerate(pinned):
        if item not in index.ids:
            raise c.bad(f"pinned[{i}]", f"{_show(item)} is not a block or part of this model (such as 3:experts)")
    p = Placement(model, devices, layers, [], settings, set(pinned))
    p.tensor_device = p.default_tensor_devices()
    for name, dev in data.get("tensors", {}).items():
        pos = index.tensor_pos.get(name)
        if pos is None:
            raise c.bad(f"tensors[{_key(name)}]", "this model has no tensor of that name")
        if p.tensor_device[pos] == "":
            raise c.bad(f"tensors[{_key(name)}]", "llama.cpp does not load this tensor, so it has no device")
        p.tensor_device[pos] = dev
    return p


def load_plan(path: str | os.PathLike, model: Model, *, check: bool = True) -> Placement:
    """Read, check and apply the plan at ``path`` to ``model``; raises :class:`PlanError` naming the file."""
    data = read_plan(path)
    try:
        return from_dict(data, model, check=check)
    except PlanError as exc:
        raise _in_file(exc, os.fspath(path)) from None
