"""Placement, history, plan files, export rules and auto-fit, without llama.cpp."""

from __future__ import annotations

import json

import pytest

from app.command.ot_patterns import verify_patterns
from app.command.parse import parse_llama_args
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Role, open_model
from app.model.demo import load_demo
from app.placement import CPU, MIXED, Placement
from app.placement.autofit import FitError, auto_fit
from app.placement.command import build_command
from app.placement.export import InexpressibleError, placement_args
from app.placement.history import History, move_command, pin_command
from app.placement.plan_file import PlanError, PlanMismatch, load_plan, save_plan
from app.placement.presets import all_on_gpus, experts_to_cpu, n_cpu_moe
from tests.gguf_factory import write_sparse_model, write_tiny_model

GiB = 1 << 30


@pytest.fixture(scope="module")
def q30(tmp_path_factory):
    return open_model(write_sparse_model("qwen3-30b-a3b", tmp_path_factory.mktemp("m") / "q30.gguf"))


def gpus(*sizes):
    return [Lane(f"CUDA{i}", f"CUDA{i}", s * GiB, s * GiB, "gpu", 1e12 - i) for i, s in enumerate(sizes)]


def roundtrip(p: Placement) -> Placement:
    argv = build_command(p, "m.gguf").argv
    parsed = parse_llama_args(argv)
    return Placement.from_settings(p.model, p.devices, parsed.settings)


def test_presets_export_short_flags(q30):
    devs = gpus(24, 12)
    s = LlamaSettings(n_ctx=8192)
    assert "-cmoe" in build_command(experts_to_cpu(q30, devs, s), "m").argv
    argv = build_command(n_cpu_moe(q30, devs, s, 20), "m").argv
    assert argv[argv.index("-ncmoe") + 1] == "20" and "-ot" not in argv
    argv = build_command(all_on_gpus(q30, devs, s), "m").argv
    assert argv[argv.index("-ts") + 1] == "33,16" and argv[argv.index("-ngl") + 1] == "49"
    assert argv[-2:] == ["--fit", "off"]


def test_moves_round_trip_through_the_command(q30):
    p = all_on_gpus(q30, gpus(24, 12), LlamaSettings(n_ctx=8192))
    for il in (3, 4, 5, 30, 31, 40):
        p.assign(f"{il}:experts", CPU)
    p.assign("10:experts:down", "CUDA1")
    p.assign("11:ffn", CPU)
    p.assign("output", "CUDA1")
    back = roundtrip(p)
    assert back.layer_device == p.layer_device and back.tensor_device == p.tensor_device
    assert p.device_of("10:experts") == MIXED
    pa = placement_args(p)
    # the -ot patterns match exactly the moved tensors (python re.search == llama.cpp regex_search here)
    got = verify_patterns(pa.overrides, [t.name for t in q30.tensors])
    moved = {t.name for t, d, d0 in zip(q30.tensors, p.tensor_device, p.default_tensor_devices()) if d != d0}
    assert {n for n, v in got.items() if v} == moved
    assert all("," not in pat for pat, _ in pa.overrides)


def test_inexpressible_placements_are_refused_with_a_reason(q30):
    p = all_on_gpus(q30, gpus(24, 12), LlamaSettings())
    p.assign("40:attn", CPU)
    with pytest.raises(InexpressibleError, match="CPU layers at the start"):
        placement_args(p)
    p = all_on_gpus(q30, gpus(24, 12), LlamaSettings())
    p.assign("5:attn", "CUDA1")
    with pytest.raises(InexpressibleError, match="one contiguous range"):
        placement_args(p)


def test_device_order_follows_the_layer_runs(q30):
    p = all_on_gpus(q30, gpus(24, 12), LlamaSettings())
    for il in range(0, 10):
        p.assign(f"{il}:attn", "CUDA1")
        p.assign(f"{il}:ffn", "CUDA1")
        p.assign(f"{il}:experts", "CUDA1")
    for il in range(10, 49):
        p.assign(f"{il}:attn" if il < 48 else "output", "CUDA0")
    argv = build_command(p, "m").argv
    assert argv[argv.index("-dev") + 1] == "CUDA1,CUDA0"
    assert roundtrip(p).tensor_device == p.tensor_device


def test_history_one_drop_one_step_with_labels(q30):
    p = all_on_gpus(q30, gpus(24), LlamaSettings())
    h = History(p)
    before = p.snapshot()
    h.push(move_command(p, [f"{i}:experts" for i in range(10)], CPU))
    assert h.undo_label == "Move 10 blocks to CPU" and h.dirty
    assert all(p.device_of(f"{i}:experts") == CPU for i in range(10))
    h.undo()
    assert p.snapshot() == before and h.redo_label == "Move 10 blocks to CPU"
    h.redo()
    h.push(pin_command(p, ["3:experts"], True))
    assert "3:experts" in p.pinned
    h.undo()
    assert "3:experts" not in p.pinned
    assert h.redo_stack and (h.push(move_command(p, ["5:ffn"], CPU)) or not h.redo_stack)


