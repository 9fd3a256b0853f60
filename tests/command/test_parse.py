"""Reading a llama.cpp command line through the flag table (the regressions the old if/elif parser had)."""

from __future__ import annotations

import pytest

from app.command.parse import ArgsError, FFN_EXPS_REGEX, parse_llama_args, settings_from_args
from app.errors import CommandError
from app.memory.settings import NGL_ALL


def test_cont_batching_is_a_switch_and_keeps_the_next_flag():
    # -cb used to be in both the valued and the switch ignore tables, and swallowed -ngl
    p = parse_llama_args(["-m", "x.gguf", "-cb", "-ngl", "12"])
    assert p.settings.n_gpu_layers == 12 and p.ignored == ["-cb"] and not p.unknown
    for spelling in ("--cont-batching", "-nocb", "--no-cont-batching", "-e", "--escape", "--no-escape"):
        assert settings_from_args(["-m", "x.gguf", spelling, "-ngl", "12"]).n_gpu_layers == 12, spelling


def test_values_are_checked_with_llama_cpp_limits():
    with pytest.raises(ArgsError, match="-np 0: invalid value for n_parallel"):
        parse_llama_args(["-np", "0"])
    with pytest.raises(ArgsError, match="--n-cpu-moe -1: invalid value"):
        parse_llama_args(["--n-cpu-moe", "-1"])
    with pytest.raises(ArgsError, match="Unsupported cache type"):
        parse_llama_args(["-ctk", "q3_k"])
    with pytest.raises(ArgsError, match="--split-mode must be none, layer, row or tensor"):
        parse_llama_args(["--split-mode", "rows"])
    with pytest.raises(ArgsError, match="-lm must be auto, none, mmap, mlock, mmap\\+mlock or dio"):
        parse_llama_args(["-lm", "yes"])
    with pytest.raises(ArgsError, match="--fit: unknown value"):
        parse_llama_args(["--fit", "maybe"])
    with pytest.raises(ArgsError, match="-ngl needs a value"):
        parse_llama_args(["-ngl"])
    assert issubclass(ArgsError, CommandError) and issubclass(ArgsError, ValueError)


def test_typed_values():
    p = parse_llama_args(["llama-server", "-ngl", "ALL", "-ctk", "Q8_0", "--fit", "0", "-fa", "-1", "-lm", "none",
                          "-ts", "3/1", "-dev", "CUDA0,,CUDA1", "--rpc", "a:1,b:2", "-ncffn", "1", "-cmoe"])
    s = p.settings
    assert s.n_gpu_layers == NGL_ALL and s.type_k == "q8_0" and p.fit == "off" and s.flash_attn == "auto"
    assert s.load_mode == p.load_mode == "none" and s.tensor_split == [3.0, 1.0] and s.devices == ["CUDA0", "CUDA1"]
    assert p.rpc == ["a:1", "b:2"] and s.overrides[-1] == (FFN_EXPS_REGEX, "CPU") and len(s.overrides) == 2


def test_old_build_spellings():
    assert settings_from_args(["-fa", "-ngl", "3"]).flash_attn == "on"  # a bare -fa switched it on
    assert settings_from_args(["--no-mmap"]).load_mode == "none"
    assert settings_from_args(["--mlock"]).load_mode == "mlock"
    p = parse_llama_args(["-co", "-c", "100"], tool="cli")  # --color was a switch too
    assert p.settings.n_ctx == 100 and p.ignored == ["-co"]


def test_llama_bench_forms():
    s = settings_from_args(["-nkvo", "1", "--repack", "0", "--no-host", "1", "-nopo", "1", "-fa", "1", "-embd", "1",
                            "-ngl", "99"], tool="bench")
    assert s.no_kv_offload and not s.repack and not s.use_host and not s.op_offload and s.flash_attn == "on"
    assert s.n_gpu_layers == 99
    s = settings_from_args(["-nkvo", "0", "--no-host", "0", "-ngl", "9"], tool="bench")
    assert not s.no_kv_offload and s.use_host and s.n_gpu_layers == 9
    # the same switches take no value in llama-server
    assert settings_from_args(["-nkvo", "-ngl", "9"]).no_kv_offload


def test_underscores_removed_flags_and_other_tools():
    p = parse_llama_args(["--ctx_size", "2048", "--n_gpu_layers", "4"])
    assert p.settings.n_ctx == 2048 and p.settings.n_gpu_layers == 4 and not p.unknown
    p = parse_llama_args(["--draft-max", "8", "-ngl", "4"])
    assert p.removed == ["--draft-max"] and p.settings.n_gpu_layers == 4
    assert any("--draft-max was removed" in w and "--spec-draft-n-max" in w for w in p.warnings)
    p = parse_llama_args(["-p", "hello", "--chunks", "3", "-ngl", "4"])  # llama-cli / perplexity flags
    assert p.not_for_tool == ["-p", "--chunks"] and p.ignored == ["-p", "--chunks"] and not p.unknown
    assert parse_llama_args(["-p", "hi"], tool="cli").not_for_tool == []


def test_unmodelled_flags_are_named():
    p = parse_llama_args(["-cram", "2048", "--mmproj", "p.gguf", "--host", "h", "-md", "d.gguf",
                          "--spec-ngram-mod-n-max", "32"])
    assert p.unmodelled == ["-cram", "--spec-ngram-mod-n-max"] and "--host" in p.ignored
    # a draft model and a projector are modelled (app.memory.draft, app.memory.projector)
    assert (p.settings.draft_model, p.settings.mmproj) == ("d.gguf", "p.gguf")


def test_inline_values_and_unknowns_as_before():
    p = parse_llama_args(["--ctx-size=4096", "--swa-full=1", "--frobnicate", "3", "--port=80"])
    assert p.settings.n_ctx == 4096 and p.settings.swa_full and p.unknown == ["--frobnicate", "3"]
    assert p.ignored == ["--port"]
