"""``layerdeck estimate [--json] [--tool T] [--devices NAME=MiB,...] -- LLAMA_ARGS...``

Prints per device the model, context and compute MiB that llama.cpp will
allocate for a llama.cpp command line. The text output starts with exactly
``llama-fit-params --fit-print on``'s lines (``NAME model context compute``,
integer MiB floored as llama.cpp prints them, devices in llama.cpp's order,
then ``Host``) so the two can be diffed; a blank line; then capacities and
notes. JSON schema ``layerdeck.estimate/1`` is documented in ``docs/cli.md``.
"""

from __future__ import annotations

import argparse

from ..command.parse import parse_llama_args
from ..lanes import to_llama_name
from ..memory.estimator import Estimate
from ..memory.settings import TOOLS
from ..placement import Placement
from ..session import Session
from .as_type import add_requant_options, predicted
from .common import ERRORS, MiB, check_notes, detection_problems, devices, fail, llama_args, load_model, print_json

SCHEMA = "layerdeck.estimate/1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "estimate",
        help="per-device memory for a llama.cpp command line",
        description="Estimate per-device memory (model, context, compute) for llama.cpp arguments "
        "given after --, e.g.: layerdeck estimate -- -m model.gguf -ngl all -c 8192",
    )
    p.add_argument("--json", action="store_true", help="print the layerdeck.estimate/1 JSON document")
    p.add_argument(
        "--tool",
        choices=TOOLS,
        default="server",
        help="which llama.cpp program will run (they reserve different output buffers; default server)",
    )
    p.add_argument(
        "--devices",
        metavar="NAME=MiB[@GB/s],...",
        help="declare devices and capacities by hand (planning for cards you don't have)",
    )
    p.add_argument("--llama-dir", help="llama.cpp binaries folder (default: settings, LAYERDECK_LLAMA_CPP_DIR, PATH)")
    add_requant_options(p)
    p.add_argument("llama_args", nargs=argparse.REMAINDER, help="llama.cpp arguments after --")
    p.set_defaults(func=run)


def to_json(est: Estimate) -> dict:
    s = est.shape
    return {
        "schema": SCHEMA,
        "devices": [
            {
                "name": to_llama_name(d.name),
                "model": d.model,
                "kv": d.kv,
                "recurrent": d.recurrent,
                "context": d.context,
                "compute": d.compute,
                "output": d.output,
                "total": d.total,
                "capacity": d.capacity,
            }
            for d in est.devices
        ],
        "context": {
            "n_ctx": s.n_ctx,
            "n_ctx_seq": s.n_ctx_seq,
            "n_stream": s.n_stream,
            "n_seq": s.n_seq,
            "unified": s.unified,
            "n_batch": s.n_batch,
            "n_ubatch": s.n_ubatch,
            "swa_cells": s.size_swa,
            "flash_attn": s.flash_attn,
        },
        "layers": est.placement.layer_device,
        "pipeline_parallel": est.pipeline_parallel,
        "notes": est.notes,
    }


def speed_json(session: Session, decode, prompt, n_ubatch: int, threads: int | None = None) -> dict:
    """The predicted speeds and every machine figure they assume, so anyone can check them with llama-bench."""
    params = session.speed_params
    host = params.get("CPU")
    cpu = params.cpu
    return {
        "tg_tokens_per_s": round(decode.tokens_per_s, 2) if decode else None,
        "pp_tokens_per_s": round(prompt.tokens_per_s, 2) if prompt else None,
        "pp_ubatch": n_ubatch,
        "calibrated": session.calibrated,
        "devices": {
            to_llama_name(d.name): {
                "kind": d.kind,
                "bandwidth_gb_s": round(d.bandwidth / 1e9, 2),
                "bandwidth_efficiency": d.eff_bandwidth,
                "flops_tflop_s": round(d.nominal_flops / 1e12, 3),
                "flops_efficiency": d.eff_flops,
                "link_gb_s": round(d.link_bandwidth / 1e9, 2),
                "link_latency_us": round(d.link_latency * 1e6, 1),
                **(
                    {
                        "cores": d.cores,
                        "threads": d.n_threads(threads if d.name == "CPU" else None),
                        "clock_mhz": round(d.clock_hz / 1e6),
                        "simd": d.simd or None,
                        "decode_gelem_s": round(d.vec_rate(threads if d.name == "CPU" else None) / 1e9, 2),
                        "vec_efficiency": d.eff_vec,
                    }
                    if d.is_cpu
                    else {}
                ),
            }
            for d in params.devices.values()
        },
        "threads": host.n_threads(threads) if host.is_cpu else None,
        "cpu": (
            {
                "physical_cores": cpu.physical_cores,
                "simd": list(cpu.simd),
                "mhz": cpu.mhz,
                "clock_assumed": cpu.mhz is None,
            }
            if cpu
            else None
        ),
    }


