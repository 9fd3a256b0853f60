"""Regenerate the README's "Figures" section from the benchmark scripts' own output.

    python3 scripts/figures.py [--only NAME,...] [--no-run]

Runs each script of ``benchmarks/`` listed below (or only those named), keeps its printed output with the
date, the machine and the command in ``docs/figures/NAME.txt``, and rewrites the README between the
``<!-- figures:begin -->`` and ``<!-- figures:end -->`` markers from every kept output: the README quotes
only what a script printed. ``--no-run`` rebuilds the section from the kept outputs alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "docs" / "figures"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
#: Outputs longer than this are quoted from their summary on (the first line matching SUMMARY).
LONG = 45
SUMMARY = re.compile(r"^\d+ comparisons|^figures +n ")

#: script -> (arguments, what it measures: the README's lead-in for its output)
BENCHES: dict[str, tuple[list[str], str]] = {
    "bench_gguf_read.py": ([], "Opening a Qwen3-235B-A22B-shaped GGUF header, Layerdeck's reader vs gguf-py"),
    "bench_estimator.py": ([], "A full estimate for a 94-layer, 128-expert model with 40 `-ot` patterns"),
    "bench_board_drop.py": ([], "A drop of ten blocks on the real board, until every gauge and the command are current"),
    "bench_estimator_accuracy.py": ([], "Estimate vs llama.cpp's `--fit-print` on CPU and RPC devices"),
    "bench_vulkan_accuracy.py": ([], "Estimate vs llama.cpp's `--fit-print` on Vulkan0 (Mesa's lavapipe)"),
    "bench_vulkan_rpc_accuracy.py": (
        [],
        "Estimate vs llama.cpp's `--fit-print` on a Vulkan0 behind RPC (a Vulkan `ggml-rpc-server` on lavapipe)",
    ),
    "bench_speed_truth.py": ([], "The speed model against measured llama-bench runs, out of sample"),
}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(name: str) -> Path:
    args, _ = BENCHES[name]
    cmd = [sys.executable, str(ROOT / "benchmarks" / name), *args]
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    KEPT.mkdir(parents=True, exist_ok=True)
    path = KEPT / (Path(name).stem + ".txt")
    head = (
        f"# {time.strftime('%Y-%m-%d', time.gmtime())} · {_cpu()}, {os.cpu_count()} CPUs · "
        f"python benchmarks/{name}{' ' + ' '.join(args) if args else ''} · {time.time() - t0:.0f} s\n"
    )
    path.write_text(head + out.stdout.rstrip() + "\n")
    return path


def section() -> str:
    parts = [BEGIN, "", "Each figure below is the output of the script named, as it printed it "
             "(`python scripts/figures.py` runs them again and rewrites this section).", ""]
    for name, (_, what) in BENCHES.items():
        path = KEPT / (Path(name).stem + ".txt")
        if not path.exists():
            parts += [f"- {what}: not measured yet (`python benchmarks/{name}`).", ""]
            continue
        head, _, body = path.read_text().partition("\n")
        lines = body.rstrip().splitlines()
        rel = path.relative_to(ROOT).as_posix()
        if len(lines) > LONG:  # a per-case table: quote its summary, the whole output is one click away
            start = next((i for i, ln in enumerate(lines) if SUMMARY.search(ln)), len(lines) - LONG)
            lines = [f"... ({start} lines before this, one per case and figure: {rel})", *lines[start:]]
        parts += [f"- {what} ({head.lstrip('# ').strip()}; [output]({rel})):", "", "  ```"]
        parts += [f"  {line}" if line else "" for line in lines]
        parts += ["  ```", ""]
    parts.append(END)
    return "\n".join(parts)


def rewrite_readme(readme: Path = ROOT / "README.md") -> None:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme} has no {BEGIN} ... {END} markers")
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    readme.write_text(before + section() + after)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated script names (bench_estimator.py,...) to run")
    ap.add_argument("--no-run", action="store_true", help="rebuild the section from the kept outputs only")
    a = ap.parse_args(argv)
    names = [n for n in (a.only.split(",") if a.only else BENCHES) if n]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}")
    if not a.no_run:
        for n in names:
            print(f"running {n} ...", flush=True)
            print(f"  kept {run(n).relative_to(ROOT)}", flush=True)
    rewrite_readme()
    print("README.md: figures section rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
