"""rwkv7: the hyperparameters the state needs, the recurrent state's size, and where LN0 lives."""

from __future__ import annotations

from app.memory import compute
from app.memory.kv import ContextShape, has_kv_layers, recurrent_bytes_per_layer, state_is_modelled
from app.model import Role, open_model
from tests.gguf_factory import write_tiny_model


def test_rwkv7_state_blocks_and_ln0(tmp_path):
    """llama_hparams::n_embd_r = token_shift_count (2) x n_embd and n_embd_s = n_embd x wkv.head_size, f32, per
    sequence on every layer; no KV; token_embd_norm is created with layer 0 (LAYER_REPEATING, bid 0)."""
    m = open_model(write_tiny_model("rwkv7", tmp_path / "r.gguf"))
    p = m.params
    assert (p.n_embd, p.wkv_head_size, p.token_shift_count) == (128, 64, 2)
    assert p.recurrent_layers == [True] * 4 and has_kv_layers(p) == [False] * 4
    assert state_is_modelled(p) and compute.unchecked_note("rwkv7", True) is None
    shape = ContextShape(8192, 2048, 4, 4, False, 2048, 512, 0, True, 4)
    assert recurrent_bytes_per_layer(p, shape) == [(2 * 128 + 128 * 64) * 4 * 4] * 4
    ln0 = m.block_of("token_embd_norm.weight")
    assert (ln0.layer, ln0.role) == (0, Role.OTHER)
    assert m.block_of("token_embd.weight").role is Role.INPUT
    assert m.block_of("output_norm.bias").role is Role.OUTPUT
    assert m.block_of("blk.1.time_mix_key.weight").role is Role.SSM
    assert m.block_of("blk.1.channel_mix_key.weight").role is Role.SSM
    assert m.block_of("blk.1.attn_norm_2.bias").role is Role.ATTN  # the norms' block, as for mamba2's attn_norm


def test_rwkv7_head_size_is_required(tmp_path):
    """llama_model_rwkv7::load_arch_hparams reads wkv.head_size without a default."""
    import pytest

    from app.errors import ReadError
    from tests import gguf_factory as gf

    spec = gf.model_spec("rwkv7")
    del spec.kv["rwkv7.wkv.head_size"]
    path = gf.write_spec(spec, tmp_path / "bad.gguf")
    with pytest.raises(ReadError, match="wkv.head_size"):
        open_model(path)


def test_arwkv7_state_has_one_token_shift(tmp_path):
    """arwkv7: the converter writes token_shift_count 1, so n_embd_r = n_embd; no LN0; Qwen2's FFN blocks."""
    m = open_model(write_tiny_model("arwkv7", tmp_path / "a.gguf"))
    p = m.params
    assert (p.wkv_head_size, p.token_shift_count) == (64, 1) and state_is_modelled(p)
    assert compute.unchecked_note("arwkv7", True) is None
    shape = ContextShape(4096, 2048, 2, 2, False, 2048, 512, 0, True, 2)
    assert recurrent_bytes_per_layer(p, shape) == [(128 + 128 * 64) * 4 * 2] * 4
    assert "token_embd_norm.weight" not in {t.name for t in m.tensors}
    assert m.block_of("blk.2.ffn_up.weight").role is Role.FFN
    assert m.block_of("blk.2.time_mix_receptance.weight").role is Role.SSM


def test_rwkv6_state_and_ln0(tmp_path):
    """rwkv6: two token shifts and head_size x head_size WKV matrices like rwkv7; LN0 on layer 0."""
    m = open_model(write_tiny_model("rwkv6", tmp_path / "f.gguf"))
    p = m.params
    assert (p.wkv_head_size, p.token_shift_count) == (64, 2) and state_is_modelled(p)
    assert compute.unchecked_note("rwkv6", True) is None
    shape = ContextShape(4096, 4096, 1, 1, True, 2048, 512, 0, True, 1)
    assert recurrent_bytes_per_layer(p, shape) == [(2 * 128 + 128 * 64) * 4] * 4
    ln0 = m.block_of("token_embd_norm.bias")
    assert (ln0.layer, ln0.role) == (0, Role.OTHER)
    assert m.block_of("blk.3.time_mix_first.weight").role is Role.SSM


def test_rwkv6_time_mix_first_stays_in_host_memory_on_lavapipe(tmp_path):
    """weight_buft_supported tests time_mix_first in an RWKV_WKV6 of S = H = n_tokens = n_seqs = 123: its state
    (915 MiB) and result exceed lavapipe's 128 MiB maxStorageBufferRange, so the weight stays on the host (seen
    on v6-Finch-7B -ngl 20: 0.31 MiB moved from Vulkan0 to Host); a 4 GiB limit accepts it."""
    from app.lanes import Lane
    from app.memory.backends import refuses, weight_op

    m = open_model(write_tiny_model("rwkv6", tmp_path / "f.gguf"))
    first = next(t for t in m.tensors if t.name == "blk.1.time_mix_first.weight")
    assert weight_op(first.name) == "RWKV_WKV6"
    lavapipe = Lane("Vulkan0", "Vulkan0", 2 << 30, 2 << 30, "gpu", max_tensor_bytes=128 << 20)
    desktop = Lane("Vulkan0", "Vulkan0", 8 << 30, 8 << 30, "gpu", max_tensor_bytes=4 << 30)
    assert refuses(lavapipe, first, m.params) and not refuses(desktop, first, m.params)
    key = next(t for t in m.tensors if t.name == "blk.1.time_mix_key.weight")
    assert not refuses(lavapipe, key, m.params)


def test_rwkv6qwen2_state_gqa_and_blocks(tmp_path):
    """rwkv6qwen2 (QRWKV6): one token shift (the converter writes token_shift_count 1), n_embd_s = n_embd x
    head_size; head_count 0 but head_count_kv from Qwen2 (k/v are head_count_kv x head_size wide, no KV cache);
    no LN0, no time_mix_first; Qwen2's FFN blocks."""
    m = open_model(write_tiny_model("rwkv6qwen2", tmp_path / "q.gguf"))
    p = m.params
    assert (p.wkv_head_size, p.token_shift_count, p.n_head_kv) == (64, 1, [1] * 4) and state_is_modelled(p)
    assert p.recurrent_layers == [True] * 4 and has_kv_layers(p) == [False] * 4
    assert compute.unchecked_note("rwkv6qwen2", True) is None
    shape = ContextShape(4096, 2048, 2, 2, False, 2048, 512, 0, True, 2)
    assert recurrent_bytes_per_layer(p, shape) == [(128 + 128 * 64) * 4 * 2] * 4
    names = {t.name: t for t in m.tensors}
    assert "token_embd_norm.weight" not in names and "blk.0.time_mix_first.weight" not in names
    assert names["blk.0.time_mix_key.weight"].shape[:2] == (128, 64)
    assert m.block_of("blk.2.ffn_up.weight").role is Role.FFN
    assert m.block_of("blk.2.time_mix_key.bias").role is Role.SSM
