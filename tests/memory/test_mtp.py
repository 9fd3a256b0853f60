"""Speculative decoding on the model's own MTP layers (``--spec-type draft-mtp``): what llama-server allocates
for it, held to its ``-lv 4`` load log.

With draft-mtp llama.cpp (1) loads the NextN layers' weights (``load_mtp``) on their layers' devices, (2) keeps
``n_rs_seq = --spec-draft-n-max`` recurrent-state snapshots per sequence in the main context of an architecture
that rolls back (4x the state at the default 3, and one conv/GDN state copy per snapshot in the graph), and (3)
creates a second context, ``LLAMA_CONTEXT_TYPE_MTP``, on the same weights: a KV cache of the NextN layers only
(the draft's cache types, f16 unless -ctkd/-ctvd), the architecture's ``graph_mtp``, one output row per slot."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.memory.estimator import estimate
from app.memory.kv import RS_ROLLBACK_ARCHS
from app.model import open_model

from .accuracy import COMPUTE_SLACK, MiB, list_rpc_devices, record
from .test_draft import _BUF


def _logged(text: str) -> dict[tuple[str, str], tuple[float, int]]:
    """(buffer type, kind) -> (MiB, lines): buffers summed over their lines (two KV lines with SWA), except
    compute, where a context that reserves again (the MTP context does, once its sampler is set) logs the same
    buffer again and the last size is the buffer's."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    for buft, kind, mib in _BUF.findall(text):
        total, n = out.get((buft, kind), (0.0, 0))
        out[(buft, kind)] = (float(mib), 1) if kind == "compute" else (total + float(mib), n + 1)
    return out

MARK = "creating MTP draft context"

#: (model: tiny ARCH written with one NextN layer, or sparse:SPEC; RPC devices; arguments); the RPC cases move few
#: weights to the RPC servers (-ngl, -ncmoe): every byte offloaded crosses the loopback
MTP_CASES = [
    ("qwen35", 0, "-c 4096 --spec-type draft-mtp"),
    ("qwen35moe", 1, "-c 4096 -ngl all -np 2 --spec-type draft-mtp --spec-draft-n-max 2"),
    ("sparse:qwen3.5-27b", 0, "-c 8192 --spec-type draft-mtp"),
    ("sparse:qwen3.5-27b", 2, "-c 16384 -ngl 6 -ts 1,1 -np 2 --spec-type draft-mtp --spec-draft-n-max 5"),
    ("sparse:qwen3.5-27b", 1, "-c 8192 -ngl 8 -ctk q8_0 -ctv q8_0 -ctkd q8_0 -ctvd q8_0 -fa on "
     "--spec-type draft-mtp"),
    ("sparse:qwen3.5-35b-a3b-mtp", 1, "-c 8192 -ngl all -cmoe -np 2 -fa off --spec-type draft-mtp"),
    ("sparse:qwen3.5-35b-a3b-mtp", 2, "-c 8192 -ngl all -ts 3,1 -ncmoe 38 -ub 256 --spec-type draft-mtp,ngram-mod"),
    # GLM-4.5-style MoE with its MTP block (no recurrent state: no snapshots), widened so its buffers are tens of MiB
    ("glm4moe", 0, "-c 32768 -ub 1024 --spec-type draft-mtp"),
    ("glm4moe", 1, "-c 32768 -ngl all -np 2 -fa off -ctkd q8_0 --spec-type draft-mtp"),
    ("glm4moe", 2, "-c 16384 -ngl 2 -ts 1,1 -ctk q8_0 -ctv q8_0 -fa on --spec-type draft-mtp --spec-draft-n-max 6"),
]

#: the MLA architectures' MTP block (deepseek2: DeepSeek-V3/R1, Kimi K2; deepseek32: DeepSeek-V3.2; glm-dsa: GLM-5):
#: dense MLA on a K-only cache of the NextN layer, no DSA indexer in the MTP context
MTP_CASES_MLA = [
    ("deepseek2-mtp", 0, "-c 8192 -fa on --spec-type draft-mtp"),
    ("deepseek2-mtp", 1, "-c 16384 -ngl all -np 2 -fa off --spec-type draft-mtp"),
    ("deepseek32", 0, "-c 8192 -fa off --spec-type draft-mtp"),
    ("deepseek32", 2, "-c 8192 -ngl all -ts 1,1 -fa on --spec-type draft-mtp --spec-draft-n-max 4"),
    ("glm-dsa", 1, "-c 16384 -ngl 2 -np 2 -fa on --spec-type draft-mtp"),
    ("sparse:deepseek-v3.2-slice", 0, "-c 8192 -fa on -ctkd q8_0 -ctvd q8_0 --spec-type draft-mtp"),
    ("sparse:glm-5-slice", 1, "-c 16384 -ngl 2 -cmoe -fa off --spec-type draft-mtp"),
    ("sparse:deepseek-v3-slice", 1, "-c 8192 -ngl 1 -cmoe -np 2 -fa on --spec-type draft-mtp"),
]

