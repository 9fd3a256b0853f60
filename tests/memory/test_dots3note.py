"""dots3-note (``src/models/dots3note.cpp``): the DSA cache of the full layers beside a window-sized SWA cache
(``llama_kv_cache_dsa_iswa``), the indexer where ``attention.indexer.types`` says, and the keys llama.cpp requires.
The figures against llama.cpp are in the accuracy matrix (tests/memory/accuracy.py ``d3n-*``, the server-log cases
and Vulkan0); here what needs no llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.memory.kv import context_shape, kv_bytes_per_layer
from app.model import open_model
from app.model.errors import MetadataError
from tests.gguf_factory import write_sparse_model
from tests.model.gguf_edit import T_U32, apply


@pytest.fixture(scope="module")
def d3n(tmp_path_factory):
    return open_model(write_sparse_model("dots3-note", tmp_path_factory.mktemp("d3n") / "d.gguf"))


def test_the_indexer_runs_on_the_full_layers_only(d3n):
    """Every 4th of the 46 trunk layers is full attention with the indexer; the NextN block (layer 46) has none."""
    p = d3n.params
    assert [il for il, f in enumerate(p.indexer_full) if f] == list(range(3, 46, 4))
    assert [il for il, s in enumerate(p.swa_layers[:46]) if not s] == list(range(3, 46, 4))
    assert not p.indexer_full[46]


def test_full_layers_cache_latent_and_indexer_keys_over_the_context_sliding_ones_the_window(d3n):
    """A full layer: (512 + 64) latent+rope and 128 indexer keys per cell over 8192 cells; a sliding one: 256 + 64
    over the window's cells, pad(4096 + 512, 256) = 4608 (K only: MLA keeps no V)."""
    s = settings_from_args("-c 8192 -np 1".split(), tool="server")
    shape = context_shape(d3n.params, s)
    per_layer = kv_bytes_per_layer(d3n.params, s, shape)
    assert shape.size_swa == 4608
    assert per_layer[3] == (512 + 64 + 128) * 2 * 8192
    assert per_layer[0] == (256 + 64) * 2 * 4608
    assert per_layer[46] == 0  # the NextN block: no cache without MTP


@pytest.mark.parametrize(
    "mutations,message",
    [
        ([["del", "{arch}.attention.indexer.types"]], r"attention\.indexer\.types is missing"),
        ([["meta", "{arch}.attention.indexer.types", T_U32, 1]], r"indexer\.types holds u32 .*reads it as arr"),
        ([["del", "{arch}.attention.sliding_window_pattern"]], r"sliding_window_pattern is missing"),
        ([["del", "{arch}.attention.kv_lora_rank_swa"]], r"kv_lora_rank_swa is missing"),
        ([["del", "{arch}.rope.freq_base_swa"]], r"rope\.freq_base_swa is missing"),
    ],
    ids=["no-indexer-types", "scalar-indexer-types", "no-pattern", "no-swa-rank", "no-swa-rope"],
)
def test_missing_keys_are_refused(tmp_path, tiny_models, mutations, message):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["dots3note"]).read_bytes(), mutations))
    with pytest.raises(MetadataError, match=message):
        open_model(p)