def test_plan_file_round_trip_and_mismatch(q30, tmp_path):
    p = n_cpu_moe(q30, gpus(24, 12), LlamaSettings(n_ctx=16384, type_k="q8_0", type_v="q8_0", flash_attn="on"), 7)
    p.pinned = {"3:experts"}
    path = tmp_path / "plan.json"
    save_plan(p, path)
    q = load_plan(path, q30)
    assert q.layer_device == p.layer_device and q.tensor_device == p.tensor_device
    assert q.settings.n_ctx == 16384 and q.settings.type_k == "q8_0" and q.pinned == {"3:experts"}
    with pytest.raises(PlanMismatch, match="open the model the plan was made for|Open the model"):
        load_plan(path, load_demo().__class__(**{**load_demo().__dict__, "tensors": load_demo().tensors[:-1]}))
    tiny = open_model(write_tiny_model("qwen3moe", tmp_path / "t.gguf"))
    with pytest.raises(PlanMismatch, match="tensors differ"):
        load_plan(path, tiny)
    path.write_text("{not json")
    with pytest.raises(PlanError, match="not a Layerdeck plan"):
        load_plan(path, q30)
    data = json.loads(json.dumps({"format": "layerdeck-plan", "version": 99}))
    path.write_text(json.dumps(data))
    with pytest.raises(PlanError, match="newer Layerdeck"):
        load_plan(path, q30)


@pytest.mark.parametrize("sizes,ctx", [((24, 12), 32768), ((8,), 16384), ((16, 16, 8), 65536), ((6,), 4096)])
def test_auto_fit_never_exceeds_a_budget(q30, sizes, ctx):
    devs = gpus(*sizes)
    res = auto_fit(q30, devs, LlamaSettings(n_ctx=ctx), margin=GiB)
    for m in res.estimate.devices:
        if m.name != "CPU":
            d = next(x for x in devs if x.name == m.name)
            assert m.total <= d.total - GiB, (m.name, m.total / GiB)
    # it uses the room: when anything is left on the CPU, every device is filled to within one expert layer
    one_layer = max(b.nbytes for b in q30.blocks if b.role is Role.EXPERTS)
    left_on_cpu = [t.name for t, d in zip(q30.tensors, res.placement.tensor_device)
                   if d == CPU and q30.block_of(t.name).role is not Role.INPUT]
    if left_on_cpu:
        for d in devs:
            used = res.estimate.device(d.name).total if d.name in [m.name for m in res.estimate.devices] else 0
            assert used >= d.total - GiB - one_layer - 256 * (1 << 20), (d.name, used / GiB)
    assert roundtrip(res.placement).tensor_device == res.placement.tensor_device


def test_auto_fit_respects_pins_and_explains_impossible(q30):
    devs = gpus(24)
    p = all_on_gpus(q30, devs, LlamaSettings(n_ctx=8192))
    p.assign("47:experts", CPU)
    p.pinned = {"47:experts"}
    res = auto_fit(q30, devs, LlamaSettings(n_ctx=8192), pinned_from=p)
    assert res.placement.device_of("47:experts") == CPU
    with pytest.raises(FitError, match="not even the output layer"):
        auto_fit(q30, gpus(1), LlamaSettings(n_ctx=8192), margin=GiB)


def test_n_cpu_moe_with_dense_leading_layers_and_suffixless_tensors(tmp_path):
    ds = open_model(write_sparse_model("deepseek-v3", tmp_path / "ds.gguf"))  # layers 0-2 have no experts
    devs = gpus(400)
    p = n_cpu_moe(ds, devs, LlamaSettings(n_ctx=4096), 10)
    argv = build_command(p, "m").argv
    assert argv[argv.index("-ncmoe") + 1] == "10" and "-ot" not in argv
    assert roundtrip(p).tensor_device == p.tensor_device
    g = open_model(write_tiny_model("granitehybrid", tmp_path / "g.gguf"))  # ssm_a, ssm_d have no .weight
    p = all_on_gpus(g, devs, LlamaSettings(n_ctx=4096))
    p.assign("0:ssm", CPU)
    assert roundtrip(p).tensor_device == p.tensor_device


