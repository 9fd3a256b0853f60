"""Speculative decoding with a draft model (-md): the draft's settings as llama.cpp derives them, its memory
against what the real llama-server allocates, and the flags through parse, export and plans."""

from __future__ import annotations

import re

import pytest

from app.command.build import build_llama_command
from app.command.parse import ArgsError, parse_llama_args, settings_from_args
from app.command.spec import PlacementArgs
from app.memory.draft import draft_settings
from app.memory.estimator import estimate
from app.memory.kv import SettingsError, context_shape
from app.memory.settings import NGL_ALL, LlamaSettings
from app.model import open_model

from .accuracy import COMPUTE_SLACK, MiB, list_rpc_devices, record

# --------------------------------------------------------------------------- the draft's settings


def _parsed(args: str) -> LlamaSettings:
    return settings_from_args(args.split(), tool="server")


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    """A tiny llama's parameters (4 layers, trained context 8192) for the context shape."""
    from tests import gguf_factory as gf

    return open_model(gf.write_tiny_model("llama", tmp_path_factory.mktemp("draft") / "m.gguf",
                                          n_ctx_train=8192, n_embd=128)).params


def test_draft_inherits_the_main_context_but_not_its_placement_or_cache_types(params):
    """common_base_params_to_speculative: the copy of the main params keeps -np, -fa, -b/-ub, -ts, -nkvo; the
    draft's own -devd/-ngld/-otd/-ctkd/-ctvd replace the main ones (f16 caches unless -ctkd/-ctvd), and the
    context has the target's n_ctx (common_speculative_init_result: cparams.n_ctx = llama_n_ctx(ctx_tgt))."""
    s = _parsed(
        "-c 5000 -np 2 -fa on -b 1024 -ub 256 -ts 3,1 -ctk q8_0 -ctv q8_0 -ngl 7 -ot blk=CPU -dev RPC0,RPC1 "
        "-md d.gguf -ngld all -otd exps=CPU -ctkd q4_0"
    )
    shape = context_shape(params, s)
    d = draft_settings(s, shape)
    assert (d.n_parallel, d.flash_attn, d.n_batch, d.n_ubatch, d.tensor_split) == (2, "on", 1024, 256, [3.0, 1.0])
    assert d.n_ctx == shape.n_ctx == 5120  # 5000 padded to 256, split over 2 streams of 2560
    assert d.devices == ["RPC0", "RPC1"]  # -devd not given: follows -dev
    assert d.n_gpu_layers == NGL_ALL and d.overrides == [("exps", "CPU")]
    assert (d.type_k, d.type_v) == ("q4_0", "f16")
    assert d.draft_model is None and d.spec_types == [] and d.eff_n_outputs_max() == 2


def test_a_draft_on_one_device_drops_an_inherited_tensor_split_mode(params):
    s = _parsed("-sm tensor -md d.gguf -devd RPC1")
    assert draft_settings(s, context_shape(params, s)).split_mode == "layer"
    s2 = _parsed("-sm tensor -md d.gguf -devd RPC0,RPC1")
    assert draft_settings(s2, context_shape(params, s2)).split_mode == "tensor"


@pytest.mark.parametrize(
    "args,rows",
    [
        ("", 4),  # auto -np: 4 slots, one output row each
        ("-md d.gguf", 4),  # a draft model alone: --spec-type stays none, nothing drafted
        ("-md d.gguf --spec-type draft-simple", 16),  # 4 x (1 + 3 drafted)
        ("-np 2 --spec-type draft-simple --spec-draft-n-max 8", 18),
        ("--spec-type ngram-mod", 260),  # 4 x (1 + 64)
        ("--spec-type ngram-cache,draft-simple", 36),  # the larger of 8 and 3
        ("--spec-type draft-simple --spec-type none", 16),  # a later 'none' adds nothing
        ("-np 64 --spec-type ngram-simple", 2048),  # capped at -b
    ],
)
def test_the_server_reserves_output_rows_for_drafted_tokens(args, rows, params):
    """server_output_limits -> common_speculative_get_output_limits(n_batch, n_parallel, n_max)."""
    assert context_shape(params, _parsed(args)).n_outputs_max == rows


def test_spec_flags_are_checked_as_llama_cpp_checks_them():
    with pytest.raises(ArgsError, match="unknown speculative type: draft-fast"):
        parse_llama_args(["--spec-type", "draft-simple,draft-fast"])
    with pytest.raises(ArgsError, match="Unsupported cache type"):
        parse_llama_args(["-md", "d.gguf", "-ctkd", "q3"])
    with pytest.raises(ArgsError, match="needs flash attention"):
        parse_llama_args(["-md", "d.gguf", "-ctvd", "q8_0", "-fa", "off"])
    with pytest.raises(ArgsError):
        parse_llama_args(["--spec-draft-n-max", "-1"])
    assert parse_llama_args(["-ctvd", "q8_0", "-fa", "off"]).settings.draft_type_v == "q8_0"  # no draft: unused


