"""Gemma 4 (``gemma4``): the facts the memory model takes from ``src/models/gemma4.cpp`` and the loader, checked
without llama.cpp (the accuracy matrix compares the figures to it: tests/memory/accuracy.py ``g4*`` cases and the
gemma4 server cases of test_accuracy_llama.py).

KV sharing (E2B: only layers 0-14 own a cache; later layers attend over layer 13's or 14's), the two head sizes
and KV head counts, the per-cache rotation of quantized caches, and which models the layer compression may cut."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.errors import ReadError
from app.lanes import Lane
from app.memory.compute import CHECKED_ARCHS, UNCHECKED, family_of
from app.memory.estimator import Estimator
from app.memory.kv import context_shape, has_kv_layers, kv_bytes_per_layer
from app.model import open_model
from tests import gguf_factory as gf
from tests.gguf_factory import write_sparse_model

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def e2b(tmp_path_factory):
    return open_model(write_sparse_model("gemma-4-e2b", tmp_path_factory.mktemp("g4") / "e2b.gguf"))


@pytest.fixture(scope="module")
def m31b(tmp_path_factory):
    return open_model(write_sparse_model("gemma-4-31b", tmp_path_factory.mktemp("g4") / "31b.gguf"))


def _rpc(n):
    return [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{50100 + i}]", 64 * GiB, 64 * GiB, "rpc") for i in range(n)]


def test_e2b_layers_15_on_share_caches(e2b):
    p = e2b.params
    assert p.arch == "gemma4" and p.n_layer == 35 and p.n_layer_kv_from_start == 15 and p.n_embd_per_layer == 256
    assert p.swa_layers == [il % 5 < 4 for il in range(35)] and p.n_swa == 512
    assert (p.head_dim_k_swa, p.head_dim_k) == (256, 512)
    assert has_kv_layers(p) == [il < 15 for il in range(35)]
    s = settings_from_args(["-c", "8192", "-fa", "on"], tool="fit-params")
    per_layer = kv_bytes_per_layer(p, s, context_shape(p, s))
    assert all(b == 0 for b in per_layer[15:])
    # K + V of 1 head at f16: the 3 own full layers (4, 9, 14) hold 8192 cells of 512, the 12 own sliding ones
    # 512 + 512 (window + ubatch, padded to 256) cells of 256
    assert sum(per_layer) == 3 * 8192 * 512 * 2 * 2 + 12 * 1024 * 256 * 2 * 2 == 60 * MiB


def test_e2b_shared_layers_read_layers_13_and_14(e2b):
    assert "gemma4" in CHECKED_ARCHS and family_of("gemma4").name == "gemma4"
    est = Estimator(e2b)
    s = settings_from_args(["-c", "16384", "-ngl", "all", "-ts", "1,1", "-fa", "off"], tool="fit-params")
    e = est.estimate(_rpc(2), s)
    assert not [n for n in e.notes if UNCHECKED in n or "approximat" in n]
    (b,) = est.compute_facts["graphs"].values()
    assert b.layers == list(range(35)), "per-layer inputs and shared caches: no layer is dropped"
    shared = b.__dict__["layer_crefs"]
    # K and V of layers 15-34: the 16 sliding ones read layer 13's cache, the 4 full ones layer 14's
    assert sorted(il for _t, il in shared) == [13] * 32 + [14] * 8
    assert sum(1 for t in b.g.nodes if t.op == "SET_ROWS") == 2 * 15
    # layers 18-34 on RPC1 own no cache
    assert e.device("RPC0").kv > 0 and e.device("RPC1").kv == 0


def test_quantized_caches_rotate_per_cache(m31b):
    est = Estimator(m31b)
    s = settings_from_args(["-c", "8192", "-ngl", "all", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0"],
                           tool="fit-params")
    est.estimate(_rpc(1), s)
    (b,) = est.compute_facts["graphs"].values()
    # the sliding cache's heads are 256 wide, the full cache's 512: one K rotation each, V rotations of 64
    assert b.inputs["k_rot_swa"].ne[:2] == (256, 256) and b.inputs["k_rot"].ne[:2] == (512, 512)
    assert b.inputs["v_rot_swa"].ne[:2] == b.inputs["v_rot"].ne[:2] == (64, 64)


def test_models_without_sharing_or_per_layer_input_are_compressed(m31b):
    p = m31b.params
    assert p.n_layer_kv_from_start == p.n_layer == 60 and p.n_embd_per_layer == 0
    assert p.n_head_kv == [16 if il % 6 < 5 else 4 for il in range(60)]
    est = Estimator(m31b)
    est.estimate([], settings_from_args(["-c", "8192"], tool="fit-params"), quick=True)  # a drag preview cuts
    (b,) = est.compute_facts["graphs"].values()
    assert len(b.layers) < 60
    # the full layers have no attn_v (K = V): their V is a second view of K's projection
    assert "blk.5.attn_v.weight" not in {t.name for t in m31b.tensors}


def test_the_per_layer_width_is_required(tmp_path):
    spec = gf.model_spec("gemma4")
    del spec.kv["gemma4.embedding_length_per_layer_input"]
    path = gf.write_spec(spec, tmp_path / "no-pl.gguf")
    with pytest.raises(ReadError, match="embedding_length_per_layer_input"):
        open_model(path)
