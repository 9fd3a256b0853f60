"""T5 (``t5``): ``load_arch_hparams`` / ``load_arch_tensors`` of ``src/models/t5.cpp`` with the names its converter
writes: an encoder (``enc.blk.N.``: RMS norms, Q/K/V/O, the relative-position bias ``attn_rel_b`` {n_head,
buckets} on layer 0 only, a gated-GELU FFN as Flan-T5's) and a decoder (``dec.blk.N.``: the same plus the cross
attention ``cross_attn_*`` over the encoder's output), ``enc.output_norm``, ``dec.output_norm`` and an untied
``output``. ``attention.relative_buckets_count`` is required; ``decoder_block_count`` defaults to
``block_count`` (a shallower decoder: t5-efficient's ``-dlN``); without ``ffn_gate`` the FFN is T5 v1.0's ReLU. The encoder's and decoder's layer N share layer N's device."""

from __future__ import annotations

from typing import Any

from tests import gguf_factory as gf


def build(s: gf.ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = int(hp["n_layer"]), int(hp["n_embd"]), int(hp["n_head"])
    hd = int(hp["head_dim"] or n_embd // n_head)
    n_ff, buckets = int(hp["n_ff"]), int(hp["rel_buckets"])
    n_dec = int(hp.get("dec_layers") or nl)
    gated = hp.get("gated", True)  # Flan-T5's gated GELU; T5 v1.0 (and t5-efficient) a ReLU FFN without a gate
    gf._common_kv(s, hp, nl)
    s.set("{arch}.attention.relative_buckets_count", buckets)
    if n_dec != nl:
        s.set("{arch}.decoder_block_count", n_dec)
    s.set("{arch}.decoder_start_token_id", 0)
    s.add("token_embd.weight", (n_embd, gf._n_vocab(hp)))
    n_qk = hd * n_head
    for pre in ("enc", "dec"):
        for i in range(nl if pre == "enc" else n_dec):
            p = f"{pre}.blk.{i}."
            attns = ("attn_", "cross_attn_") if pre == "dec" else ("attn_",)
            for a in attns:
                s.add(p + a + "norm.weight", (n_embd,), "norm")
                if i == 0 and a == "attn_":
                    s.add(p + "attn_rel_b.weight", (n_head, buckets))
                s.add(p + a + "q.weight", (n_embd, n_qk))
                s.add(p + a + "k.weight", (n_embd, n_qk))
                s.add(p + a + "v.weight", (n_embd, n_qk))
                s.add(p + a + "o.weight", (n_qk, n_embd))
            s.add(p + "ffn_norm.weight", (n_embd,), "norm")
            if gated:
                s.add(p + "ffn_gate.weight", (n_embd, n_ff))
            s.add(p + "ffn_up.weight", (n_embd, n_ff))
            s.add(p + "ffn_down.weight", (n_ff, n_embd))
        s.add(f"{pre}.output_norm.weight", (n_embd,), "norm")
    s.add("output.weight", (n_embd, gf._n_vocab(hp)))


gf.register(
    "t5",
    build=build,
    tiny=dict(n_layer=2, n_head_kv=4, n_ff=128, rel_buckets=32, n_ctx_train=512, dec_layers=None, gated=True),
    sparse={
        # google/flan-t5-large (config.json: d_model 1024, d_kv 64, 16 heads, d_ff 2816, 24 + 24 layers, 32
        # buckets, gated-gelu, untied lm_head, vocabulary 32128; the converter writes context_length 512)
        "flan-t5-large": dict(
            name="flan-t5-large", n_layer=24, n_embd=1024, n_head=16, n_head_kv=16, head_dim=64, n_ff=2816,
            rel_buckets=32, n_ctx_train=512, n_vocab=32128, rms_eps=1e-6, quant="q4_k_m", file_type=15),
        # google/t5-efficient-base-dl4 (T5 v1.0's ReLU FFN without a gate: d_model 768, 12 heads of 64, d_ff 3072,
        # 12 encoder layers and 4 decoder layers, 32 buckets, vocabulary 32128), in f16 as its small size is shared
        "t5-efficient-base-dl4": dict(
            name="t5-efficient-base-dl4", n_layer=12, dec_layers=4, gated=False, n_embd=768, n_head=12,
            n_head_kv=12, head_dim=64, n_ff=3072, rel_buckets=32, n_ctx_train=512, n_vocab=32128, rms_eps=1e-6,
            quant="f16", file_type=1),
        # google/flan-t5-xl (d_model 2048, 32 heads of 64, d_ff 5120)
        "flan-t5-xl": dict(
            name="flan-t5-xl", n_layer=24, n_embd=2048, n_head=32, n_head_kv=32, head_dim=64, n_ff=5120,
            rel_buckets=32, n_ctx_train=512, n_vocab=32128, rms_eps=1e-6, quant="q4_k_m", file_type=15),
    },
)