def test_the_draft_flags_survive_export_and_import():
    s = _parsed(
        "-md /models/d.gguf -ngld 12 -devd RPC1 -otd exps=CPU -cmoed -ctkd q8_0 -ctvd q8_0 -fa on "
        "--spec-type draft-simple --spec-draft-n-max 6"
    )
    cmd = build_llama_command(PlacementArgs([], 99, [], []), s, "/models/m.gguf")
    again = settings_from_args(cmd.argv[1:], tool="server")
    for field in ("draft_model", "draft_n_gpu_layers", "draft_devices", "draft_overrides", "draft_type_k",
                  "draft_type_v", "spec_types", "spec_draft_n_max"):
        assert getattr(again, field) == getattr(s, field), field
    assert "-md" in cmd.argv and cmd.argv[cmd.argv.index("-ngld") + 1] == "12"
    plain = build_llama_command(PlacementArgs([], 99, [], []), _parsed("-c 4096"), "/models/m.gguf")
    assert not {"-md", "-ngld", "-devd", "-otd", "-ctkd", "--spec-type"} & set(plain.argv)


def test_a_draft_that_is_not_open_is_said_not_counted(tmp_path):
    from tests import gguf_factory as gf

    main = open_model(gf.write_tiny_model("llama", tmp_path / "m.gguf"))
    s = _parsed("-c 4096 -md elsewhere.gguf")
    est = estimate(main, [], s)
    assert est.draft is None and any("elsewhere.gguf (-md) is not open" in n for n in est.notes)
    with pytest.raises(SettingsError, match="failed to create MTP context"):  # a llama has no NextN layers
        estimate(main, [], _parsed("-c 4096 --spec-type draft-mtp"))
    glm = open_model(gf.write_tiny_model("glm4moe", tmp_path / "glm.gguf"))
    nextn = sum(t.nbytes for t, s in zip(glm.tensors, glm.index.skipped) if s)
    assert nextn > 0
    est3 = estimate(glm, [], _parsed("-c 2048 --spec-type draft-mtp"))
    from app.units import fmt_bytes

    assert any(f"{fmt_bytes(nextn)}, counted on their layers' devices" in n for n in est3.notes)
    assert est3.host.model - estimate(glm, [], _parsed("-c 2048")).host.model == nextn
    assert est3.draft is not None and est3.draft.host.compute > 0  # the MTP context (tests/memory/test_mtp.py)
    est4 = estimate(main, [], _parsed("-c 4096 --spec-type draft-dflash"))
    assert any("draft-dflash without -md: llama.cpp drafts nothing" in n for n in est4.notes)
    est5 = estimate(main, [], _parsed("-c 4096 --spec-type draft-eagle3"))  # sized with -md: tests/memory/test_eagle3.py
    assert any("draft-eagle3 without -md" in n for n in est5.notes)


# --------------------------------------------------------------------------- against llama-server

_BUF = re.compile(r"(\S+)\s+(model|KV|RS|compute|output) buffer size =\s*([\d.]+) MiB")

#: (main tiny model, draft tiny model, RPC devices, arguments): the draft on the CPU, on every device with the
#: main model's -ts, pinned to one device with its own cache types, with overrides, and a MoE draft
DRAFT_CASES = [
    ("llama", "qwen3", 0, "-c 4096"),
    ("qwen3moe", "qwen3", 2, "-c 4096 -ngl all -ts 1,1 -fa on"),
    ("qwen3moe", "qwen3", 2, "-c 4096 -ngl all -devd RPC1 -ngld all -ctkd q8_0 -ctvd q8_0 -fa on "
     "--spec-type draft-simple --spec-draft-n-max 5"),
    ("gemma3", "qwen3", 1, "-c 8192 -ngl all -ngld 0 -np 2"),
    ("qwen3", "qwen3moe", 1, "-c 4096 -ngl all -otd exps=CPU -ot blk\\.0\\.=CPU --spec-type draft-simple"),
    ("qwen3moe", "gpt-oss", 2, "-c 4096 -ngl all -ts 2,1 -ngld 3 -fa off -np 3"),
    ("llama", "llama", 1, "-c 2048 -ngl 2 -np 1 -nkvo -ub 128"),
    # full size (sparse files): Qwen3-4B with its usual draft Qwen3-0.6B, every buffer tens of MiB or more
    ("sparse:qwen3-4b", "sparse:qwen3-0.6b", 0, "-c 8192 --spec-type draft-simple"),
    ("sparse:qwen3-4b", "sparse:qwen3-0.6b", 1, "-c 16384 -ngl 30 -ngld all -np 2 -ctkd q8_0 -ctvd q8_0 -fa on "
     "--spec-type draft-simple --spec-draft-n-max 8"),
]


