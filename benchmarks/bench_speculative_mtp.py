"""MTP speculative decoding (``--spec-type draft-mtp``, no ``-md``): the predicted decode speed next to
llama-server's measured one.

A Qwen3.5-style model with one NextN/MTP block (the factory's qwen35, widened so weights rather than per-call
overheads set the time, with a large vocabulary so the MTP head weighs as it does in the real models) decodes on
this machine's CPU. llama.cpp's synthetic acceptance (``--spec-synth-rates``, ``server_sample_and_accept_synth``)
fixes the acceptance rate; the prediction is Layerdeck's (:func:`app.speed.speculative.mtp_decode`) at the same
rate, with the speed model's figures for this machine (uncalibrated unless a calibration is saved). Prints, per
acceptance rate and drafted-token count: measured tok/s, the accepted share llama-server reports, predicted tok/s
at the nominal rate and at the share the run really got (the error is the latter's); and the model alone.

The ratio to the model alone (measured speedup next to predicted) is printed too: on a machine other work
shares it is steadier than the absolute rates. ``--threads`` (default 1) sets ``-t`` and ``-td``: with one thread
a context has no worker threads to wait for, which a loaded 2-core machine otherwise turns into time slices.

    python3 benchmarks/bench_speculative_mtp.py [--tokens 64] [--rates 0,0.5,1.0] [--n-max 1,3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.command.parse import settings_from_args  # noqa: E402
from app.llamacpp import build  # noqa: E402
from app.model import open_model  # noqa: E402
from app.placement import Placement  # noqa: E402
from app.session import Session  # noqa: E402
from benchmarks.bench_speculative import measure  # noqa: E402
from tests import gguf_factory as gf  # noqa: E402

#: the widened tiny qwen35: 8 layers (2 full attention, 6 gated delta-net) of 1024 + one MTP block, vocabulary
#: ~64k (the head and the MTP block's own FFN about as heavy as two trunk layers each)
SHAPE = dict(n_layer=8, n_nextn=1, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, vocab_extra=64000)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rates", default="0,0.5,1.0")
    ap.add_argument("--n-max", default="1,3")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--poll0", action="store_true", help="also run with --poll 0 --spec-draft-poll 0")
    a = ap.parse_args()
    bin_dir = Path(build.ensure_built())
    work = Path(tempfile.mkdtemp(prefix="layerdeck-mtp-"))
    path = gf.write_tiny_model("qwen35", work / "qwen35-mtp.gguf", **SHAPE)
    model = open_model(path)
    base = ["-c", "4096", "-np", "1", "--fit", "off", "-ngl", "0", "-t", str(a.threads), "-td", str(a.threads)]
    print(f"model: {path.name} ({model.path.stat().st_size / 2**20:.0f} MiB, {model.params.n_layer} layers with "
          f"{model.params.nextn_layers} NextN) on the CPU ({bin_dir}); {a.tokens} tokens a run, {a.repeat} runs each, "
          "median")

    def run(args: list[str], tag: str) -> tuple[float, dict]:
        return measure(bin_dir, path, args, work / f"{tag}.log", a.tokens, a.repeat)

    plain_meas, _ = run(base, "plain")
    session = Session(model, [], placement=Placement.from_settings(model, [], settings_from_args(base, tool="server")))
    plain_pred = session.decode.tokens_per_s if session.decode else float("nan")
    print(f"\n{'case':40} {'measured':>9} {'accepted':>9} {'predicted':>10} {'at accepted':>11} {'error':>7} "
          f"{'speedup measured':>16} {'predicted':>9}")
    print(f"{'model alone':40} {plain_meas:9.2f} {'':>9} {plain_pred:10.2f} {plain_pred:11.2f} "
          f"{100 * (plain_pred / plain_meas - 1):+6.1f}%")
    errors, ratio_err = [], []
    polls = [[], ["--poll", "0", "--spec-draft-poll", "0"]] if a.poll0 else [[]]
    for poll in polls:
        for n_max in (int(x) for x in a.n_max.split(",")):
            for rate in (float(x) for x in a.rates.split(",")):
                spec = [*base, *poll, "--spec-type", "draft-mtp", "--spec-draft-n-max", str(n_max),
                        "--spec-synth-rates", ",".join([f"{rate:g}"] * n_max)]
                # the model alone again next to each case: other work on the machine moves both alike
                alone, _ = run(base, f"plain-{n_max}-{rate:g}{'-poll0' if poll else ''}")
                meas, last = run(spec, f"mtp-{n_max}-{rate:g}{'-poll0' if poll else ''}")
                accepted = last.get("draft_n_accepted", 0) / max(1, last.get("draft_n", 0))
                ses = Session(model, [], placement=Placement.from_settings(model, [], settings_from_args(spec,
                                                                                                        tool="server")))
                ses.set_draft_acceptance(rate)
                sp = ses.speculative
                if sp is None:
                    raise SystemExit(f"no MTP prediction for {' '.join(spec)}")
                # the same step times at the tokens a step the run really got: 1 + accepted share x drafted
                got = (1 + accepted * sp.n_draft) / sp.step_seconds
                err = 100 * (got / meas - 1)
                errors.append(abs(err))
                tag = f"n_max {n_max}, acceptance {rate:g}{', poll 0' if poll else ''}"
                print(f"{tag:40} {meas:9.2f} {accepted:9.2f} {sp.tokens_per_s:10.2f} {got:11.2f} {err:+6.1f}% "
                      f"{meas / alone:16.2f} {got / plain_pred:9.2f}")
                ratio_err.append(abs(100 * (got / plain_pred / (meas / alone) - 1)))
                print(f"{'':40} step {1e3 * sp.step_seconds:.1f} ms: draft {1e3 * sp.draft_seconds:.1f}, verify "
                      f"{1e3 * sp.verify_seconds:.1f}, catch-up {1e3 * sp.catchup_seconds:.1f}")
    print(f"\ndraft-mtp: median |error| {statistics.median(errors):.1f}%, worst {max(errors):.1f}% over "
          f"{len(errors)} cases (speed model {'calibrated' if session.calibrated else 'not calibrated'} here); "
          f"speedup over the model alone (measured next to each case): median |error| "
          f"{statistics.median(ratio_err):.1f}%, worst {max(ratio_err):.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
