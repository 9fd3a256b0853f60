"""Blocks for every architecture the factory writes, tiny and full-size."""

from __future__ import annotations

import pytest

from app.model import Role, open_model
from tests import gguf_factory as gf


@pytest.mark.parametrize("arch", gf.ARCHS)
def test_every_tensor_lands_in_one_block(arch, tiny_models):
    m = open_model(tiny_models[arch])
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes
    names = [t.name for b in m.blocks for t in b.tensors]
    assert sorted(names) == sorted(t.name for t in m.tensors)
    # the only tensors without a layer: the rope frequency factors llama.cpp creates with layer 0 and duplicates
    # for the others (rope_freqs, LongRoPE's rope_factors_long/short); any other is a classification miss
    strays = [t.name for b in m.blocks if b.role is Role.GLOBAL for t in b.tensors
              if not t.name.startswith(("rope_freqs.", "rope_factors_long.", "rope_factors_short."))]
    assert not strays, strays
    roles = {b.role for b in m.blocks}
    assert {Role.INPUT, Role.ATTN} <= roles
    p = m.params
    if p.n_expert:
        assert Role.EXPERTS in roles
        for b in m.blocks:
            if b.role is Role.EXPERTS:
                assert set(b.parts) <= {"gate", "up", "down", "gate_up"} and b.parts
                assert sum(b.part_bytes(pt) for pt in b.parts) == b.nbytes
    if arch == "granitehybrid":
        assert Role.SSM in roles and any(p.recurrent_layers)
    if arch == "deepseek2":
        assert p.is_mla and p.n_layer_dense_lead >= 1
        assert not any(b.role is Role.EXPERTS and b.layer < p.n_layer_dense_lead for b in m.blocks)
        attn = {t.name.split(".", 2)[2] for b in m.blocks if b.id == "1:attn" for t in b.tensors}
        assert {"attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight"} <= attn
    if arch == "gpt-oss":
        assert p.has_swa and any(t.name.endswith("attn_sinks.weight") for b in m.blocks if b.role is Role.ATTN
                                 for t in b.tensors)
        assert any(t.type_name == "MXFP4" for t in m.tensors)
        assert any(t.name.endswith("_exps.bias") for b in m.blocks if b.role is Role.EXPERTS for t in b.tensors)
    if arch == "glm4moe":
        assert p.nextn_layers and any(b.nextn for b in m.blocks)


# published parameter counts (total, active), billions; sparse models whose published count is not known here
# (or whose config is only approximated: gpt-oss-20b, glm-4.5-air, granite-4.0-h-small, ernie) are left out
_PUBLISHED = {"qwen3-30b-a3b": (30.5, 3.3), "qwen3-235b-a22b": (235, 22), "deepseek-v3": (671, 37),
              "gpt-oss-120b": (117, 5.1), "llama-3.1-8b": (8.03, 8.03), "mixtral-8x7b": (46.7, 12.9),
              "qwen2-57b-a14b": (57.4, 14.2), "deepseek-v2-lite": (15.7, 2.4), "llama-4-scout": (109, 17),
              "gemma-3-27b": (27.0, 27.0), "gemma-3-4b": (3.88, 3.88), "qwen3-8b": (8.2, 8.2), "qwen3-4b": (4.0, 4.0),
              "qwen2.5-7b": (7.6, 7.6), "granite-3.3-8b": (8.2, 8.2), "granite-3.1-3b-a800m": (3.3, 0.8),
              "olmoe-1b-7b": (6.9, 1.3), "ministral-3-14b": (13.5, 13.5), "seed-oss-36b": (36.2, 36.2),
              "smollm3-3b": (3.08, 3.08), "mamba2-2.7b": (2.7, 2.7), "mamba-codestral-7b": (7.3, 7.3),
              "hunyuan-a13b": (80, 13), "glm-4-32b-0414": (32, 32), "exaone-4.0-32b": (32, 32),
              "exaone-4.0-1.2b": (1.28, 1.28)}


@pytest.mark.parametrize("spec", [s for s in gf.SPARSE_SPECS if s in _PUBLISHED])
def test_full_size_models(spec, sparse_models):
    m = open_model(sparse_models[spec])
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes
    total, active = m.n_params / 1e9, m.n_params_active / 1e9
    expected = _PUBLISHED[spec]
    assert total == pytest.approx(expected[0], rel=0.03)
    assert active == pytest.approx(expected[1], rel=0.12)