def _path(key: str, tiny_models, sparse_models):
    return sparse_models[key[7:]] if key.startswith("sparse:") else tiny_models[key]


def _logged(text: str) -> dict[tuple[str, str], tuple[float, int]]:
    """(buffer type, kind) -> (MiB summed over the lines, number of lines): a model with SWA logs two KV
    buffers, each rounded to two decimals."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    for buft, kind, mib in _BUF.findall(text):
        total, n = out.get((buft, kind), (0.0, 0))
        out[(buft, kind)] = (total + float(mib), n + 1)
    return out


@pytest.mark.llama
@pytest.mark.parametrize("main_arch,draft_arch,n_rpc,args", DRAFT_CASES,
                         ids=[f"{m}+{d}-{n}rpc" for m, d, n, _ in DRAFT_CASES])
def test_draft_buffers_match_llama_server(main_arch, draft_arch, n_rpc, args, llama_bin, rpc_servers, llama_server,
                                          tiny_models, sparse_models):
    """Both models' buffers against llama-server's -lv 4 log: the lines after 'loading draft model' are the
    draft's. Every device buffer to the log's two decimals (compute: plus the layer compression's bytes)."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    extra = (["--rpc", ",".join(endpoints)] if endpoints else []) + args.split()
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    main_path, draft_path = (_path(k, tiny_models, sparse_models) for k in (main_arch, draft_arch))
    srv = llama_server(main_path, "-md", str(draft_path), *extra, "--fit", "off", "--no-repack", "-lv", "4",
                       timeout=180)
    text = srv.output()
    srv.stop()
    cut = text.find("loading draft model")
    assert cut > 0, text[-3000:]
    main_model, draft_model = open_model(main_path), open_model(draft_path)
    s = settings_from_args(["-md", str(draft_path), *args.split()], tool="server")
    est = estimate(main_model, devices, s, draft=draft_model)
    assert est.draft is not None
    by_buft = {d.buft: d.name for d in devices}
    misses = []
    for part, logged, ours_est in (("main", _logged(text[:cut]), est), ("draft", _logged(text[cut:]), est.draft)):
        assert logged, part
        for (buft, kind), (mib, lines) in logged.items():
            dev = ours_est.device(by_buft.get(buft, "CPU"))
            ours = {"model": dev.model, "KV": dev.kv, "RS": dev.recurrent, "compute": dev.compute,
                    "output": dev.output}[kind] / MiB
            tol = max(0.01 * mib, 16) if kind == "model" and buft not in by_buft else (
                0.005 * lines + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0))
            if abs(ours - mib) > tol:
                misses.append(f"{part} {buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    # every device's total holds both models
    for d in est.devices:
        mine = next((x for x in est.draft.devices if x.name == d.name), None)
        assert d.draft == (mine.total if mine else 0)
    record("server-log", case=f"draft-{main_arch}+{draft_arch}-{n_rpc}rpc", arch=main_model.params.arch,
           backends=["CPU"] + (["RPC"] if n_rpc else []), ok=not misses, features=["draft"])
    assert not misses, "\n".join(misses)


@pytest.mark.llama
@pytest.mark.parametrize("args", [
    "-c 4096 -ngl all -ngld all --spec-type draft-simple",
    "-c 8192 -ngl all -ngld 1 -np 2 -ctkd q8_0 -ctvd q8_0 -fa on --spec-type draft-simple --spec-draft-n-max 6",
])
def test_draft_buffers_match_llama_server_on_vulkan(args, llama_vulkan_bin, tiny_models, tmp_path):
    """The same on Vulkan0 (lavapipe, the graph reordering replayed as in the Vulkan dry-run comparisons): weights,
    caches, output and compute buffers of both models, Vulkan_Host being the host's."""
    from app.devices.detect import detect
    from app.memory.device_adapter import from_detected
    from tests.llama_fixtures import VULKAN_ENV, start_llama_server

    env = dict(VULKAN_ENV)
    import os

    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **env}, cuda_probe=None,
                                 amd=False).devices)
    main_path, draft_path = tiny_models["qwen3moe"], tiny_models["qwen3"]
    srv = start_llama_server(llama_vulkan_bin, main_path, "-md", str(draft_path), *args.split(), "--fit", "off",
                             "--no-repack", "-lv", "4", log=tmp_path / "vk.log", timeout=120, env=env)
    try:
        text = srv.output()
    finally:
        srv.stop()
    cut = text.find("loading draft model")
    assert cut > 0, text[-3000:]
    s = settings_from_args(["-md", str(draft_path), *args.split()], tool="server")
    est = estimate(open_model(main_path), lanes, s, draft=open_model(draft_path))
    misses = []
    for part, logged, ours_est in (("main", _logged(text[:cut]), est), ("draft", _logged(text[cut:]), est.draft)):
        assert any(b == "Vulkan0" for b, _ in logged), part
        for (buft, kind), (mib, lines) in logged.items():
            dev = ours_est.device("Vulkan0" if buft == "Vulkan0" else "CPU")
            ours = {"model": dev.model, "KV": dev.kv, "RS": dev.recurrent, "compute": dev.compute,
                    "output": dev.output}[kind] / MiB
            tol = max(0.01 * mib, 16) if buft == "CPU_Mapped" else (
                0.005 * lines + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0))
            if abs(ours - mib) > tol:
                misses.append(f"{part} {buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    record("server-log", case=f"draft-vulkan-{args.split()[1]}", arch="qwen3moe", backends=["Vulkan"],
           ok=not misses, features=["draft"])
    assert not misses, "\n".join(misses)