def thread_advice(session: Session, decode, est: Estimate, detection, requested: int | None = None) -> dict | None:
    """-t/-tb/--numa advice for this placement (the CPU's share of the decode time decides how much it
    matters), with the GPUs' PCI bus ids from detection for their NUMA node."""
    from ..speed.threads import advise

    cpu = session.speed_params.cpu
    if cpu is None or decode is None:
        return None
    share = decode.device_seconds.get("CPU", 0.0) / decode.seconds_per_token if decode.seconds_per_token else 0.0
    used = {d.name for d in est.devices if d.model}
    gpus = [
        (d.name, d.pci_bus_id)
        for d in (detection.devices if detection is not None else ())
        if d.name in used and d.name != "CPU"
    ]
    adv = advise(cpu, share, gpus=gpus, requested=requested)
    return {
        "threads": adv.threads,
        "threads_batch": adv.threads_batch,
        "numa": adv.numa,
        "numa_node": adv.numa_node,
        "cpu_decode_share": round(share, 3),
        "advice": adv.lines,
    }


def render_speed(doc: dict) -> list[str]:
    if doc["tg_tokens_per_s"] is None:
        return ["speed: no prediction for this placement"]
    host = doc["devices"].get("Host", {})
    basis = "this machine's calibration" if doc["calibrated"] else "default figures (not calibrated on this machine)"
    cpu = doc.get("cpu") or {}
    threads = f", {doc['threads']} CPU threads" if doc.get("threads") else ""
    clock = f" at {cpu['mhz']:.0f} MHz" if cpu.get("mhz") else " (clock not readable: 2000 MHz assumed)" if cpu else ""
    advice = (doc.get("threads_advice") or {}).get("advice", [])
    return [
        f"speed: generation {doc['tg_tokens_per_s']:.1f} tok/s, prompt {doc['pp_tokens_per_s']:.0f} tok/s "
        f"(ubatch {doc['pp_ubatch']}); {basis}, RAM {host.get('bandwidth_gb_s', 0):g} GB/s{threads}{clock}; "
        "check with llama-bench and the same arguments"
    ] + [f"threads: {a}" for a in advice]


def render_text(est: Estimate) -> str:
    lines = [f"{to_llama_name(d.name)} {d.model // MiB} {d.context // MiB} {d.compute // MiB} " for d in est.devices]
    lines.append("")
    lines.append(
        f"{'device':10} {'model':>9} {'context':>9} {'compute':>9} {'output':>8} {'total':>9} {'capacity':>9} {'free':>9}"
    )
    for d in est.devices:
        cap = f"{d.capacity // MiB}" if d.capacity else "-"
        free = f"{(d.capacity - d.total) // MiB}" if d.capacity else "-"
        lines.append(
            f"{to_llama_name(d.name):10} {d.model / MiB:9.0f} {d.context / MiB:9.0f} {d.compute / MiB:9.0f} "
            f"{d.output / MiB:8.1f} {d.total / MiB:9.0f} {cap:>9} {free:>9}"
        )
    s = est.shape
    lines.append(
        f"context: {s.n_ctx} cells ({s.n_stream} stream{'s' if s.n_stream > 1 else ''} x {s.n_ctx_seq}), "
        f"{s.n_seq} slot{'s' if s.n_seq > 1 else ''}, ubatch {s.n_ubatch}, flash attention "
        f"{'on' if s.flash_attn else 'off'}" + (f", SWA cache {s.size_swa} cells" if s.size_swa else "")
    )
    for d in est.devices:
        if d.capacity and d.total > d.capacity:
            lines.append(
                f"over capacity: {to_llama_name(d.name)} needs {(d.total - d.capacity) / MiB:.0f} MiB more than it has"
            )
    lines += [f"note: {n}" for n in est.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        parsed = parse_llama_args(llama_args(args.llama_args), tool=args.tool)
    except ERRORS as exc:
        return fail(exc)
    if not parsed.model:
        return fail("give the model with -m after --, e.g. layerdeck estimate -- -m model.gguf -c 8192")
    try:
        model, verdict = load_model(parsed.model, args.llama_dir)
        model = predicted(model, args)
        lanes, detection = devices(args.devices, parsed.rpc, args.llama_dir, parsed.settings, parsed.fit)
        session = Session(model, lanes, placement=Placement.from_settings(model, lanes, parsed.settings))
        est = session.estimate_settings(parsed.settings)
    except ERRORS as exc:
        return fail(exc)
    decode, prompt = session.speed_of(est.placement, parsed.settings)
    speed = speed_json(session, decode, prompt, parsed.settings.n_ubatch, parsed.settings.n_threads)
    speed["threads_advice"] = thread_advice(session, decode, est, detection, parsed.settings.n_threads)
    est.notes.extend(w for w in model.warnings if model.predicted_from and w.startswith("predicted: "))
    est.notes.extend(parsed.warnings)
    est.notes.extend(check_notes(verdict))
    est.notes.extend(detection_problems(detection))
    est.notes.extend(n for n in session.machine_notes if n not in est.notes)
    if args.json:
        print_json({**to_json(est), "speed": speed})
    else:
        print(render_text(est) + "\n" + "\n".join(render_speed(speed)))
    return 0