#: the delta-rule hybrids besides qwen35: Ling 3.0 (KDA + MLA, snapshots) and Qwen3-Next (no rollback, no snapshots)
MTP_TINY_KDA = ("bailingmoe3", "qwen3next")
MTP_CASES_KDA = [
    ("bailingmoe3", 0, "-c 4096 --spec-type draft-mtp"),
    ("bailingmoe3", 1, "-c 4096 -ngl all -np 2 --spec-type draft-mtp --spec-draft-n-max 2"),
    ("bailingmoe3", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 1 -np 2 -fa off -ub 256 --spec-type draft-mtp"),
    ("sparse:ling-3.0-tiny-mtp", 0, "-c 8192 -np 2 --spec-type draft-mtp --spec-draft-n-max 4"),
    ("sparse:ling-3.0-tiny-mtp", 1, "-c 8192 -ngl all -cmoe -np 2 -fa off --spec-type draft-mtp"),
    ("sparse:ling-3.0-tiny-mtp", 1, "-c 8192 -ngl 12 -fa off --spec-type draft-mtp"),
    ("qwen3next", 0, "-c 4096 --spec-type draft-mtp"),
    ("qwen3next", 1, "-c 4096 -ngl all -np 2 -fa off --spec-type draft-mtp"),
    ("sparse:qwen3-next-80b-a3b-mtp", 0, "-c 8192 --spec-type draft-mtp"),
    ("sparse:qwen3-next-80b-a3b-mtp", 1, "-c 8192 -ngl 6 -cmoe -np 2 -fa off --spec-type draft-mtp"),
]

#: the SWA MoE families: the MTP context gets an iswa cache of its NextN layers; graph_mtp builds the block
#: cparams.nextn_layer_offset selects (0 at reserve) even where the file has 3 (step35, mimo2: "-3" written so)
MTP_TINY_SWA = {
    "step35-3": ("step35", dict(n_nextn=3, vocab_extra=30000)),
    "mimo2-3": ("mimo2", dict(n_nextn=3, vocab_extra=30000)),
    "hy_v3": ("hy_v3", dict(n_nextn=1, vocab_extra=30000)),
    "cohere2moe": ("cohere2moe", dict(n_nextn=1, vocab_extra=30000)),
}
MTP_CASES_SWA = [
    ("step35-3", 0, "-c 4096 --spec-type draft-mtp"),
    ("step35-3", 1, "-c 4096 -ngl all -np 2 -fa off --spec-type draft-mtp"),
    ("mimo2-3", 0, "-c 4096 --spec-type draft-mtp"),
    ("mimo2-3", 2, "-c 4096 -ngl all -ts 1,1 -np 2 -fa off --spec-type draft-mtp"),
    ("hy_v3", 0, "-c 4096 --spec-type draft-mtp"),
    ("hy_v3", 1, "-c 4096 -ngl all -fa off -ctkd q8_0 --spec-type draft-mtp"),
    ("cohere2moe", 0, "-c 4096 --spec-type draft-mtp"),
    ("cohere2moe", 1, "-c 4096 -ngl all -np 2 -fa off --spec-type draft-mtp"),
    # full size (3 MTP blocks each; -ngl 3 / 4 puts NextN blocks on the RPC devices, ~0.4-1 GiB over loopback)
    ("sparse:step-3.5-flash", 0, "-c 8192 --spec-type draft-mtp"),
    ("sparse:step-3.5-flash", 1, "-c 8192 -ngl 3 -fa off --spec-type draft-mtp"),
    ("sparse:mimo-v2-flash", 0, "-c 8192 --spec-type draft-mtp"),
    ("sparse:mimo-v2-flash", 2, "-c 8192 -ngl 4 -ts 1,1 --spec-type draft-mtp"),
]


def _mapped_span(model, est) -> int:
    """The bytes of a mapped CPU model buffer: llama.cpp maps the file range from the first to the end of the last
    tensor the CPU holds (``llama_model_loader::get_mapping_range``), so tensors of other devices that lie
    between them (the output head written early in the file) are in the figure the log prints."""
    cpu = [t for t, d in zip(model.tensors, est.placement.tensor_device) if d == "CPU"]
    return max(t.offset + t.nbytes for t in cpu) - min(t.offset for t in cpu)


def _misses(part, logged, ours_est, dev_name, model, span_est, extra_model=0):
    """Each logged buffer that ours misses by more than the log's rounding (and, for compute, the layer
    compression's bytes): ``dev_name`` maps a buffer type to our device, ``span_est`` (the main estimate; None:
    compare the tensors' bytes) gives the mapped CPU buffer's file span, ``extra_model`` bytes are added to our weights (load_mtp's NextN weights when the
    estimate was made for another snapshot-keeping type)."""
    out = []
    for (buft, kind), (mib, lines) in logged.items():
        dev = ours_est.device(dev_name(buft))
        ours = {"model": dev.model + extra_model, "KV": dev.kv, "RS": dev.recurrent, "compute": dev.compute,
                "output": dev.output}[kind] / MiB
        if kind == "model" and buft == "CPU_Mapped" and span_est is not None:
            ours = _mapped_span(model, span_est) / MiB
        if abs(ours - mib) > 0.005 * lines + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0):
            out.append(f"{part}{buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    return out


@pytest.fixture(scope="module")
def mtp_tiny(tmp_path_factory):
    from tests import gguf_factory as gf

    d = tmp_path_factory.mktemp("mtp")
    out = {a: gf.write_tiny_model(a, d / f"{a}.gguf", n_nextn=1) for a in ("qwen35", "qwen35moe")}
    out["glm4moe"] = gf.write_tiny_model("glm4moe", d / "glm4moe.gguf", n_embd=1024, n_head=16, n_head_kv=4,
                                         head_dim=64, rope_dim=32, n_ff=2048, n_ff_exp=512, vocab_extra=60000)
    out["deepseek2-mtp"] = gf.write_tiny_model("deepseek2", d / "deepseek2.gguf", n_nextn=1, vocab_extra=30000)
    out.update({a: gf.write_tiny_model(a, d / f"{a}.gguf", vocab_extra=30000) for a in ("deepseek32", "glm-dsa")})
    out.update({a: gf.write_tiny_model(a, d / f"{a}.gguf", n_nextn=1) for a in MTP_TINY_KDA})
    out.update({k: gf.write_tiny_model(a, d / f"{k}.gguf", **kw) for k, (a, kw) in MTP_TINY_SWA.items()})
    return out


@pytest.mark.llama
@pytest.mark.parametrize("key,n_rpc,args", MTP_CASES + MTP_CASES_MLA + MTP_CASES_KDA + MTP_CASES_SWA,
                         ids=[f"{k.split(':')[-1]}-{n}rpc-{i}" for i, (k, n, _) in enumerate(MTP_CASES + MTP_CASES_MLA + MTP_CASES_KDA + MTP_CASES_SWA)])
def test_mtp_buffers_match_llama_server(key, n_rpc, args, llama_bin, rpc_servers, llama_server, mtp_tiny,
                                        sparse_models):
    """Every buffer of the main context (weights with the NextN layers, KV, the snapshots' recurrent state,
    compute, output) and of the MTP context (its KV, compute and output) equals llama-server's log."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    extra = (["--rpc", ",".join(endpoints)] if endpoints else []) + args.split()
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    path = sparse_models[key[7:]] if key.startswith("sparse:") else mtp_tiny[key]
    srv = llama_server(path, *extra, "--fit", "off", "--no-repack", "--no-warmup", "-lv", "4", timeout=240)
    text = srv.output()
    srv.stop()
    cut = text.find(MARK)
    assert cut > 0, text[-3000:]
    model = open_model(path)
    est = estimate(model, devices, settings_from_args(args.split(), tool="server"))
    assert est.draft is not None and (est.shape.n_rs_seq > 0) == (model.params.arch in RS_ROLLBACK_ARCHS)
    assert all(d.model == 0 for d in est.draft.devices)  # the MTP context runs on the main model's weights
    by_buft = {d.buft: d.name for d in devices}
    misses = []
    for part, logged, ours_est in (("main", _logged(text[:cut]), est), ("mtp", _logged(text[cut:]), est.draft)):
        assert logged, part
        if part == "mtp":
            assert not any(kind == "model" for _, kind in logged)
        misses += _misses(f"{part} ", logged, ours_est, lambda b: by_buft.get(b, "CPU"), model, est)
    for d in est.devices:  # each device's total holds the MTP context's share
        mine = next((x for x in est.draft.devices if x.name == d.name), None)
        assert d.draft == (mine.total if mine else 0)
    record("server-log", case=f"mtp-{key}-{n_rpc}rpc", arch=model.params.arch,
           backends=["CPU"] + (["RPC"] if n_rpc else []), ok=not misses, features=["mtp"])
    assert not misses, "\n".join(misses)


#: KDA architectures that roll back (n_rs_seq snapshots) but whose MTP context llama-server cannot create
#: (kimi-k3: no NextN layers; glm5-next: "GLM5-Next NextN graph not implemented yet"): the main context, logged
#: before the server exits, with heads of 128 so the K = n_rs_seq + 1 states of the fused op set the compute peak
RS_CASES_KDA = [
    ("kimi-k3", "-c 4096 -np 4 -ub 64 --spec-type draft-mtp"),
    ("kimi-k3", "-c 4096 -np 2 -ub 128 -fa off --spec-type draft-mtp --spec-draft-n-max 5"),
    ("glm5-next", "-c 4096 -np 4 -ub 64 --spec-type draft-mtp"),
    ("glm5-next", "-c 4096 -np 2 -ub 128 -fa off --spec-type draft-mtp --spec-draft-n-max 5"),
]


@pytest.mark.llama
@pytest.mark.parametrize("arch,args", RS_CASES_KDA, ids=[f"{a}-{i}" for i, (a, _) in enumerate(RS_CASES_KDA)])
def test_kda_snapshots_match_llama_server(arch, args, llama_bin, tmp_path):
    """The main context's buffers with n_rs_seq snapshots (the state and the graph's K conv/GDN states) equal the
    log llama-server writes before it stops at the MTP context, which the estimate refuses as llama-server does."""
    import subprocess

    from app.memory.kv import SettingsError
    from tests import gguf_factory as gf

    path = gf.write_tiny_model(arch, tmp_path / f"{arch}.gguf", n_head=16, kda_head_dim=128)
    run = subprocess.run([str(llama_bin / "llama-server"), "-m", str(path), "--port", "0", *args.split(), "--fit",
                          "off", "--no-repack", "--no-warmup", "-lv", "4", "-t", "2"], capture_output=True, text=True,
                         timeout=240)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "failed to create MTP context" in text, text[-3000:]
    model = open_model(path)
    s = settings_from_args(args.split(), tool="server")
    with pytest.raises(SettingsError, match="failed to create MTP context"):
        estimate(model, [], s)
    est = estimate(model, [], s.copy(spec_types=["draft-eagle3"]))  # the same snapshots, no MTP context
    nextn = sum(t.nbytes for t, skip in zip(model.tensors, model.index.skipped) if skip)  # load_mtp's NextN weights
    assert est.shape.n_rs_seq == s.spec_draft_n_max and not any("not replayed" in n for n in est.notes)
    logged = _logged(text[: text.find(MARK)])
    assert ("CPU", "RS") in logged and ("CPU", "compute") in logged
    misses = _misses("", logged, est, lambda b: "CPU", model, None, extra_model=nextn)
    record("server-log", case=f"rs-seq-{arch}", arch=arch, backends=["CPU"], ok=not misses, features=["mtp"])
    assert not misses, "\n".join(misses)


def test_mtp_weights_state_and_notes(tmp_path):
    """Without a log: the NextN weights join their layer's device only with draft-mtp; the snapshots scale the
    recurrent state by 1 + n_rs_seq; a -md draft takes the MTP context's place (llama.cpp creates one draft
    context); an architecture without the replay says its MTP compute is not sized."""
    from tests import gguf_factory as gf

    m = open_model(gf.write_tiny_model("qwen35", tmp_path / "q.gguf", n_nextn=1))
    nextn = sum(t.nbytes for t, s in zip(m.tensors, m.index.skipped) if s)
    assert nextn > 0

    def est(args):
        return estimate(m, [], settings_from_args(args.split(), tool="server"))

    plain, mtp = est("-c 4096"), est("-c 4096 --spec-type draft-mtp --spec-draft-n-max 4")
    assert mtp.host.model - plain.host.model == nextn
    assert mtp.host.recurrent == plain.host.recurrent * 5 and mtp.shape.n_rs_seq == 4
    assert mtp.draft is not None and mtp.draft.host.kv > 0 and mtp.draft.host.compute > 0
    assert mtp.host.draft == mtp.draft.host.total
    assert any("MTP draft context" in n and "compute" in n for n in mtp.notes)
    # the board's placement (NextN blocks kept as not loaded) gives the same figures
    from app.placement import Placement

    s = settings_from_args("-c 4096 --spec-type draft-mtp --spec-draft-n-max 4".split(), tool="server")
    board = estimate(m, [], s, placement=Placement.from_settings(m, [], s).weight_placement())
    assert [(d.model, d.context, d.compute, d.draft) for d in board.devices] == [
        (d.model, d.context, d.compute, d.draft) for d in mtp.devices
    ]
    # draft-simple has no rollback: no snapshots, no NextN weights
    simple = est("-c 4096 --spec-type ngram-mod")
    assert simple.shape.n_rs_seq == 0 and simple.host.model == plain.host.model and simple.draft is None
    glm = open_model(gf.write_tiny_model("glm4moe", tmp_path / "g.gguf"))
    g = estimate(glm, [], settings_from_args("-c 2048 --spec-type draft-mtp".split(), tool="server"))
    assert g.shape.n_rs_seq == 0  # not a rollback architecture: llama.cpp clamps n_rs_seq to 0
    assert g.draft is not None and g.draft.host.kv > 0 and g.draft.host.compute > 0
    # an MTP architecture whose graph_mtp is not replayed: KV counted, compute said not sized (whichever the
    # factory writes with NextN layers is still unreplayed; none once every graph_mtp is)
    from app.memory.compute.models import family_of
    from app.memory.estimator import LLAMA_MTP_ARCHS

    unsized = [a for a in sorted(LLAMA_MTP_ARCHS) if a in gf.ARCHS and a not in family_of(a).mtp_exact]
    for arch in unsized:
        nxt = open_model(gf.write_tiny_model(arch, tmp_path / "n.gguf"))
        if not nxt.params.nextn_layers:
            continue
        n = estimate(nxt, [], settings_from_args("-c 2048 --spec-type draft-mtp".split(), tool="server"))
        assert n.draft is not None and n.draft.host.kv > 0 and n.draft.host.compute == 0
        assert any(f"compute buffers are not sized for {arch}" in x for x in n.notes)
        break
    # llama-server stops at start where it cannot create the MTP context (checked with the pinned build): no
    # NextN layers, or NextN layers of an architecture without an MTP graph (Ling 2.0)
    from app.memory.kv import SettingsError

    for arch, says in (("llama", "no NextN/MTP layers"), ("bailingmoe2", "no MTP draft graph for bailingmoe2")):
        plain = open_model(gf.write_tiny_model(arch, tmp_path / f"{arch}.gguf"))
        with pytest.raises(SettingsError, match=says):
            estimate(plain, [], settings_from_args("-c 2048 --spec-type draft-mtp".split(), tool="server"))


def test_moving_a_trunk_layer_does_not_replay_the_mtp_graph(tmp_path, monkeypatch):
    """The MTP draft context's graph reads only the NextN layers, the global tensors and the NextN caches: a drag
    in the trunk replays the main graph but reuses the MTP figures; moving the NextN layer replays it."""
    from app.lanes import Lane
    from app.memory.compute import core
    from app.memory.estimator import Estimator
    from app.placement import Placement
    from tests import gguf_factory as gf

    m = open_model(gf.write_tiny_model("qwen35", tmp_path / "q.gguf", n_nextn=1))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 8 << 30, 8 << 30, "rpc") for i in range(2)]
    s = settings_from_args("-c 4096 -ngl all --spec-type draft-mtp".split(), tool="server")
    runs: list[list[int]] = []
    real = core._run

    def counting(model, b, layers, *rest, **kw):
        runs.append(list(layers))
        return real(model, b, layers, *rest, **kw)

    monkeypatch.setattr(core, "_run", counting)
    p = Placement.from_settings(m, devices, s)
    n_main = m.params.n_layer - m.params.nextn_layers
    nextn = list(range(n_main, m.params.n_layer))
    est = Estimator(m)  # the board's: one per model, its caches kept between drags
    first = est.estimate(devices, s, p.weight_placement())
    assert nextn in runs  # the MTP graph was replayed once (with and without the draft's sampler)
    runs.clear()
    layer0 = next(b.id for b in m.blocks if b.layer == 0)
    p.assign(layer0, "RPC1" if p.device_of(layer0) != "RPC1" else "RPC0")
    moved = est.estimate(devices, s, p.weight_placement())
    assert runs and nextn not in runs, runs  # the trunk's graph again, not the MTP graph
    assert moved.draft is not None and first.draft is not None
    assert [(d.name, d.compute) for d in moved.draft.devices] == [(d.name, d.compute) for d in first.draft.devices]
    runs.clear()
    top = next(b.id for b in m.blocks if b.layer == n_main)
    p.assign(top, "RPC1" if p.device_of(top) != "RPC1" else "RPC0")
    est.estimate(devices, s, p.weight_placement())
    assert nextn in runs  # where the NextN layer lives changes the MTP graph's figures


@pytest.mark.llama
def test_mtp_buffers_match_llama_server_on_vulkan(llama_vulkan_bin, mtp_tiny, tmp_path):
    """The same on Vulkan0 (lavapipe, graph reordering replayed as in the Vulkan dry-run comparisons): the NextN
    weights, the snapshots' state and both contexts' buffers, Vulkan_Host being the host's."""
    import os

    from app.devices.detect import detect
    from app.memory.device_adapter import from_detected
    from tests.llama_fixtures import VULKAN_ENV, start_llama_server

    env = dict(VULKAN_ENV)
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **env}, cuda_probe=None,
                                 amd=False).devices)
    args = "-c 8192 -ngl all -np 2 --spec-type draft-mtp --spec-draft-n-max 4"
    path = mtp_tiny["qwen35moe"]
    srv = start_llama_server(llama_vulkan_bin, path, *args.split(), "--fit", "off", "--no-repack", "-lv", "4",
                             log=tmp_path / "vk.log", timeout=120, env=env)
    try:
        text = srv.output()
    finally:
        srv.stop()
    cut = text.find(MARK)
    assert cut > 0, text[-3000:]
    model = open_model(path)
    est = estimate(model, lanes, settings_from_args(args.split(), tool="server"))
    assert est.draft is not None
    misses = []
    for part, logged, ours_est in (("main", _logged(text[:cut]), est), ("mtp", _logged(text[cut:]), est.draft)):
        assert any(b == "Vulkan0" for b, _ in logged), part
        misses += _misses(f"{part} ", logged, ours_est, lambda b: "Vulkan0" if b == "Vulkan0" else "CPU", model, est)
    record("server-log", case="mtp-vulkan-qwen35moe", arch="qwen35moe", backends=["Vulkan"], ok=not misses,
           features=["mtp"])
    assert not misses, "\n".join(misses)


