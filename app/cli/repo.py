"""``layerdeck repo ORG/REPO [--json] [--devices ...] [--rpc ...] [-c N] [-np N] [--margin MiB]``.

Lists a Hugging Face repository's GGUF files (the Hub's tree listing), one row per quantization (a split
set is one row), reads each one's header over HTTP (a few MB each, never the weights) and auto-fits it on
the user's devices like ``layerdeck fit``: file size, whether it fits, what goes where, what is left on each
device and the predicted decode and prompt speeds. :func:`plan_repo` is the table's core, shared with the
GUI's "Open from Hugging Face…" dialog.

JSON schema ``layerdeck.repo/1``: ``{"schema", "repo", "devices": [names], "context", "rows": [{"quant",
"files", "size", "fits", "where", "left": {device: bytes}, "tg", "pp", "error"}], "notes": [...]}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ..lanes import CPU, Lane, to_llama_name
from ..memory.settings import LlamaSettings
from ..model import Model, Role
from ..session import Session
from .common import ERRORS, MiB, detection_problems, device_options, devices, fail, fmt_bytes, print_json

SCHEMA = "layerdeck.repo/1"


@dataclass
class RepoRow:
    """One quantization of the repository on the user's devices."""

    quant: str
    files: list[str]
    size: int | None
    name: str  # what opens it: ORG/REPO:QUANT-like hf:// name of its first file
    fits: bool = False
    where: str = ""
    left: dict[str, int] = field(default_factory=dict)  # device -> bytes left (capacity - estimate)
    tg: float | None = None
    pp: float | None = None
    error: str | None = None
    model: Model | None = None


def _where(model: Model, session: Session) -> str:
    """``CUDA0: 30 layers, CPU: 18 layers + experts of 12 layers``: each lane's layers, and the layers whose
    expert tensors it holds while the layer is elsewhere."""
    p = session.placement
    n = model.params.n_layer
    counts: dict[str, int] = {}
    for dev in p.layer_device[:n]:
        counts[dev] = counts.get(dev, 0) + 1
    moved: dict[str, set[int]] = {}
    for t, dev in zip(model.tensors, p.tensor_device):
        b = model.block_of(t.name)
        if b.role is Role.EXPERTS and b.layer is not None and b.layer < n and dev and dev != p.layer_device[b.layer]:
            moved.setdefault(dev, set()).add(b.layer)
    parts = []
    for dev in [d.name for d in session.devices] + [CPU]:
        label = "CPU" if dev == CPU else to_llama_name(dev)
        bits = [f"{counts[dev]} layers"] if counts.get(dev) else []
        if dev in moved:
            bits.append(f"experts of {len(moved[dev])} layers")
        if bits:
            parts.append(f"{label}: " + " + ".join(bits))
    return ", ".join(parts)


