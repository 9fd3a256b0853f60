"""The deterministic rules, checked by hand-computed numbers (no llama.cpp needed)."""

from __future__ import annotations

import pytest

from app.command.parse import ArgsError, FFN_EXPS_REGEX, parse_llama_args, settings_from_args
from app.memory.kv import SettingsError, context_shape, kv_bytes_per_layer
from app.memory.layout import OverrideMatcher, PlacementError, layer_devices, place_weights
from app.lanes import CPU, Lane
from app.memory.settings import LlamaSettings
from app.model import open_model
from tests.gguf_factory import write_sparse_model, write_tiny_model

GiB = 1 << 30


def dev(name, gib=24, buft=None):
    return Lane(name, buft or name, gib * GiB, gib * GiB)


def test_layer_split_matches_llama_cpp_examples():
    # src/llama-model.cpp load_tensors: 5 layers (4 blocks + output) with -ts 3,1 -> blocks 0-3 on dev0, output on dev1
    s = LlamaSettings(n_gpu_layers=-2, tensor_split=[3, 1])
    assert layer_devices(4, [dev("A"), dev("B")], s) == ["A", "A", "A", "A", "B"]
    # -ngl 1 offloads only the output layer
    assert layer_devices(4, [dev("A")], LlamaSettings(n_gpu_layers=1)) == [CPU] * 4 + ["A"]
    # 48 layers + output, 3:1 -> ceil(49*0.75) = 37 layers on the first device
    out = layer_devices(48, [dev("A"), dev("B")], LlamaSettings(n_gpu_layers=-2, tensor_split=[3, 1]))
    assert out.count("A") == 37 and out[-1] == "B"
    # no -ts: proportional to free memory
    out = layer_devices(9, [dev("A", 8), dev("B", 24)], LlamaSettings(n_gpu_layers=-2))
    assert out.count("A") == 3 and out.count("B") == 7
    # no devices at all: everything on the host
    assert layer_devices(3, [], LlamaSettings()) == [CPU] * 4
    # kept per input (an estimate asks every time): the same names with other free memory, another -ts, another
    # -ngl each split anew, and the answer is the caller's to change
    out = layer_devices(9, [dev("A", 24), dev("B", 8)], LlamaSettings(n_gpu_layers=-2))
    assert out.count("A") == 8 and out.count("B") == 2
    assert layer_devices(9, [dev("A", 24), dev("B", 8)], LlamaSettings(n_gpu_layers=-2, tensor_split=[1, 1])).count(
        "A"
    ) == 5
    assert layer_devices(9, [dev("A", 24), dev("B", 8)], LlamaSettings(n_gpu_layers=4)).count(CPU) == 6
    out.append("mine")
    assert layer_devices(9, [dev("A", 24), dev("B", 8)], LlamaSettings(n_gpu_layers=-2))[-1] == "B"


def test_override_first_match_wins_and_is_unanchored():
    names = ["blk.1.ffn_up_exps.weight", "blk.10.ffn_up_exps.weight", "blk.21.ffn_down_exps.weight"]
    m = OverrideMatcher(names)
    got = m.resolve([(r"blk\.1\.", "CUDA0"), (r"ffn_.*_exps", "CPU")])
    assert got == {0: "CUDA0", 1: "CPU", 2: "CPU"}
    assert m.resolve([(r"1\.ffn", "X")]) == {0: "X", 2: "X"}  # unanchored: found inside "blk.21."