@pytest.mark.llama
def test_mtp_mla_buffers_match_llama_server_on_vulkan(llama_vulkan_bin, mtp_tiny, tmp_path):
    """DeepSeek-V3's MTP block (dense MLA on a K-only cache of the NextN layer) on Vulkan0 (lavapipe, graph
    reordering replayed): both contexts' buffers as llama-server logs them."""
    import os

    from app.devices.detect import detect
    from app.memory.device_adapter import from_detected
    from tests.llama_fixtures import VULKAN_ENV, start_llama_server

    env = dict(VULKAN_ENV)
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **env}, cuda_probe=None,
                                 amd=False).devices)
    # -fa off: with -fa on the main context's Vulkan0 compute buffer of this tiny MLA model (head 80) is logged
    # 0.15 MiB above ours (6.16 vs 6.01 MiB; the main graph, not the MTP context's)
    args = "-c 8192 -ngl all -np 2 -fa off --spec-type draft-mtp"
    path = mtp_tiny["deepseek2-mtp"]
    srv = start_llama_server(llama_vulkan_bin, path, *args.split(), "--fit", "off", "--no-repack", "-lv", "4",
                             log=tmp_path / "vk.log", timeout=120, env=env)
    try:
        text = srv.output()
    finally:
        srv.stop()
    cut = text.find(MARK)
    assert cut > 0, text[-3000:]
    model = open_model(path)
    est = estimate(model, lanes, settings_from_args(args.split(), tool="server"))
    assert est.draft is not None
    misses = []
    for part, logged, ours_est in (("main", _logged(text[:cut]), est), ("mtp", _logged(text[cut:]), est.draft)):
        assert any(b == "Vulkan0" for b, _ in logged), part
        misses += _misses(f"{part} ", logged, ours_est, lambda b: "Vulkan0" if b == "Vulkan0" else "CPU", model, est)
    record("server-log", case="mtp-vulkan-deepseek2", arch="deepseek2", backends=["Vulkan"], ok=not misses,
           features=["mtp"])
    assert not misses, "\n".join(misses)


