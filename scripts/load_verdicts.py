"""Count how Layerdeck's verdict on mutated GGUF files compares with llama.cpp's, without and with the load
check (app/llamacpp/load_check.py). Prints one table; used for the figures in the hardening notes.

    python scripts/load_verdicts.py [N] [--llama-dir DIR]

N seeded structure-aware mutations (the GGUF fuzzer's ``any_mutation``, one or two per file) of the fuzzer's
base models; for each: does llama.cpp (``llama-fit-params``) refuse it, does Layerdeck's reader alone refuse it,
does the CLI with the load check refuse it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from app.llamacpp.build import ensure_built  # noqa: E402
from tests.fuzz import test_fuzz_gguf as fz  # noqa: E402
from tests.gguf_factory import write_tiny_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=500)
    ap.add_argument("--llama-dir", default=None)
    args = ap.parse_args()
    llama = Path(args.llama_dir or ensure_built())
    tmp = Path(tempfile.mkdtemp(prefix="layerdeck-verdicts-"))
    bases = fz.Bases({a: write_tiny_model(a, tmp / f"{a}.gguf").read_bytes() for a in fz.FUZZ_ARCHS})
    counts: Counter[str] = Counter()

    @settings(max_examples=args.n, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(arch=st.sampled_from(fz.FUZZ_ARCHS), mutations=st.lists(fz.any_mutation, min_size=1, max_size=2))
    def one(arch, mutations):
        path = fz.write_input(tmp, bases, arch, mutations)
        theirs, _ = fz.llama_refuses(llama, path)
        alone = not fz.run_core(path).loaded
        code, _, _, _ = fz.run_cli(["inspect", "--llama-dir", str(llama), str(path)])
        checked = code == 2
        counts["inputs"] += 1
        counts["llama.cpp refuses"] += theirs
        counts["reader alone: differs from llama.cpp"] += alone != theirs
        counts["reader alone: accepts a file llama.cpp refuses"] += theirs and not alone
        counts["reader alone: refuses a file llama.cpp loads"] += alone and not theirs
        counts["with the load check: differs from llama.cpp"] += checked != theirs

    one()
    width = max(map(len, counts))
    for k, v in counts.items():
        print(f"{k:{width}}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