def test_args_parsing_builds_the_same_override_list_as_llama_cpp():
    p = parse_llama_args(["llama-server", "-m", "x.gguf", "--rpc", "h:1,h:2", "-ot", r"a=CPU,b\.c=RPC0[h:1]",
                          "-ncmoe", "2", "-cmoe", "-c", "8192", "-fa", "off", "-ngl", "all", "-ts", "3/1",
                          "--port", "8080", "--frobnicate"])
    s = p.settings
    assert p.program == "llama-server" and p.model == "x.gguf" and p.rpc == ["h:1", "h:2"]
    assert s.overrides == [("a", "CPU"), (r"b\.c", "RPC0[h:1]"), (rf"blk\.0{FFN_EXPS_REGEX}", "CPU"),
                           (rf"blk\.1{FFN_EXPS_REGEX}", "CPU"), (FFN_EXPS_REGEX, "CPU")]
    assert s.n_ctx == 8192 and s.flash_attn == "off" and s.n_gpu_layers == -2 and s.tensor_split == [3.0, 1.0]
    assert p.unknown == ["--frobnicate"] and "--port" in p.ignored
    assert any("unknown flag --frobnicate" in w for w in p.warnings)
    assert settings_from_args(["--ctx-size=4096", "--flash-attn", "on"]).n_ctx == 4096
    with pytest.raises(ArgsError, match="-c expects a whole number"):
        parse_llama_args(["-c", "lots"])
    with pytest.raises(ArgsError, match="-ot item"):
        parse_llama_args(["-ot", "noequals"])


