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
from ..memory.draft import detected_spec_types, spec_type_of
from ..memory.estimator import Estimate
from ..memory.settings import TOOLS
from ..model.projector import open_projector
from ..placement import Placement
from ..session import Session
from ..speed.speculative import DEFAULT_ACCEPTANCE
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
    p.add_argument(
        "--acceptance",
        type=float,
        metavar="RATE",
        help="share of drafted tokens the model accepts, 0-1, for the speed with a draft model (-md with "
        f"--spec-type draft-simple; default {DEFAULT_ACCEPTANCE}; llama-server logs the measured rate)",
    )
    add_requant_options(p)
    p.add_argument("llama_args", nargs=argparse.REMAINDER, help="llama.cpp arguments after --")
    p.set_defaults(func=run)


def _devices_json(est: Estimate) -> list[dict]:
    return [
        {
            "name": to_llama_name(d.name),
            "model": d.model,
            "kv": d.kv,
            "recurrent": d.recurrent,
            "context": d.context,
            "compute": d.compute,
            "output": d.output,
            "draft": d.draft,
            "projector": d.projector,
            "total": d.total,
            "capacity": d.capacity,
        }
        for d in est.devices
    ]


def to_json(est: Estimate, draft_path: str | None = None, projector_path: str | None = None) -> dict:
    s = est.shape
    draft = est.draft
    return {
        "schema": SCHEMA,
        "devices": _devices_json(est),
        "draft": (
            {
                "model": draft_path,
                # "mtp": the model's own NextN layers in a second context (--spec-type draft-mtp), no weights
                "kind": "mtp" if draft.shape.mtp else "draft-model",
                "devices": _devices_json(draft),
                "layers": draft.placement.layer_device,
            }
            if draft is not None
            else None
        ),
        "projector": (
            {
                "file": projector_path,
                "device": to_llama_name(est.projector.device),
                "weights": est.projector.weights,
                "compute": {to_llama_name(k): v for k, v in est.projector.compute.items()},
                "exact": est.projector.exact,
                # one clip context per encoder: its projector type and compute buffers ({} where not counted)
                "encoders": [
                    {"kind": kind, "type": ptype, "compute": {to_llama_name(k): v for k, v in own.items()}}
                    for kind, ptype, own in est.projector.encoders
                ],
            }
            if est.projector is not None
            else None
        ),
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
    spec = doc.get("speculative")
    # "mtp": drafted by the model's own NextN layers (--spec-type draft-mtp), else by the -md draft model
    label = "speed with MTP drafting" if (spec or {}).get("kind") == "mtp" else "speed with the draft model"
    spec_line = (
        [
            f"{label}: generation {spec['tg_tokens_per_s']:.1f} tok/s ({spec['speedup']:.2f}x) at "
            f"an acceptance rate of {spec['acceptance']:.0%}"
            + (" (assumed: set yours with --acceptance)" if spec["acceptance_assumed"] else "")
            + f", {spec['n_draft']} drafted tokens a step ({spec['tokens_per_step']:.2f} tokens a step); "
            + spec["bound"]
        ]
        if spec
        else []
    ) + [f"{label}: {n}" for n in (spec or {}).get("advice", [])]
    return (
        [
            f"speed: generation {doc['tg_tokens_per_s']:.1f} tok/s, prompt {doc['pp_tokens_per_s']:.0f} tok/s "
            f"(ubatch {doc['pp_ubatch']}); {basis}, RAM {host.get('bandwidth_gb_s', 0):g} GB/s{threads}{clock}; "
            "check with llama-bench and the same arguments"
        ]
        + spec_line
        + [f"threads: {a}" for a in advice]
    )


def render_text(est: Estimate) -> str:
    lines = [f"{to_llama_name(d.name)} {d.model // MiB} {d.context // MiB} {d.compute // MiB} " for d in est.devices]
    lines.append("")
    draft = f" {'draft':>9}" if est.draft is not None else ""
    draft += f" {'projector':>9}" if est.projector is not None else ""
    lines.append(
        f"{'device':10} {'model':>9} {'context':>9} {'compute':>9} {'output':>8}{draft} {'total':>9} {'capacity':>9} "
        f"{'free':>9}"
    )
    for d in est.devices:
        cap = f"{d.capacity // MiB}" if d.capacity else "-"
        free = f"{(d.capacity - d.total) // MiB}" if d.capacity else "-"
        dr = f" {d.draft / MiB:9.0f}" if est.draft is not None else ""
        dr += f" {d.projector / MiB:9.0f}" if est.projector is not None else ""
        lines.append(
            f"{to_llama_name(d.name):10} {d.model / MiB:9.0f} {d.context / MiB:9.0f} {d.compute / MiB:9.0f} "
            f"{d.output / MiB:8.1f}{dr} {d.total / MiB:9.0f} {cap:>9} {free:>9}"
        )
    if est.draft is not None and est.draft.shape.mtp:
        lines.append(
            "MTP draft context (--spec-type draft-mtp), per device: "
            + ", ".join(
                f"{to_llama_name(d.name)} {d.context // MiB} KV + {d.compute // MiB} compute MiB"
                for d in est.draft.devices
                if d.total
            )
        )
    elif est.draft is not None:
        lines.append(
            "draft model (-md), per device: "
            + ", ".join(
                f"{to_llama_name(d.name)} {d.model // MiB} model + {d.context // MiB} context + {d.compute // MiB} "
                "compute MiB"
                for d in est.draft.devices
                if d.total
            )
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
        draft, draft_verdict = (
            load_model(parsed.settings.draft_model, args.llama_dir) if parsed.settings.draft_model else (None, None)
        )
        projector = open_projector(parsed.settings.mmproj) if parsed.settings.mmproj else None
        lanes, detection = devices(args.devices, parsed.rpc, args.llama_dir, parsed.settings, parsed.fit)
        session = Session(
            model,
            lanes,
            placement=Placement.from_settings(model, lanes, parsed.settings),
            draft=draft,
            projector=projector,
        )
        est = session.estimate_settings(parsed.settings)
    except ERRORS as exc:
        return fail(exc)
    if args.acceptance is not None:
        if not 0.0 <= args.acceptance <= 1.0:
            return fail(f"--acceptance {args.acceptance}: give the share of drafted tokens accepted, from 0 to 1")
        session.set_draft_acceptance(args.acceptance)
    decode, prompt = session.speed_of(est.placement, parsed.settings)
    speed = speed_json(session, decode, prompt, parsed.settings.n_ubatch, parsed.settings.n_threads)
    spec = session.speculative
    speed["speculative"] = (
        {
            "tg_tokens_per_s": round(spec.tokens_per_s, 2),
            "speedup": round(spec.speedup, 3),
            "acceptance": spec.acceptance,
            "acceptance_assumed": args.acceptance is None,
            "n_draft": spec.n_draft,
            "tokens_per_step": round(spec.tokens_per_step, 3),
            "kind": "mtp" if spec.mtp else "draft-model",
            "draft_seconds": spec.draft_seconds,
            "verify_seconds": spec.verify_seconds,
            "catchup_seconds": spec.catchup_seconds,  # draft-mtp: the NextN block over the verified batch
            "bound": spec.bound,
            "advice": list(spec.notes),
        }
        if spec is not None
        else None
    )
    # the type that drafts with the -md file (common_speculative_init): draft-simple for a model, draft-eagle3 for
    # an EAGLE-3 head, draft-mtp for Gemma 4's assistant, draft-dflash / draft-dspark for a DFlash head (which
    # llama.cpp infers from the file when no --spec-type is given, as the estimate does)
    st = parsed.settings.spec_types
    wanted = spec_type_of(draft) if draft is not None else "draft-simple"
    inferred = not st and wanted in detected_spec_types(draft)
    if parsed.settings.draft_model and wanted not in st and not inferred:
        est.notes.append(
            f"-md without --spec-type {wanted}: llama-server loads the draft model (its memory is counted) but "
            f"does not draft with it; add --spec-type {wanted} to use it"
        )
    speed["threads_advice"] = thread_advice(session, decode, est, detection, parsed.settings.n_threads)
    est.notes.extend(w for w in model.warnings if model.predicted_from and w.startswith("predicted: "))
    est.notes.extend(parsed.warnings)
    est.notes.extend(check_notes(verdict))
    if draft_verdict is not None:
        est.notes.extend(f"draft: {n}" for n in check_notes(draft_verdict))
    est.notes.extend(
        f"{flag} changes llama.cpp's memory but is not modelled: the figures leave it out" for flag in parsed.unmodelled
    )
    est.notes.extend(detection_problems(detection))
    est.notes.extend(n for n in session.machine_notes if n not in est.notes)
    if args.json:
        print_json({**to_json(est, parsed.settings.draft_model, parsed.settings.mmproj), "speed": speed})
    else:
        print(render_text(est) + "\n" + "\n".join(render_speed(speed)))
    return 0
