"""T5 (``src/models/t5.cpp``): a file of ``enc.blk.N`` / ``dec.blk.N`` tensors opens as layers (both halves of
layer N on one device), llama-server's reserve sizes every token's output, a cache per sequence is refused as
llama.cpp aborts on it, and the estimate says llama-server never encodes a request. The figures against llama.cpp
are in the accuracy matrix (tests/memory/accuracy.py ``ft5l-*``/``ft5xl-*``, the server-log cases and Vulkan0)."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.backends import BackendAbort
from app.memory.compute.approx import APPROXIMATE
from app.memory.estimator import Estimator
from app.memory.kv import context_shape
from app.model import Role, open_model
from tests.gguf_factory import write_sparse_model

GiB = 1 << 30


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    return open_model(write_sparse_model("flan-t5-large", tmp_path_factory.mktemp("t5") / "t5.gguf"))


def test_encoder_and_decoder_layers_are_one_layer(t5):
    """Layer 3's attention block holds the encoder's self-attention and the decoder's self- and cross attention;
    the two output norms go with the output (LAYER_OUTPUT); nothing is left global."""
    names = {t.name for b in t5.layer_blocks(3) if b.role is Role.ATTN for t in b.tensors}
    assert {"enc.blk.3.attn_q.weight", "dec.blk.3.attn_q.weight", "dec.blk.3.cross_attn_k.weight"} <= names
    out = {t.name for b in t5.blocks if b.role is Role.OUTPUT for t in b.tensors}
    assert {"enc.output_norm.weight", "dec.output_norm.weight", "output.weight"} <= out
    assert not [b for b in t5.blocks if b.role is Role.GLOBAL]
    assert "encoder's and the decoder's layer" in t5.params.layer_note


def test_llama_server_sizes_every_tokens_output(t5):
    """llama_context: n_outputs_max is n_batch for a model with an encoder, whatever -np says."""
    for tool in ("server", "fit-params"):
        shape = context_shape(t5.params, settings_from_args("-c 4096 -np 1".split(), tool=tool))
        assert shape.n_outputs_max == shape.n_batch


def test_a_cache_per_sequence_is_refused_as_llama_cpp_aborts(t5):
    """-np 2 without a unified cache: the position bias cannot repeat over KQ split into streams."""
    devices = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 24 * GiB, 24 * GiB, "rpc")]
    with pytest.raises(BackendAbort, match=r"ggml_can_repeat.*use -kvu"):
        Estimator(t5).estimate(devices, settings_from_args("-c 4096 -ngl all -np 2".split(), tool="fit-params"))
    est = Estimator(t5).estimate(devices, settings_from_args("-c 4096 -ngl all -np 2 -kvu".split(), tool="server"))
    assert not [n for n in est.notes if n.startswith(APPROXIMATE)]
    assert any("llama-server runs its encoder only in the warm-up" in n for n in est.notes)
