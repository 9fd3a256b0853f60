"""Falcon-H1 and Jamba facts the accuracy matrix rests on: which layers hold a KV cache and a recurrent state, how
big the state is (``llama_hparams::n_embd_r``/``n_embd_s``), and which block each tensor goes to."""

from __future__ import annotations

from app.memory import compute
from app.memory.kv import ContextShape, has_kv_layers, kv_bytes_per_layer, recurrent_bytes_per_layer, state_is_modelled
from app.command.parse import settings_from_args
from app.model import Role, open_model
from app.speed.predict import SpeedFacts
from tests.gguf_factory import write_tiny_model

# 4096 cells in 2 streams of 2048, 2 sequences, ubatch 512, flash attention on
SHAPE = ContextShape(4096, 2048, 2, 2, False, 2048, 512, 0, True, 2)


def test_falcon_h1_every_layer_has_kv_and_state(tmp_path):
    """falcon-h1: attention and Mamba2 side by side in every layer, so every layer is recurrent (``is_recr_impl``
    all true) and every layer also has a KV cache (the hybrid memory's filters both accept every layer)."""
    m = open_model(write_tiny_model("falcon-h1", tmp_path / "f.gguf"))
    p = m.params
    assert p.recurrent_layers == [True] * 4 and has_kv_layers(p) == [True] * 4
    # K and V: 2 KV heads of 32 (key_length, not n_embd / n_head), f16, 2048 cells x 2 streams
    assert kv_bytes_per_layer(p, settings_from_args([]), SHAPE) == [2 * (2 * 32 * 2) * 2048 * 2] * 4
    # conv: (d_conv - 1) x (d_inner + 2 n_group d_state) = 3 x (128 + 2 x 2 x 16); ssm: d_state x d_inner = 16 x 128
    assert recurrent_bytes_per_layer(p, SHAPE) == [(3 * 192 + 16 * 128) * 2 * 4] * 4
    assert state_is_modelled(p) and compute.unchecked_note("falcon-h1", True) is None
    assert m.block_of("blk.0.ssm_in.weight").role is Role.SSM
    assert m.block_of("blk.0.ssm_norm.weight").role is Role.SSM
    assert m.block_of("blk.0.attn_q.weight").role is Role.ATTN
    assert m.block_of("blk.0.ffn_norm").role is Role.ATTN  # the loader names it without ".weight"
    assert m.block_of("blk.3.ffn_gate.weight").role is Role.FFN
    # the speed model reads every layer's K and V per decoded token (2 KV heads x (32 + 32) f16 values, 4 layers)
    facts = SpeedFacts(m)
    assert facts.kv_bytes_per_cell == 2.0 * 4 * 2 * (32 + 32)
    assert facts.attn_flops_per_cell == 2.0 * 4 * 4 * (32 + 32)


def test_jamba_mamba_layers_have_state_attention_layers_kv(tmp_path):
    """jamba: a layer is recurrent iff ``head_count_kv[il]`` is 0; the Mamba-1 state is (d_conv - 1) x d_inner
    (no groups) plus d_state x d_inner f32 per sequence."""
    m = open_model(write_tiny_model("jamba", tmp_path / "j.gguf"))
    p = m.params
    assert p.n_head_kv == [0, 0, 2, 0]
    assert p.recurrent_layers == [True, True, False, True]
    assert has_kv_layers(p) == [False, False, True, False]
    state = (3 * 128 + 16 * 128) * 2 * 4
    assert recurrent_bytes_per_layer(p, SHAPE) == [state, state, 0, state]
    assert state_is_modelled(p) and compute.unchecked_note("jamba", True) is None
    assert m.block_of("blk.0.ssm_x.weight").role is Role.SSM
    assert m.block_of("blk.0.ssm_dt_norm.weight").role is Role.SSM
    assert m.block_of("blk.2.attn_k.weight").role is Role.ATTN
    assert m.block_of("blk.1.ffn_up_exps.weight").role is Role.EXPERTS
    assert m.block_of("blk.0.ffn_up.weight").role is Role.FFN
