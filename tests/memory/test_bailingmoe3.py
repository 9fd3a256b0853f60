"""bailingmoe3 (Ling 3.0): the KDA layers' recurrent state, the MLA layers' K-only cache, and the hparams."""

from __future__ import annotations

import pytest

from app.errors import ReadError
from app.memory import compute
from app.memory.kv import ContextShape, has_kv_layers, recurrent_bytes_per_layer, state_is_modelled
from app.model import Role, open_model
from tests import gguf_factory as gf


def test_bailingmoe3_kda_state_and_mla_layers(tmp_path):
    """head_count_kv 0 marks the KDA layers (llama_model_bailingmoe3::load_arch_hparams: is_recr = n_head_kv == 0);
    their state is n_embd_r = 3 * (d_conv - 1) * n_head * kda.head_dim (the q, k, v conv states) plus n_embd_s =
    head_dim^2 * n_head, f32 per sequence; the MLA layers cache K only (kv_lora_rank + n_rot)."""
    m = open_model(gf.write_tiny_model("bailingmoe3", tmp_path / "b.gguf"))
    p = m.params
    assert p.recurrent_layers == [True, False, True, False] and has_kv_layers(p) == [False, True, False, True]
    assert (p.kda_head_dim, p.ssm_d_conv, p.is_mla, p.head_dim_k) == (16, 4, True, 32 + 8)
    assert state_is_modelled(p) and compute.unchecked_note("bailingmoe3", True) is None
    shape = ContextShape(4096, 2048, 2, 2, False, 2048, 512, 0, True, 2)
    per_seq = 3 * 3 * 4 * 16 + 16 * 16 * 4
    assert recurrent_bytes_per_layer(p, shape) == [per_seq * 4 * 2, 0, per_seq * 4 * 2, 0]
    assert m.block_of("blk.0.ssm_conv1d_q.weight").role is Role.SSM
    assert m.block_of("blk.1.attn_kv_a_mqa.weight").role is Role.ATTN
    assert m.block_of("blk.1.ffn_up_exps.weight").role is Role.EXPERTS


def test_bailingmoe3_kda_head_dim_is_required(tmp_path):
    """load_arch_hparams reads kda.head_dim (and ssm.conv_kernel) without a default."""
    spec = gf.model_spec("bailingmoe3")
    del spec.kv["bailingmoe3.kda.head_dim"]
    with pytest.raises(ReadError, match="kda.head_dim"):
        open_model(gf.write_spec(spec, tmp_path / "bad.gguf"))


def test_bailingmoe3_shared_expert_width_defaults_to_the_experts(tmp_path):
    """n_ff_shexp = n_ff_exp * max(1, n_expert_shared) when the file has no expert_shared_feed_forward_length."""
    spec = gf.model_spec("bailingmoe3")
    del spec.kv["bailingmoe3.expert_shared_feed_forward_length"]
    p = open_model(gf.write_spec(spec, tmp_path / "s.gguf")).params
    assert p.n_ff_shexp == 32
