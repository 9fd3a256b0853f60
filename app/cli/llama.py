"""``layerdeck llama``: the llama.cpp builds on this machine; download, build, switch, remove.

Usage::

    layerdeck llama list [--json] [--llama-dir DIR]
    layerdeck llama get [--backend cpu|cuda|vulkan|rocm|metal|sycl] [--release-url URL] [--json]
    layerdeck llama build [--backend cpu|vulkan|cuda|rocm|metal] [--jobs N] [--cuda-from-pypi]
    layerdeck llama use PATH|VERSION
    layerdeck llama remove VERSION

``get`` reads one release from the releases API (default: the official latest release of
ggml-org/llama.cpp over HTTPS; ``--release-url`` names a mirror that returns one release as JSON),
picks the asset for this machine (the reason is printed), checks its sha256, unpacks it next to earlier
installs, runs its ``--version`` and ``--list-devices`` and only then makes it current. Nothing is
downloaded unless this command is run.

Exit status: 0; 2 with one ``layerdeck: MESSAGE`` line when something cannot be done; 130 on Ctrl+C
(a download resumes next time; a build keeps what it compiled and resumes next time).

JSON of ``list --json`` (``"schema": "layerdeck.llama-builds/1"``)::

    {"schema": "layerdeck.llama-builds/1", "current": path | null, "oldest_supported_build": int,
     "pinned_build": int, "builds": [Build + {"current": bool}], "notes": [str]}
    Build = {"folder", "sources": [str], "server", "installed_version": str | null,
             "version": {"build": int | null, "commit": str | null, "text": str} | null,
             "backends": [str], "devices": [{"name", "description", "total_mib", "free_mib"}],
             "features": {"list_devices", "override_tensor", "fit", "fit_print", "verbosity", "load_mode": bool},
             "tools": [str], "usable": bool, "supported": bool, "missing": [str], "problems": [str]}
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from ..llamacpp import find, install, releases, store
from ..units import fmt_bytes
from .common import ERRORS, fail, print_json


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "llama",
        help="the llama.cpp builds on this machine: list, download, build, switch, remove",
        description="Find every llama.cpp on this machine, download an official release, build one, switch.",
    )
    sub = p.add_subparsers(dest="llama_command", metavar="ACTION")
    ls = sub.add_parser("list", help="every llama.cpp build found, the current one marked")
    ls.add_argument("--json", action="store_true", help="print JSON (schema layerdeck.llama-builds/1)")
    ls.add_argument("--llama-dir", metavar="DIR", help="a folder to count as the Settings folder")
    ls.add_argument("--timeout", type=float, default=find.TIMEOUT_S, metavar="S", help="limit for each probe run")
    ls.set_defaults(func=run_list)
    get = sub.add_parser("get", help="download the official prebuilt release for this machine and make it current")
    get.add_argument("--backend", choices=releases.BACKENDS, help="force a backend (default: chosen for this GPU)")
    get.add_argument(
        "--release-url",
        default=releases.OFFICIAL_RELEASE_URL,
        metavar="URL",
        help="a releases API endpoint returning one release as JSON (default: the official latest)",
    )
    get.add_argument("--json", action="store_true", help="print the result as JSON")
    get.set_defaults(func=run_get)
    b = sub.add_parser(
        "build",
        help="build llama.cpp from source (the pinned llama-cpp-python sdist)",
        description="Build llama.cpp from the pinned llama-cpp-python sdist for one backend. The toolchain is "
        "checked first (what is missing and how to get it is said); CUDA is built for the compute capability of "
        "this machine's GPUs only. Progress comes from CMake's output; the log is saved in the build folder. "
        "Ctrl+C stops the compilers; what was compiled is kept and the next build resumes from it.",
    )
    from ..llamacpp.build import BACKENDS

    b.add_argument("--backend", choices=BACKENDS, default="cpu")
    b.add_argument("--jobs", "-j", type=int, metavar="N", help="parallel compile jobs (default: the CPU count)")
    b.add_argument(
        "--cuda-from-pypi",
        action="store_true",
        help="without a CUDA toolkit: install NVIDIA's CUDA 13 toolkit wheels from PyPI into a private folder first",
    )
    b.set_defaults(func=run_build)
    use = sub.add_parser("use", help="make a build current (an installed version or a folder)")
    use.add_argument("spec", metavar="PATH|VERSION")
    use.set_defaults(func=run_use)
    rm = sub.add_parser("remove", help="delete one of Layerdeck's installs (not the current one)")
    rm.add_argument("version", metavar="VERSION")
    rm.set_defaults(func=run_remove)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    return p


def _devices(b: find.Build) -> str:
    if not b.devices:
        return "CPU only" if b.features.get("list_devices") else "not listed"
    return ", ".join(f"{d.name} ({d.description}, {d.total_mib} MiB)" for d in b.devices)


def format_builds(builds: list[find.Build], current) -> str:
    if not builds:
        return (
            "No llama.cpp found (looked in the Settings folder, LAYERDECK_LLAMA_CPP_DIR, Layerdeck's installs, "
            "PATH, ~/llama.cpp/build/bin, Homebrew).\nGet one with: layerdeck llama get  (or: layerdeck llama "
            "build)\n"
        )
    lines = []
    for b in builds:
        mark = "*" if find.is_current(b, current) else " "
        name = f" [{b.installed}]" if b.installed else ""
        lines.append(f"{mark} {b.folder}{name}")
        lines.append(f"    found: {', '.join(b.sources)}")
        lines.append(f"    version: {b.label()}")
        if b.usable:
            lines.append(f"    backends: {', '.join(b.backends)}")
            lines.append(f"    devices: {_devices(b)}")
            if not b.supported:
                lines.append("    NOT SUPPORTED by Layerdeck:")
            for m in b.missing():
                lines.append(f"    missing: {m}")
        for p in b.problems:
            lines.append(f"    problem: {p}")
    lines.append("")
    lines.append(
        f"* = current. Oldest supported build: b{find.OLDEST_SUPPORTED_BUILD}; tested with "
        f"b{find.PINNED_BUILD} ({find.PINNED_COMMIT})."
    )
    return "\n".join(lines) + "\n"


def run_list(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    notes: list[str] = []
    store.installed(notes)
    store.current_dir(notes)
    builds = find.find_all(args.llama_dir, timeout=args.timeout)
    current = find.current_folder(args.llama_dir)
    if args.json:
        print_json(
            {
                "schema": "layerdeck.llama-builds/1",
                "current": str(current) if current else None,
                "oldest_supported_build": find.OLDEST_SUPPORTED_BUILD,
                "pinned_build": find.PINNED_BUILD,
                "builds": [dict(b.to_json(), current=find.is_current(b, current)) for b in builds],
                "notes": notes
                + ([] if builds else ["no llama.cpp found: layerdeck llama get, or layerdeck llama build"]),
            },
            out,
            indent=2,
        )
    else:
        out.write(format_builds(builds, current))
        for n in notes:
            out.write(f"note: {n}\n")
    return 0


def _progress_printer(err: TextIO):
    tty = err.isatty()

    def show(p: releases.Progress) -> None:
        if tty:
            err.write("\r" + p.text().ljust(100)[:100])
        err.flush()

    return show


def run_get(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        release = releases.fetch_release(args.release_url)
        machine = releases.this_machine()
        choice = releases.choose(release, machine, args.backend)
    except ERRORS as exc:
        return fail(exc)
    err.write(
        f"{machine.describe()}\n{release.tag}: {', '.join(a.name for a in choice.assets)} "
        f"({fmt_bytes(choice.download_bytes)})\nwhy: {choice.reason}\n"
    )
    for n in choice.notes:
        err.write(f"note: {n}\n")
    try:
        result = install.install(choice, progress=_progress_printer(err))
    except KeyboardInterrupt:
        err.write("\ncancelled; the download resumes from where it stopped next time\n")
        return 130
    except ERRORS as exc:
        if err.isatty():
            err.write("\n")
        return fail(exc)
    if err.isatty():
        err.write("\n")
    b = result.build
    if args.json:
        print_json(
            {
                "schema": "layerdeck.llama-get/1",
                "version": result.installed.version,
                "folder": str(result.installed.bin_dir),
                "asset": choice.asset.name,
                "runtime": choice.runtime.name if choice.runtime else None,
                "backend": choice.backend,
                "reason": choice.reason,
                "already_installed": result.already,
                "build": b.to_json(),
                "notes": list(result.notes),
            },
            out,
            indent=2,
        )
    else:
        how = "was already installed; checked and made current" if result.already else "installed and made current"
        out.write(
            f"{result.installed.version} {how}: {result.installed.bin_dir}\n"
            f"  version: {b.label()}\n  backends: {', '.join(b.backends)}\n  devices: {_devices(b)}\n"
        )
    return 0


def _build_progress_printer(err: TextIO):
    """One status line (rewritten in place on a terminal; a line per 10% step otherwise)."""
    tty = err.isatty()
    last: list = [None]

    def show(p) -> None:
        step = f"[{p.step}/{p.steps}] " if p.steps > 1 else ""
        if tty:
            err.write("\r" + (step + p.text()).ljust(110)[:110])
            err.flush()
            return
        mark = (p.stage, p.step, None if p.fraction is None else int(p.fraction * 10))
        if mark != last[0]:
            last[0] = mark
            pct = f" {100 * p.fraction:.0f}%" if p.fraction is not None else ""
            err.write(f"{step}{p.stage}{pct}\n")
            err.flush()

    return show


def run_build(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from ..llamacpp import build

    backend = args.backend
    try:
        override = os.environ.get(build.BACKEND_ENV_DIRS[backend])
        if not override:
            if backend == "cuda" and args.cuda_from_pypi:
                nvcc = build.find_nvcc()
                if nvcc is None:
                    err.write(f"installing NVIDIA's CUDA toolkit wheels from PyPI into {build.cuda_wheel_dir()}\n")
                    build.install_cuda_wheels(progress=_build_progress_printer(err))
                    if err.isatty():
                        err.write("\n")
                else:
                    err.write(f"note: nvcc is already here ({nvcc}); the PyPI toolkit is not installed\n")
            arch = build.key_arch(backend, build.PINNED_VERSION, None)
            root = build.cache_root() / build.build_key(build.PINNED_VERSION, backend, arch)
            if not build.complete(root / "bin"):  # a finished build needs no toolchain
                plan = build.plan(backend)
                err.write(
                    f"building llama.cpp {build.PINNED_VERSION} ({backend}) in {root}: "
                    f"{build.estimate_text(backend, args.jobs)}\n"
                )
                for name, path in plan.tools.items():
                    err.write(f"  {name}: {path}\n")
                if plan.arch:
                    err.write(f"  GPU architecture: {' '.join(plan.arch)}\n")
                err.write(f"  log: {root / 'build.log'}\n")
        folder = build.ensure_built(backend=backend, jobs=args.jobs, progress=_build_progress_printer(err))
        if err.isatty():
            err.write("\n")
        b = install.use(os.fspath(folder))
    except KeyboardInterrupt:
        err.write(
            "\ncancelled: the compilers were stopped; what was compiled is kept in the build folder and the next "
            "`layerdeck llama build` resumes from it\n"
        )
        return 130
    except ERRORS as exc:
        if err.isatty():
            err.write("\n")
        return fail(exc)
    out.write(
        f"built {backend} and made it current: {folder}\n  version: {b.label()}\n  backends: {', '.join(b.backends)}\n"
    )
    return 0


def run_use(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        b = install.use(args.spec)
    except ERRORS as exc:
        return fail(exc)
    out.write(f"current: {b.folder} ({b.label()}; backends {', '.join(b.backends)})\n")
    if not b.supported:
        for m in b.missing():
            out.write(f"  missing: {m}\n")
    cur = find.current_folder(None)
    if cur is not None and not find.is_current(b, cur):
        out.write(
            f"note: {cur} still comes first (beside the app, or LAYERDECK_LLAMA_CPP_DIR); unset it to use this build\n"
        )
    return 0


def run_remove(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        folder = install.remove(args.version)
    except ERRORS as exc:
        return fail(exc)
    out.write(f"removed {args.version} ({folder})\n")
    return 0
