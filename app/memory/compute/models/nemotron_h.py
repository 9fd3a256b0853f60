"""``src/models/nemotron-h.cpp`` for ``nemotron_h`` (Nemotron Nano 2) and ``nemotron_h_moe`` (Nemotron 3 Nano), which
builds the same graph (``llama_model_nemotron_h_moe::graph`` is ``llama_model_nemotron_h::graph``).

Every layer is one of three kinds, each ``attn_norm``, the kind's block, and the residual: a Mamba2 block
(``build_mamba2_layer``, recurrent where ``head_count_kv`` and ``feed_forward_length`` are both 0), attention
without rope (Q/K/V/O, the hybrid memory's KV cache, where only ``feed_forward_length`` is 0), or an FFN-only layer:
a dense squared-ReLU MLP (``ffn_up`` -> relu -> sqr -> ``ffn_down``, ``LLM_FFN_RELU_SQR`` is two ops) or, with
experts, sigmoid routing with a selection bias (``exp_probs_b``), up-only experts with squared ReLU, normalised and
scaled weights, plus an ungated squared-ReLU shared expert added after. Without ``embeddings_nextn_masked``
(llama.cpp's default) the last layer runs on every token and the output rows are picked after the final norm,
whose full result (``h_nextn``) is itself a graph output.

With ``--spec-type draft-mtp`` the main context keeps ``n_rs_seq`` Mamba2 state snapshots per sequence
(``K = n_rs_seq + 1``: ``min(n_seq_tokens, K)`` conv-state copies and an ``SSM_SCAN`` returning K states, see
:func:`.mamba.mamba2_layer`), and ``nemotron_h_moe``'s MTP draft context runs :func:`build_mtp` over its NextN
block (``graph_mtp`` of ``src/models/nemotron-h-moe.cpp``, on a plain KV cache of that block). A latent MoE (``ffn_latent_down``/``ffn_latent_up``, Nemotron 3
Super) is built as llama.cpp builds it but was not compared.
"""

from __future__ import annotations

from ..builder import qkv, sum_experts
from ..ggml import OUTPUT, argsort_top_k, binary, concat, get_rows, mul_mat, mul_mat_id, reshape, sum_rows, unary
from . import Family
from .mamba import mamba2_layer
from .qwen35 import output_after_norm


def _relu_sqr(x):
    """``LLM_FFN_RELU_SQR``: ``ggml_relu`` then ``ggml_sqr``."""
    return unary("SQR", unary("UNARY", x))


def _mlp(b, cur, up, up_b, down, down_b):
    """``build_ffn`` without a gate, squared ReLU."""
    cur = mul_mat(b.w(up), cur)
    cur = b.add_b(cur, up_b) if up_b else cur
    cur = _relu_sqr(cur)
    cur = mul_mat(b.w(down), cur)
    return b.add_b(cur, down_b) if down_b else cur


def _moe(b, cur, router_logits, il):
    """``build_moe_ffn`` as nemotron-h calls it: given router logits, sigmoid gating, the ``exp_probs_b`` selection
    bias, up/down experts (no gate) with squared ReLU, weights normalised (``expert_weights_norm``) and scaled."""
    c, g = b.c, b.g
    n_embd, nt = cur.ne[0], cur.ne[1]
    n_exp, k = c.n_expert, c.n_expert_used
    probs = unary("UNARY", router_logits)  # sigmoid
    sel = probs
    bias = b.w(f"blk.{il}.exp_probs_b.bias")
    if bias is not None:
        sel = binary("ADD", probs, bias)
    selected = argsort_top_k(sel, k)
    weights = get_rows(reshape(probs, 1, n_exp, nt), selected)
    if c.expert_weights_norm:
        weights = reshape(weights, k, nt)
        wsum = unary("CLAMP", sum_rows(weights))
        weights = reshape(binary("DIV", weights, wsum), 1, k, nt)
    if c.expert_weights_scale:
        weights = unary("SCALE", weights)
    g.expand(weights)
    cur = reshape(cur, n_embd, 1, nt)
    up = mul_mat_id(b.w(f"blk.{il}.ffn_up_exps.weight"), cur, selected)
    experts = mul_mat_id(b.w(f"blk.{il}.ffn_down_exps.weight"), _relu_sqr(up), selected)
    experts = binary("MUL", experts, weights)
    return sum_experts(g, experts, k)


