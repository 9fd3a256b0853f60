"""PLaMo 2 (``plamo2``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/plamo2.cpp``: the
``ssm.conv_kernel`` / ``inner_size`` / ``state_size`` / ``time_step_rank`` (the Mamba heads) / ``group_count`` (0)
keys; a layer is a Mamba layer where ``head_count_kv`` is 0. Mamba layers: ``ssm_in`` (n_embd x 2 d_inner),
``ssm_conv1d`` (no bias), ``ssm_x`` (d_inner x dt_dim + 2 d_state, dt_dim = max(64, n_embd / 16)), ``ssm_dt``
(dt_dim x heads) with bias, ``ssm_a`` / ``ssm_d`` (heads), the B/C/dt norms; attention layers: a fused
``attn_qkv``, per-head Q/K norm weights (head x heads), ``attn_output``. Every layer: the post norms (named
without ``.weight``), ``ffn_norm`` and a fused SwiGLU FFN (``ffn_up`` 2 x feed_forward_length); ``output``
optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    hd = int(hp["head_dim"])
    d_inner, d_conv, d_state, heads = (int(hp[k]) for k in ("ssm_d_inner", "ssm_d_conv", "ssm_d_state", "ssm_heads"))
    every = int(hp["attn_every"])
    kv = [int(hp["n_head_kv"]) if il % every == every - 1 else 0 for il in range(nl)]
    ff = int(hp["n_ff"])
    dt_dim = max(64, n_embd // 16)
    hp = dict(hp, n_head_kv=kv)
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.key_length", hd)
    s.set("{arch}.attention.value_length", hd)
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", heads)
    s.set("{arch}.ssm.group_count", 0)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        if kv[i] == 0:
            s.add(p + "ssm_in.weight", (n_embd, 2 * d_inner))
            s.add(p + "ssm_conv1d.weight", (d_conv, d_inner))
            s.add(p + "ssm_x.weight", (d_inner, dt_dim + 2 * d_state))
            s.add(p + "ssm_dt.weight", (dt_dim, heads))
            s.add(p + "ssm_dt.bias", (heads,), "bias")
            s.add(p + "ssm_a", (heads,), "ssm_a")
            s.add(p + "ssm_d", (heads,), "ones")
            s.add(p + "ssm_out.weight", (d_inner, n_embd))
            s.add(p + "ssm_dt_norm", (dt_dim,), "norm")
            s.add(p + "ssm_b_norm", (d_state,), "norm")
            s.add(p + "ssm_c_norm", (d_state,), "norm")
        else:
            s.add(p + "attn_qkv.weight", (n_embd, hd * (n_head + 2 * kv[i])))
            s.add(p + "attn_q_norm.weight", (hd, n_head), "norm")
            s.add(p + "attn_k_norm.weight", (hd, kv[i]), "norm")
            s.add(p + "attn_output.weight", (hd * n_head, n_embd))
        s.add(p + "post_attention_norm", (n_embd,), "norm")
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_down.weight", (ff, n_embd))
        s.add(p + "ffn_up.weight", (n_embd, 2 * ff))
        s.add(p + "post_ffw_norm", (n_embd,), "norm")


register(
    "plamo2",
    build=_build,
    tiny=dict(head_dim=16, n_head_kv=2, n_ff=128, ssm_d_inner=128, ssm_d_conv=4, ssm_d_state=16, ssm_heads=8,
              attn_every=2),
    sparse={
        # pfnet/plamo-2-8b (its exact layout is not available here): 32 layers of 4096, attention on every 2nd
        # (32 query / 4 KV heads of 128), Mamba elsewhere (d_inner 8192 in 64 heads, state 64, conv 4), a
        # fused SwiGLU FFN of 16384, vocabulary 100000
        "plamo2-8b": dict(
            name="plamo-2-8b", n_layer=32, n_embd=4096, n_head=32, n_head_kv=4, head_dim=128, n_ff=16384,
            ssm_d_inner=8192, ssm_d_conv=4, ssm_d_state=64, ssm_heads=64, attn_every=2, n_ctx_train=32768,
            n_vocab=100000, quant="q4_k_m", file_type=15),
    },
)