def test_the_draft_and_projector_settings_survive_a_plan(tmp_path):
    """A plan keeps the draft's and the projector's settings; wrong values are refused naming the field."""
    import json

    from app.placement import Placement
    from app.placement.plan_file import PlanError, load_plan, save_plan
    from tests import gguf_factory as gf

    model = open_model(gf.write_tiny_model("llama", tmp_path / "m.gguf"))
    s = _parsed("-c 4096 -md /m/d.gguf -ngld 2 -devd RPC0 -otd exps=CPU -ctkd q8_0 -ctvd q8_0 -fa on "
                "--spec-type draft-simple --spec-draft-n-max 5 --mmproj /m/p.gguf -mmdev RPC0 --image-max-tokens 256")
    p = Placement.from_settings(model, [], s)
    save_plan(p, tmp_path / "plan.json")
    back = load_plan(tmp_path / "plan.json", model).settings
    for field in ("draft_model", "draft_n_gpu_layers", "draft_devices", "draft_overrides", "draft_type_k",
                  "draft_type_v", "spec_types", "spec_draft_n_max", "mmproj", "mmproj_offload", "mmproj_device",
                  "image_max_tokens"):
        assert getattr(back, field) == getattr(s, field), field
    data = json.loads((tmp_path / "plan.json").read_text())
    for key, bad, says in (("draft_devices", ["CPU", 3], "device name"), ("spec_types", ["draft-fast"], "speculative"),
                           ("draft_type_k", "q3", "KV cache type"), ("mmproj", 7, "projector"),
                           ("spec_draft_n_max", -1, "drafted tokens")):
        broken = json.loads(json.dumps(data))
        broken["settings"][key] = bad
        (tmp_path / "bad.json").write_text(json.dumps(broken))
        with pytest.raises(PlanError, match=says):
            load_plan(tmp_path / "bad.json", model)


def test_the_session_and_the_estimate_agree_on_which_draft_is_open(tmp_path, monkeypatch):
    """A pasted command may name the open draft by another path (relative, here): the estimate counts it and the
    session says it is open (one rule, ``Estimator.draft_for``), without reading the file again."""
    from app.placement import Placement
    from app.session import Session
    from tests import gguf_factory as gf

    main = open_model(gf.write_tiny_model("llama", tmp_path / "m.gguf"))
    draft_path = gf.write_tiny_model("llama", tmp_path / "d.gguf", n_layer=2)
    draft = open_model(draft_path)
    s = _parsed(f"-c 2048 -md {draft_path} --spec-type draft-simple")
    ses = Session(main, [], placement=Placement.from_settings(main, [], s), draft=draft)
    opened = ses.estimator.draft
    monkeypatch.chdir(tmp_path)
    ses.import_command(f"llama-server -m {tmp_path / 'm.gguf'} -md d.gguf -c 2048 --spec-type draft-simple")
    assert ses.placement.settings.draft_model == "d.gguf"
    assert ses.estimator.draft is opened and ses.draft_model is draft and ses.estimate.draft is not None
