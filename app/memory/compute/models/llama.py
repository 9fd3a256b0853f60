"""The llama-style decoder (``src/models/llama.cpp``, ``qwen3moe.cpp``, ``granite-hybrid.cpp`` ...), which is
also the graph used for any architecture without a module of its own."""

from __future__ import annotations

from ...kv import NO_MEMORY_ARCHS
from ..builder import qkv, rope
from ..ggml import OUTPUT, binary, get_rows, unary
from ..mtp import mtp_head, mtp_input
from . import Family
from .mamba import mamba2_layer

#: the llama layer with layer norms (LLM_NORM): ``src/models/orion.cpp`` (with biases), ``olmo.cpp`` (OLMo 1:
#: neither weight nor bias, the norm alone), ``dbrx.cpp`` (weights only), ``jais.cpp`` / ``jais2.cpp`` (biases
#: everywhere)
LAYER_NORM = frozenset({"orion", "olmo", "dbrx", "jais", "jais2"})
#: the q/k norms after rope, not before: ``src/models/maincoder.cpp``
ROPE_THEN_QK_NORM = frozenset({"maincoder"})
#: a squared-ReLU FFN without a gate (LLM_FFN_RELU_SQR, LLM_FFN_SEQ): ``src/models/arcee.cpp``
RELU_SQR_FFN = frozenset({"arcee", "jais2"})


def _has_rope(p) -> bool:
    """``src/models/refact.cpp`` and ``jais.cpp`` never rope (ALiBi); ``baichuan.cpp`` ropes its 7B (32 layers)
    only: the 13B and other depths take ALiBi or nothing, and build no ``inp_pos``. ALiBi's bias is a
    ``ggml_soft_max_ext`` / ``ggml_flash_attn_ext`` parameter: no tensor of its own."""
    return not (p.arch in ("refact", "jais") or (p.arch == "baichuan" and p.n_layer != 32))


#: build_attn and build_ffn are passed no biases even where the loader reads them: ``src/models/refact.cpp``
NO_BIAS_ARCHS = frozenset({"refact"})
#: graphs without ``inp_out_ids``: every token's logits, no ``get_rows`` on the last layer, and ``ggml_rope``
#: without frequency factors: ``src/models/cogvlm.cpp`` (its visual-expert weights are loaded, unused by text)
ALL_OUTPUTS_ARCHS = frozenset({"cogvlm"})
#: rope on the sliding-window layers only (the global ones are NoPE): ``src/models/maple.cpp``
SWA_ROPE_ONLY_ARCHS = frozenset({"maple"})