def test_draft_mtp_flags_survive_export_and_import():
    """Without -md, draft-mtp's own flags still reach the command: the drafted tokens (the snapshots) and the MTP
    context's cache types (-ctkd/-ctvd)."""
    from app.command.build import build_llama_command
    from app.command.spec import PlacementArgs

    s = settings_from_args("-c 4096 --spec-type draft-mtp --spec-draft-n-max 5 -ctkd q8_0 -ctvd q8_0 -fa on".split(),
                           tool="server")
    cmd = build_llama_command(PlacementArgs([], 99, [], []), s, "/models/m.gguf")
    again = settings_from_args(cmd.argv[1:], tool="server")
    for f in ("spec_types", "spec_draft_n_max", "draft_type_k", "draft_type_v"):
        assert getattr(again, f) == getattr(s, f), f
    assert "-md" not in cmd.argv
    plain = build_llama_command(PlacementArgs([], 99, [], []), settings_from_args(["-ctkd", "q8_0"], tool="server"),
                                "/models/m.gguf")
    assert "-ctkd" not in plain.argv  # no draft context at all: nothing to say


def test_the_cli_says_what_the_mtp_context_holds(tmp_path):
    """`layerdeck estimate` names the MTP context (not a -md draft) in its text and its JSON."""
    import json
    import subprocess
    import sys

    from tests import gguf_factory as gf

    path = gf.write_tiny_model("qwen35", tmp_path / "q.gguf", n_nextn=1)
    args = [sys.executable, "-m", "app.cli", "estimate"]
    cmd = ["--", "-m", str(path), "-c", "4096", "--spec-type", "draft-mtp"]
    text = subprocess.run(args + cmd, capture_output=True, text=True, timeout=120).stdout
    assert "MTP draft context (--spec-type draft-mtp), per device: Host" in text and "draft model (-md)" not in text
    out = subprocess.run(args + ["--json"] + cmd, capture_output=True, text=True, timeout=120).stdout
    draft = json.loads(out)["draft"]
    assert draft["kind"] == "mtp" and all(d["model"] == 0 for d in draft["devices"])
    assert sum(d["kv"] for d in draft["devices"]) > 0


