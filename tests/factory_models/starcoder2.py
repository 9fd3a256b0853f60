"""StarCoder2 (``starcoder2``): ``load_arch_tensors`` / ``load_arch_hparams`` of ``src/models/starcoder2.cpp``.

Every layer: ``attn_norm`` weight and bias (a layer norm; ``attention.layer_norm_epsilon`` is required), Q/K/V
with biases, ``attn_output`` with its bias, ``ffn_norm`` weight and bias, ``ffn_up``/``ffn_down`` with biases (no
gate, GELU); ``output_norm`` weight and bias; ``output.weight`` optional (tied head). The rope spans the whole head
(the graph asserts n_rot == head_dim).
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import ModelSpec, _attn_qkvo, _common_kv, _n_vocab, register


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head, n_kv = hp["n_layer"], hp["n_embd"], int(hp["n_head"]), int(hp["n_head_kv"])
    hd = n_embd // n_head
    n_ff = int(hp["n_ff"])
    _common_kv(s, hp, nl)
    s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    s.add("token_embd.weight", (n_embd, _n_vocab(hp)))
    s.add("output_norm.weight", (n_embd,), "norm")
    s.add("output_norm.bias", (n_embd,), "bias")
    if not hp.get("tied_embeddings"):
        s.add("output.weight", (n_embd, _n_vocab(hp)))
    for i in range(nl):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        s.add(p + "attn_norm.bias", (n_embd,), "bias")
        _attn_qkvo(s, i, n_embd, n_embd, hd * n_kv, hd * n_kv, bias=True, out_bias=True)
        s.add(p + "ffn_norm.weight", (n_embd,), "norm")
        s.add(p + "ffn_norm.bias", (n_embd,), "bias")
        s.add(p + "ffn_up.weight", (n_embd, n_ff))
        s.add(p + "ffn_up.bias", (n_ff,), "bias")
        s.add(p + "ffn_down.weight", (n_ff, n_embd))
        s.add(p + "ffn_down.bias", (n_embd,), "bias")


register(
    "starcoder2",
    build=_build,
    tiny=dict(n_ff=256, rope_base=100000.0),
    sparse={
        # bigcode/starcoder2-3b: 30 layers of 3072, 24 query / 2 KV heads, intermediate 12288, vocabulary 49152,
        # rope theta 999999.4, 16384 positions, tied embeddings
        "starcoder2-3b": dict(
            name="starcoder2-3b", n_layer=30, n_embd=3072, n_head=24, n_head_kv=2, n_ff=12288, n_ctx_train=16384,
            rope_base=999999.4420358813, n_vocab=49152, tied_embeddings=True, quant="q4_k_m", file_type=15),
        # bigcode/starcoder2-15b: 40 layers of 6144, 48 query / 4 KV heads, intermediate 24576, rope theta 1e5
        "starcoder2-15b": dict(
            name="starcoder2-15b", n_layer=40, n_embd=6144, n_head=48, n_head_kv=4, n_ff=24576, n_ctx_train=16384,
            rope_base=100000.0, n_vocab=49152, quant="q4_k_m", file_type=15),
    },
)
