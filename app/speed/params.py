"""Speed parameters for the devices of a placement: from detection, the card catalogue, a RAM test and calibration."""

from __future__ import annotations

import json
import logging
import math
import socket
from pathlib import Path

from ..lanes import CPU, Lane
from ..paths import atomic_write_text, data_dir, read_small_file, set_aside
from .predict import GB, CpuFacts, DeviceSpeed, SpeedParams

log = logging.getLogger(__name__)

DEFAULT_HOST_BW = 60 * GB  # dual-channel DDR5, sustained, when nothing was measured
DEFAULT_GPU_BW = 500 * GB
# An RPC crossing is several synchronous requests (inputs, graph, outputs), not one round trip: about 1.5 ms
# per crossing measured on loopback here (tests/speed/test_proof.py), more over a LAN.
RPC_LINK = (1.25 * GB, 2.0e-3)  # 10 GbE, unless the user says otherwise
LOOPBACK_LINK = (5 * GB, 1.5e-3)


#: The fraction of the measured RAM figure (:func:`app.speed.membench.measure_host_bandwidth`, one thread's
#: copies on every core, read and write counted) that llama.cpp's decode streams (fitted on this project's
#: data set, benchmarks/speed_data: 0.82-0.93 on its two halves; calibration replaces it).
CPU_EFF_BANDWIDTH = 0.85

#: The clock assumed where the CPU does not say (said in the notes of whoever shows the figures).
DEFAULT_MHZ = 2000.0


def host_cpu() -> CpuFacts:
    """This machine's CPU: physical cores (llama.cpp's default thread count), SIMD flags and clock."""
    import platform

    import psutil

    cores = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    simd: tuple[str, ...] = ()
    mhz: float | None = None
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        simd = ("neon",)
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags") and not simd:
                    simd = tuple(x for x in line.split(":", 1)[1].split() if x.startswith(("avx", "fma")))
                elif line.startswith("cpu MHz") and mhz is None:
                    mhz = float(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    if mhz is None:
        try:
            freq = psutil.cpu_freq()
            mhz = (freq.max or freq.current) if freq else None
        except (OSError, RuntimeError, NotImplementedError):
            mhz = None
    if not simd and machine in ("x86_64", "amd64"):
        simd = ("avx2",)  # every x86-64 CPU llama.cpp's default build targets since 2013; flags not readable
    return CpuFacts(physical_cores=int(cores), simd=simd, mhz=mhz or None)


#: The fraction of the SIMD units' FLOPs ggml's CPU matrix kernels reach in prompt processing (fitted on
#: this project's data set: 0.34-0.36; calibration replaces it).
CPU_EFF_FLOPS = 0.35


def _cpu_device(name: str, kind: str, bandwidth: float, cpu: CpuFacts, eff_bandwidth: float, **kw) -> DeviceSpeed:
    return DeviceSpeed(
        name,
        kind,
        bandwidth,
        eff_bandwidth=eff_bandwidth,
        eff_flops=CPU_EFF_FLOPS,
        cores=cpu.physical_cores,
        clock_hz=(cpu.mhz or DEFAULT_MHZ) * 1e6,
        simd=cpu.best_simd,
        **kw,
    )


def speed_params(
    devices: list[Lane],
    host_bandwidth: float | None = None,
    calibration: dict[str, dict] | None = None,
    cpu: CpuFacts | None = None,
) -> SpeedParams:
    """The speed model's figures for ``devices`` and the host (``cpu``: detected when not given).

    A CPU-backed RPC server on this machine (loopback) shares this CPU; one on another host is assumed to
    have the same CPU (it cannot say; the figures' notes say so)."""
    cpu = cpu or host_cpu()
    host_bw = host_bandwidth or DEFAULT_HOST_BW
    out: dict[str, DeviceSpeed] = {CPU: _cpu_device(CPU, "cpu", host_bw, cpu, CPU_EFF_BANDWIDTH)}
    for d in devices:
        if d.kind == "rpc":
            link_bw, lat = LOOPBACK_LINK if d.is_loopback else RPC_LINK
            if d.bandwidth:  # a GPU behind the server reports its own bandwidth
                out[d.name] = DeviceSpeed(
                    d.name, "rpc", d.bandwidth, link_bandwidth=link_bw, link_latency=lat, eff_bandwidth=0.7
                )
            else:  # a CPU-backed server reads from host RAM and computes on its cores
                out[d.name] = _cpu_device(
                    d.name, "rpc", host_bw, cpu, CPU_EFF_BANDWIDTH, link_bandwidth=link_bw, link_latency=lat
                )
        else:
            out[d.name] = DeviceSpeed(d.name, "gpu", d.bandwidth or DEFAULT_GPU_BW)
    for name, fitted in (calibration or {}).items():
        if name in out:
            for k in ("eff_bandwidth", "eff_flops", "link_latency", "eff_vec"):
                if k in fitted:
                    setattr(out[name], k, float(fitted[k]))
            for k, attr in (("type_cost", "type_cost"), ("type_cost_pp", "type_cost_pp")):
                if isinstance(fitted.get(k), dict):
                    setattr(out[name], attr, {str(t): float(c) for t, c in fitted[k].items()})
    return SpeedParams(
        out,
        token_overhead=float((calibration or {}).get("_overhead", {}).get("token_overhead", 1.5e-3)),
        cpu=cpu,
    )


def calibration_file() -> Path:
    return data_dir() / "speed-calibration.json"


def machine_key(devices: list[Lane]) -> str:
    return socket.gethostname() + "|" + ",".join(f"{d.name}:{d.total >> 30}G" for d in devices)


#: The largest calibration file read (one small entry per machine and device set).
MAX_CALIBRATION_BYTES = 1 << 20
#: The figures a calibration entry may hold per device (and ``_overhead``), all finite and positive.
_FITTED_KEYS = ("eff_bandwidth", "eff_flops", "link_latency", "token_overhead", "eff_vec")
#: Per-type cost tables a calibration entry may hold per device (type family -> finite positive factor).
_FITTED_TABLES = ("type_cost", "type_cost_pp")


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
            if k in _FITTED_TABLES and isinstance(v, dict) and len(v) <= 64:
                if all(_finite(c) and isinstance(t, str) and t.isidentifier() and len(t) <= 16 for t, c in v.items()):
                    continue
                return None
            if k not in _FITTED_KEYS or not _finite(v):
                return None
    return entry


def _finite(v: object) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


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
