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
    assert not any(b.role is Role.GLOBAL for b in m.blocks), [b.id for b in m.blocks if b.role is Role.GLOBAL]
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


@pytest.mark.parametrize("spec", list(gf.SPARSE_SPECS))
def test_full_size_models(spec, sparse_models):
    m = open_model(sparse_models[spec])
    assert sum(b.nbytes for b in m.blocks) == m.tensor_bytes
    total, active = m.n_params / 1e9, m.n_params_active / 1e9
    expected = {"qwen3-30b-a3b": (30.5, 3.3), "qwen3-235b-a22b": (235, 22), "deepseek-v3": (671, 37),
                "gpt-oss-120b": (117, 5.1)}[spec]
    assert total == pytest.approx(expected[0], rel=0.03)
    assert active == pytest.approx(expected[1], rel=0.12)
