"""DeepSeek-V4 (``deepseek4``): weights, ``llama_kv_cache_dsv4`` (the raw sliding-window K cache, the CSA/HCA
compressed caches, the lightning indexer's cache and the three compressor states) and the compute graph
(``src/models/deepseek4.cpp`` replayed by :mod:`app.memory.compute.models.deepseek4`: mHC with Sinkhorn, the
compressors, the indexer's top-k, the sparse CSA/HCA attention) against the real llama.cpp:
``llama-fit-params --fit-print`` (floored MiB) on the full-size sparse model, and in server mode the model, KV
(+ DSV4 state), compute and output buffers ``llama-server -lv 4`` logs (two decimals) on the tiny model, and
Vulkan0 (lavapipe) against the Vulkan build's dry run.
"""

from __future__ import annotations

import os
import re

import pytest

from app.command.parse import settings_from_args
from app.devices.detect import detect
from app.llamacpp.fit_print import run_fit_print
from app.memory.compute import APPROXIMATE
from app.memory.compute.models import CHECKED_ARCHS
from app.memory.device_adapter import from_detected
from app.memory.estimator import estimate
from app.model import open_model
from tests.llama_fixtures import VULKAN_ENV

from .accuracy import (
    COMPUTE_SLACK,
    MIN_PRINTED_MIB,
    MiB,
    _c,
    errors,
    list_rpc_devices,
    record,
    run_case,
    within_floor,
)

pytestmark = pytest.mark.llama

FIT_CASES = [
    _c("dsv4-cpu", "deepseek-v4-flash", 0, "-c 4096"),
    _c("dsv4-cpu-np4-q8", "deepseek-v4-flash", 0, "-c 16384 -np 4 -ctk q8_0 -ctv q8_0"),
    _c("dsv4-1rpc-ngl20-faoff", "deepseek-v4-flash", 1, "-c 8192 -ngl 20 -fa off"),
    _c("dsv4-2rpc-ts13-np2", "deepseek-v4-flash", 2, "-c 16384 -ngl all -ts 1,3 -np 2"),
    _c("dsv4-2rpc-cmoe-ub1024", "deepseek-v4-flash", 2, "-c 32768 -ngl all -ts 1,1 -cmoe -ub 1024"),
    _c("dsv4-3rpc-np3-ub64", "deepseek-v4-flash", 3, "-c 65536 -ngl all -ts 1,1,1 -np 3 -ub 64"),
]


@pytest.mark.parametrize("case", FIT_CASES, ids=[c.id for c in FIT_CASES])
def test_estimate_matches_fit_print(case, llama_bin, rpc_servers, sparse_models):
    servers = rpc_servers(case.n_rpc) if case.n_rpc else []
    result = run_case(case, sparse_models[case.model], llama_bin, [s.endpoint for s in servers])
    rows = errors(result)
    approximate = any(n.startswith(APPROXIMATE) for n in result.ours.notes)
    record("fit-print", case=case.id, arch="deepseek4", backends=["CPU"] + (["RPC"] if case.n_rpc else []),
           compute_off="", args=" ".join(case.args), approximate=approximate,
           ok={q: all(ok for _d, qq, _o, _t, ok in rows if qq == q) for q in ("model", "context", "compute")})
    assert "deepseek4" in CHECKED_ARCHS
    assert not approximate, "the compute graph was built (not the approximate path)"
    # the host's compute with every layer offloaded is the graph inputs and the embedding lookup, a few MiB at
    # -ub 64 (11 MiB on dsv4-3rpc-np3-ub64): still compared to the floored MiB below, exempt from the size floor
    small = [(dev, q, t) for dev, q, _o, t, _ok in rows if 0 < t < MIN_PRINTED_MIB and (dev, q) != ("CPU", "compute")]
    assert not small, f"figures too small to tell a wrong estimate from flooring: {small}"
    assert [r.name for r in result.theirs] == [d.name for d in result.ours.devices]
    misses = [f"{dev} {q}: ours {o:.4f} MiB vs llama.cpp {t:.0f} MiB (floored)" for dev, q, o, t, ok in rows if not ok]
    assert not misses, "\n".join(misses)


_BUF = re.compile(r"(\S+) (model|KV|compute|output|DSV4 \w+ state) buffer size =\s*([\d.]+) MiB")


