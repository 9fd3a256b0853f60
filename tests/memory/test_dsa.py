"""DSA (DeepSeek-V3.2 ``deepseek32``, GLM-5 ``glm-dsa``): which layers run the lightning indexer, the indexer's
own K cache, its blocks, and the indexer-types key llama.cpp refuses. The compute figures are compared with
llama.cpp in tests/memory/accuracy.py (``dsv32-*``, ``glm5-*``) and test_accuracy_llama.py (server logs)."""

from __future__ import annotations

import subprocess

import pytest

from app.command.parse import settings_from_args
from app.memory.kv import context_shape, kv_bytes_per_layer
from app.model import MetadataError, open_model
from app.model.blocks import Role
from tests import gguf_factory as gf


def test_shared_layers_cache_no_indexer_keys(tmp_path):
    m = open_model(gf.write_tiny_model("glm-dsa", tmp_path / "g.gguf"))  # indexer_types [1, 0, 1]
    p = m.params
    assert p.nextn_layers == 1 and p.indexer_full == [True, False, True, False]  # the MTP block: no DSA cache
    assert (p.indexer_head_count, p.indexer_head_size, p.indexer_top_k) == (4, 64, 256)
    s = settings_from_args("-c 4096 -np 2 -fa on".split(), tool="fit-params")
    kv = kv_bytes_per_layer(p, s, context_shape(p, s))
    mla = (64 + 16) * 2 * 4096  # kv_lora_rank + n_rot, f16, 2 streams of 2048 cells
    lid = 64 * 2 * 4096  # one indexer key head of 64
    assert kv == [mla + lid, mla, mla + lid, 0]


def test_deepseek32_indexes_every_layer_and_its_tensors_are_attention(tmp_path):
    m = open_model(gf.write_tiny_model("deepseek32", tmp_path / "d.gguf"))
    assert m.params.indexer_full == [True, True, True, False]
    for b in m.blocks:
        if any(".indexer." in t.name for t in b.tensors):
            assert b.role is Role.ATTN, b
    n_idx = sum(1 for b in m.blocks for t in b.tensors if ".indexer." in t.name)
    assert n_idx == 4 * 5  # the MTP block has its own (skipped by llama.cpp without MTP)


def test_glm_5_2_default_pattern_without_the_key(tmp_path):
    # llama_model_glm_dsa::load_arch_hparams: a 1M context means GLM-5.2, whose indexer runs on layers 0, 1, 2, 6, ..
    spec = gf.model_spec("glm-dsa", n_layer=8, n_ctx_train=1048576, indexer_types=None)
    m = open_model(gf.write_spec(spec, tmp_path / "g52.gguf"))
    assert m.params.indexer_full == [True, True, True, False, False, False, True, False, False]


def _wrong_length(tmp_path):
    spec = gf.model_spec("glm-dsa", n_ctx_train=4096)
    spec.set("{arch}.attention.indexer.types", [True, False])
    return gf.write_spec(spec, tmp_path / "bad.gguf")


def test_indexer_types_of_the_wrong_length_are_refused(tmp_path):
    with pytest.raises(MetadataError, match="wrong array length; expected 3, got 2"):
        open_model(_wrong_length(tmp_path))


@pytest.mark.llama
def test_llama_cpp_refuses_the_same_file(tmp_path, llama_bin):
    path = _wrong_length(tmp_path)
    # llama-fit-params keeps its load errors to itself; llama-server logs them and exits
    out = subprocess.run([str(llama_bin / "llama-server"), "-m", str(path), "-c", "256", "--port", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "wrong array length; expected 3, got 2" in out.stdout + out.stderr
