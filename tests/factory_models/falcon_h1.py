"""TII Falcon-H1 (``falcon-h1``): attention and a Mamba2 block side by side in every layer, then a SwiGLU FFN.

``llama_model_falcon_h1::load_arch_tensors`` (``src/models/falcon-h1.cpp``) reads, per layer: ``ssm_in`` (d_inner +
conv_dim + n_head, conv_dim = d_inner + 2 n_group d_state), ``ssm_conv1d`` (+ optional bias), ``ssm_dt.bias``,
``ssm_a``, ``ssm_d``, an optional grouped ``ssm_norm`` (``mamba_rms_norm`` in the HF config), ``ssm_out``; Q/K/V/O
(``create_tensor_qkv``, head_dim from ``attention.key_length``), ``attn_norm``, ``ffn_norm`` and a gated FFN.
``load_arch_hparams`` requires the RMS epsilon and the five ``ssm.*`` keys (``time_step_rank`` is the number of
Mamba2 heads). The converter (``conversion/falcon_h1.py``) folds the muP multipliers into the weights, so the graph
has no extra scales; it writes ``key_length``/``value_length`` (head_dim is not n_embd / n_head).
"""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"]), int(hp["n_head_kv"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    d_inner, d_conv, d_state = int(hp["ssm_d_inner"]), int(hp["ssm_d_conv"]), int(hp["ssm_d_state"])
    n_group, n_ssm_head = int(hp["ssm_n_group"]), int(hp["ssm_n_head"])
    if d_inner % n_ssm_head:
        raise ValueError(f"ssm_d_inner {d_inner} is not a multiple of ssm_n_head {n_ssm_head}")
    conv_dim = d_inner + 2 * n_group * d_state
    gf._common_kv(s, dict(hp, head_dim=hd), nl)
    s.set("{arch}.ssm.conv_kernel", d_conv)
    s.set("{arch}.ssm.inner_size", d_inner)
    s.set("{arch}.ssm.state_size", d_state)
    s.set("{arch}.ssm.time_step_rank", n_ssm_head)
    s.set("{arch}.ssm.group_count", n_group)
    gf._embeddings(s, hp)
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "ssm_in.weight", (n_embd, d_inner + conv_dim + n_ssm_head))
        s.add(p + "ssm_conv1d.weight", (d_conv, conv_dim), "ones")  # f32 in every policy
        s.add(p + "ssm_conv1d.bias", (conv_dim,), "bias")
        s.add(p + "ssm_dt.bias", (n_ssm_head,), "bias")
        s.add(p + "ssm_a", (1, n_ssm_head), "ssm_a")
        s.add(p + "ssm_d", (1, n_ssm_head), "ones")
        if hp["ssm_norm"]:
            s.add(p + "ssm_norm.weight", (d_inner // n_group, n_group), "norm")
        s.add(p + "ssm_out.weight", (d_inner, n_embd))
        gf._attn_qkvo(s, i, n_embd, hd * n_head, hd * n_kv, hd * n_kv)
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm", (n_embd,), "norm")  # tn(LLM_TENSOR_FFN_NORM, i): no ".weight"
        gf._dense_ffn(s, i, n_embd, int(hp["n_ff"]))


gf.register(
    "falcon-h1",
    build=build,
    # tiny: head_dim 32 over 4 heads (not n_embd / n_head, as in the real ones), two groups, the optional ssm_norm
    tiny=dict(n_layer=4, head_dim=32, n_ff=128, ssm_d_conv=4, ssm_d_inner=128, ssm_d_state=16, ssm_n_group=2,
              ssm_n_head=8, ssm_norm=True),
    sparse={
        # Falcon-H1-7B (config.json): 44 layers, hidden 3072, 12 query / 2 KV heads of 128, MLP 12288, Mamba2 24
        # heads of 128 (d_ssm 3072), 1 group, state 256, conv 4, vocabulary 130048, 262144 positions, untied
        # output; the grouped Mamba norm as in Falcon-H1R-7B (mamba_rms_norm true)
        "falcon-h1-7b": dict(name="Falcon-H1-7B-Instruct", n_layer=44, n_embd=3072, n_head=12, n_head_kv=2,
                             head_dim=128, n_ff=12288, ssm_d_conv=4, ssm_d_inner=3072, ssm_d_state=256,
                             ssm_n_group=1, ssm_n_head=24, ssm_norm=True, n_ctx_train=262144, rope_base=1e11,
                             n_vocab=130048, quant="q4_k_m", file_type=15),
        # Falcon-H1-1.5B: 24 layers, hidden 2048, 8 query / 2 KV heads of 128, MLP 4608, Mamba2 48 heads of 64
        # (d_ssm 3072), 1 group, state 256, conv 4, vocabulary 65537, 131072 positions; no Mamba norm
        "falcon-h1-1.5b": dict(name="Falcon-H1-1.5B-Instruct", n_layer=24, n_embd=2048, n_head=8, n_head_kv=2,
                               head_dim=128, n_ff=4608, ssm_d_conv=4, ssm_d_inner=3072, ssm_d_state=256,
                               ssm_n_group=1, ssm_n_head=48, ssm_norm=False, n_ctx_train=131072, rope_base=1e11,
                               n_vocab=65537, quant="q4_k_m", file_type=15),
    },
)
