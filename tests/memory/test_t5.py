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


def test_a_shallower_decoder_runs_its_own_layers(tmp_path):
    """decoder_block_count 4 under 12 encoder layers: the decoder's last layer is layer 3 (its own kind), the
    8 other layers have a cache and no decoder op; more decoder than encoder layers is refused as llama.cpp fails
    (no device for a decoder layer past the encoder's)."""
    from pathlib import Path

    from app.model.errors import MetadataError
    from tests.model.gguf_edit import T_U32, apply

    m = open_model(write_sparse_model("t5-efficient-base-dl4", tmp_path / "dl4.gguf"))
    assert (m.params.n_layer, m.params.dec_n_layer) == (12, 4)
    facts = Estimator(m).compute_facts
    assert facts["kinds"][3] != facts["kinds"][2] and facts["kinds"][4] != facts["kinds"][3]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(apply(Path(m.path).read_bytes(), [["meta", "{arch}.decoder_block_count", T_U32, 13]]))
    with pytest.raises(MetadataError, match=r"decoder_block_count is 13, more than block_count \(12\)"):
        open_model(bad)


def test_layers_of_one_structure_share_a_kind_but_the_graph_is_not_cut(t5):
    """The layer number is not part of a layer's structure (enc.blk.N / dec.blk.N included): Flan-T5's 24 layers
    are 3 kinds (layer 0 holds the relative-position bias tables, the decoder's last layer keeps only the output
    rows). The graph is replayed uncut all the same: every layer's bias is gathered on layer 0's device, whose peak
    grows with the layers, so a drag preview gives the exact figures."""
    est = Estimator(t5)
    kinds = est.compute_facts["kinds"]
    assert len(set(kinds)) == 3 and len(set(kinds[1:23])) == 1
    assert est.compute_facts["uncut"]
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 48 * GiB, 48 * GiB, "rpc") for i in range(3)]
    s = settings_from_args("-c 4096 -ngl all -ts 1,2,1".split(), tool="fit-params")
    quick, full = est.estimate(devices, s, quick=True), Estimator(t5).estimate(devices, s)
    assert [d.compute for d in quick.devices] == [d.compute for d in full.devices]


def test_its_output_buffer_holds_the_embeddings_too(t5):
    """output_reserve with has_embd for T5: (n_vocab + n_embd) floats per output row."""
    from app.memory.kv import output_buffer_bytes

    shape = context_shape(t5.params, settings_from_args("-c 4096 -np 1".split(), tool="server"))
    assert output_buffer_bytes(t5.params, shape) == (32128 + 1024) * 4


def test_decode_speed_reads_the_decoder_only(t5):
    """llama-server's decodes never run the encoder: its layers are not read per token."""
    from app.speed.predict import SpeedFacts

    facts = SpeedFacts(t5)
    enc = [i for i, t in enumerate(t5.tensors) if t.name.startswith("enc.")]
    dec = [i for i, t in enumerate(t5.tensors) if t.name.startswith("dec.blk.")]
    assert enc and all(facts.read_per_token[i] == 0 and facts.flops_per_token[i] == 0 for i in enc)
    assert all(facts.read_per_token[i] == t5.tensors[i].nbytes for i in dec)
