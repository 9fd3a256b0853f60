"""``layerdeck repo ORG/REPO [--json] [--predict TYPES] [--imatrix|--no-imatrix] [--devices ...] [--rpc ...]
[-c N] [-np N] [--margin MiB]`` and ``layerdeck repo ORG/REPO --download QUANT [--dest DIR]``.

Lists a Hugging Face repository's GGUF files (the Hub's tree listing), one row per quantization (a split
set is one row), reads each one's header over HTTP (a few MB each, never the weights) and auto-fits it on
the user's devices like ``layerdeck fit``: file size, whether it fits, what goes where, what is left on each
device and the predicted decode and prompt speeds. Quantizations the repository does not have (by default
:data:`app.remote.predicted.COMMON_TYPES`) follow as *predicted* rows: llama-quantize's rules applied to the
header of the repository's highest-precision file (:mod:`app.remote.predicted`), fitted the same way.
:func:`plan_repo` is the table's core, shared with the GUI's "Open from Hugging Face…" dialog.
``--download QUANT`` downloads that quantization (:mod:`app.remote.download`) instead of listing.

JSON schema ``layerdeck.repo/1``: ``{"schema", "repo", "devices": [names], "context", "predicted_from":
{"file", "quant", "imatrix"} | null, "rows": [{"quant", "predicted", "files", "size", "fits", "where",
"left": {device: bytes}, "tg", "pp", "error", "imatrix_note", "command"}], "notes": [...]}``; ``command`` is
the launch command of a repository file with ``-hf ORG/REPO:QUANT`` (llama.cpp downloads it), null for a
predicted row.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..lanes import CPU, Lane, to_llama_name
from ..memory.settings import LlamaSettings
from ..model import Model, Role
from ..remote.predicted import COMMON_TYPES
from ..session import Session
from .common import ERRORS, MiB, detection_problems, device_options, devices, fail, fmt_bytes, print_json

SCHEMA = "layerdeck.repo/1"


@dataclass
class RepoRow:
    """One quantization of the repository (or, ``predicted``, one it does not have) on the user's devices."""

    quant: str
    files: list[str]
    size: int | None
    name: str  # what opens it: the hf:// name of its first file (a predicted row: the file name it stands for)
    fits: bool = False
    where: str = ""
    left: dict[str, int] = field(default_factory=dict)  # device -> bytes left (capacity - estimate)
    tg: float | None = None
    pp: float | None = None
    error: str | None = None
    model: Model | None = None
    predicted: bool = False
    imatrix_note: str = ""
    #: what llama.cpp's ``-hf`` is given to download it (``ORG/REPO:QUANT``, or ``ORG/REPO -hff FILE`` where the
    #: tag would pick another file); empty for a predicted row
    hf_name: str = ""
    command: list[str] | None = None  # the launch command of the fitted placement, with -hf
    session: Session | None = None


@dataclass
class RepoPlan:
    """What :func:`plan_repo` found besides the rows: the predicted rows' source and assumption."""

    source_file: str = ""
    source_quant: str = ""
    imatrix: bool | None = None


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