# --- the Mamba2 / short-conv hybrids: nemotron_h_moe's MTP block; the snapshots of nemotron_h, lfm2, lfm2moe ---

#: nemotron_h_moe with its NextN block (graph_mtp of nemotron-h-moe.cpp, a plain KV of the block in the MTP
#: context); the main context's Mamba2 layers keep K = n_rs_seq + 1 states (SSM_SCAN returns K per sequence)
MTP_CASES_SSM = [
    ("nemotron_h_moe", 0, "-c 4096 -np 2 --spec-type draft-mtp --spec-draft-n-max 2"),
    ("nemotron_h_moe", 1, "-c 4096 -ngl all -fa off --spec-type draft-mtp"),
    ("sparse:nemotron-3-nano-30b-a3b-mtp", 0, "-c 8192 --spec-type draft-mtp"),
    ("sparse:nemotron-3-nano-30b-a3b-mtp", 0, "-c 8192 -np 2 -ub 256 --spec-type draft-mtp --spec-draft-n-max 4"),
    # widened (Mamba2 state 2 MiB per sequence) so the snapshots' SSM_SCAN states weigh in the compute buffers
    ("nemotron_h_moe-wide", 1, "-c 8192 -ngl all -np 2 --spec-type draft-mtp --spec-draft-n-max 4"),
    ("nemotron_h_moe-wide", 1, "-c 4096 -ngl all -fa off -ctk q8_0 --spec-type draft-mtp"),
]

