"""Speed parameters for the devices of a placement: from detection, the card catalogue, a RAM test and calibration."""

from __future__ import annotations

import json
import logging
import math
import socket
from pathlib import Path

from ..lanes import CPU, Lane
from ..paths import atomic_write_text, data_dir, read_small_file, set_aside
from .predict import GB, DeviceSpeed, SpeedParams

log = logging.getLogger(__name__)

DEFAULT_HOST_BW = 60 * GB  # dual-channel DDR5, sustained, when nothing was measured
DEFAULT_GPU_BW = 500 * GB
# An RPC crossing is several synchronous requests (inputs, graph, outputs), not one round trip: about 1.5 ms
# per crossing measured on loopback here (tests/speed/test_proof.py), more over a LAN.
RPC_LINK = (1.25 * GB, 2.0e-3)  # 10 GbE, unless the user says otherwise
LOOPBACK_LINK = (5 * GB, 1.5e-3)


def speed_params(
    devices: list[Lane], host_bandwidth: float | None = None, calibration: dict[str, dict] | None = None
) -> SpeedParams:
    out: dict[str, DeviceSpeed] = {CPU: DeviceSpeed(CPU, "cpu", host_bandwidth or DEFAULT_HOST_BW, eff_bandwidth=0.5)}
    for d in devices:
        if d.kind == "rpc":
            link_bw, lat = LOOPBACK_LINK if d.is_loopback else RPC_LINK
            # a CPU-backed RPC server reads from host RAM; a GPU one reports its own bandwidth
            bw = d.bandwidth or (host_bandwidth or DEFAULT_HOST_BW)
            cpu_backed = not d.bandwidth
            out[d.name] = DeviceSpeed(
                d.name,
                "rpc",
                bw,
                link_bandwidth=link_bw,
                link_latency=lat,
                eff_bandwidth=0.5 if cpu_backed else 0.7,
                flops_per_byte=8.0 if cpu_backed else 0.0,
            )
        else:
            out[d.name] = DeviceSpeed(d.name, "gpu", d.bandwidth or DEFAULT_GPU_BW)
    for name, fitted in (calibration or {}).items():
        if name in out:
            for k in ("eff_bandwidth", "eff_flops", "link_latency"):
                if k in fitted:
                    setattr(out[name], k, float(fitted[k]))
    return SpeedParams(
        out, token_overhead=float((calibration or {}).get("_overhead", {}).get("token_overhead", 1.5e-3))
    )


def calibration_file() -> Path:
    return data_dir() / "speed-calibration.json"


def machine_key(devices: list[Lane]) -> str:
    return socket.gethostname() + "|" + ",".join(f"{d.name}:{d.total >> 30}G" for d in devices)


#: The largest calibration file read (one small entry per machine and device set).
MAX_CALIBRATION_BYTES = 1 << 20
#: The figures a calibration entry may hold per device (and ``_overhead``), all finite and positive.
_FITTED_KEYS = ("eff_bandwidth", "eff_flops", "link_latency", "token_overhead")


def _read_calibration_file(path: Path, notes: list[str]) -> dict | None:
    """The whole file as a dict; None (and a note) when it is missing, unreadable or not a JSON object."""
    try:
        data = json.loads(read_small_file(path, MAX_CALIBRATION_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, too large, not UTF-8 or not JSON
        _note(notes, f"{path} cannot be used ({_clip(exc)}); the speed model uses its default figures")
        return None
    if not isinstance(data, dict):
        _note(notes, f"{path} is not a calibration file (not a JSON object); the speed model uses its defaults")
        return None
    return data


def _clip(exc: BaseException, n: int = 120) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= n else text[: n - 1] + "…"


def _note(notes: list[str], text: str) -> None:
    log.warning("%s", text)
    notes.append(text)


def _valid_entry(entry: object) -> dict[str, dict] | None:
    """``entry`` when it has the shape :func:`save_calibration` writes (device -> figure -> finite number)."""
    if not isinstance(entry, dict):
        return None
    for figures in entry.values():
        if not isinstance(figures, dict):
            return None
        for k, v in figures.items():
            if k not in _FITTED_KEYS or isinstance(v, bool) or not isinstance(v, (int, float)):
                return None
            if not math.isfinite(v) or v < 0:
                return None
    return entry


def load_calibration(devices: list[Lane], notes: list[str] | None = None) -> dict[str, dict] | None:
    """This machine's fitted figures for these devices, or None when none were saved.

    A file or entry of the wrong shape is ignored: it is logged and, when ``notes`` is given, a sentence
    saying so is appended to it (for the caller to show).
    """
    notes = notes if notes is not None else []
    path = calibration_file()
    data = _read_calibration_file(path, notes)
    if data is None:
        return None
    key = machine_key(devices)
    if key not in data:
        return None
    entry = _valid_entry(data[key])
    if entry is None:
        _note(
            notes,
            f"the calibration for this machine in {path} has the wrong shape; it is ignored (run the "
            "speed proof again to recalibrate)",
        )
    return entry


def save_calibration(devices: list[Lane], fitted: dict[str, dict], notes: list[str] | None = None) -> Path:
    """Store ``fitted`` for this machine, keeping the other machines' entries; written in one step.

    A file that cannot be read is not overwritten: it is set aside (``.corrupt-<time>``, with a note).
    """
    notes = notes if notes is not None else []
    path = calibration_file()
    data = _read_calibration_file(path, notes)
    if data is None and path.exists():
        try:
            kept = set_aside(path)
        except OSError as exc:
            _note(notes, f"could not set {path} aside ({_clip(exc)})")
        else:
            _note(notes, f"the unreadable calibration file was kept as {kept.name}")
    data = dict(data or {})
    data[machine_key(devices)] = fitted
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))
    return path