@pytest.mark.parametrize(
    "n_rpc,args",
    [
        (1, "-c 4096 -ngl all -np 2"),
        (2, "-c 8192 -ngl all -ts 1,1 -ncmoe 1 -np 4 -fa off -ub 256"),
        (1, "-c 4096 -ngl 2 -np 2 -ctk q8_0 -ctv q8_0"),  # a partial offload: layers 3 and the output on RPC0
        # -np auto: 4 slots and kv_unified, which the DSV4 caches ignore (the raw window stays per sequence)
        (1, "-c 8192 -ngl all -nkvo -fa off -ub 128"),
        (1, "-c 8192 -ngl all -nkvo -fa on -ub 128"),
        (1, "-c 8192 -ngl all -nkvo -fa off"),
        (1, "-c 8192 -ngl all -fa off -ub 128"),
    ],
)
def test_server_buffers_match_log(n_rpc, args, llama_bin, rpc_servers, llama_server, tiny_models):
    servers = rpc_servers(n_rpc)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    srv = llama_server(tiny_models["deepseek4"], "--rpc", ",".join(endpoints), *args.split(), "--fit", "off",
                       "--no-repack", "-lv", "4")
    logged: dict[tuple[str, str], float] = {}
    lines: dict[tuple[str, str], int] = {}
    for buft, kind, mib in _BUF.findall(srv.output()):
        kind = "KV" if kind.startswith("DSV4") else kind  # the compressor states are part of the cache
        logged[(buft, kind)] = logged.get((buft, kind), 0.0) + float(mib)
        lines[(buft, kind)] = lines.get((buft, kind), 0) + 1
    srv.stop()
    assert any(k == "KV" for _b, k in logged), logged
    est = estimate(open_model(tiny_models["deepseek4"]), devices, settings_from_args(args.split(), tool="server"))
    assert not [n for n in est.notes if n.startswith(APPROXIMATE)], "the compute graph was built"
    by_buft = {d.buft: d.name for d in devices}
    misses = []
    for (buft, kind), mib in logged.items():
        if kind == "model" and buft not in by_buft:
            continue  # the mapped host range (padding, neighbours): test_accuracy_llama keeps a loose bound for it
        dev = est.device(by_buft.get(buft, "CPU"))
        ours = {"model": dev.model, "KV": dev.kv, "compute": dev.compute, "output": dev.output}[kind] / MiB
        # each logged line is %.2f: half a hundredth of rounding per line summed (+ the compression's few bytes for
        # compute, as test_accuracy_llama allows)
        tol = 0.005 * lines[(buft, kind)] + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0)
        if abs(ours - mib) > tol:
            misses.append(f"{buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    assert any(k == "compute" for _b, k in logged), logged
    record("server-log", case=f"deepseek4-{n_rpc}rpc", arch="deepseek4", backends=["CPU", "RPC"], ok=not misses)
    assert not misses, "\n".join(misses)


#: Vulkan0 on lavapipe (tests/backends/test_vulkan.py's setting: 128 MiB per tensor, so the big weights' ops run on
#: the CPU), against the same build's plain dry run: ggml_vk_graph_optimize's reordering on, which the replay
#: follows (app/memory/compute/vk_optimize.py); with GGML_VK_DISABLE_GRAPH_OPTIMIZE=1 llama.cpp's Vulkan0 compute
#: is lower (-c 8192 -ngl all -cmoe: 219 against 249 MiB), so the reordering is what is compared here.
VULKAN_ARGS = ["-c 8192 -ngl all -cmoe", "-c 8192 -ngl 20 -fa off"]


@pytest.mark.parametrize("args", VULKAN_ARGS, ids=["dsv4-vk-cmoe", "dsv4-vk-ngl20-faoff"])
def test_estimate_equals_the_vulkan_dry_run(args, llama_vulkan_bin, sparse_models):
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **VULKAN_ENV}, cuda_probe=None,
                                 amd=False).devices)
    path = sparse_models["deepseek-v4-flash"]
    argv = [*args.split(), "--no-repack"]
    ours = estimate(open_model(path), lanes, settings_from_args(argv, tool="fit-params"))
    theirs = run_fit_print(path, argv, llama_dir=llama_vulkan_bin, env={**os.environ, **VULKAN_ENV}, timeout=300)
    assert [r.name for r in theirs] == ["Vulkan0", "CPU"]
    assert not [n for n in ours.notes if n.startswith(APPROXIMATE)], "the compute graph was built"
    got = [(r.name, q, getattr(ours.device(r.name), q), getattr(r, q)) for r in theirs
           for q in ("model", "context", "compute")]
    record("vulkan", case=f"dsv4-vk {args}", arch="deepseek4", backends=["Vulkan"], features=["vulkan"],
           ok={q: all(within_floor(o, t) for _n, qq, o, t in got if qq == q) for q in ("model", "context", "compute")})
    misses = [f"{n} {q}: ours {o / MiB:.4f} MiB vs llama.cpp {t} MiB" for n, q, o, t in got if not within_floor(o, t)]
    assert not misses, "\n".join(misses)
    assert not any("ggml_vk_graph_optimize" in n for n in ours.notes), ours.notes