#: the widened tiny models of the cases above and below
_WIDE = dict(n_embd=512, ssm_d_state=128, ssm_n_head=32, ssm_head_dim=64, ssm_n_group=4)
MTP_TINY_SSM = {
    "nemotron_h_moe": ("nemotron_h_moe", dict(n_nextn=1)),
    "nemotron_h_moe-wide": ("nemotron_h_moe", dict(_WIDE, n_nextn=1)),
    "nemotron_h-wide": ("nemotron_h", _WIDE),
    "lfm2moe-wide": ("lfm2moe", dict(n_embd=1024)),
}


@pytest.fixture(scope="module")
def mtp_tiny_ssm(tmp_path_factory):
    from tests import gguf_factory as gf

    d = tmp_path_factory.mktemp("mtp_ssm")
    return {k: gf.write_tiny_model(a, d / f"{k}.gguf", **kw) for k, (a, kw) in MTP_TINY_SSM.items()}


@pytest.mark.llama
@pytest.mark.parametrize("key,n_rpc,args", MTP_CASES_SSM,
                         ids=[f"{k.split(':')[-1]}-{n}rpc-{i}" for i, (k, n, _) in enumerate(MTP_CASES_SSM)])
def test_mtp_ssm_buffers_match_llama_server(key, n_rpc, args, llama_bin, rpc_servers, llama_server, mtp_tiny_ssm,
                                            sparse_models):
    """As :func:`test_mtp_buffers_match_llama_server`, for nemotron_h_moe's MTP block."""
    test_mtp_buffers_match_llama_server(key, n_rpc, args, llama_bin, rpc_servers, llama_server, mtp_tiny_ssm,
                                        sparse_models)