def test_random_placements_export_or_explain(tmp_path):
    """Whatever the board allows either exports exactly or is refused for a reason llama.cpp has."""
    import random

    from tests.placement.test_llama_placement import random_placement

    rng = random.Random(7)
    for arch in ("granitehybrid", "deepseek2", "glm4moe", "gpt-oss", "qwen3moe", "llama4"):
        m = open_model(write_tiny_model(arch, tmp_path / f"{arch}.gguf"))
        devs = [Lane(f"RPC{i}", f"RPC0[127.0.0.1:{5000 + i}]", 8 * GiB, 8 * GiB, "rpc") for i in range(3)]
        exported = 0
        for _ in range(60):
            p = random_placement(m, devs, rng)
            try:
                back = roundtrip(p)
            except InexpressibleError as exc:
                assert "internal check failed" not in str(exc), (arch, str(exc))
                continue
            assert back.layer_device == p.layer_device and back.tensor_device == p.tensor_device, arch
            exported += 1
        assert exported >= 30, (arch, exported)


def test_fastest_keeps_pinned_parts(q30):
    from app.placement.fastest import fastest
    from app.speed.params import speed_params

    devs = gpus(24, 24)
    p = all_on_gpus(q30, devs, LlamaSettings(n_ctx=8192))
    p.assign("3:experts:gate", CPU)
    p.pinned = {"3:experts:gate"}
    res = fastest(q30, devs, LlamaSettings(n_ctx=8192), speed_params(devs, 80e9), pinned_from=p)
    assert res.placement.device_of("3:experts:gate") == CPU


def test_auto_fit_keeps_a_pinned_attention_layer(q30):
    devs = gpus(24, 24)
    p = all_on_gpus(q30, devs, LlamaSettings(n_ctx=8192))
    p.pinned = {"47:attn"}
    want = p.layer_device[47]
    res = auto_fit(q30, devs, LlamaSettings(n_ctx=8192), pinned_from=p)
    assert res.placement.layer_device[47] == want == res.placement.device_of("47:attn")


def test_auto_fit_keeps_layers_whose_cache_llama_cpp_would_abort_on_off_the_device(q30):
    """A layer's K cache above the Vulkan driver's 128 MiB storage-buffer range: llama.cpp's scheduler aborts
    on any placement with that layer's cache on Vulkan0, so auto-fit places what runs (the output layer, which
    has no cache) and its report says what kept the rest off; a quantized cache under the range lets them on."""
    from app.memory.backends import BackendAbort
    from app.memory.estimator import Estimator

    vk = [Lane("Vulkan0", "Vulkan0", 24 * GiB, 24 * GiB, "gpu", max_tensor_bytes=128 << 20)]
    s = LlamaSettings(n_ctx=131072, type_k="f32", type_v="f32")  # 256 MiB a layer
    with pytest.raises(BackendAbort, match=r"cache_k_l0 \(256 MiB\) is in Vulkan0's memory"):
        Estimator(q30).estimate(vk, s)
    res = auto_fit(q30, vk, s)
    n = q30.params.n_layer
    assert res.placement.layer_device == [CPU] * n + ["Vulkan0"]
    Estimator(q30).estimate(vk, s, res.placement.weight_placement())  # what it placed, llama.cpp runs
    (why,) = [line for line in res.report if "holds no more" in line]
    assert list(res.held_back) == ["Vulkan0"]
    assert why.startswith("Vulkan0 holds no more: llama.cpp aborts on this placement: its cache_k_l")
    assert "storage-buffer range" in why and "-nkvo" in why
    ok = LlamaSettings(n_ctx=131072, type_k="q8_0", type_v="q8_0", flash_attn="on")  # 68 MiB a layer
    fit = auto_fit(q30, vk, ok)
    assert fit.placement.layer_device.count("Vulkan0") > 1 and not any("holds no more" in ln for ln in fit.report)


def test_auto_fit_on_a_size_limited_device_keeps_refused_weights_in_host_memory(tmp_path):
    """A Vulkan driver's 128 MiB per tensor: llama.cpp's loader keeps OLMo-3-7B's 100k x 4096 output in host
    memory whatever -ngl says. Auto-fit builds placements from layer devices, so its default tensor devices must
    follow the same rule, or the board shows the output on Vulkan0 and the export's own check refuses it
    ("output.weight would land on CPU instead of Vulkan0")."""
    from app.placement.autofit import auto_fit

    model = open_model(write_sparse_model("olmo-3-7b", tmp_path / "o.gguf"))
    vk = [Lane("Vulkan0", "Vulkan0", 8 * GiB, 8 * GiB, "gpu", 0.4e12, max_tensor_bytes=128 << 20)]
    p = auto_fit(model, vk, LlamaSettings(n_ctx=8192)).placement
    out = next(i for i, t in enumerate(model.tensors) if t.name == "output.weight")
    assert p.layer_device[model.params.n_layer] == "Vulkan0" and p.tensor_device[out] == CPU
    assert not p.has_overrides()  # the fallback is llama.cpp's default, not an override
    assert placement_args(p).overrides == []
    from app.memory.layout import place_weights

    assert p.tensor_device == place_weights(model, vk, placement_args(p).settings(p.settings)).tensor_device