def _fit_row(row: RepoRow, model: Model, lanes, settings, host, host_bw, margin, keep: bool) -> None:
    """Auto-fit ``model`` on ``lanes`` into ``row``: fits, what goes where, what is left, speeds, command."""
    from ..speed.predict import predict_decode, predict_prompt

    session = Session(model, lanes, settings=settings, host_capacity=host, host_bandwidth=host_bw, margin=margin)
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
    if row.hf_name:
        try:
            row.command = session.command(model_path=row.hf_name).argv
        except ERRORS as exc:
            row.command = None
            row.error = row.error or f"no command: {getattr(exc, 'message', exc)}"
    if keep:
        row.model, row.session = model, session


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
    predict: Sequence[str] | str | None = None,
    imatrix: bool | None = None,
    info: RepoPlan | None = None,
) -> tuple[list[RepoRow], list[str]]:
    """Every quantization of ``repo`` (``ORG/REPO`` or ``hf://ORG/REPO``) read and auto-fitted on ``lanes``,
    then the ``predict`` types it does not have (default :data:`~app.remote.predicted.COMMON_TYPES`; ``"none"``
    or ``[]`` for none), predicted from its highest-precision file, as rows with ``predicted`` set.

    ``imatrix``: predict as made with an importance matrix (None: as the repository's files were made).
    ``progress(done, total)`` counts quantizations. A quantization whose header cannot be read or that does
    not fit gets its reason in ``error`` (the others are still listed). ``info`` receives the predicted rows'
    source. Raises the listing's :class:`~app.remote.errors.RemoteError` when the repository itself cannot be
    read, :class:`~app.model.requant.RequantError` for a ``predict`` name llama-quantize does not have.
    """
    from ..remote import RemoteNameError, RemoteOptions, open_remote, parse_name
    from ..remote.hub import find_best_model, group_quants, list_files
    from ..remote.predicted import bits_per_weight, made_with_imatrix, parse_targets, predict_missing

    targets = parse_targets(predict) if predict != [] else []
    name = parse_name(repo if repo.startswith("hf://") else "hf://" + repo)
    if name is None or name.kind != "quant":
        raise RemoteNameError(f"{repo!r} is not a repository name: give ORG/REPO (like Qwen/Qwen3-8B-GGUF).", repo)
    options = options or RemoteOptions()
    files = list_files(name.repo, options.fetcher(), name.revision)
    groups = group_quants(files)
    if name.quant:
        groups = [g for g in groups if g.tag.upper() == name.quant.upper()]
        targets = []
    notes: list[str] = []
    if not groups:
        from ..remote.hub import no_such_quant

        raise no_such_quant(name.repo, name.quant, files)
    rows: list[RepoRow] = []
    best = None  # (bits per weight, row, model, read) of the highest-precision file read
    models: list[Model] = []
    have = {g.tag.upper() for g in groups}
    todo = [t for t in targets if t.upper() not in have]
    total = len(groups) + (1 if todo else 0)
    for i, g in enumerate(groups):
        row = RepoRow(g.tag, [f.path for f in g.files], g.size, f"hf://{name.repo}/{g.primary.path}")
        picked = find_best_model(files, g.tag)
        row.hf_name = f"hf://{name.repo}:{g.tag}" if picked == g.primary else row.name
        rows.append(row)
        try:
            model, read = open_remote(row.name, options)
            row.size = model.file_size
            models.append(model)
            if todo and (best is None or bits_per_weight(model) > best[0]):
                best = (bits_per_weight(model), row, model, read)
            _fit_row(row, model, lanes, settings, host, host_bw, margin, keep_models)
        except ERRORS as exc:
            row.error = getattr(exc, "message", str(exc))
            row.fits = False
        if progress is not None:
            progress(i + 1, total)
    if todo and best is not None:
        _, src_row, src_model, src_read = best
        assume = made_with_imatrix(models) if imatrix is None else imatrix
        source_file = src_row.files[0].rsplit("/", 1)[-1]
        if info is not None:
            info.source_file, info.source_quant, info.imatrix = src_row.files[0], src_row.quant, assume
        for p in predict_missing(src_model, src_read, todo, assume_imatrix=assume, repo=name.repo):
            row = RepoRow(p.target, [], None, p.model.path.name if p.model else "", predicted=True)
            row.imatrix_note = p.imatrix_note
            rows.append(row)
            if p.model is None:
                row.error = p.error
                continue
            row.size = p.model.file_size
            try:
                _fit_row(row, p.model, lanes, settings, host, host_bw, margin, keep_models)
            except ERRORS as exc:
                row.error = getattr(exc, "message", str(exc))
                row.fits = False
        why = (
            "the repository's files were made with one"
            if imatrix is None and assume
            else "the repository's files were made without one"
            if imatrix is None
            else "as asked"
        )
        notes.append(
            f"predicted rows: no such file in the repository; their tensor types and sizes are llama-quantize's "
            f"rules (the pinned llama.cpp) applied to {source_file}'s header ({src_row.quant}, the repository's "
            f"highest-precision file), assumed made {'with' if assume else 'without'} an importance matrix "
            f"({why}); the real files of another quantizer may differ (`layerdeck repo {'--no-imatrix' if assume else '--imatrix'}` "
            "predicts the other way)"
        )
        if progress is not None:
            progress(total, total)
    elif todo:
        notes.append("no quantization could be predicted: no header of the repository could be read")
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
        help="list a Hugging Face repo's quantizations and how each fits your devices, or download one",
        description="Read the header of every GGUF quantization in a Hugging Face repository (never the "
        "weights) and auto-fit each one on your devices; quantizations the repository does not have are "
        "predicted from its highest-precision file by llama-quantize's rules. --download QUANT downloads one.",
    )
    p.add_argument("repo", help="ORG/REPO (the Hub base URL comes from HF_ENDPOINT; gated repos need HF_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the layerdeck.repo/1 JSON document")
    p.add_argument(
        "--predict",
        metavar="TYPES",
        default="common",
        help="quantizations to predict where the repository has none: 'common' (default: "
        f"{','.join(COMMON_TYPES)}), 'all', 'none', or names separated by commas",
    )
    imx = p.add_mutually_exclusive_group()
    imx.add_argument(
        "--imatrix",
        dest="imatrix",
        action="store_const",
        const=True,
        default=None,
        help="predict as made with an importance matrix (default: as the repository's files were made)",
    )
    imx.add_argument("--no-imatrix", dest="imatrix", action="store_const", const=False, help="... without one")
    p.add_argument(
        "--download",
        metavar="QUANT",
        help="download this quantization (every shard, resumable, size and SHA-256 checked) instead of listing",
    )
    p.add_argument(
        "--dest",
        metavar="DIR",
        help="with --download: the folder (default: models/ORG/REPO in Layerdeck's data folder)",
    )
    p.add_argument("--rpc", help="host:port,...")
    p.add_argument("-c", "--ctx", type=int, default=8192)
    p.add_argument("-np", "--parallel", type=int, default=-1)
    p.add_argument("-ctk", default="f16")
    p.add_argument("-ctv", default="f16")
    p.add_argument("-fa", default="auto", choices=("auto", "on", "off"))
    p.add_argument("--margin", type=float, default=1024, help="MiB to leave free on each GPU (default 1024)")
    p.add_argument("--host-bw", type=float, help="host RAM bandwidth in GB/s (default: measure it)")
    p.set_defaults(func=run)


