"""Granite Switch (``src/models/granite-switch.cpp``): the router's attention layer llama.cpp appends after the real
layers (a KV cache, no weights, counted by -ngl and -ts), the adapters' keys as llama.cpp checks them, and the
graph that reads the stacked LoRA tensors. The figures against llama.cpp are in the accuracy matrix
(tests/memory/accuracy.py ``gsw3-*``/``gsw8-*``, the server-log cases and Vulkan0); here what needs no llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute.approx import APPROXIMATE
from app.memory.estimator import Estimator
from app.memory.kv import context_shape, kv_bytes_per_layer
from app.model import open_model
from app.model.errors import MetadataError
from tests.gguf_factory import write_sparse_model
from tests.model.gguf_edit import T_ARR, T_I32, T_U32, apply

GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture(scope="module")
def g3b(tmp_path_factory):
    return open_model(write_sparse_model("granite-switch-3b", tmp_path_factory.mktemp("gsw") / "g.gguf"))


def test_the_router_layer_follows_the_real_ones(g3b):
    """block_count 40, n_layer_all 41: the router layer has one query and one KV head, no FFN and no tensors."""
    p = g3b.params
    assert (p.n_layer, p.router_layer, p.n_adapters, p.lora_rank) == (41, 40, 6, 32)
    assert (p.n_head[40], p.n_head_kv[40], p.n_ff[40]) == (1, 1, 0)
    assert not [b for b in g3b.layer_blocks(40) if b.nbytes]
    assert "40 layers and the adapter router's attention layer" in p.layer_note


def test_the_router_layer_caches_one_head(g3b):
    """Its K and V rows are one head of 64 wide: 2 x 64 x 2 bytes per cell (f16), beside 2 x 8 x 64 x 2 bytes."""
    s = settings_from_args("-c 8192".split(), tool="server")
    per_layer = kv_bytes_per_layer(g3b.params, s, context_shape(g3b.params, s))
    assert per_layer[40] == 8192 * 2 * 64 * 2
    assert per_layer[39] == 8192 * 2 * 8 * 64 * 2


@pytest.mark.parametrize("ngl,router_on_gpu", [(1, False), (2, True)])
def test_ngl_counts_the_router_layer(g3b, ngl, router_on_gpu):
    """-ngl N offloads the last N of 41 layers plus the output: -ngl 1 is the output alone, -ngl 2 adds the router
    layer (its cache only: no weight moves)."""
    devices = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 64 * GiB, 64 * GiB, "rpc")]
    est = Estimator(g3b).estimate(devices, settings_from_args(f"-c 8192 -ngl {ngl}".split(), tool="server"))
    assert not [n for n in est.notes if n.startswith(APPROXIMATE)]
    router_kv = 8192 * 2 * 64 * 2
    assert est.device("RPC0").context == (router_kv if router_on_gpu else 0)


@pytest.mark.parametrize(
    "mutations,message",
    [
        ([["meta", "{arch}.adapters.count", T_U32, 5000]], r"adapters\.count is 5,000, more than the 4096"),
        ([["meta", "{arch}.adapters.lora_rank", T_U32, 1 << 20]], r"adapters\.lora_rank is 1,048,576"),
        ([["del", "{arch}.adapters.lora_rank"]], r"adapters\.lora_rank is missing"),
        ([["meta", "{arch}.adapters.count", T_U32, 2]], r"hold 3 and 3 token ids, but adapters\.count is 2"),
        ([["meta", "{arch}.adapters.token_ids_substitute", T_ARR, {"arr": T_I32, "values": [3, 4, 1 << 20]}]],
         r"holds the token id 1,048,576, outside the vocabulary"),
        ([["del", "{arch}.adapters.token_ids_activate"]], r"adapters\.token_ids_activate is missing"),
    ],
    ids=["many-adapters", "huge-rank", "no-rank", "count-vs-arrays", "substitute-outside", "no-activate"],
)
def test_hostile_adapter_keys_are_refused(tmp_path, tiny_models, mutations, message):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["graniteswitch"]).read_bytes(), mutations))
    with pytest.raises(MetadataError, match=message):
        open_model(p)


def test_lora_stacks_are_read_one_adapter_slot_per_token(g3b):
    """MUL_MAT_ID over adapters + 1 slots reads one slot's rows per token: a seventh of each stack here."""
    from app.speed.predict import SpeedFacts

    facts = SpeedFacts(g3b)
    for i, t in enumerate(g3b.tensors):
        if t.name.endswith(".lora_a"):
            assert facts.read_per_token[i] == pytest.approx(t.nbytes / 7)
            assert facts.flops_per_token[i] == pytest.approx(2 * t.n_elements / 7)


def test_nextn_layers_make_way_for_the_router(tmp_path, tiny_models):
    """A file that says nextn_predict_layers 1: llama.cpp's router takes layer n_layer() = block_count - 1 and the
    NextN count is repurposed (no MTP layer)."""
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["graniteswitch"]).read_bytes(),
                        [["meta", "{arch}.nextn_predict_layers", T_U32, 1]]))
    params = open_model(p).params
    assert (params.router_layer, params.n_layer, params.nextn_layers) == (3, 4, 0)


def test_adapter_token_ids_must_be_i32(tmp_path, tiny_models):
    from tests.model.gguf_edit import T_I8

    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["graniteswitch"]).read_bytes(),
                        [["meta", "{arch}.adapters.token_ids_activate", T_ARR, {"arr": T_I8, "values": [1, 2, 3]}]]))
    with pytest.raises(MetadataError, match=r"token_ids_activate is an array of i8, not of token ids"):
        open_model(p)
