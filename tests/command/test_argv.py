"""The argv helpers: every spelling of an option counts, values are skipped, the last occurrence wins."""

from __future__ import annotations

from app.command.argv import (MODEL_FLAGS, RPC_FLAGS, VERBOSE_SWITCHES, flag_index, flag_value, has_flag,
                              model_path, rpc_endpoints)


def test_aliases_from_the_table():
    assert RPC_FLAGS == ("--rpc", "-rpc") and MODEL_FLAGS == ("-m", "--model")
    assert VERBOSE_SWITCHES == ("-v", "--verbose", "--log-verbose")
    argv = ["llama-server", "--model", "a.gguf", "--n-gpu-layers", "3"]
    assert flag_value(argv, "-m") == "a.gguf" and flag_value(argv, "-ngl") == "3"
    assert model_path(argv) == "a.gguf" and model_path(["x"], {"LLAMA_ARG_MODEL": "e.gguf"}) == "e.gguf"


def test_last_occurrence_wins_as_in_llama_cpp():
    argv = ["llama-server", "-c", "10", "--ctx-size", "20", "-c", "30", "--port", "1"]
    assert flag_index(argv, "-c") == 5 and flag_value(argv, "--ctx-size") == "30"
    assert rpc_endpoints(["-rpc", "a:1", "--rpc", "b:1, c:2"]) == ["b:1", "c:2"]
    assert rpc_endpoints([], {"LLAMA_ARG_RPC": "h:1"}) == ["h:1"]


def test_values_are_not_taken_for_flags():
    argv = ["llama-server", "-a", "--port", "--host", "h"]  # an alias named "--port"
    assert not has_flag(argv, "--port") and flag_value(argv, "--host") == "h"
    assert has_flag(["-fa", "-v"], "-v") and not has_flag(["-fa", "on"], "-v")
    # negatives are a different meaning
    assert not has_flag(["-no-kvu"], "-kvu") and has_flag(["--no-kv-unified"], "-no-kvu")
    # unknown flags are still found by name
    assert has_flag(["--frobnicate", "x"], "--frobnicate")