def plan_repo(
    repo: str,
    lanes: list[Lane],
    settings: LlamaSettings,
    *,
    host: int | None = None,
    host_bw: float | None = None,
    margin: int = 0,
    options=None,
    progress: Callable[[int, int], None] | None = None,
    keep_models: bool = False,
) -> tuple[list[RepoRow], list[str]]:
    """Every quantization of ``repo`` (``ORG/REPO`` or ``hf://ORG/REPO``) read and auto-fitted on ``lanes``.

    ``progress(done, total)`` counts quantizations. A quantization whose header cannot be read or that does
    not fit gets its reason in ``error`` (the others are still listed). Raises the listing's
    :class:`~app.remote.errors.RemoteError` when the repository itself cannot be read.
    """
    from ..remote import RemoteNameError, RemoteOptions, open_remote, parse_name
    from ..remote.hub import group_quants, list_files

    name = parse_name(repo if repo.startswith("hf://") else "hf://" + repo)
    if name is None or name.kind != "quant":
        raise RemoteNameError(f"{repo!r} is not a repository name: give ORG/REPO (like Qwen/Qwen3-8B-GGUF).", repo)
    options = options or RemoteOptions()
    files = list_files(name.repo, options.fetcher(), name.revision)
    groups = group_quants(files)
    if name.quant:
        groups = [g for g in groups if g.tag.upper() == name.quant.upper()]
    notes: list[str] = []
    if not groups:
        from ..remote.hub import no_such_quant

        raise no_such_quant(name.repo, name.quant, files)
    rows: list[RepoRow] = []
    from ..speed.predict import predict_decode, predict_prompt

    for i, g in enumerate(groups):
        row = RepoRow(g.tag, [f.path for f in g.files], g.size, f"hf://{name.repo}/{g.primary.path}")
        rows.append(row)
        try:
            model, _ = open_remote(row.name, options)
            if keep_models:
                row.model = model
            row.size = model.file_size
            session = Session(
                model, lanes, settings=settings, host_capacity=host, host_bandwidth=host_bw, margin=margin
            )
            res = session.auto_fit(host_budget=host)
            est = res.estimate
            over = session.overflows(est)
            host_mem = est.host
            host_over = host is not None and host_mem.total > host
            row.fits = not over and not host_over
            row.where = _where(model, session)
            used = {d.name: d.total for d in est.devices}
            for name_ in [d.name for d in lanes] + [CPU]:
                cap = host if name_ == CPU else session.capacity(name_)
                if cap:
                    row.left[to_llama_name(name_)] = cap - used.get(name_, 0)
            if not row.fits:
                row.error = "; ".join(
                    [f"{to_llama_name(o.lane)} over by {o.excess / MiB:.0f} MiB" for o in over]
                    + ([f"host RAM over by {(host_mem.total - host) / MiB:.0f} MiB"] if host_over and host else [])
                )
            if host_bw:
                wp = session.placement.weight_placement()
                params = session.speed_params
                row.tg = predict_decode(model, wp, params).tokens_per_s
                row.pp = predict_prompt(model, wp, params, settings.n_ubatch).tokens_per_s
        except ERRORS as exc:
            row.error = getattr(exc, "message", str(exc))
            row.fits = False
        if progress is not None:
            progress(i + 1, len(groups))
    notes.append(
        "llama.cpp has not checked that these files load (each row is planned from its header): "
        "`layerdeck inspect REPO:QUANT` asks it for one quantization"
    )
    if host is None:
        notes.append("host RAM not known (planned devices): the CPU column is not checked against a capacity")
    if not host_bw:
        notes.append("speeds not predicted: give --host-bw GB/s (or let the fit command measure it)")
    return rows, notes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repo",
        parents=[device_options()],
        help="list a Hugging Face repo's quantizations and how each fits your devices",
        description="Read the header of every GGUF quantization in a Hugging Face repository (never the "
        "weights) and auto-fit each one on your devices.",
    )
    p.add_argument("repo", help="ORG/REPO (the Hub base URL comes from HF_ENDPOINT; gated repos need HF_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the layerdeck.repo/1 JSON document")
    p.add_argument("--rpc", help="host:port,...")
    p.add_argument("-c", "--ctx", type=int, default=8192)
    p.add_argument("-np", "--parallel", type=int, default=-1)
    p.add_argument("-ctk", default="f16")
    p.add_argument("-ctv", default="f16")
    p.add_argument("-fa", default="auto", choices=("auto", "on", "off"))
    p.add_argument("--margin", type=float, default=1024, help="MiB to leave free on each GPU (default 1024)")
    p.add_argument("--host-bw", type=float, help="host RAM bandwidth in GB/s (default: measure it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        rpc = args.rpc.split(",") if args.rpc else []
        lanes, result = devices(args.devices, rpc, args.llama_dir)
        settings = LlamaSettings(
            n_ctx=args.ctx, n_parallel=args.parallel, type_k=args.ctk, type_v=args.ctv, flash_attn=args.fa
        )
        host = result.host.total_bytes if result is not None and getattr(result.host, "total_bytes", None) else None
        if args.host_bw:
            host_bw = args.host_bw * 1e9
        else:
            from ..speed.membench import measure_host_bandwidth

            host_bw = measure_host_bandwidth()

        def progress(done: int, total: int) -> None:
            if sys.stderr.isatty():
                print(f"\rreading headers: {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

        rows, notes = plan_repo(
            args.repo, lanes, settings, host=host, host_bw=host_bw, margin=int(args.margin * MiB), progress=progress
        )
    except ERRORS as exc:
        return fail(exc)
    notes = notes + detection_problems(result)
    names = [to_llama_name(d.name) for d in lanes] + [to_llama_name(CPU)]
    if args.json:
        print_json(
            {
                "schema": SCHEMA,
                "repo": args.repo,
                "devices": names,
                "context": args.ctx,
                "rows": [
                    {
                        "quant": r.quant,
                        "files": r.files,
                        "size": r.size,
                        "fits": r.fits,
                        "where": r.where,
                        "left": r.left,
                        "tg": r.tg,
                        "pp": r.pp,
                        "error": r.error,
                    }
                    for r in rows
                ],
                "notes": notes,
            }
        )
        return 0
    print(render_text(args.repo, rows, names, args.ctx, notes))
    return 0


def render_text(repo: str, rows: list[RepoRow], names: list[str], ctx: int, notes: list[str]) -> str:
    head = f"{'quant':12} {'size':>10} {'fits':>5}" + "".join(f"{'left ' + n:>14}" for n in names)
    head += f"{'tg tok/s':>10}{'pp tok/s':>10}  where"
    out = [f"{repo}: {len(rows)} quantization{'s' if len(rows) != 1 else ''}, context {ctx:,}", "", head]
    for r in rows:
        size = fmt_bytes(r.size) if r.size is not None else "?"
        cells = "".join(f"{(f'{r.left[n] / MiB:.0f} MiB' if n in r.left else '-'):>14}" for n in names)
        tg = f"{r.tg:10.1f}" if r.tg is not None else f"{'-':>10}"
        pp = f"{r.pp:10.0f}" if r.pp is not None else f"{'-':>10}"
        fits = "yes" if r.fits else "no"
        out.append(f"{r.quant:12} {size:>10} {fits:>5}{cells}{tg}{pp}  {r.where}")
        if r.error:
            out.append(f"{'':12}   {r.error}")
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)