def test_context_padding_streams_and_swa(tmp_path):
    m = open_model(write_tiny_model("gpt-oss", tmp_path / "g.gguf"))
    # -c 10000 -np 3 non-unified: 3 streams x 3584 cells (src/llama-context.cpp; seen with real llama.cpp)
    sh = context_shape(m.params, LlamaSettings(n_ctx=10000, n_parallel=3, tool="fit-params"))
    assert (sh.n_stream, sh.n_ctx_seq, sh.n_ctx) == (3, 3584, 10752)
    # server auto -np: 4 slots, one unified stream
    sh = context_shape(m.params, LlamaSettings(n_ctx=10000))
    assert (sh.n_stream, sh.n_seq, sh.n_ctx_seq) == (1, 4, 10240)
    p = m.params
    if p.has_swa:
        w = p.n_swa
        sh = context_shape(p, LlamaSettings(n_ctx=32768, n_parallel=2, tool="fit-params"))
        assert sh.size_swa == -(-min(sh.n_ctx_seq, w + 512) // 256) * 256
        assert context_shape(p, LlamaSettings(n_ctx=32768, swa_full=True)).size_swa == 32768


def test_kv_bytes_gqa_fa_and_quantized(tmp_path):
    m = open_model(write_sparse_model("qwen3-30b-a3b", tmp_path / "q.gguf"))
    s = LlamaSettings(n_ctx=8192, tool="fit-params", flash_attn="on")
    kv = kv_bytes_per_layer(m.params, s, context_shape(m.params, s))
    assert kv[0] == 2 * 4 * 128 * 8192 * 2 and sum(kv) == 48 * kv[0]  # K+V, 4 KV heads x 128, f16
    s = LlamaSettings(n_ctx=8192, tool="fit-params", flash_attn="on", type_k="q8_0", type_v="q4_0")
    kv = kv_bytes_per_layer(m.params, s, context_shape(m.params, s))
    assert kv[0] == (512 // 32 * 34 + 512 // 32 * 18) * 8192
    with pytest.raises(SettingsError, match="needs flash attention"):
        context_shape(m.params, LlamaSettings(flash_attn="off", type_v="q8_0"))


def test_mla_caches_k_only(tmp_path):
    m = open_model(write_sparse_model("deepseek-v3", tmp_path / "d.gguf"))
    s = LlamaSettings(n_ctx=4096, tool="fit-params")
    kv = kv_bytes_per_layer(m.params, s, context_shape(m.params, s))
    assert kv[0] == 576 * 4096 * 2


def test_tied_embeddings_loaded_twice_and_overrides_route_experts(tmp_path):
    m = open_model(write_tiny_model("llama", tmp_path / "t.gguf", tied_embeddings=True))
    assert m.params.tied_embeddings
    pl = place_weights(m, [dev("RPC0")], LlamaSettings(n_gpu_layers=-2))
    assert pl.duplicated_output == "RPC0"
    te = next(t for t in m.tensors if t.name == "token_embd.weight")
    by = pl.bytes_by_device(m)
    assert by[CPU] == te.nbytes and by["RPC0"] == m.tensor_bytes - te.nbytes + te.nbytes
    moe = open_model(write_tiny_model("qwen3moe", tmp_path / "q.gguf"))
    pl = place_weights(moe, [dev("RPC0")], settings_from_args(["-ngl", "all", "-cmoe"]))
    for t, d in zip(moe.tensors, pl.tensor_device):
        assert d == (CPU if "_exps" in t.name or t.name.startswith("token_embd") else "RPC0"), t.name
    with pytest.raises(PlacementError, match="not a buffer type"):
        place_weights(moe, [dev("RPC0")], settings_from_args(["-ot", "exps=CUDA7"]))


def test_environment_variables_apply_first_and_flags_win():
    from app.command.formats import parse_command_text

    env, argv = parse_command_text("LLAMA_ARG_N_GPU_LAYERS=20 LLAMA_ARG_CPU_MOE=1 LLAMA_ARG_CTX_SIZE=4096 "
                                   "LLAMA_ARG_OVERRIDE_TENSOR='a=CPU,b=CPU' llama-server -m x.gguf -ngl 30 -ot c=CPU")
    s = parse_llama_args(argv, env=env).settings
    assert s.n_gpu_layers == 30 and s.n_ctx == 4096
    assert s.overrides == [("a", "CPU"), ("b", "CPU"), (FFN_EXPS_REGEX, "CPU"), ("c", "CPU")]
    assert parse_llama_args(["-m", "x"], env={"LLAMA_ARG_CPU_MOE": "0"}).settings.overrides == []


def test_env_form_round_trips_through_llama_cpp_semantics():
    from app.command.formats import parse_command_text, render

    argv = ["llama-server", "-m", "x.gguf", "-ngl", "49", "-kvu", "-nkvo", "-cmoe", "-ot", "a=CPU", "-ot", "b=CPU",
            "-c", "4096", "-ncffn", "2"]
    text = render(argv, "env")
    assert "LLAMA_ARG_KV_OFFLOAD=0" in text and "NO_KV_OFFLOAD" not in text
    env, rest = parse_command_text(text)
    p = parse_llama_args(rest, env=env)
    s = p.settings
    assert s.kv_unified and s.no_kv_offload and s.n_ctx == 4096 and s.n_gpu_layers == 49 and not p.unknown
    assert [o[0] for o in s.overrides[:2]] == ["a", "b"] and len(s.overrides) == 5
    # llama.cpp's is_truthy is exact: "yes" is not true, "0" turns unified KV off
    assert parse_llama_args(["-m", "x"], env={"LLAMA_ARG_CPU_MOE": "yes"}).settings.overrides == []
    assert parse_llama_args(["-m", "x"], env={"LLAMA_ARG_KV_UNIFIED": "0"}).settings.kv_unified is False


def test_architecture_without_a_module_is_estimated_and_flagged(tmp_path):
    """An architecture llama.cpp knows but no family module replays takes the llama-style fallback graph: unknown
    tensors still land in a block, and the estimate says its compute buffers are not confirmed. (A name llama.cpp
    does not know at all is refused at open: tests/model/test_open_model.py.)"""
    import numpy as np
    from gguf import GGUFWriter

    from app.memory.compute.models import REGISTRY
    from app.memory.estimator import estimate
    from app.model import llama_keys

    unreplayed = sorted(set(llama_keys.KNOWN_ARCHS) - set(REGISTRY) - set(llama_keys.UNSUPPORTED_ARCHS))
    assert unreplayed, "every architecture has a module: the fallback graph and this test can go"
    w = GGUFWriter(str(tmp_path / "u.gguf"), unreplayed[0])
    w.add_tokenizer_model("llama")
    w.add_token_list(["a", "b"])
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_context_length(2048)
    w.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    for i in range(2):
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
        w.add_tensor(f"blk.{i}.mystery_proj.weight", np.zeros((64, 64), dtype=np.float16))
    w.add_tensor("output.weight", np.zeros((32, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    m = open_model(tmp_path / "u.gguf")
    assert any(b.id == "0:other" for b in m.blocks)  # unknown tensors still land in a block
    est = estimate(m, [dev("CUDA0", 8)], LlamaSettings(n_ctx=2048))
    assert est.device("CUDA0").model == m.tensor_bytes - 32 * 64 * 2
    assert any("not confirmed against llama.cpp" in n for n in est.notes)


@pytest.mark.parametrize("spec", ["gemma-3-27b", "deepseek-v4-flash", "gpt-oss-20b"])
def test_one_estimator_serves_every_cache_setting_as_a_fresh_one_would(tmp_path, spec):
    """The per-model caches an Estimator keeps (KV bytes per layer by cache type, swa_full and context shape;
    compute results by placement) give, for a sequence of settings that change one cache setting at a time and
    come back, the figures a new Estimator gives for each: nothing is served for another setting."""
    from app.memory.estimator import Estimator, estimate

    model = open_model(write_sparse_model(spec, tmp_path / "m.gguf"))
    lanes = [dev("RPC0", 48), dev("RPC1", 48)]
    base = ["-ngl", "all", "-ts", "1,1", "-c", "8192"]
    runs = [
        [],
        ["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"],
        ["-ctk", "q8_0"],
        ["--swa-full"],
        ["-c", "16384"],
        ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on", "--swa-full"],
        ["-np", "4", "-kvu"],
        [],
        ["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"],
    ]
    kept = Estimator(model)
    seen = set()
    for extra in runs:
        settings = settings_from_args(base + extra)
        got = kept.estimate(lanes, settings)
        want = estimate(model, lanes, settings)  # a new Estimator of its own
        figures = [(d.name, d.model, d.kv, d.compute) for d in got.devices]
        assert figures == [(d.name, d.model, d.kv, d.compute) for d in want.devices], extra
        seen.add(tuple(d.kv for d in got.devices))
    assert len(seen) >= 5  # the settings do change the cache, so a stale entry would show


def test_layer_signatures_numbered_anew_never_meet_an_earlier_number(tmp_path, monkeypatch):
    """Layer signatures are numbered per model (core._sig_numbers) for the cut, the result key and the trace;
    past a cap the numbering starts over with its numbers going on. With a cap of 3 it starts over on every
    estimate here, and drag previews of placements that come back give a fresh estimator's figures each time."""
    from app.memory.compute import core
    from app.memory.estimator import Estimator

    monkeypatch.setattr(core, "_SIG_NUMBERS", 3)
    model = open_model(write_sparse_model("qwen3-30b-a3b", tmp_path / "m.gguf"))
    lanes = [dev("CUDA0", 96), dev("CUDA1", 96)]
    kept = Estimator(model)
    compared = 0
    for rep in range(2):  # the second round repeats the first's placements: a stale number would hit here
        for il in (3, 17, 30, 3):
            args = ["-ngl", "all", "-ts", "1,1", "-c", "8192", "-ot", rf"blk\.{il}\.ffn_(up|down|gate)_exps=CPU"]
            settings = settings_from_args(args)
            got = kept.estimate(lanes, settings, quick=True)
            want = Estimator(model).estimate(lanes, settings, quick=True)
            assert [(d.name, d.compute) for d in got.devices] == [(d.name, d.compute) for d in want.devices]
            compared += 1
    facts = kept.compute_facts
    assert compared == 8 and facts["sig_next"] > 8 and len(facts["sig_numbers"]) <= 3 + model.params.n_layer