def build(b):
    """Llama-style decoder: llama/mixtral, qwen2/3(+moe), glm4moe, granitehybrid, and the fallback for others.

    ``src/models/llama.cpp`` / ``qwen3moe.cpp`` / ``granite-hybrid.cpp``: norm, Q/K/V (+ q/k norm), rope,
    attention (or a Mamba2 block on recurrent layers), residual, norm, dense FFN or MoE (+ shared expert),
    residual. Tensors a model lacks (biases, norms) are skipped.
    """
    c, p = b.c, b.p
    if p.arch in LAYER_NORM:
        b.norm_op = "NORM"
    inpL = b.inp_embd()
    roped = _has_rope(p)
    pos = b.inp_pos() if roped else None
    all_outputs = p.arch in ALL_OUTPUTS_ARCHS
    out_ids = None if all_outputs else b.inp_out_ids()
    iswa = c.has_swa
    biased = p.arch not in NO_BIAS_ARCHS
    for il in b.layers:
        if il in c.layer_inp_out:  # res->t_layer_inp[il] = inpL, set as an output (llama_set_embeddings_layer_inp)
            inpL.flags = inpL.fl0 = OUTPUT
        inpSA = inpL
        if c.recurrent[il]:
            cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
            cur = mamba2_layer(b, cur, il)
        else:
            cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
            hd_k = p.head_dim_k_swa if c.is_swa(il) else p.head_dim_k
            hd_v = p.head_dim_v_swa if c.is_swa(il) else p.head_dim_v
            q, k, v = qkv(b, il, cur, hd_k, hd_k, hd_v)
            qn = b.w(f"blk.{il}.attn_q_norm.weight")
            kn = b.w(f"blk.{il}.attn_k_norm.weight")
            freqs = None if all_outputs else b.w("rope_freqs.weight")
            if not roped or (p.arch in SWA_ROPE_ONLY_ARCHS and not c.is_swa(il)):
                if qn is not None:
                    q = b.norm(q, qn, il)
                if kn is not None:
                    k = b.norm(k, kn, il)
            elif p.arch in ROPE_THEN_QK_NORM:
                q, k = rope(q, pos, freqs), rope(k, pos, freqs)
                q = b.norm(q, qn, il) if qn is not None else q
                k = b.norm(k, kn, il) if kn is not None else k
            else:
                if qn is not None:
                    q = b.norm(q, qn, il)
                q = rope(q, pos, freqs)
                if kn is not None:
                    k = b.norm(k, kn, il)
                k = rope(k, pos, freqs)
            if p.arch in NO_MEMORY_ARCHS:  # the diffusion decoders: non-causal attention over the ubatch alone
                cur = b.attn_no_cache(
                    il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias")
                )
            else:
                cur = b.attn(
                    il,
                    q,
                    k,
                    v,
                    b.w(f"blk.{il}.attn_output.weight"),
                    b.w(f"blk.{il}.attn_output.bias") if biased else None,
                    sinks=b.w(f"blk.{il}.attn_sinks.weight"),
                    iswa_order=iswa,
                )
        if il == b.last and out_ids is not None:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        ffn_inp = binary("ADD", cur, inpSA)
        ffn_norm = f"blk.{il}.ffn_norm.weight"
        if ffn_norm not in c.names and f"blk.{il}.attn_output_norm.weight" in c.names:
            ffn_norm = f"blk.{il}.attn_output_norm.weight"  # dbrx.cpp: the FFN's norm is attn_out_norm
        cur = b.norm(ffn_inp, ffn_norm, il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            moe_out = b.moe(
                cur,
                il,
                gating=c.gating,
                norm_w=c.expert_weights_norm,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
            cur = b.shexp(cur, moe_out, il)
        else:
            cur = b.ffn(cur, "ffn", il, act="relu_sqr" if p.arch in RELU_SQR_FFN else "silu", bias=biased)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


def build_mtp(b):
    """``graph_mtp`` of glm4-moe.cpp (GLM-4.5/4.6/4.7's MTP block): :mod:`app.memory.compute.mtp`'s input and
    head around one decoder block: Q/K/V with their biases, q/k norms where present, rope, attention with the
    output projection on the MTP context's KV cache, post-attention norm, the routed experts (sigmoid with the
    selection bias) plus the shared expert."""
    c = b.c
    il = b.layers[0]
    cur, pos, out_ids = mtp_input(b, il)
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    q, k, v = qkv(b, il, cur, b.p.head_dim_k, b.p.head_dim_k, b.p.head_dim_v)
    qn, kn = b.w(f"blk.{il}.attn_q_norm.weight"), b.w(f"blk.{il}.attn_k_norm.weight")
    if qn is not None:
        q = b.norm(q, qn, il)
    if kn is not None:
        k = b.norm(k, kn, il)
    cur = b.attn(il, rope(q, pos), rope(k, pos), v, b.w(f"blk.{il}.attn_output.weight"), None)
    ffn_inp = binary("ADD", cur, inpSA)
    cur = b.norm(ffn_inp, f"blk.{il}.post_attention_norm.weight", il)
    moe_out = b.moe(
        cur,
        il,
        gating=c.gating,
        norm_w=c.expert_weights_norm,
        w_scale=c.expert_weights_scale,
        probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
    )
    cur = binary("ADD", b.shexp(cur, moe_out, il), ffn_inp)
    return mtp_head(b, cur, il, out_ids)


FAMILY = Family(
    name="llama",
    build=build,
    exact=frozenset(
        {
            "llama",
            "qwen2",
            "qwen2moe",
            "qwen3",
            "qwen3moe",
            "glm4moe",
            "granite",
            "granitemoe",
            "granitehybrid",
            "exaone",
            # the same layer under other names (tests/factory_models/llama_style.py)
            "internlm2",
            "xverse",
            "qwen",
            "orion",
            "deepseek",
            "olmo",
            "dbrx",
            "minicpm",  # granite's graph (llama_model_minicpm::graph = llama_model_granite::graph)
            "arcee",  # AFM: the FFN a squared ReLU without a gate
            "pangu-embedded",  # a bias on the attention output
            "nanbeige",  # one pass over the layers (num_loops > 1 is not modelled, the estimate says so)
            "maincoder",  # q/k norms after rope
            "mellum",  # qwen3moe's layer, sliding-window layers 3 of every 4 where the file has a window
            "baichuan",  # Baichuan 1/2: rope on the 7B (32 layers), ALiBi (no rope) on the 13B
            "refact",  # ALiBi (no rope); the biases the loader reads are not used by the graph
            "jais",  # layer norms with biases, a fused qkv with its bias, ALiBi (no rope)
            "jais2",  # layer norms with biases, rope, a squared-ReLU FFN without a gate
            "bailingmoe",  # Ling 1.x: softmax experts on every layer plus the gated shared experts
            "cogvlm",  # CogVLM's text path: fused qkv, every token's logits
            "maple",  # q/k norms, rope on the SWA layers only, normalised softmax experts on every layer
            # the diffusion decoders: no memory, non-causal attention over the ubatch (builder.attn_no_cache)
            "llada",
            "dream",
            "llada-moe",
            "rnd1",
        }
    ),
    fallback=True,
    build_mtp=build_mtp,
    mtp_exact=frozenset({"glm4moe"}),
)