def _default_devices_by_the_rules(p: Placement) -> list[str]:
    """Where each tensor goes with no overrides, spelt out tensor by tensor (the reference for the fast path)."""
    from app.memory.backends import backend_of, refused_weights

    n = p.model.params.n_layer
    idx = p.model.index
    out = []
    for i, (il, skip) in enumerate(zip(idx.tensor_layer, idx.skipped)):
        dev = "" if skip else CPU if il < 0 else p.layer_device[min(il, n)]
        lane = next((d for d in p.devices if d.name == dev), None)
        limited = lane is not None and (lane.max_tensor_bytes is not None or backend_of(lane) == "vulkan")
        if limited and i in refused_weights(p.model, lane):
            dev = CPU  # the layer's device refuses the weight: host memory (select_weight_buft)
        out.append(dev)
    return out


@pytest.mark.parametrize("name", ["glm-4.5-air", "olmo-3-7b", "qwen3-30b-a3b"])
def test_default_tensor_devices_follow_the_rules_tensor_by_tensor(name, tmp_path):
    """The per-model slot table (ModelIndex.default_slot) gives what the rules give, tensor by tensor: NextN
    tensors nowhere (GLM-4.5-Air's layer 46), inputs on the CPU, the output on its layer's device, weights a
    size-limited lane refuses (OLMo-3-7B's output on a 128 MiB Vulkan driver) in host memory."""
    import random

    model = open_model(write_sparse_model(name, tmp_path / "m.gguf"))
    lanes = gpus(24, 24) + [Lane("Vulkan0", "Vulkan0", 8 * GiB, 8 * GiB, "gpu", 0.4e12, max_tensor_bytes=128 << 20)]
    rng = random.Random(7)
    n = model.params.n_layer
    seen: set[str] = set()
    for _ in range(12):
        layers = [rng.choice([CPU] + [d.name for d in lanes]) for _ in range(n + 1)]
        p = Placement(model, lanes, layers, [""] * len(model.tensors))
        got = p.default_tensor_devices()
        assert got == _default_devices_by_the_rules(p)
        seen |= set(got)
    assert {CPU, "CUDA0", "Vulkan0"} <= seen
    if name == "glm-4.5-air":
        assert "" in seen and sum(model.index.skipped) > 0
    if name == "olmo-3-7b":
        out = next(i for i, t in enumerate(model.tensors) if t.name == "output.weight")
        p = Placement(model, lanes, ["Vulkan0"] * (n + 1), [""] * len(model.tensors))
        assert p.default_tensor_devices()[out] == CPU and p.default_tensor_devices()[0] == CPU


def test_export_self_check_is_left_out_when_asked_and_run_on_the_kept_result_later(q30, monkeypatch):
    """A drag's preview asks for the arguments without the export's self-check (half the cost on a 94-layer model);
    the drop asks with it, and the cache runs the check on the result it kept. A self-check that fails is said at
    that ask and at every one after it."""
    from app.placement import export

    cache = export.ExportCache(q30)
    checks: list[int] = []
    real = export._verify
    monkeypatch.setattr(export, "_verify", lambda p, args, m: (checks.append(1), real(p, args, m))[1])
    p = experts_to_cpu(q30, gpus(24, 24), LlamaSettings())
    p.assign("7:experts", "CUDA1")
    quick = cache.get(p, verify=False)
    assert not checks
    full = cache.get(p)
    assert len(checks) == 1 and full.overrides == quick.overrides and full.overrides
    cache.get(p, verify=False)
    cache.get(p)
    assert len(checks) == 1  # kept as checked

    def broken(p, args, m):
        raise InexpressibleError("internal check failed: test")

    monkeypatch.setattr(export, "_verify", broken)
    q = p.copy()
    q.assign("9:experts", "CUDA0")
    assert cache.get(q, verify=False).overrides  # not checked: the arguments
    with pytest.raises(InexpressibleError, match="internal check failed"):
        cache.get(q)
    with pytest.raises(InexpressibleError, match="internal check failed"):
        cache.get(q, verify=False)
    with pytest.raises(InexpressibleError, match="internal check failed"):
        placement_args(q.copy())  # without a cache: checked
    assert placement_args(q.copy(), verify=False).overrides


def test_default_tensor_devices_refuse_a_placement_short_of_layers(q30):
    """The slot table maps layer n_layer to the output's device; a layer list one short would map the output onto
    the CPU slot without a word, so it is refused as the old per-tensor lookup refused it (IndexError then)."""
    n = q30.params.n_layer
    p = Placement(q30, gpus(24), ["CUDA0"] * n, [""] * len(q30.tensors))
    with pytest.raises(ValueError, match=f"{n} layer devices; the model needs {n + 1}"):
        p.default_tensor_devices()
