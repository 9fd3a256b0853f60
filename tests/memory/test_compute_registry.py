"""The graph replay's registry: one module per architecture family, found by listing the package; names map to
families, unknown names to the llama-style fallback; architectures not confirmed say so."""

from __future__ import annotations

import sys
import textwrap

import pytest

from app.memory import compute
from app.memory.compute import models
from app.memory.kv import state_is_modelled
from app.model import ModelParams, open_model
from tests.gguf_factory import write_tiny_model


def test_every_family_module_is_found_and_names_are_unique():
    names = [f.name for f in compute.FAMILIES]
    assert len(names) == len(set(names))
    assert {"llama", "gemma3", "olmoe", "deepseek2", "openai-moe", "llama4", "mamba2"} <= set(names)
    for f in compute.FAMILIES:
        for arch in f.exact | f.also:
            assert compute.family_of(arch) is f, arch
    assert compute.CHECKED_ARCHS == frozenset(a for f in compute.FAMILIES for a in f.exact)


def test_unknown_architectures_use_the_llama_fallback():
    fb = compute.family_of("no-such-arch")
    assert fb.fallback and fb.name == "llama"
    assert "no-such-arch" not in compute.REGISTRY


def test_adding_an_architecture_is_adding_a_file(tmp_path, monkeypatch):
    (tmp_path / "zz_newarch.py").write_text(
        textwrap.dedent(
            """
            from app.memory.compute.models import Family

            def build(b):
                raise NotImplementedError

            FAMILY = Family(name="zz-new", build=build, exact=frozenset(), also=frozenset({"zz-new-arch"}))
            """
        )
    )
    monkeypatch.setattr(models, "__path__", [*models.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, f"{models.__name__}.zz_newarch", raising=False)
    found = models._discover()  # what the package does when it is imported
    sys.modules.pop(f"{models.__name__}.zz_newarch", None)
    new = [f for f in found if f.name == "zz-new"]
    assert len(new) == 1 and new[0].also == {"zz-new-arch"}
    assert [f.name for f in found if f.name != "zz-new"] == [f.name for f in compute.FAMILIES]


@pytest.mark.parametrize("arch", sorted(compute.CHECKED_ARCHS))
def test_exact_architectures_have_no_unchecked_note(arch):
    assert compute.unchecked_note(arch) is None


@pytest.mark.parametrize(
    "arch,graph",
    [("qwen4exp", "a llama-style graph (no module of its own)"), ("t5encoder", "a llama-style graph (no module of its own)")],
)
def test_other_architectures_say_so(arch, graph):
    note = compute.unchecked_note(arch)
    assert note is not None and note.startswith(compute.UNCHECKED)
    assert f"'{arch}'" in note and graph in note and "Verify" in note


def test_an_architecture_built_by_a_family_but_not_compared_says_so(monkeypatch):
    """A module may build an architecture it was not checked for (``also``): the note names its graph."""
    from app.memory.compute import models

    fam = models.Family(name="zz-family", build=lambda b: None, exact=frozenset(), also=frozenset({"zz-arch"}))
    monkeypatch.setitem(models.REGISTRY, "zz-arch", fam)
    note = compute.unchecked_note("zz-arch")
    assert note is not None and note.startswith(compute.UNCHECKED)
    assert "'zz-arch'" in note and "the zz-family graph" in note and "Verify" in note


def test_recurrent_state_not_modelled_is_said(tmp_path):
    hybrid = open_model(write_tiny_model("granitehybrid", tmp_path / "g.gguf")).params
    assert state_is_modelled(hybrid)
    mamba = open_model(write_tiny_model("mamba2", tmp_path / "m.gguf")).params
    assert state_is_modelled(mamba) and all(mamba.recurrent_layers)
    rwkv = ModelParams(arch="qwen4exp", n_layer=2, recurrent_layers=[True, True])  # not modelled
    assert not state_is_modelled(rwkv)
    note = compute.unchecked_note("qwen4exp", state_is_modelled(rwkv))
    assert note is not None and "recurrent state is not modelled" in note
    dense = open_model(write_tiny_model("llama", tmp_path / "l.gguf")).params
    assert state_is_modelled(dense)
    # gated delta-net hybrids: the state is sized like Mamba's from the ssm.* keys, on the recurrent layers only
    q35 = open_model(write_tiny_model("qwen35", tmp_path / "q.gguf")).params
    assert state_is_modelled(q35) and q35.recurrent_layers == [True, True, True, False]
    assert compute.unchecked_note("qwen35", state_is_modelled(q35)) is None


def test_delta_net_layers_and_blocks(tmp_path):
    """qwen35: attention.recurrent_layers (or full_attention_interval, default 4) marks the gated delta-net
    layers; the MTP block is neither recurrent nor cached; linear-attention projections are recurrent blocks."""
    from app.model import Role

    m = open_model(write_tiny_model("qwen35", tmp_path / "a.gguf", recurrent_layers=[False, True, True, False]))
    assert m.params.recurrent_layers == [False, True, True, False]
    assert m.block_of("blk.1.attn_qkv.weight").role is Role.SSM
    assert m.block_of("blk.1.attn_gate.weight").role is Role.SSM
    assert m.block_of("blk.1.ssm_norm.weight").role is Role.SSM
    assert m.block_of("blk.0.attn_q.weight").role is Role.ATTN
    mtp = open_model(write_tiny_model("qwen35moe", tmp_path / "b.gguf", n_nextn=1)).params
    assert mtp.n_layer == 5 and mtp.nextn_layers == 1
    assert mtp.recurrent_layers == [True, True, True, False, False]
    from app.memory.kv import has_kv_layers

    assert has_kv_layers(mtp) == [False, False, False, True, False]


def test_short_conv_layers_state_and_blocks(tmp_path):
    """lfm2/lfm2moe: head_count_kv 0 marks the short-conv layers (recurrent, no KV); their state is
    (l_cache - 1) x n_embd f32 per sequence (llama_hparams::n_embd_r, no s state); shortconv tensors are
    recurrent blocks; token_embd_norm is the output norm (LLM_TENSOR_OUTPUT_NORM_LFM2), placed with the output."""
    from app.memory.kv import ContextShape, has_kv_layers, recurrent_bytes_per_layer
    from app.model import Role

    m = open_model(write_tiny_model("lfm2moe", tmp_path / "l.gguf"))
    p = m.params
    assert p.recurrent_layers == [True, True, False, True] and p.shortconv_l_cache == 3
    assert has_kv_layers(p) == [False, False, True, False]
    assert state_is_modelled(p) and compute.unchecked_note("lfm2moe", state_is_modelled(p)) is None
    shape = ContextShape(4096, 2048, 2, 2, False, 2048, 512, 0, True, 2)
    assert recurrent_bytes_per_layer(p, shape) == [2 * 64 * 2 * 4, 2 * 64 * 2 * 4, 0, 2 * 64 * 2 * 4]
    assert m.block_of("blk.0.shortconv.in_proj.weight").role is Role.SSM
    assert m.block_of("blk.0.shortconv.conv.weight").role is Role.SSM
    assert m.block_of("blk.2.attn_q.weight").role is Role.ATTN
    assert m.block_of("token_embd_norm.weight").role is Role.OUTPUT
    assert m.block_of("blk.1.ffn_gate_exps.weight").role is Role.EXPERTS
    assert m.block_of("blk.0.ffn_gate.weight").role is Role.FFN
    dense = open_model(write_tiny_model("lfm2", tmp_path / "d.gguf")).params
    assert dense.n_layer_dense_lead == dense.n_layer  # llama.cpp: every LFM2 layer's FFN is dense


def test_new_moe_families_blocks(tmp_path):
    """phimoe's LongRoPE factors are global tensors (one copy per buffer type in llama.cpp); bailingmoe2's NextN
    block is in the file but neither cached nor built."""
    from app.memory.kv import has_kv_layers
    from app.model import Role

    phi = open_model(write_tiny_model("phimoe", tmp_path / "p.gguf", rope_factors=True))
    assert phi.block_of("rope_factors_long.weight").role is Role.GLOBAL
    assert phi.block_of("output.bias").role is Role.OUTPUT
    ling = open_model(write_tiny_model("bailingmoe2", tmp_path / "b.gguf")).params
    assert ling.n_layer == 4 and ling.nextn_layers == 1
    assert has_kv_layers(ling) == [True, True, True, False]
    assert {compute.family_of(a).name for a in ("phimoe", "dots1", "bailingmoe2", "lfm2", "lfm2moe")} == {
        "phimoe", "dots1", "lfm2"}
