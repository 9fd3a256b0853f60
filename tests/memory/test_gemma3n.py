"""Gemma 3n (``gemma3n``): the facts the memory model takes from ``src/models/gemma3n.cpp`` and the loader, checked
without llama.cpp (the accuracy matrix compares the figures to it: tests/memory/accuracy.py ``g3n*`` cases and the
gemma3n server cases of test_accuracy_llama.py).

KV sharing (only layers 0-19 own a cache; later layers attend over layer 18's or 19's), where the per-layer
embedding and the AltUp projections live, the tied output llama.cpp loads twice, and the replayed graph's cache
references."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.lanes import CPU, Lane
from app.memory.compute import CHECKED_ARCHS, UNCHECKED, family_of
from app.memory.estimator import Estimator
from app.memory.kv import context_shape, has_kv_layers, kv_bytes_per_layer
from app.memory.layout import place_weights
from app.model import open_model
from app.model.blocks import Role
from tests.gguf_factory import write_sparse_model

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def e2b(tmp_path_factory):
    return open_model(write_sparse_model("gemma-3n-e2b", tmp_path_factory.mktemp("g3n") / "e2b.gguf"))


def _rpc(n):
    return [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{50100 + i}]", 64 * GiB, 64 * GiB, "rpc") for i in range(n)]


def test_only_the_first_20_layers_own_a_cache(e2b):
    p = e2b.params
    assert p.arch == "gemma3n" and p.n_layer == 30 and p.n_layer_kv_from_start == 20
    assert p.swa_layers == [il % 5 < 4 for il in range(30)] and p.n_swa == 512
    assert has_kv_layers(p) == [il < 20 for il in range(30)]
    s = settings_from_args(["-c", "8192"], tool="fit-params")
    shape = context_shape(p, s)
    per_layer = kv_bytes_per_layer(p, s, shape)
    assert all(b == 0 for b in per_layer[20:])
    # K + V of 2 heads of 256 at f16: the 4 full layers (4, 9, 14, 19) hold 8192 cells, the 16 sliding ones
    # 512 + 512 (window + ubatch, padded to 256) cells; llama-fit-params prints 96 MiB for this (g3n2-cpu)
    row = 2 * 256 * 2 * 2
    assert sum(per_layer) == 4 * 8192 * row + 16 * 1024 * row == 96 * MiB


def test_per_layer_embedding_stays_in_host_memory_and_altup_follows_the_output(e2b):
    blocks = {t.name: b for b in e2b.blocks for t in b.tensors}
    assert blocks["per_layer_token_embd.weight"].role is Role.INPUT
    assert blocks["per_layer_model_proj.weight"].id == blocks["per_layer_proj_norm.weight"].id == "0:other"
    assert blocks["altup_proj.weight"].role is blocks["altup_unembd_proj.weight"].role is Role.OUTPUT
    s = settings_from_args(["-c", "8192", "-ngl", "all", "-ts", "1,2"], tool="fit-params")
    wp = place_weights(e2b, _rpc(2), s)
    dev = {t.name: d for t, d in zip(e2b.tensors, wp.tensor_device)}
    assert dev["per_layer_token_embd.weight"] == dev["token_embd.weight"] == CPU  # LLM_TENSOR_LAYER_INPUT
    assert dev["per_layer_model_proj.weight"] == dev["blk.0.attn_q.weight"] == "RPC0"  # created with layer 0
    assert dev["altup_proj.weight"] == dev["output_norm.weight"] == wp.layer_device[-1] == "RPC1"


def test_the_tied_output_is_a_second_copy_unless_mapped(e2b):
    te = next(t for t in e2b.tensors if t.name == "token_embd.weight")
    assert e2b.params.tied_embeddings
    # the loader creates the output's copy before token_embd, so even in one buffer type there are two
    fit = place_weights(e2b, [], settings_from_args(["-c", "8192"], tool="fit-params"))
    assert fit.duplicated_output == CPU
    assert fit.bytes_by_device(e2b)[CPU] == e2b.tensor_bytes + te.nbytes
    # a mapped file maps both tensors onto the same range
    mapped = place_weights(e2b, [], settings_from_args(["-c", "8192"], tool="server"))
    assert mapped.duplicated_output is None
    on_rpc = place_weights(e2b, _rpc(1), settings_from_args(["-c", "8192", "-ngl", "all"], tool="server"))
    assert on_rpc.duplicated_output == "RPC0"


def test_shared_layers_read_the_caches_of_layers_18_and_19(e2b):
    assert "gemma3n" in CHECKED_ARCHS and family_of("gemma3n").name == "gemma3n"
    est = Estimator(e2b)
    s = settings_from_args(["-c", "16384", "-ngl", "all", "-ts", "2,1", "-fa", "off"], tool="fit-params")
    e = est.estimate(_rpc(2), s)
    assert not [n for n in e.notes if UNCHECKED in n or "approximat" in n]
    # -ts 2,1: layers 0-19 on RPC0 (all caches), 20-29 on RPC1 (none of its own)
    assert e.device("RPC0").kv > 0 and e.device("RPC1").kv == 0
    (b,) = est.compute_facts["graphs"].values()
    assert b.layers == list(range(30)), "no layer is dropped: each brings its own per-layer input copy"
    shared = b.__dict__["layer_crefs"]
    # K and V of layers 20-29: the 8 sliding ones read layer 18's cache, the full ones (24, 29) layer 19's
    assert sorted(il for _t, il in shared) == [18] * 16 + [19] * 4
    # K and V are stored only by the 20 layers that own a cache
    assert sum(1 for t in b.g.nodes if t.op == "SET_ROWS") == 2 * 20
    # the shared layers' copies of RPC0's caches make RPC1's compute buffer the larger one
    assert e.device("RPC1").compute > e.device("RPC0").compute