def ffn_layer(b, cur, il):
    """``build_ffn_layer``: the dense MLP, or the routed experts (through the latent projections when the model
    has them) plus the shared expert."""
    if b.w(f"blk.{il}.ffn_gate_inp.weight") is None:
        return _mlp(
            b,
            cur,
            f"blk.{il}.ffn_up.weight",
            f"blk.{il}.ffn_up.bias",
            f"blk.{il}.ffn_down.weight",
            f"blk.{il}.ffn_down.bias",
        )
    latent_down = b.w(f"blk.{il}.ffn_latent_down.weight")
    latent_up = b.w(f"blk.{il}.ffn_latent_up.weight")
    inp_latent = mul_mat(latent_down, cur) if latent_down is not None else cur
    router_logits = b.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
    moe_out = _moe(b, inp_latent, router_logits, il)
    if latent_up is not None:
        moe_out = mul_mat(latent_up, moe_out)
    shexp = _mlp(b, cur, f"blk.{il}.ffn_up_shexp.weight", "", f"blk.{il}.ffn_down_shexp.weight", "")
    return binary("ADD", moe_out, shexp)


def build(b):
    c, p = b.c, b.p
    inpL = b.inp_embd()
    out_ids = b.inp_out_ids()
    hd = p.head_dim_k
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if c.recurrent[il]:
            cur = mamba2_layer(b, cur, il)
        elif p.n_ff[il] == 0:
            q, k, v = qkv(b, il, cur, hd, hd, hd)
            cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        else:
            cur = ffn_layer(b, cur, il)
        inpL = binary("ADD", cur, inpSA)
    return output_after_norm(b, inpL, out_ids)


def build_mtp(b):
    """``graph_mtp`` of nemotron-h-moe.cpp over the one NextN block: the draft token's embedding and the target's
    hidden state (``mtp_h_input``), RMS-normed, concatenated and projected by ``eh_proj`` (no positions: NoPE); the
    attention sub-layer on the MTP context's KV cache plus the residual; the output rows picked before the MoE
    (``crop_before_ffn``: the context's ``embeddings_nextn`` is masked); ``post_attention_norm``, the routed
    experts plus the shared expert and the residual; the head's own LayerNorm (``LLM_NORM``, ``h_nextn``, a graph
    output) and the LM head."""
    p = b.p
    il = b.layers[0]
    tokens = b.inp("inp_tokens", "i32", (b.nt,))
    tok = get_rows(b.w(f"blk.{il}.nextn.embed_tokens.weight") or b.w("token_embd.weight"), tokens)
    h = b.inp("mtp_h_input", "f32", (p.n_embd, b.nt))
    out_ids = b.inp_out_ids()
    h_norm = b.norm(h, f"blk.{il}.nextn.hnorm.weight", il)
    e_norm = b.norm(tok, f"blk.{il}.nextn.enorm.weight", il)
    cur = b.mm(f"blk.{il}.nextn.eh_proj.weight", concat(e_norm, h_norm, 0))
    inpSA = cur
    cur = b.norm(cur, f"blk.{il}.attn_norm.weight", il)
    hd = p.head_dim_k
    q, k, v = qkv(b, il, cur, hd, hd, hd)
    cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
    cur = get_rows(binary("ADD", cur, inpSA), out_ids)
    residual = cur
    cur = b.norm(cur, f"blk.{il}.post_attention_norm.weight", il)
    router_logits = b.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
    shexp = _mlp(b, cur, f"blk.{il}.ffn_up_shexp.weight", "", f"blk.{il}.ffn_down_shexp.weight", "")
    latent_down = b.w(f"blk.{il}.ffn_latent_down.weight")
    latent_up = b.w(f"blk.{il}.ffn_latent_up.weight")
    moe_out = _moe(b, mul_mat(latent_down, cur) if latent_down is not None else cur, router_logits, il)
    if latent_up is not None:
        moe_out = mul_mat(latent_up, moe_out)
    cur = binary("ADD", binary("ADD", moe_out, shexp), residual)
    cur = binary("MUL", unary("NORM", cur), b.w(f"blk.{il}.nextn.shared_head_norm.weight"))
    cur.flags = cur.fl0 = OUTPUT  # h_nextn
    head = b.w(f"blk.{il}.nextn.shared_head_head.weight") or b.w("output.weight") or b.w("token_embd.weight@output")
    logits = mul_mat(head, cur)
    logits.flags = logits.fl0 = OUTPUT
    b.g.expand(logits)
    return logits


# checked against llama-fit-params --fit-print (full-size Nemotron-Nano-9B-v2 / 12B-v2, Nemotron-3-Nano-30B-A3B: CPU
# and 1-3 RPC, -ngl partial, -cmoe/-ncmoe, -np 2-4, flash attention on/off, q8_0 KV, -ub 256/1024) and llama-server
# -lv 4 (tiny models): tests/memory/accuracy.py, test_accuracy_llama.py
FAMILY = Family(
    name="nemotron_h",
    build=build,
    exact=frozenset({"nemotron_h", "nemotron_h_moe"}),
    build_mtp=build_mtp,
    mtp_exact=frozenset({"nemotron_h_moe"}),
    rs_seq=True,
)
