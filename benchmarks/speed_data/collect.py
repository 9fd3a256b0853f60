"""Measure llama.cpp's real speed on this machine: the data set the speed model is judged on.

Writes full-size models as sparse GGUF files (the real header and tensor table of the test factory's
shapes, re-typed to each quantization by llama-quantize's rules in ``app/model/requant.py``; the data
region is a hole, which reads as zeros: the kernels do not look at the values), then runs the pinned
llama.cpp's ``llama-bench`` (and ``llama-batched-bench`` where built) on them: on the CPU and on
CPU-backed ``ggml-rpc-server`` devices over loopback, several thread counts, depths, micro-batch
sizes and parallel-slot counts. Every case is repeated (``-r``) and the per-repetition figures are
kept, so each measurement carries its spread.

    python3 benchmarks/speed_data/collect.py [--out FILE] [--only CASE,...] [--llama-dir DIR]

It appends to the data set (one JSON document: the machine, the llama.cpp build, and one entry per
case), so a case can be re-run alone. The benchmarks run at a raised priority (``nice -n -10``, with
the kernel's session autogroups off so that nice counts across sessions) when the user may; the load
average before and after each case is stored with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gguf_factory import GGML_QUANT_SIZES, Q, model_spec, sparse_spec, write_spec  # noqa: E402

from app.model import open_model  # noqa: E402
from app.model.requant import predict_model  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "cpu-2core-epyc.json"
MODEL_DIR = Path(os.environ.get("LAYERDECK_SPEED_MODELS", str(Path.home() / ".cache/layerdeck/speed-models")))

#: Shapes the factory does not keep as sparse specs (Llama 3.2 1B and 3B).
EXTRA_SHAPES = {
    "llama-3.2-1b": ("llama", dict(name="Llama-3.2-1B", n_layer=16, n_embd=2048, n_head=32, n_head_kv=8,
                                   n_ff=8192, n_ctx_train=131072, rope_base=500000.0, n_vocab=128256,
                                   tied_embeddings=True, quant="q4_k_m", file_type=15)),
    "llama-3.2-3b": ("llama", dict(name="Llama-3.2-3B", n_layer=28, n_embd=3072, n_head=24, n_head_kv=8,
                                   n_ff=8192, n_ctx_train=131072, rope_base=500000.0, n_vocab=128256,
                                   tied_embeddings=True, quant="q4_k_m", file_type=15)),
}

#: model key -> (shape, llama-quantize type). The key names the file.
MODELS = {
    "llama-3.2-1b-Q8_0": ("llama-3.2-1b", "Q8_0"),
    "llama-3.2-3b-Q4_K_M": ("llama-3.2-3b", None),
    "llama-3.2-3b-IQ4_XS": ("llama-3.2-3b", "IQ4_XS"),
    "qwen3-4b-Q4_K_M": ("qwen3-4b", None),
    "qwen3-4b-Q8_0": ("qwen3-4b", "Q8_0"),
    "gemma-3-4b-Q4_K_M": ("gemma-3-4b", None),
    "llama-3.1-8b-Q4_K_M": ("llama-3.1-8b", None),
    "llama-3.1-8b-IQ4_XS": ("llama-3.1-8b", "IQ4_XS"),
    "olmoe-1b-7b-Q4_K_M": ("olmoe-1b-7b", None),
    "olmoe-1b-7b-MXFP4_MOE": ("olmoe-1b-7b", "MXFP4_MOE"),
    "deepseek-v2-lite-Q4_K_M": ("deepseek-v2-lite", None),
    "gpt-oss-20b-MXFP4": ("gpt-oss-20b", None),
}

BENCH = ["-r", "3", "-o", "json"]


def _case(name, model, args, rpc=0, tool="llama-bench"):
    return {"case": name, "model": model, "args": args, "rpc": rpc, "tool": tool}


#: The cases. Each model gets a base case (threads 1 and 2, pp and tg); the small ones also depths,
#: micro-batch sizes, RPC placements and parallel slots.
CASES = [
    _case("base", m, ["-p", "64", "-n", "16", "-t", "2"]) for m in MODELS
] + [
    _case("threads", "llama-3.2-1b-Q8_0", ["-p", "64", "-n", "32", "-t", "1"]),
    _case("threads", "qwen3-4b-Q4_K_M", ["-p", "32", "-n", "16", "-t", "1"]),
    _case("threads", "olmoe-1b-7b-Q4_K_M", ["-p", "64", "-n", "16", "-t", "1"]),
    _case("threads-over", "llama-3.2-1b-Q8_0", ["-p", "64", "-n", "32", "-t", "4"]),
    _case("depth", "llama-3.2-1b-Q8_0", ["-p", "64", "-n", "32", "-t", "2", "-d", "1024"]),
    _case("depth", "olmoe-1b-7b-Q4_K_M", ["-p", "64", "-n", "16", "-t", "2", "-d", "1024"]),
    _case("ubatch", "llama-3.2-1b-Q8_0", ["-p", "256", "-n", "0", "-t", "2", "-ub", "16,64,256", "-b", "256"]),
    _case("ubatch", "llama-3.2-3b-Q4_K_M", ["-p", "128", "-n", "0", "-t", "2", "-ub", "8,32,128", "-b", "128"]),
    _case("rpc2", "llama-3.2-1b-Q8_0", ["-p", "64", "-n", "32", "-t", "2", "-ngl", "99", "-ts", "1/1"], rpc=2),
    _case("rpc1-half", "llama-3.2-1b-Q8_0", ["-p", "64", "-n", "32", "-t", "2", "-ngl", "8"], rpc=1),
    _case("rpc2", "qwen3-4b-Q4_K_M", ["-p", "32", "-n", "16", "-t", "2", "-ngl", "99", "-ts", "1/1"], rpc=2),
    _case("rpc1-exps-cpu", "olmoe-1b-7b-Q4_K_M",
          ["-p", "64", "-n", "16", "-t", "2", "-ngl", "99", "-ot", "exps=CPU"], rpc=1),
    _case("rpc2", "olmoe-1b-7b-Q4_K_M", ["-p", "64", "-n", "16", "-t", "2", "-ngl", "99", "-ts", "3/1"], rpc=2),
    _case("parallel", "llama-3.2-1b-Q8_0",
          ["-npp", "64", "-ntg", "32", "-npl", "1,2,4,8", "-c", "1024", "-t", "2", "--output-format", "jsonl"],
          tool="llama-batched-bench"),
    _case("parallel", "olmoe-1b-7b-Q4_K_M",
          ["-npp", "64", "-ntg", "16", "-npl", "1,2,4", "-c", "512", "-t", "2", "--output-format", "jsonl"],
          tool="llama-batched-bench"),
    _case("parallel-shared", "llama-3.2-1b-Q8_0",
          ["-npp", "64", "-ntg", "32", "-npl", "1,2,4,8", "-c", "1024", "-t", "2", "-pps", "--output-format",
           "jsonl"], tool="llama-batched-bench"),
    _case("server", "llama-3.2-1b-Q8_0", ["-np", "4", "-c", "2048", "-t", "2", "--users", "1,2,4"],
          tool="llama-server"),
    _case("server", "olmoe-1b-7b-Q4_K_M", ["-np", "4", "-c", "4096", "-t", "2", "--users", "1,2,4"],
          tool="llama-server"),
    _case("base-again", "qwen3-4b-Q4_K_M", ["-p", "64", "-n", "16", "-t", "2"]),
]


def model_file(key: str) -> Path:
    """The sparse file of ``key`` (written once; re-typed by llama-quantize's rules when a type is named)."""
    shape, qtype = MODELS[key]
    path = MODEL_DIR / f"{key}.gguf"
    if path.exists():
        return path
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    arch, hp = EXTRA_SHAPES[shape] if shape in EXTRA_SHAPES else (None, None)
    spec = model_spec(arch, **hp) if arch else sparse_spec(shape)
    if qtype:
        base = MODEL_DIR / f"{shape}.base.gguf"
        write_spec(spec, base, sparse=True)
        target = predict_model(open_model(base), qtype, imatrix=qtype.startswith("IQ"))
        types = {t.name: t.type_id for t in target.tensors}
        for t in spec.tensors:
            t.qtype = Q(types[t.name])
            assert t.qtype in GGML_QUANT_SIZES
        spec.set("general.file_type", int(target.metadata["general.file_type"]))
        base.unlink()
    write_spec(spec, path, sparse=True)
    return path


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _priority() -> list[str]:
    """``nice -n -10`` when this user may raise priority (and nice counts across sessions), else nothing."""
    try:
        Path("/proc/sys/kernel/sched_autogroup_enabled").write_text("0")
    except OSError:
        pass
    return ["nice", "-n", "-10"] if os.geteuid() == 0 else []


def _start_rpc(bin_dir: Path, n: int, base_port: int = 52100) -> tuple[list[subprocess.Popen], list[str]]:
    procs, eps = [], []
    for i in range(n):
        port = base_port + i
        procs.append(subprocess.Popen(
            [str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port), "-t", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        eps.append(f"127.0.0.1:{port}")
    deadline = time.time() + 30
    for ep in eps:
        host, port = ep.split(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"ggml-rpc-server on {ep} did not start") from None
                time.sleep(0.2)
    return procs, eps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_case(case: dict, bin_dir: Path, path: Path) -> list[dict]:
    """Real concurrent requests to llama-server on 127.0.0.1: for each user count, that many /completion
    requests at once (64-token prompt, 32 tokens each), three rounds; each request's own timings are kept."""
    import concurrent.futures
    import urllib.request

    args = list(case["args"])
    users = [int(u) for u in args.pop(args.index("--users") + 1).split(",")]
    args.remove("--users")
    port = _free_port()
    argv = _priority() + [str(bin_dir / "llama-server"), "-m", str(path), "--host", "127.0.0.1", "--port",
                          str(port), "--no-warmup", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("llama-server did not become ready")
            time.sleep(0.5)

        def one(i: int) -> dict:
            body = json.dumps({"prompt": " ".join(["hello"] * 64) + f" {i}", "n_predict": 32, "ignore_eos": True,
                               "cache_prompt": False, "temperature": 0}).encode()
            req = urllib.request.Request(url + "/completion", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())["timings"]

        one(-1)  # warm-up
        out = []
        for n in users:
            rounds = []
            for rnd in range(3):
                t0 = time.time()
                with concurrent.futures.ThreadPoolExecutor(n) as ex:
                    timings = list(ex.map(one, range(rnd * 10, rnd * 10 + n)))
                rounds.append({"wall_s": round(time.time() - t0, 2),
                               "per_user_tg": [round(t["predicted_per_second"], 3) for t in timings],
                               "per_user_pp": [round(t["prompt_per_second"], 3) for t in timings]})
            out.append({"users": n, "n_prompt": 64, "n_gen": 32, "rounds": rounds})
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_case(case: dict, bin_dir: Path) -> dict:
    path = model_file(case["model"])
    if case["tool"] == "llama-server":
        before, t0 = _loadavg(), time.time()
        results = _server_case(case, bin_dir, path)
        return {**case, "file": path.name, "file_bytes": path.stat().st_size, "results": results,
                "wall_s": round(time.time() - t0, 1), "loadavg_before": before, "loadavg_after": _loadavg(),
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tool = bin_dir / case["tool"]
    if not tool.exists():
        raise FileNotFoundError(f"{tool} is missing (build it with app.llamacpp.build.ensure_tool)")
    procs: list[subprocess.Popen] = []
    args = list(case["args"])
    try:
        if case["rpc"]:
            procs, eps = _start_rpc(bin_dir, case["rpc"])
            args += ["--rpc", ",".join(eps)]
        if case["tool"] == "llama-bench":
            argv = [str(tool), "-m", str(path), *args, *BENCH]
        else:
            argv = [str(tool), "-m", str(path), *args]
        before, t0 = _loadavg(), time.time()
        out = subprocess.run(_priority() + argv, capture_output=True, text=True, timeout=3600)
        wall = time.time() - t0
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    if out.returncode != 0:
        raise RuntimeError(f"{case['case']} {case['model']}: exit {out.returncode}: {out.stderr[-2000:]}")
    if case["tool"] == "llama-bench":
        results = json.loads(out.stdout)
        keep = ("n_prompt", "n_gen", "n_depth", "n_threads", "n_batch", "n_ubatch", "n_gpu_layers", "type_k",
                "flash_attn", "avg_ts", "stddev_ts", "samples_ts", "devices", "backends")
        results = [{k: r.get(k) for k in keep} for r in results]
    else:
        results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {
        **case,
        "args": args,
        "file": path.name,
        "file_bytes": path.stat().st_size,
        "results": results,
        "wall_s": round(wall, 1),
        "loadavg_before": before,
        "loadavg_after": _loadavg(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def machine() -> dict:
    from app.speed.membench import measure_host_bandwidth
    from app.speed.params import host_cpu

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), [])
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "simd": [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni") if f in flags],
        "ram_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
        "host_bandwidth_gb_s": round(measure_host_bandwidth() / 1e9, 2),
        "kernel": platform.release(),
        "physical_cores": host_cpu().physical_cores,
        "mhz": host_cpu().mhz,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", help="comma-separated case:model pairs or case names to (re)run")
    ap.add_argument("--llama-dir", type=Path, help="llama.cpp bin folder (default: the pinned build)")
    a = ap.parse_args(argv)
    if a.llama_dir:
        bin_dir = a.llama_dir
    else:
        from app.llamacpp.build import ensure_built

        bin_dir = ensure_built()
    doc = json.loads(a.out.read_text()) if a.out.exists() else {"schema": "layerdeck.speed-data/1", "runs": []}
    version = subprocess.run([str(bin_dir / "llama-bench"), "--version"], capture_output=True, text=True)
    doc["llama_cpp"] = (version.stdout + version.stderr).strip().splitlines()[:2]
    doc.setdefault("machine", machine())
    doc["how"] = __doc__.strip().split("\n\n")[0] + " See benchmarks/speed_data/collect.py."
    wanted = set((a.only or "").split(",")) - {""}
    for case in CASES:
        key = f"{case['case']}:{case['model']}"
        if wanted and key not in wanted and case["case"] not in wanted:
            continue
        try:
            entry = run_case(case, bin_dir)
        except (RuntimeError, FileNotFoundError, subprocess.TimeoutExpired) as exc:
            print(f"{key}: FAILED: {exc}", file=sys.stderr, flush=True)
            continue
        doc["runs"] = [r for r in doc["runs"] if f"{r['case']}:{r['model']}" != key] + [entry]
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
        figs = ", ".join(
            f"{r.get('n_prompt', r.get('pp'))}/{r.get('n_gen', r.get('tg'))}: "
            f"{r.get('avg_ts', r.get('speed_tg', r.get('rounds')))}" for r in entry["results"])
        print(f"{key}: {entry['wall_s']} s; {figs}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
