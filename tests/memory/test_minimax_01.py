"""MiniMax-01 (``src/models/minimax-01.cpp``): which layers are lightning attention, the state llama.cpp keeps for
them, and the last pp reserve with one sequence that llama-server allocates and llama-fit-params does not print.
The figures against llama.cpp are in the accuracy matrix (tests/memory/accuracy.py ``mmt01-*``/``mm1-*``, the
server-log cases and Vulkan0); here what needs no llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute.approx import APPROXIMATE
from app.memory.estimator import Estimator
from app.memory.kv import context_shape, recurrent_bytes_per_layer
from app.model import open_model
from app.model.errors import MetadataError
from tests.gguf_factory import write_sparse_model
from tests.model.gguf_edit import T_ARR, T_BOOL, T_U32, apply

GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture(scope="module")
def text01(tmp_path_factory):
    return open_model(write_sparse_model("minimax-text-01", tmp_path_factory.mktemp("mm") / "mm.gguf"))


def test_every_eighth_layer_is_softmax_attention_by_default(text01, tmp_path):
    """No recurrent_layers array and no interval key: load_arch_hparams' default interval is 8 (4 is qwen35's)."""
    p = text01.params
    assert [il for il, r in enumerate(p.recurrent_layers) if not r] == list(range(7, 80, 8))
    m1 = open_model(write_sparse_model("minimax-m1-40k", tmp_path / "m1.gguf"))
    assert m1.params.recurrent_layers == p.recurrent_layers  # the same kinds from the per-layer array


def test_lightning_state_is_a_head_by_head_matrix_per_head(text01):
    """n_embd_s = 128 x 128 x 64 floats per sequence on each of the 70 lightning layers; no conv state."""
    shape = context_shape(text01.params, settings_from_args("-c 8192 -np 4".split(), tool="server"))
    per_layer = recurrent_bytes_per_layer(text01.params, shape)
    assert per_layer[0] == 128 * 128 * 64 * 4 * 4 and per_layer[7] == 0
    assert sum(per_layer) == 70 * 128 * 128 * 64 * 4 * 4


def test_llama_server_reserves_one_sequence_last(text01, monkeypatch):
    """With -np > 1 llama-server's buffers also hold the pp graph of one sequence (n_seq_tokens^2 of diagonal
    decay: 512^2 x 64 heads x 4 bytes, 64 MiB, against 4 x 128^2 x 64 x 4 with 4 sequences), which
    llama-fit-params does not print (its figures come from the first reserve); with one sequence the graphs are
    the same."""
    import app.memory.estimator as estimator

    devices = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 512 * GiB, 512 * GiB, "rpc")]
    srv = settings_from_args("-c 8192 -ngl all -np 4".split(), tool="server")
    both = Estimator(text01).estimate(devices, srv)
    assert not [n for n in both.notes if n.startswith(APPROXIMATE)]
    monkeypatch.setattr(estimator, "ONE_SEQ_RESERVE_ARCHS", frozenset())
    first = Estimator(text01).estimate(devices, srv)
    grew = both.device("RPC0").compute - first.device("RPC0").compute
    # the diagonal decay input and its scaled exp (in place) live together: 64 MiB each instead of 16 (seen: 128)
    assert grew >= 2 * (64 - 16) * MiB, grew / MiB


@pytest.mark.parametrize(
    "mutations,message",
    [
        ([["meta", "{arch}.full_attention_interval", T_U32, 0]],
         r"minimax-01\.full_attention_interval is 0, and llama\.cpp divides by it"),
        ([["meta", "{arch}.attention.recurrent_layers", T_ARR, {"arr": T_BOOL, "values": [True, False]}]],
         r"minimax-01\.attention\.recurrent_layers holds 2 values, but block_count says 4 layers"),
    ],
    ids=["zero-interval", "short-array"],
)
def test_hostile_layer_kinds_are_refused(tmp_path, tiny_models, mutations, message):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["minimax-01"]).read_bytes(), mutations))
    with pytest.raises(MetadataError, match=message):
        open_model(p)
