"""Nemotron-H (``nemotron_h``, ``nemotron_h_moe``): which layers are Mamba2, attention or FFN-only, their state,
KV and blocks, as ``llama_model_nemotron_h::load_arch_hparams`` and the hybrid memory's filters decide."""

from __future__ import annotations

from app.memory import compute
from app.memory.kv import ContextShape, has_kv_layers, recurrent_bytes_per_layer, state_is_modelled
from app.model import Role, open_model
from tests.gguf_factory import sparse_spec, write_sparse_model, write_tiny_model


def _shape(n_seq: int) -> ContextShape:
    return ContextShape(4096 * n_seq, 4096, n_seq, n_seq, False, 2048, 512, 0, True, n_seq)


def test_layer_kinds_of_the_tiny_models(tmp_path):
    """recurrent iff head_count_kv == 0 and feed_forward_length == 0: the FFN-only / MoE-only layers are neither
    recurrent nor cached, and their attn_norm stays in their own block."""
    dense = open_model(write_tiny_model("nemotron_h", tmp_path / "d.gguf"))  # M-M*-M
    p = dense.params
    assert p.recurrent_layers == [True, False, True, False, False, True]
    assert has_kv_layers(p) == [False, False, False, True, False, False]
    assert state_is_modelled(p) and compute.unchecked_note("nemotron_h", state_is_modelled(p)) is None
    assert [b.id for b in dense.blocks if b.layer == 1] == ["1:ffn"]
    assert dense.block_of("blk.1.attn_norm.weight").id == "1:ffn"
    assert dense.block_of("blk.0.attn_norm.weight").id == "0:ssm"
    assert dense.block_of("blk.3.attn_norm.weight").role is Role.ATTN
    moe = open_model(write_tiny_model("nemotron_h_moe", tmp_path / "m.gguf"))  # ME*EME
    q = moe.params
    assert q.recurrent_layers == [True, False, False, False, True, False]
    assert has_kv_layers(q) == [False, False, True, False, False, False]
    assert q.n_expert == 8 and q.n_expert_used == 2 and q.n_ff_exp == 64 and q.n_ff_shexp == 128
    assert [b.id for b in moe.blocks if b.layer == 1] == ["1:ffn", "1:experts"]
    assert moe.block_of("blk.1.ffn_up_shexp.weight").id == "1:ffn"
    assert moe.block_of("blk.1.exp_probs_b.bias").id == "1:ffn"
    assert compute.family_of("nemotron_h_moe").name == "nemotron_h"


def test_published_layer_patterns(tmp_path):
    """NVIDIA-Nemotron-Nano-9B-v2: 27 Mamba2, 4 attention, 25 MLP layers; the state per Mamba2 layer and
    sequence is (d_conv - 1) * (d_inner + 2 n_group d_state) + d_state * d_inner f32 values (n_embd_r + n_embd_s)."""
    spec = sparse_spec("nemotron-nano-9b-v2")
    p = open_model(write_sparse_model("nemotron-nano-9b-v2", tmp_path / "n9.gguf")).params
    pattern = spec.hparams["pattern"]
    assert p.recurrent_layers == [k == "M" for k in pattern]
    assert has_kv_layers(p) == [k == "*" for k in pattern]
    assert (sum(p.recurrent_layers), sum(has_kv_layers(p))) == (27, 4)
    per_layer = ((4 - 1) * (10240 + 2 * 8 * 128) + 128 * 10240) * 4
    assert recurrent_bytes_per_layer(p, _shape(2)) == [2 * per_layer if k == "M" else 0 for k in pattern]
    n3 = open_model(write_sparse_model("nemotron-3-nano-30b-a3b", tmp_path / "n3.gguf")).params
    assert (sum(n3.recurrent_layers), sum(has_kv_layers(n3))) == (23, 6)
    assert n3.n_expert == 128 and n3.n_expert_used == 6 and n3.n_ff_exp == 1856 and n3.n_ff_shexp == 3712
