"""Speed parameters for the devices of a placement: from detection, the card catalogue, a RAM test and calibration."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

from ..lanes import CPU, Lane
from ..paths import data_dir
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


def load_calibration(devices: list[Lane]) -> dict[str, dict] | None:
    try:
        data = json.loads(calibration_file().read_text())
    except (OSError, ValueError):
        return None
    return data.get(machine_key(devices))


def save_calibration(devices: list[Lane], fitted: dict[str, dict]) -> Path:
    path = calibration_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[machine_key(devices)] = fitted
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path