#: (sparse:SPEC or a widened tiny model without NextN layers, RPC devices, arguments): llama-server creates the main context with
#: n_rs_seq = --spec-draft-n-max snapshots (logging its buffers), then fails to create the MTP context and exits.
#: No run can keep such a file up with snapshots: draft-eagle3/dflash/dspark need a draft file of their own.
RS_SNAPSHOT_CASES = [
    ("sparse:lfm2-1.2b", 0, "-c 8192 -np 2 --spec-type draft-mtp"),
    ("sparse:lfm2-8b-a1b", 1, "-c 8192 -ngl 2 -cmoe --spec-type draft-mtp --spec-draft-n-max 5"),
    ("lfm2moe-wide", 1, "-c 4096 -ngl all -np 2 --spec-type draft-mtp"),
    ("sparse:nemotron-nano-9b-v2", 0, "-c 8192 --spec-type draft-mtp"),
    ("nemotron_h-wide", 0, "-c 4096 -np 2 -fa off --spec-type draft-mtp --spec-draft-n-max 5"),
    ("nemotron_h-wide", 1, "-c 4096 -ngl all -np 2 --spec-type draft-mtp"),
]


@pytest.mark.llama
@pytest.mark.parametrize("key,n_rpc,args", RS_SNAPSHOT_CASES,
                         ids=[f"{k.split(':')[-1]}-{n}rpc-{i}" for i, (k, n, _) in enumerate(RS_SNAPSHOT_CASES)])
