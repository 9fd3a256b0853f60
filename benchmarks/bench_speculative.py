"""Speculative decoding: the predicted decode speed with a draft model next to llama-server's measured one.

A full-size pair written as sparse files (Qwen3-4B with Qwen3-0.6B as its draft, Q4_K_M; the weights are a
hole, so the kernels run on zeros at full cost) decodes on this machine's CPU with ``-md`` and
``--spec-type draft-simple``. llama.cpp's synthetic acceptance (``--spec-synth-rates``: each drafted token
accepted at random with the given probability, ``server_sample_and_accept_synth``) fixes the acceptance rate,
so the measured speed is that of a known rate; the prediction is Layerdeck's (:mod:`app.speed.speculative`)
at the same rate, with the speed model's figures for this machine (uncalibrated unless a calibration is saved).
Prints, per acceptance rate and drafted-token count: measured tok/s, the accepted share llama-server reports,
predicted tok/s at the nominal rate and at the share the run really got (the error is the latter's); and the
model alone.

    python3 benchmarks/bench_speculative.py [--tokens 48] [--rates 0.5,0.8,1.0] [--n-max 3,6] [--draft eagle3|dflash]

``--draft eagle3``: the draft is an EAGLE-3 head for the same Qwen3-4B (``--spec-type draft-eagle3``; a head of
the published EAGLE-3 heads' shape for a 2560-wide target: one layer of the target's width, 32 query / 8 KV heads of
128, intermediate 9728, its own lm_head over a 32000-token draft vocabulary mapped to the target's by d2t, fed
target layers 2, 18 and 33).

``--draft dflash``: the draft is a DFlash head for the same Qwen3-4B (``--spec-type draft-dflash``; the shape of
z-lab's Qwen3-4B-DFlash-b16: five layers of the target's width, 32 query / 8 KV heads of 128, intermediate 9728,
block size 16, fed target layers 2, 10, 18, 26 and 34, reading the target's embeddings; its own lm_head over a
32000-token vocabulary with d2t, as DSpark heads ship, so that the drafted token is not the end of text).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.command.parse import settings_from_args  # noqa: E402
from app.llamacpp import build  # noqa: E402
from app.model import open_model  # noqa: E402
from app.placement import Placement  # noqa: E402
from app.session import Session  # noqa: E402
from tests import gguf_factory as gf  # noqa: E402
from tests.llama_fixtures import free_port  # noqa: E402


def serve(bin_dir: Path, model: Path, args: list[str], log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [str(bin_dir / "llama-server"), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), *args]
    out = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"llama-server did not start; see {log}")


def generate(port: int, n: int) -> dict:
    body = json.dumps({"prompt": "Once upon a time", "n_predict": n, "ignore_eos": True, "temperature": 0,
                       "cache_prompt": False}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.loads(r.read())["timings"]


def measure(bin_dir: Path, model: Path, args: list[str], log: Path, tokens: int, repeat: int) -> tuple[float, dict]:
    """Median decode tok/s of ``repeat`` runs of ``tokens`` after a warm-up, and the last run's timings."""
    proc, port = serve(bin_dir, model, args, log)
    try:
        generate(port, 8)  # warm the caches
        runs = [generate(port, tokens) for _ in range(repeat)]
    finally:
        proc.terminate()
        proc.wait(30)
    return statistics.median(r["predicted_per_second"] for r in runs), runs[-1]