# --------------------------------------------------------------------------- --spec-type draft-mtp

#: the tiny model with its MTP block kept (``nextn_predict_layers`` 1, compress ratio 0) and heads of 128 next to
#: the indexer's 64 (equal heads crash llama.cpp's MTP context: test_equal_heads_crash_llama_cpp_and_are_refused)
DSV4_MTP = dict(n_nextn=1, head_dim=128, vocab_extra=30000)

#: (RPC devices, arguments): the trunk's compressor states with their restore/snapshot rows (n_rs_seq =
#: --spec-draft-n-max), the raw window cache that also holds the MTP layer, and the MTP context's iswa cache and
#: graph_mtp
MTP_CASES = [
    (0, "-c 4096 --spec-type draft-mtp"),
    (1, "-c 4096 -ngl all -np 2 -fa off --spec-type draft-mtp"),
    (2, "-c 8192 -ngl all -ts 1,1 -ub 256 --spec-type draft-mtp --spec-draft-n-max 5"),
    (1, "-c 4096 -ngl 3 -np 2 -ctk q8_0 -ctv q8_0 -ctkd q8_0 -ctvd q8_0 --spec-type draft-mtp"),
    (1, "-c 4096 -ngl all -np 1 -ub 128 --spec-type draft-mtp --spec-draft-n-max 2"),
]
_MTP_MARK = "creating MTP draft context"


@pytest.fixture(scope="module")
def dsv4_mtp(tmp_path_factory):
    from tests import gguf_factory as gf

    return gf.write_tiny_model("deepseek4", tmp_path_factory.mktemp("dsv4mtp") / "dsv4-mtp.gguf", **DSV4_MTP)


def _logged_parts(text: str) -> list[tuple[str, dict[tuple[str, str], tuple[float, int]]]]:
    """The main context's buffers and the MTP context's (the compressor states counted as KV; compute: the last
    size a context logs, as it reserves again once the draft's sampler is set)."""
    cut = text.find(_MTP_MARK)
    assert cut > 0, text[-3000:]
    parts = []
    for name, part in (("main", text[:cut]), ("mtp", text[cut:])):
        got: dict[tuple[str, str], tuple[float, int]] = {}
        for buft, kind, mib in _BUF.findall(part):
            kind = "KV" if kind.startswith("DSV4") else kind
            total, n = got.get((buft, kind), (0.0, 0))
            got[(buft, kind)] = (float(mib), 1) if kind == "compute" else (total + float(mib), n + 1)
        parts.append((name, got))
    return parts