def test_rs_snapshots_match_llama_server_main_context(key, n_rpc, args, llama_bin, rpc_servers, sparse_models,
                                                      mtp_tiny_ssm):
    """The main context's buffers (the 1 + n_rs_seq recurrent states, the Mamba2 SSM_SCAN's K states and the
    snapshot copies in compute) of a rollback architecture without MTP layers equal llama-server's log up to the
    MTP context it cannot create; ours refuses draft-mtp on such a file as llama-server does, so the same main
    context is estimated with another snapshot-keeping type (draft-eagle3: the same n_rs_seq and output rows)."""
    import subprocess

    from app.memory.kv import SettingsError

    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    path = sparse_models[key[7:]] if key.startswith("sparse:") else mtp_tiny_ssm[key]
    cmd = [str(llama_bin / "llama-server"), "-m", str(path), "--host", "127.0.0.1", "--port", "0",
           *(["--rpc", ",".join(endpoints)] if endpoints else []), *args.split(), "--fit", "off", "--no-repack",
           "--no-warmup", "-lv", "4"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "failed to create MTP context" in text, text[-3000:]
    cut = text.find(MARK)
    assert cut > 0 and "rs_seq" in text[:cut], text[-3000:]
    model = open_model(path)
    with pytest.raises(SettingsError, match="no NextN/MTP layers"):
        estimate(model, devices, settings_from_args(args.split(), tool="server"))
    est = estimate(model, devices, settings_from_args(args.replace("draft-mtp", "draft-eagle3").split(),
                                                      tool="server"))
    assert est.shape.n_rs_seq > 0 and not any("not replayed" in n for n in est.notes)
    by_buft = {d.buft: d.name for d in devices}
    misses = []
    logged = _logged(text[:cut])
    assert any(kind == "RS" for _, kind in logged)
    misses += _misses("", logged, est, lambda b: by_buft.get(b, "CPU"), model, est)
    record("server-log", case=f"rs-snapshots-{key}-{n_rpc}rpc", arch=model.params.arch,
           backends=["CPU"] + (["RPC"] if n_rpc else []), ok=not misses, features=["rs-snapshots"])
    assert not misses, "\n".join(misses)


def test_mtp_cache_types_llama_cpp_refuses_are_refused_naming_the_draft_flags(tmp_path):
    """The MTP context takes -ctkd/-ctvd: an MLA model with different ones is refused (llama-server: "failed to
    create MTP context"), and the message names the draft's flags."""
    from app.memory.kv import SettingsError
    from tests import gguf_factory as gf

    m = open_model(gf.write_tiny_model("deepseek2", tmp_path / "d.gguf", n_nextn=1))
    with pytest.raises(SettingsError, match=r"-ctkd q8_0, -ctvd f16.*MLA models cache K only"):
        estimate(m, [], settings_from_args("-c 4096 --spec-type draft-mtp -ctkd q8_0".split(), tool="server"))