def run_download(args: argparse.Namespace) -> int:
    from ..remote import RemoteNameError, parse_name
    from ..remote.download import download_quant

    repo = args.repo.removeprefix("hf://")
    if ":" in repo or repo.count("/") != 1:
        return fail(
            RemoteNameError(
                f"{args.repo!r}: give the repository as ORG/REPO and the quantization with --download QUANT.", args.repo
            )
        )
    try:
        name = parse_name(f"hf://{repo}:{args.download}")
    except ERRORS as exc:
        return fail(exc)
    assert name is not None
    tty = sys.stderr.isatty()

    def progress(p) -> None:
        if tty:
            print("\r\033[K" + p.text(), end="", file=sys.stderr, flush=True)

    try:
        res = download_quant(name.display, args.dest, progress=progress)
    except ERRORS as exc:
        if tty:
            print(file=sys.stderr)
        return fail(exc)
    if tty:
        print(file=sys.stderr)
    for path in res.paths:
        print(path)
    what = f"{fmt_bytes(res.fetched)} downloaded"
    if res.resumed:
        what += f", {fmt_bytes(res.resumed)} resumed from an earlier part"
    if res.already:
        what += f", {len(res.already)} file{'s' if len(res.already) != 1 else ''} already there"
    print(f"note: {what}; size" + (" and SHA-256" if not res.notes else "") + " checked", file=sys.stderr)
    for n in res.notes:
        print(f"note: {n}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.download:
        return run_download(args)
    if args.dest:
        return fail("--dest goes with --download QUANT")
    info = RepoPlan()
    try:
        rpc = args.rpc.split(",") if args.rpc else []
        from ..remote.predicted import parse_targets

        targets = parse_targets(args.predict)  # before any network: a mistyped type is said at once
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
            args.repo,
            lanes,
            settings,
            host=host,
            host_bw=host_bw,
            margin=int(args.margin * MiB),
            progress=progress,
            predict=targets,
            imatrix=args.imatrix,
            info=info,
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
                "predicted_from": (
                    {"file": info.source_file, "quant": info.source_quant, "imatrix": info.imatrix}
                    if info.source_file
                    else None
                ),
                "rows": [
                    {
                        "quant": r.quant,
                        "predicted": r.predicted,
                        "files": r.files,
                        "size": r.size,
                        "fits": r.fits,
                        "where": r.where,
                        "left": r.left,
                        "tg": r.tg,
                        "pp": r.pp,
                        "error": r.error,
                        "imatrix_note": r.imatrix_note or None,
                        "command": r.command,
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
    head = f"{'quant':12} {'kind':9} {'size':>10} {'fits':>5}" + "".join(f"{'left ' + n:>14}" for n in names)
    head += f"{'tg tok/s':>10}{'pp tok/s':>10}  where"
    real = sum(not r.predicted for r in rows)
    pred = len(rows) - real
    title = f"{repo}: {real} quantization{'s' if real != 1 else ''}"
    if pred:
        title += f", {pred} predicted"
    out = [f"{title}, context {ctx:,}", "", head]
    for r in rows:
        size = fmt_bytes(r.size) if r.size is not None else "?"
        cells = "".join(f"{(f'{r.left[n] / MiB:.0f} MiB' if n in r.left else '-'):>14}" for n in names)
        tg = f"{r.tg:10.1f}" if r.tg is not None else f"{'-':>10}"
        pp = f"{r.pp:10.0f}" if r.pp is not None else f"{'-':>10}"
        fits = "yes" if r.fits else "no"
        kind = "predicted" if r.predicted else "file"
        out.append(f"{r.quant:12} {kind:9} {size:>10} {fits:>5}{cells}{tg}{pp}  {r.where}")
        for extra in (r.error, r.imatrix_note):
            if extra:
                out.append(f"{'':12}   {extra}")
    if real:
        out.append("")
        out.append(
            f"download one: layerdeck repo {repo} --download QUANT; or launch with llama.cpp's -hf {repo}:QUANT "
            "(--json gives each file's launch command)"
        )
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)