def _shift_d2t(path: Path) -> None:
    """A sparse head's weights are a hole, so its logits tie and it drafts token 2, the end of text, which
    synthetic acceptance never accepts: shift its 32000-token vocabulary by 10 in the d2t map (draft id +
    d2t[id])."""
    import numpy as np
    from gguf import GGUFReader

    d2t = next(t for t in GGUFReader(path).tensors if t.name == "d2t")
    with open(path, "r+b") as f:
        f.seek(d2t.data_offset)
        f.write(np.full(int(d2t.n_elements), 10, dtype=np.int64).tobytes())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--rates", default="0.5,0.8,1.0")
    ap.add_argument("--n-max", default="3,6")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--draft", choices=("simple", "eagle3", "dflash"), default="simple")
    a = ap.parse_args()
    bin_dir = Path(build.ensure_built())
    work = Path(tempfile.mkdtemp(prefix="layerdeck-spec-"))
    main_path = gf.write_sparse_model("qwen3-4b", work / "qwen3-4b.gguf")
    if a.draft == "eagle3":
        from tests.factory_models.eagle3 import write_eagle3_draft

        draft_path = write_eagle3_draft(
            work / "eagle3-qwen3-4b.gguf", sparse=True, n_embd_tgt=2560, target_layers=(2, 18, 33), n_embd=2560,
            n_head=32, n_head_kv=8, head_dim=128, n_ff=9728, n_vocab=151936, d2t=32000, quant="q4_k_m")
        _shift_d2t(draft_path)
        spec_type = "draft-eagle3"
    elif a.draft == "dflash":
        from tests.factory_models.dflash import write_dflash_draft

        draft_path = write_dflash_draft(
            work / "dflash-qwen3-4b.gguf", sparse=True, target_layers=(2, 10, 18, 26, 34), n_layer=5, n_embd=2560,
            n_head=32, n_head_kv=8, head_dim=128, n_ff=9728, n_vocab=151936, n_ctx_train=40960, quant="q4_k_m",
            own_output=True, d2t=32000)
        _shift_d2t(draft_path)
        spec_type = "draft-dflash"
    else:
        draft_path = gf.write_sparse_model("qwen3-0.6b", work / "qwen3-0.6b.gguf")
        spec_type = "draft-simple"
    model, draft = open_model(main_path), open_model(draft_path)
    base = ["-c", "4096", "-np", "1", "--fit", "off", "-ngl", "0"]
    print(f"pair: {model.path.name} + draft {draft.path.name} on the CPU ({bin_dir}); {a.tokens} tokens a run, "
          f"{a.repeat} runs each, median")

    def run(args: list[str], tag: str) -> tuple[float, dict]:
        return measure(bin_dir, main_path, args, work / f"{tag}.log", a.tokens, a.repeat)

    plain_meas, _ = run(base, "plain")
    s0 = settings_from_args(base, tool="server")
    session = Session(model, [], placement=Placement.from_settings(model, [], s0))
    plain_pred = session.decode.tokens_per_s if session.decode else float("nan")
    print(f"\n{'case':34} {'measured':>9} {'accepted':>9} {'predicted':>10} {'at accepted':>10} {'error':>7}")
    print(f"{'model alone':34} {plain_meas:9.2f} {'':>9} {plain_pred:10.2f} {plain_pred:10.2f} "
          f"{100 * (plain_pred / plain_meas - 1):+6.1f}%")
    errors = []
    for n_max in (int(x) for x in a.n_max.split(",")):
        for rate in (float(x) for x in a.rates.split(",")):
            spec = [*base, "-md", str(draft_path), "-ngld", "0", "--spec-type", spec_type,
                    "--spec-draft-n-max", str(n_max), "--spec-synth-rates", ",".join([f"{rate:g}"] * n_max)]
            meas, last = run(spec, f"spec-{n_max}-{rate:g}")
            accepted = last.get("draft_n_accepted", 0) / max(1, last.get("draft_n", 0))
            s = settings_from_args(spec, tool="server")
            ses = Session(model, [], placement=Placement.from_settings(model, [], s), draft=draft)
            ses.set_draft_acceptance(rate)
            sp = ses.speculative
            pred = sp.tokens_per_s if sp else float("nan")
            # the same step times at the tokens a step the run really got (the random acceptance of a short run
            # strays from the nominal rate): 1 + accepted share x drafted
            got = (1 + accepted * n_max) / sp.step_seconds if sp else float("nan")
            err = 100 * (got / meas - 1)
            errors.append(abs(err))
            print(f"{f'n_max {n_max}, acceptance {rate:g}':34} {meas:9.2f} {accepted:9.2f} {pred:10.2f} "
                  f"{got:10.2f} {err:+6.1f}%")
    print(f"\nspeculative: median |error| {statistics.median(errors):.1f}%, worst {max(errors):.1f}% over "
          f"{len(errors)} cases (speed model {'calibrated' if session.calibrated else 'not calibrated'} here)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
