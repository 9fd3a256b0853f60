"""Cohere2 MoE (``cohere2moe``, North Mini Code): ``llama_model_cohere2moe::load_arch_tensors`` /
``load_arch_hparams`` of ``src/models/cohere2moe.cpp``.

Every layer: ``attn_norm`` only (a parallel block: attention and FFN read the same normed input), Q/K/V/O without
biases (head_dim * n_head wide; ``create_tensor_qkv`` also takes one fused ``attn_qkv``); a dense SwiGLU FFN
(``feed_forward_length``) on the ``leading_dense_block_count`` first layers, else the router and the three
``*_exps`` (``expert_feed_forward_length``) plus, with ``expert_shared_count`` > 0, the ungated shared expert
(``expert_shared_feed_forward_length``, averaged with the routed output). ``block_count`` counts the NextN/MTP
blocks (``nextn_predict_layers``, ``TENSOR_SKIP`` without MTP): a full MoE block plus ``nextn.eh_proj``/``enorm``/
``hnorm``. Required: a norm epsilon (RMS here, as the converter writes), ``attention.sliding_window``,
``logit_scale``, ``leading_dense_block_count``, ``expert_feed_forward_length``; the converter writes no
``expert_gating_func`` (llama.cpp then uses sigmoid) and the sliding pattern as one bool per main layer (from
``layer_types``). ``rope.dimension_count`` must equal the head size (the graph asserts it); ``output.weight`` is
optional (tied embeddings).
"""

from __future__ import annotations

from typing import Any

from tests.gguf_factory import (
    VT,
    ModelSpec,
    _attn_qkvo,
    _common_kv,
    _dense_ffn,
    _embeddings,
    _experts,
    _n_vocab,
    _per_layer,
    _shared_expert,
    register,
)


def _build(s: ModelSpec, hp: dict[str, Any]) -> None:
    nl, n_embd, n_head = hp["n_layer"], hp["n_embd"], int(hp["n_head"])
    n_nextn = int(hp.get("n_nextn") or 0)
    nall = nl + n_nextn
    hd = int(hp["head_dim"] or n_embd // n_head)
    kv = _per_layer(hp["n_head_kv"], nall)
    n_dense = int(hp["n_layer_dense_lead"])
    n_shared = int(hp.get("n_expert_shared") or 0)
    _common_kv(s, hp, nall)
    if hp["layer_norm"]:  # only attention.layer_norm_epsilon: cohere2moe_norm_type is then LLM_NORM
        del s.kv[s.key("{arch}.attention.layer_norm_rms_epsilon")]
        s.set("{arch}.attention.layer_norm_epsilon", float(hp["rms_eps"]))
    s.set("{arch}.rope.dimension_count", hd)
    s.set("{arch}.vocab_size", _n_vocab(hp))
    s.set("{arch}.logit_scale", float(hp["logit_scale"]))
    s.set("{arch}.leading_dense_block_count", n_dense)
    s.set("{arch}.expert_weights_norm", bool(hp["expert_weights_norm"]))
    if n_shared:
        s.set("{arch}.expert_shared_count", n_shared)
        s.set("{arch}.expert_shared_feed_forward_length", int(hp["n_ff_exp"]) * n_shared)
    if hp.get("expert_gating_func"):
        s.set("{arch}.expert_gating_func", int(hp["expert_gating_func"]))
    s.set("{arch}.attention.sliding_window", int(hp["sliding_window"]))
    # convert_hf_to_gguf: [t == "sliding_attention" for t in layer_types]; North Mini Code's dense first layer is
    # global, then 3 sliding and 1 global (set_swa_pattern(4, dense_first) gives the same)
    period = int(hp["swa_period"])
    s.set("{arch}.attention.sliding_window_pattern", [i % period != 0 for i in range(nl)], VT.BOOL)
    if n_nextn:
        s.set("{arch}.nextn_predict_layers", n_nextn)
    _embeddings(s, hp)
    for i in range(nall):
        p = f"blk.{i}."
        s.add(p + "attn_norm.weight", (n_embd,), "norm")
        _attn_qkvo(s, i, n_embd, hd * n_head, hd * kv[i], hd * kv[i])
        if i < n_dense and i < nl:
            _dense_ffn(s, i, n_embd, hp["n_ff"])
        else:
            _experts(s, i, n_embd, hp["n_ff_exp"], hp["n_expert"])
            if n_shared:
                _shared_expert(s, i, n_embd, hp["n_ff_exp"] * n_shared)
        if i >= nl:
            s.add(p + "nextn.eh_proj.weight", (2 * n_embd, n_embd))
            s.add(p + "nextn.enorm.weight", (n_embd,), "norm")
            s.add(p + "nextn.hnorm.weight", (n_embd,), "norm")


register(
    "cohere2moe",
    build=_build,
    # 5 main layers (layer 0 dense and global, 1-3 sliding over 128 tokens, 4 global) + 1 NextN block, 8 experts
    # of 64 (2 used, sigmoid, normalised) + 1 shared expert
    tiny=dict(n_layer=5, n_nextn=1, head_dim=32, n_ff=128, n_expert=8, n_expert_used=2, n_ff_exp=64,
              n_expert_shared=1, n_layer_dense_lead=1, expert_weights_norm=True, sliding_window=128, swa_period=4,
              logit_scale=0.25, rms_eps=1e-5, rope_base=50000.0, layer_norm=False),
    sparse={
        # North-Mini-Code-1.0 (CohereLabs/North-Mini-Code-1.0, Cohere2MoeForCausalLM; the model card's config
        # table): 49 layers (the first dense, intermediate 3072; 13 global NoPE-except-dense + 36 sliding over
        # 4096, 3:1), hidden 2048, 32 query / 4 KV heads of 128, 128 experts of 768 (8 used, sigmoid), no shared
        # expert, vocabulary 262144, tied embeddings (logit scale), 500000 context, rope theta 50000 (30.5B)
        "north-mini-code-1.0": dict(
            name="North-Mini-Code-1.0", n_layer=49, n_nextn=0, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128,
            n_ff=3072, n_ff_exp=768, n_expert=128, n_expert_used=8, n_expert_shared=0, n_layer_dense_lead=1,
            sliding_window=4096, n_ctx_train=500000, rope_base=50000.0, n_vocab=262144, tied_embeddings=True,
            quant="q4_k_m", file_type=15),
    },
)