@pytest.mark.parametrize("n_rpc,args", MTP_CASES, ids=[f"dsv4-mtp-{n}rpc-{i}" for i, (n, _) in enumerate(MTP_CASES)])
def test_mtp_buffers_match_log(n_rpc, args, llama_bin, rpc_servers, llama_server, dsv4_mtp):
    """Every buffer of both contexts equals llama-server -lv 4's log: the main context's weights (with the MTP
    block: load_mtp), KV + compressor states with n_rs_seq snapshot planes, compute with the states'
    restore/snapshot copies, output; the MTP context's KV, compute and output."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    extra = ["--rpc", ",".join(endpoints)] if endpoints else []
    srv = llama_server(dsv4_mtp, *extra, *args.split(), "--fit", "off", "--no-repack", "--no-warmup", "-lv", "4")
    text = srv.output()
    srv.stop()
    model = open_model(dsv4_mtp)
    est = estimate(model, devices, settings_from_args(args.split(), tool="server"))
    assert est.shape.n_rs_seq > 0 and est.draft is not None
    assert not [n for n in est.notes if n.startswith(APPROXIMATE) or "not sized" in n or "not replayed" in n]
    misses = _mtp_misses(text, est, {d.buft: d.name for d in devices})
    record("server-log", case=f"mtp-deepseek4-{n_rpc}rpc", arch="deepseek4",
           backends=["CPU"] + (["RPC"] if n_rpc else []), ok=not misses, features=["mtp"])
    assert not misses, "\n".join(misses)


def _mtp_misses(text, est, by_buft, host_bufts=("CPU",)) -> list[str]:
    """Each buffer of the two contexts' logs that the estimate misses by more than the log's rounding;
    ``by_buft``: buffer type -> device name, the others (``host_bufts``: the host's own) are the CPU's."""
    misses = []
    for part, logged in _logged_parts(text):
        ours_est = est if part == "main" else est.draft
        assert any(k == "compute" for _b, k in logged) and any(k == "KV" for _b, k in logged), (part, logged)
        for (buft, kind), (mib, n_lines) in logged.items():
            if kind == "model" and buft not in by_buft:
                continue  # the mapped host range: test_accuracy_llama keeps a loose bound for it
            dev = ours_est.device(by_buft.get(buft, "CPU"))
            ours = {"model": dev.model, "KV": dev.kv, "compute": dev.compute, "output": dev.output}[kind] / MiB
            tol = 0.005 * n_lines + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0)
            if abs(ours - mib) > tol:
                misses.append(f"{part} {buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    return misses


@pytest.mark.parametrize("args", ["-c 8192 -ngl all -np 2 --spec-type draft-mtp",
                                  "-c 4096 -ngl 2 -fa off --spec-type draft-mtp --spec-draft-n-max 5"],
                         ids=["dsv4-mtp-vk-np2", "dsv4-mtp-vk-ngl2-faoff"])
def test_mtp_buffers_match_log_on_vulkan(args, llama_vulkan_bin, dsv4_mtp, tmp_path):
    """Both contexts on Vulkan0 (lavapipe, its graph reordering replayed): the restore/snapshot copies and
    graph_mtp as the Vulkan backend schedules them, Vulkan_Host being the host's."""
    from tests.llama_fixtures import start_llama_server

    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **VULKAN_ENV}, cuda_probe=None,
                                 amd=False).devices)
    srv = start_llama_server(llama_vulkan_bin, dsv4_mtp, *args.split(), "--fit", "off", "--no-repack",
                             "--no-warmup", "-lv", "4", log=tmp_path / "vk.log", timeout=120, env=dict(VULKAN_ENV))
    try:
        text = srv.output()
    finally:
        srv.stop()
    est = estimate(open_model(dsv4_mtp), lanes, settings_from_args(args.split(), tool="server"))
    assert est.draft is not None and est.shape.n_rs_seq > 0
    assert "Vulkan0 compute buffer size" in text
    misses = _mtp_misses(text, est, {"Vulkan0": "Vulkan0"})
    record("server-log", case=f"mtp-vulkan-deepseek4 {args}", arch="deepseek4", backends=["Vulkan"],
           ok=not misses, features=["mtp", "vulkan"])
    assert not misses, "\n".join(misses)


def test_equal_heads_crash_llama_cpp_and_are_refused(llama_bin, tmp_path):
    """The tiny model's heads equal the indexer's (64): llama-server dies of SIGFPE creating the MTP context
    (build_input_k_rot on the empty non-SWA cache), and the estimate refuses the command, saying why."""
    import signal
    import socket
    import subprocess

    from app.memory.kv import SettingsError
    from tests import gguf_factory as gf

    path = gf.write_tiny_model("deepseek4", tmp_path / "dsv4-eq.gguf", n_nextn=1, vocab_extra=30000)
    args = ["-c", "4096", "--spec-type", "draft-mtp"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run([str(llama_bin / "llama-server"), "-m", str(path), *args, "--fit", "off", "--no-warmup",
                           "--port", str(port), "--host", "127.0.0.1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGFPE, (proc.returncode, proc.stderr[-2000:])
    assert _MTP_MARK in proc.stderr
    with pytest.raises(SettingsError, match="divides by zero") as err:
        estimate(open_model(path), [], settings_from_args(args, tool="server"))
    assert "Drop --spec-type draft-mtp" in str(err.value)
    # without the draft the same file loads and is estimated
    assert estimate(open_model(path), [], settings_from_args(args[:2], tool="server")).draft is None
