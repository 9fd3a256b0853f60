"""Mamba 1 (``mamba``: Mamba, Falcon Mamba): ``load_arch_tensors`` / ``load_arch_hparams`` of
``src/models/mamba.cpp``: the ``ssm.conv_kernel`` / ``inner_size`` / ``state_size`` / ``time_step_rank`` keys
(``ssm.dt_b_c_rms`` optional: Falcon Mamba's weightless RMS norms of dt, B and C); per layer ``ssm_in``
(n_embd x 2 d_inner), ``ssm_conv1d`` with bias, ``ssm_x`` (d_inner x dt_rank + 2 d_state), ``ssm_dt`` with bias,
``ssm_a`` (d_state x d_inner), ``ssm_d``, ``ssm_out``; ``output`` optional."""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _common_kv, _embeddings, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd = hp["n_layer"], hp["n_embd"]
    d_inner, d_conv, d_state, dt_rank = (int(hp[k]) for k in ("ssm_d_inner", "ssm_d_conv", "ssm_d_state", "ssm_dt_rank"))
    _common_kv(s, hp, nl)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", dt_rank)
    if hp["dt_b_c_rms"]:
        s.set("{arch}.ssm.dt_b_c_rms", True)
    _embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "ssm_in.weight", (n_embd, 2 * d_inner))
        s.add(p + "ssm_conv1d.weight", (d_conv, d_inner))
        s.add(p + "ssm_conv1d.bias", (d_inner,), "bias")
        s.add(p + "ssm_x.weight", (d_inner, dt_rank + 2 * d_state))
        s.add(p + "ssm_dt.weight", (dt_rank, d_inner))
        s.add(p + "ssm_dt.bias", (d_inner,), "bias")
        s.add(p + "ssm_a", (d_state, d_inner), "ssm_a")
        s.add(p + "ssm_d", (d_inner,), "ones")
        s.add(p + "ssm_out.weight", (d_inner, n_embd))


register(
    "mamba",
    build=_build,
    tiny=dict(n_head=0, n_head_kv=0, n_ff=0, ssm_d_conv=4, ssm_d_inner=128, ssm_d_state=16, ssm_dt_rank=8,
              dt_b_c_rms=False),
    sparse={
        # state-spaces/mamba-2.8b-hf: 64 layers of 2560, d_inner 5120, state 16, dt rank 160, conv 4, vocabulary
        # 50280, tied
        "mamba-2.8b": dict(
            name="mamba-2.8b", n_layer=64, n_embd=2560, ssm_d_inner=5120, ssm_d_state=16, ssm_dt_rank=160,
            ssm_d_conv=4, dt_b_c_rms=False, n_ctx_train=1048576, n_vocab=50280, tied_embeddings=True,
            quant="q4_k_m", file_type=15),
        # tiiuae/falcon-mamba-7b: 64 layers of 4096, d_inner 8192, state 16, dt rank 256, RMS-normed dt/B/C,
        # vocabulary 65024
        "falcon-mamba-7b": dict(
            name="falcon-mamba-7b", n_layer=64, n_embd=4096, ssm_d_inner=8192, ssm_d_state=16, ssm_dt_rank=256,
            ssm_d_conv=4, dt_b_c_rms=True, n_ctx_train=1048576, n_vocab=65024, quant="q4_k_m", file_type=15),
    },
)
