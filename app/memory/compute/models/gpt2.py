"""``src/models/gpt2.cpp`` (GPT-2), ``starcoder.cpp`` (StarCoder, SantaCoder, StarCoderBase) and ``falcon.cpp``
(Falcon 7B/40B/180B), ``mpt.cpp`` (MPT), ``bloom.cpp`` (BLOOM) and ``gptneox.cpp`` (Pythia, GPT-NeoX):
layer norms with biases (``LLM_NORM``: ggml's NORM, never in place), a fused ``attn_qkv``,
attention over a plain KV cache scaled by 1/sqrt(head_dim), a GELU FFN over ``ffn_up`` without a gate.

- gpt2, starcoder: no rope; the learned position embedding is gathered for the batch's positions
  (``get_rows(position_embd, inp_pos)``) and added to the token embedding; biases on Q/K/V, the attention output,
  the FFN; ``ffn_inp`` = attention + input, ``ffn_norm``, FFN, residual.
- mpt, bloom: the same layer without rope or position embeddings (ALiBi: a parameter of the softmax); mpt's
  position embeddings where the file has them, its Q/K/V clamped where ``attention.clamp_kqv`` is set; bloom's
  layer norm of the embeddings (``token_embd_norm``, layer 0's).
- codeshell (CodeShell), starcoder2 (StarCoder2; llama.cpp does not read its sliding window), nemotron
  (Nemotron-3/4, Minitron): the same layer with rope and without position embeddings; nemotron's FFN is relu squared (``LLM_FFN_RELU_SQR``: relu, then sqr).
- gptneox: rope; a parallel residual with ``use_parallel_residual``.
- falcon: a parallel block, NeoX rope. ``attn_norm`` feeds the FFN and, unless the layer has ``attn_norm_2``
  (40B/180B: a second norm of the layer input for the attention), Q/K/V; on the last layer the attention output,
  the layer input and ``attn_norm`` keep only the output rows; layer output = FFN + attention + input.

Final norm with its bias, then the head (``output.weight``, else the token embedding duplicated).
"""

from __future__ import annotations

from ..builder import qkv, rope
from ..ggml import binary, get_rows, mul_mat, unary
from . import Family


def _gpt2(b, inpL, pos, out_ids):
    """gpt2, starcoder, and (no rope either: ALiBi biases the softmax, no tensor of its own) mpt and bloom."""
    hd = b.p.head_dim_k
    if b.w("position_embd.weight") is not None:  # mpt: optional
        inpL = binary("ADD", inpL, get_rows(b.w("position_embd.weight"), pos))
    if b.w("token_embd_norm.weight") is not None:  # bloom: the embeddings' layer norm, created with layer 0
        inpL = b.norm(inpL, "token_embd_norm.weight", 0, mb=b.w("token_embd_norm.bias"))
    roped = b.p.arch in ("codeshell", "nemotron", "starcoder2")
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        if roped:
            q = rope(q, pos)
            k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        ffn_inp = binary("ADD", cur, inpL)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        if b.p.arch == "nemotron":  # LLM_FFN_RELU_SQR: relu, then sqr (two ops, both in place)
            cur = b.add_b(mul_mat(b.w(f"blk.{il}.ffn_up.weight"), cur), f"blk.{il}.ffn_up.bias")
            cur = unary("SQR", unary("UNARY", cur))
            cur = b.add_b(mul_mat(b.w(f"blk.{il}.ffn_down.weight"), cur), f"blk.{il}.ffn_down.bias")
        else:
            cur = b.ffn(cur, "ffn", il, act="gelu", par=False)
        inpL = binary("ADD", cur, ffn_inp)
    return inpL


def _gptneox(b, inpL, pos, out_ids):
    """gptneox (Pythia, GPT-NeoX-20B): rope; with ``use_parallel_residual`` the FFN reads ``ffn_norm`` of the layer
    input and the layer output is FFN + input + attention, else the sequential ``ffn_inp`` residual."""
    hd = b.p.head_dim_k
    par = bool(b.c.meta.get("gptneox.use_parallel_residual"))
    for il in b.layers:
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"))
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
        if par:
            attn_out = cur
            cur = b.norm(inpL, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
            cur = b.ffn(cur, "ffn", il, act="gelu", par=False)
            cur = binary("ADD", cur, inpL)
            inpL = binary("ADD", cur, attn_out)
        else:
            ffn_inp = binary("ADD", cur, inpL)
            cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
            cur = b.ffn(cur, "ffn", il, act="gelu", par=False)
            inpL = binary("ADD", cur, ffn_inp)
    return inpL


def _falcon(b, inpL, pos, out_ids):
    hd = b.p.head_dim_k
    for il in b.layers:
        attn_norm = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
        if b.w(f"blk.{il}.attn_norm_2.weight") is not None:
            cur = b.norm(inpL, f"blk.{il}.attn_norm_2.weight", il, mb=b.w(f"blk.{il}.attn_norm_2.bias"))
        else:
            cur = attn_norm
        q, k, v = qkv(b, il, cur, hd, hd, hd)
        q = rope(q, pos)
        k = rope(k, pos)
        cur = b.attn(il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpL = get_rows(inpL, out_ids)
            attn_norm = get_rows(attn_norm, out_ids)
        ffn_inp = cur
        cur = b.ffn(attn_norm, "ffn", il, act="gelu", par=False)
        cur = binary("ADD", cur, ffn_inp)
        inpL = binary("ADD", cur, inpL)
    return inpL


def build(b):
    b.norm_op = "NORM"  # every build_norm here is LLM_NORM
    inpL = b.inp_embd()
    # bloom and an mpt without position embeddings (ALiBi) build no positions input
    pos = b.inp_pos() if b.p.arch not in ("bloom", "mpt") or b.w("position_embd.weight") is not None else None
    out_ids = b.inp_out_ids()
    layers = {"falcon": _falcon, "gptneox": _gptneox}.get(b.p.arch, _gpt2)
    inpL = layers(b, inpL, pos, out_ids)
    return b.output(inpL)


# checked against llama-fit-params --fit-print (full-size GPT-2 XL, StarCoderBase 15B, Falcon 7B and 40B on the
# CPU, 1-3 RPC devices and Vulkan0) and llama-server -lv 4 (tiny models): tests/memory/accuracy.py,
# test_accuracy_llama.py.
FAMILY = Family(
    name="gpt2",
    build=build,
    exact=frozenset({"gpt2", "starcoder", "falcon", "mpt", "bloom", "gptneox", "codeshell", "nemotron", "starcoder2"}),
)
