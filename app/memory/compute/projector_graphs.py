"""The compute graphs of multimodal projectors (``tools/mtmd/models/*.cpp`` over ``clip_graph`` of
``tools/mtmd/clip.cpp``), built with the mini ggml for the warmup image that ``clip_model_loader::warmup``
reserves. Scheduling and allocation are :mod:`.schedule` and :mod:`.alloc`, as for the text model.

A graph builder takes a :class:`ClipHParams` and a weight factory (``w(name) -> T or None``) and returns the
built :class:`~.ggml.Graph`. Weights are ``T`` of type ``"w"`` (the scheduler's mark of a pre-allocated
weight); :func:`wview` makes the views of weights the graphs use (``ggml_conv_2d`` reshapes the kernel, gemma3
transposes its projection).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ...model.projector import mobilenetv5_blocks
from .ggml import (
    INPUT,
    NONE,
    Graph,
    T,
    binary,
    concat,
    cont,
    get_rows,
    mul_mat,
    mul_mat_id,
    ne4,
    new,
    permute,
    reshape,
    row_size,
    sum_rows,
    transpose,
    unary,
    view,
    view_tensor,
)


@dataclass(frozen=True)
class ClipHParams:
    """``clip_hparams`` as far as the graphs' shapes depend on them."""

    n_embd: int
    n_head: int
    n_head_kv: int
    d_head: int
    n_ff: int
    n_layer: int
    patch_size: int
    image_size: int
    warmup_image_size: int
    n_merge: int
    ffn_op: str  # "gelu", "silu", "gelu_quick"
    n_wa_pattern: int = 0  # Qwen2.5-VL: every n-th layer has full attention, the others window attention
    prefix: str = "v"  # the encoder's tensor prefix: "v" (vision) or "a" (audio)
    n_mel: int = 0  # audio: mel bins (the warmup's rows)
    warmup_frames: int = 0  # audio: the warmup's frames (clip_hparams::warmup_audio_size, 3000)
    stack_factor: int = 0  # audio: frames stacked into one token (clip.audio.projector.stack_factor)
    feature_layers: tuple[int, ...] = ()  # clip.vision.feature_layer: the layers whose inputs LLaVA stacks
    wa_modes: tuple[int, ...] = ()  # MiMo-VL: clip.vision.wa_pattern_mode per layer (-1 full, 0 row, 1 column)
    #: clip.vision.wa_layer_indexes: Youtu-VL's full-attention layers; MiniCPM-V 4.6's ViT merger follows the first
    wa_layers: tuple[int, ...] = ()
    n_expert_used: int = 0  # dots.3 note's vision MoE: clip.vision.expert_used_count
    #: Granite 4 Vision: clip.vision.projector.spatial_offsets, per feature layer (-1: the block pools its windows)
    spatial_offsets: tuple[int, ...] = ()
    query_side: int = 0  # Granite 4 Vision: clip.vision.projector.query_side
    window_side: int = 0  # Granite 4 Vision: clip.vision.projector.window_side
    #: DeepSeek-OCR's SAM encoder: clip.vision.sam.block_count / head_count / embedding_length, and its local
    #: attention windows (clip.vision.window_size)
    sam_n_layer: int = 0
    sam_n_head: int = 0
    sam_n_embd: int = 0
    attn_window_size: int = 0
    query_num: int = 0  # MiniCPM-V: the resampler's learned queries (clip.minicpmv_query_num, else by version)
    conv_kernel: int = 0  # Parakeet: the conv module's depthwise kernel (clip.audio.conv_kernel_size)
    rvq_bins: tuple[int, ...] = ()  # MiMo-Audio: clip.audio.rvq.codebook_size, the bins of each quantizer
    local_layers: int = 0  # MiMo-Audio: the local transformer's blocks (clip.audio.local_block_count)
    local_group: int = 0  # MiMo-Audio: the frames one local group flattens (clip.audio.local_group_size)
    chunk_size: int = 0  # Granite Speech: the frames of one attention block (clip.audio.chunk_size)
    proj_window: int = 0  # Granite Speech: the QFormer's window of frames (clip.audio.projector.window_size)
    proj_downsample: int = 0  # Granite Speech: frames per query (clip.audio.projector.downsample_rate)
    proj_heads: int = 0  # Granite Speech: the QFormer's heads (clip.audio.projector.head_count)


def wview(w: T, ne, op: str = "RESHAPE") -> T:
    """A view of a weight: the scheduler sees a view op on a weight's buffer; its bytes are the weight's."""
    t = T("w", ne4(ne), (0, 0, 0, 0), op, [w], w.vs if w.vs is not None else w)
    t.size = w.size
    t.name = w.name + "(view)"
    return t


class _Weight(T):
    """A weight that knows its ggml type (the graphs that copy or reshape a weight need it)."""

    __slots__ = ("wty",)
    wty: str


def wtype(w: T) -> str:
    """The ggml type name of a weight made by :func:`make_weight` (f32 for others)."""
    return w.wty if isinstance(w, _Weight) else "f32"


def make_weight(name: str, shape, ty: str, nbytes: int) -> T:
    t = _Weight("w", ne4(shape), (0, 0, 0, 0), NONE, [])
    t.wty = ty
    t.name = name
    t.size = nbytes
    return t


def graph_input(ty: str, ne, name: str = "") -> T:
    """A tensor the graph reads as an input (``ggml_set_input``): positions, masks, indices, the raw image."""
    t = new(ty, ne4(ne), NONE)
    t.flags = t.fl0 = INPUT
    t.name = name
    return t


def inp_raw(ne) -> T:
    """``clip_graph::build_inp_raw``: the warmup image or audio, an f32 graph input."""
    return graph_input("f32", ne, "inp_raw")


def ropes(*positions: T):
    """The ``add_pos`` of a ViT: one ROPE per positions input (two for ``build_rope_2d``'s halves, one for M-RoPE)."""

    def add_pos(cur: T) -> T:
        for pos in positions:
            cur = new("f32", cur.ne, "ROPE", (cur, pos))
        return cur

    return add_pos


def dual_patch_conv(g: Graph, hp: ClipHParams, w, raw: T) -> T:
    """The Qwen-VL family's two patch convolutions of a still image (the temporal pair), added."""
    p = hp.patch_size
    return binary(
        "ADD", conv_2d(g, w("v.patch_embd.weight"), raw, p, p), conv_2d(g, w("v.patch_embd.weight.1"), raw, p, p)
    )


def cast(a: T, ty: str) -> T:
    """``ggml_cast``: a CPY whose second source is the result itself."""
    t = new(ty, a.ne, "CPY", (a,))
    t.src.append(t)
    t.cs = t.src
    return t


def conv_2d(g: Graph, kernel: T, inp: T, s0: int, s1: int, p0: int = 0, p1: int = 0, col_ty: str | None = None) -> T:
    """``ggml_conv_2d`` without dilation: im2col (f16, f32 for a bf16 kernel; ``col_ty`` where the graph picks
    it), a matmul against the reshaped kernel, a permuted copy."""
    kw, kh, ic, oc = kernel.ne
    ow = (inp.ne[0] + 2 * p0 - kw) // s0 + 1
    oh = (inp.ne[1] + 2 * p1 - kh) // s1 + 1
    n = inp.ne[3]
    col_ty = col_ty or ("f32" if wtype(kernel) == "bf16" else "f16")
    im2col = new(col_ty, (ic * kh * kw, ow, oh, n), "IM2COL", (kernel, inp))
    a = reshape(im2col, im2col.ne[0], im2col.ne[3] * im2col.ne[2] * im2col.ne[1])
    b = wview(kernel, (kw * kh * ic, oc))
    r = mul_mat(a, b)
    r = reshape(r, im2col.ne[1], im2col.ne[2], im2col.ne[3], oc)
    return cont(permute(r, 0, 1, 3, 2))


def conv_2d_dw(kernel: T, inp: T, s: int, p: int) -> T:
    """``ggml_conv_2d_dw`` (no dilation): the kernel as [KW, KH, 1, C], im2col (f16, f32 for a bf16 kernel) of the
    input as C images of one channel, a batched matmul, the result [OW, OH, C, N]."""
    kw, kh = kernel.ne[0], kernel.ne[1]
    channels = kernel.ne[2] * kernel.ne[3]
    new_a = wview(kernel, (kw, kh, 1, channels))
    b = reshape(inp, inp.ne[0], inp.ne[1], 1, inp.ne[2] * inp.ne[3])
    ow = (inp.ne[0] + 2 * p - kw) // s + 1
    oh = (inp.ne[1] + 2 * p - kh) // s + 1
    col_ty = "f32" if wtype(kernel) == "bf16" else "f16"
    im2col = new(col_ty, (kw * kh, ow, oh, b.ne[3]), "IM2COL", (new_a, b))
    new_b = reshape(im2col, im2col.ne[0], im2col.ne[2] * im2col.ne[1], inp.ne[2], inp.ne[3])
    a2 = wview(kernel, (kw * kh, 1, channels, 1))
    return reshape(mul_mat(a2, new_b), ow, oh, inp.ne[2], inp.ne[3])


def _norm(cur: T, w: T | None, b: T | None, rms: bool) -> T:
    cur = unary("RMS_NORM" if rms else "NORM", cur)
    if w is not None:
        cur = binary("MUL", cur, w)
    if b is not None:
        cur = binary("ADD", cur, b)
    return cur


def _add_b(cur: T, b: T | None) -> T:
    return binary("ADD", cur, b) if b is not None else cur


def flash_attn(q: T, k: T, v: T, mask: T | None = None) -> T:
    """``ggml_flash_attn_ext``: [d_head_v, n_head, n_pos, 1] f32."""
    src = (q, k, v) if mask is None else (q, k, v, mask)
    return new("f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "FLASH_ATTN_EXT", src)


def build_attn(
    g: Graph, hp: ClipHParams, wo, wo_b, q_cur, k_cur, v_cur, fa: bool, mask: T | None = None, mm=None, sinks=None
) -> T:
    """``clip_graph::build_attn``; ``sinks``: per-head attention sinks (a weight the flash attention or the softmax
    reads as one more source, with a mask)."""
    mm = mm or mul_mat
    g.expand(q_cur)  # ggml_build_forward_order: these nodes first, in this order
    g.expand(k_cur)
    g.expand(v_cur)
    q = permute(q_cur, 0, 2, 1, 3)
    k = permute(k_cur, 0, 2, 1, 3)
    if fa:
        v = permute(v_cur, 0, 2, 1, 3)
        k = cast(k, "f16")
        v = cast(v, "f16")
        if mask is not None:
            mask = cast(mask, "f16")
        cur = flash_attn(q, k, v, mask)
        if sinks is not None and mask is not None:  # ggml_flash_attn_ext_add_sinks: src[4]
            cur.src = cur.cs = [*cur.src, sinks]
        cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    else:
        v = cont(permute(v_cur, 1, 2, 0, 3))
        kq = mul_mat(k, q)
        kq = unary("SOFT_MAX", kq) if mask is None else binary("SOFT_MAX", kq, mask)
        if sinks is not None and mask is not None:  # ggml_soft_max_add_sinks: src[2]
            kq.src = kq.cs = [*kq.src, sinks]
        kqv = mul_mat(v, kq)
        cur = permute(kqv, 0, 2, 1, 3)
        cur = cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3], 1, 1)
    if wo is not None:
        cur = mm(wo, cur)
    return _add_b(cur, wo_b)


def build_ffn(cur: T, up, up_b, gate, gate_b, down, down_b, op: str, mm=None) -> T:
    mm = mm or mul_mat
    tmp = mm(up, cur) if up is not None else cur
    tmp = _add_b(tmp, up_b)
    if gate is not None:
        cur = _add_b(mm(gate, cur), gate_b)
        cur = new(cur.ty, cur.ne, "GLU", (cur, tmp))
    else:
        cur = unary("UNARY", tmp)
        if op == "relu_sqr":  # FFN_RELU_SQR: ggml_relu then ggml_sqr
            cur = unary("SQR", cur)
    if down is not None:
        cur = mm(down, cur)
    return _add_b(cur, down_b)


def _moe_ffn(cur: T, w, p: str, hp: ClipHParams) -> T:
    """``clip_graph::build_moe_ffn`` (dots.3 note's pyramid blocks): a sigmoid router (plus its selection bias),
    the top ``n_expert_used`` experts, their weights normalised, gated SiLU experts through MUL_MAT_ID, each
    token's expert outputs summed as views (one expert: a copy)."""
    n_tokens = cur.ne[1]
    gate_exps = w(p + "ffn_gate_exps.weight")
    n_expert = gate_exps.ne[2]
    n_used = min(hp.n_expert_used, n_expert)
    if n_used <= 0:
        raise ValueError("no experts used (clip.vision.expert_used_count)")
    probs = unary("UNARY", mul_mat(w(p + "ffn_gate_inp.weight"), cur))
    bias = w(p + "exp_probs_b.weight")
    sel = binary("ADD", probs, bias) if bias is not None else probs
    selected = new("i32", (n_used, sel.ne[1], sel.ne[2], sel.ne[3]), "TOP_K", (sel,))  # ggml_top_k: an op of its own
    weights = reshape(get_rows(reshape(probs, 1, n_expert, n_tokens), selected), n_used, n_tokens)
    weights = reshape(binary("DIV", weights, sum_rows(weights)), 1, n_used, n_tokens)
    x = reshape(cur, cur.ne[0], 1, n_tokens)
    gate = mul_mat_id(gate_exps, x, selected)
    up = mul_mat_id(w(p + "ffn_up_exps.weight"), x, selected)
    out = mul_mat_id(w(p + "ffn_down_exps.weight"), binary("MUL", unary("UNARY", gate), up), selected)
    out = binary("MUL", out, weights)
    strides = (out.nb[2], out.nb[2] * n_tokens, out.nb[2] * n_tokens)
    total = view(out, (out.ne[0], n_tokens, 1, 1), strides)
    for _ in range(1, n_used):
        total = binary("ADD", total, view(out, (out.ne[0], n_tokens, 1, 1), strides))
    return cont(total) if n_used == 1 else total


def layer_ffn(cur: T, w, p: str, op: str, mm=None) -> T:
    """``build_ffn`` of a ViT block ``p``: its ``ffn_up``/``ffn_gate``/``ffn_down`` weights and biases, where
    present."""
    return build_ffn(
        cur,
        w(p + "ffn_up.weight"),
        w(p + "ffn_up.bias"),
        w(p + "ffn_gate.weight"),
        w(p + "ffn_gate.bias"),
        w(p + "ffn_down.weight"),
        w(p + "ffn_down.bias"),
        op,
        mm,
    )


def mlp(w, cur: T, up: str, down: str, op: str) -> T:
    """``build_ffn`` of a projector's two-layer MLP ``up``/``down`` (each weight with its bias where present)."""
    return build_ffn(cur, w(up + ".weight"), w(up + ".bias"), None, None, w(down + ".weight"), w(down + ".bias"), op)


def build_vit(
    g: Graph,
    hp: ClipHParams,
    w,
    inp: T,
    n_pos: int,
    rms: bool,
    pos_embd: T | None,
    fa: bool,
    add_pos=None,
    mm=None,
    v_norm: bool = False,
    avgpool: bool = False,
    masks: list | None = None,
) -> T:
    """``clip_graph::build_vit`` for separate q/k/v (with or without biases and q/k norms), an optional
    ``add_pos`` on Q and K (RoPE), layer scales and post norms, no masks. ``mm``: the graph's ``build_mm``
    (Gemma 4 clamps around every matmul); ``v_norm``: Gemma 4's RMS norm of V; ``avgpool``: the audio
    encoders' pool of 2 before the post norm (``clip_model::audio_has_avgpool``); ``masks``: per layer, the
    attention mask or None (``build_vit_opts::attn_mask_layers``)."""
    if pos_embd is not None:
        inp = binary("ADD", inp, pos_embd)
    inp = reshape(inp, hp.n_embd, n_pos)
    inp_l = inp
    pre_w = w(f"{hp.prefix}.pre_ln.weight")
    if pre_w is not None:
        inp_l = _norm(inp_l, pre_w, w(f"{hp.prefix}.pre_ln.bias"), rms)
    inp_l = vit_layers(g, hp, w, inp_l, range(hp.n_layer), n_pos, rms, fa, add_pos, mm, v_norm, masks)
    if avgpool:  # audio_has_avgpool: a 1-D average pool of 2 over the positions
        cur = cont(transpose(inp_l))
        cur = new("f32", ((cur.ne[0] - 2) // 2 + 1, cur.ne[1], cur.ne[2], cur.ne[3]), "POOL_1D", (cur,))
        inp_l = cont(transpose(cur))
    post_w = w(f"{hp.prefix}.post_ln.weight")
    if post_w is not None:
        inp_l = _norm(inp_l, post_w, w(f"{hp.prefix}.post_ln.bias"), rms)
    return reshape(inp_l, hp.n_embd, inp_l.ne[1], 1)


def vit_layers(
    g: Graph,
    hp: ClipHParams,
    w,
    inp_l: T,
    layers: range,
    n_pos: int,
    rms: bool,
    fa: bool,
    add_pos=None,
    mm=None,
    v_norm: bool = False,
    masks: list | None = None,
) -> T:
    """The ``layers`` blocks of :func:`build_vit` over ``n_pos`` positions (``clip_graph::build_vit``'s layer loop;
    MiniCPM-V 4.6 runs its layers in two ranges around the ViT merger)."""
    mm = mm or mul_mat
    dh = hp.d_head
    for il in layers:
        p = f"{hp.prefix}.blk.{il}."
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), rms)
        qn, kn = w(p + "attn_q_norm.weight"), w(p + "attn_k_norm.weight")
        per_head = False
        if w(p + "attn_qkv.weight") is not None:  # fused: Q, K, V as views of one matmul's rows
            cur = _add_b(mm(w(p + "attn_qkv.weight"), cur), w(p + "attn_qkv.bias"))
            row = cur.nb[0] * dh
            q, k, v = (view(cur, (dh, hp.n_head, n_pos, 1), (row, cur.nb[1], cur.nb[1] * n_pos)) for _ in range(3))
            if qn is not None:
                q = _norm(q, qn, None, rms)
            if kn is not None:
                k = _norm(k, kn, None, rms)
        else:
            q = _add_b(mm(w(p + "attn_q.weight"), cur), w(p + "attn_q.bias"))
            k = _add_b(mm(w(p + "attn_k.weight"), cur), w(p + "attn_k.bias"))
            v = _add_b(mm(w(p + "attn_v.weight"), cur), w(p + "attn_v.bias"))
            per_head = qn is not None and qn.ne[0] == dh
            if not per_head:
                if qn is not None:
                    q = _norm(q, qn, None, rms)
                if kn is not None:
                    k = _norm(k, kn, None, rms)
            q = reshape(q, dh, hp.n_head, n_pos, 1)
            k = reshape(k, dh, hp.n_head_kv, n_pos, 1)
            v = reshape(v, dh, hp.n_head_kv, n_pos, 1)
        if per_head:
            q = _norm(q, qn, None, rms)
            if kn is not None:
                k = _norm(k, kn, None, rms)
        if add_pos is not None:
            q = add_pos(q)
            k = add_pos(k)
        if v_norm:
            v = unary("RMS_NORM", v)
        mask = masks[il] if masks is not None and il < len(masks) else None
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa, mask, mm)
        if w(p + "ls1.weight") is not None:
            cur = binary("MUL", cur, w(p + "ls1.weight"))
        if w(p + "attn_post_norm.weight") is not None:
            cur = _norm(cur, w(p + "attn_post_norm.weight"), None, rms)
        cur = binary("ADD", cur, inp_l)
        inp_l = cur
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), rms)
        if w(p + "ffn_gate_exps.weight") is not None:
            cur = _moe_ffn(cur, w, p, hp)
        else:
            cur = layer_ffn(cur, w, p, hp.ffn_op, mm)
        if w(p + "ffn_post_norm.weight") is not None:
            cur = _norm(cur, w(p + "ffn_post_norm.weight"), None, rms)
        if w(p + "ls2.weight") is not None:
            cur = binary("MUL", cur, w(p + "ls2.weight"))
        cur = binary("ADD", inp_l, cur)
        if w(p + "out_scale.weight") is not None:
            cur = binary("MUL", cur, w(p + "out_scale.weight"))
        inp_l = cur
    return inp_l


def build_inp(g: Graph, hp: ClipHParams, w, size: int) -> tuple[T, T, int]:
    """``clip_graph::build_inp``: the raw image (an input), the patch embedding, its bias. Returns (raw input,
    patches [n_embd, n_patches], n_patches)."""
    raw = inp_raw((size, size, 3, 1))
    npx = size // hp.patch_size
    n_patches = npx * npx
    inp = conv_2d(g, w("v.patch_embd.weight"), raw, hp.patch_size, hp.patch_size)
    inp = reshape(inp, n_patches, hp.n_embd, 1)
    inp = cont(transpose(inp))
    bias = w("v.patch_embd.bias")
    if bias is not None:
        inp = binary("ADD", inp, bias)
    if w("v.patch_embd.weight.1") is not None:
        raise NotImplementedError("second patch embedding")
    return raw, inp, n_patches


def build_gemma3(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_siglip::build`` for ``PROJECTOR_TYPE_GEMMA3`` (``models/siglip.cpp``)."""
    g = Graph()
    size = hp.warmup_image_size
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    cur = build_vit(g, hp, w, inp, n_patches, False, w("v.position_embd.weight"), fa)
    side = size // hp.patch_size
    k = hp.n_merge
    cur = transpose(cur)
    cur = cont(cur, side, side, hp.n_embd, 1)
    po = (side - k) // k + 1  # ggml_calc_pool_output_size without padding
    cur = new("f32", (po, po, hp.n_embd, 1), "POOL_2D", (cur,))
    cur = reshape(cur, cur.ne[0] * cur.ne[0], hp.n_embd, 1)
    cur = cont(transpose(cur))
    cur = unary("RMS_NORM", cur)
    cur = binary("MUL", cur, w("mm.soft_emb_norm.weight"))
    proj = w("mm.input_projection.weight")
    pt = wview(proj, (proj.ne[1], proj.ne[0]), "TRANSPOSE")
    pc = new(wtype(proj), pt.ne, "CONT", (pt,))
    cur = mul_mat(pc, cur)
    g.expand(cur)
    return g


def _root(t: T) -> T:
    return t.vs if t.vs is not None else t


def cont_any(a: T, *ne) -> T:
    """``ggml_cont``/``ggml_cont_Nd`` of a tensor or of a view of a weight (the copy has the weight's type)."""
    ty = wtype(_root(a)) if a.ty == "w" else a.ty
    return new(ty, ne if ne else a.ne, "CONT", (a,))


def w_reshape(a: T, *ne) -> T:
    return wview(a, ne) if a.ty == "w" else reshape(a, *ne)


def resize_position_embeddings(w, hp: ClipHParams, width: int, height: int) -> T:
    """``clip_graph::resize_position_embeddings``: the learned grid interpolated to the image's (UPSCALE)."""
    pos = w("v.position_embd.weight")
    n_side = int(pos.ne[1] ** 0.5)
    if height == n_side and width == n_side:
        return pos
    r = wview(pos, (hp.n_embd, n_side, n_side))
    r = permute(r, 2, 0, 1, 3)
    r = new(wtype(pos), (width, height, hp.n_embd, 1), "UPSCALE", (r,))
    r = permute(r, 1, 2, 0, 3)
    return cont_any(r, hp.n_embd, width * height, 1, 1)


def _merge_2x2(x: T, e: int, npx: int, npy: int) -> T:
    x = cont_any(x, e * 2, npx // 2, npy, 1)
    x = reshape(x, e * 2, npx // 2, 2, npy // 2)
    x = permute(x, 0, 2, 1, 3)
    return cont_any(x, e, npx * npy, 1, 1)


def build_qwen3vl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_qwen3vl::build`` (``models/qwen3vl.cpp``) for a still image."""
    g = Graph()
    size = hp.warmup_image_size
    e, dh = hp.n_embd, hp.d_head
    npx = size // hp.patch_size
    n_pos = npx * npx
    raw = inp_raw((size, size, 3, 1))
    inp = dual_patch_conv(g, hp, w, raw)
    inp = _merge_2x2(permute(inp, 1, 2, 0, 3), e, npx, npx)
    inp = binary("ADD", inp, w("v.patch_embd.bias"))
    pos = _merge_2x2(resize_position_embeddings(w, hp, npx, npx), e, npx, npx)
    inp = binary("ADD", inp, pos)
    positions = graph_input("i32", (n_pos * 4,))
    inp_l = inp
    pre_w = w("v.pre_ln.weight")
    if pre_w is not None:
        inp_l = _norm(inp_l, pre_w, w("v.pre_ln.bias"), False)
    merge = hp.n_merge * hp.n_merge if hp.n_merge > 0 else 4
    deep = None
    for il in range(hp.n_layer):
        p = f"v.blk.{il}."
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        cur = binary("ADD", mul_mat(w(p + "attn_qkv.weight"), cur), w(p + "attn_qkv.bias"))
        row = cur.nb[0] * dh
        q = view(cur, (dh, hp.n_head, n_pos), (row, cur.nb[1]))
        k = view(cur, (dh, hp.n_head, n_pos), (row, cur.nb[1]))
        v = view(cur, (dh, hp.n_head, n_pos), (row, cur.nb[1]))
        q = new("f32", q.ne, "ROPE", (q, positions))
        k = new("f32", k.ne, "ROPE", (k, positions))
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa)
        cur = binary("ADD", cur, inp_l)
        inp_l = cur
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
        cur = layer_ffn(cur, w, p, hp.ffn_op)
        cur = binary("ADD", inp_l, cur)
        d = f"v.deepstack.{il}."
        if w(d + "fc1.weight") is not None:
            feat = reshape(cur, e * merge, n_pos // merge, 1)
            feat = _norm(feat, w(d + "norm.weight"), w(d + "norm.bias"), False)
            feat = build_ffn(
                feat, w(d + "fc1.weight"), w(d + "fc1.bias"), None, None, w(d + "fc2.weight"), w(d + "fc2.bias"), "gelu"
            )
            deep = feat if deep is None else concat(deep, feat, 0)
        inp_l = cur
    post_w = w("v.post_ln.weight")
    if post_w is not None:
        inp_l = _norm(inp_l, post_w, w("v.post_ln.bias"), False)
    emb = reshape(inp_l, e * 4, n_pos // 4, 1)
    emb = mlp(w, emb, "mm.0", "mm.2", "gelu")
    if deep is not None:
        emb = concat(emb, deep, 0)
    g.expand(emb)
    return g


def build_ling3vl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_ling3vl::build`` (Ling 3 VL, ``models/ling3vl.cpp``): Qwen3-VL's tower (two patch convs merged
    2x2, the optional patch bias, the resized learned grid, a layer-norm ViT with M-RoPE), then the merger's norm
    alone and the ``mm.0``/``mm.2`` GELU MLP over the 2x2-merged patches."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    n_pos = npx * npx
    raw = inp_raw((size, size, 3, 1))
    inp = dual_patch_conv(g, hp, w, raw)
    inp = _merge_2x2(permute(inp, 1, 2, 0, 3), e, npx, npx)
    if w("v.patch_embd.bias") is not None:
        inp = binary("ADD", inp, w("v.patch_embd.bias"))
    pos = _merge_2x2(resize_position_embeddings(w, hp, npx, npx), e, npx, npx)
    positions = graph_input("i32", (n_pos * 4,))

    add_pos = ropes(positions)

    cur = build_vit(g, hp, w, inp, n_pos, False, pos, fa, add_pos)
    cur = _norm(cur, w("mm.input_norm.weight"), w("mm.input_norm.bias"), False)
    cur = reshape(cur, e * 4, n_pos // 4, 1)
    cur = mlp(w, cur, "mm.0", "mm.2", "gelu")
    g.expand(cur)
    return g


def build_qwen2vl(hp: ClipHParams, w, fa: bool, rms: bool = False, n_wa_pattern: int = 0) -> Graph:
    """``clip_graph_qwen2vl::build`` (``models/qwen2vl.cpp``) for a still image: Qwen2-VL (layer norms) and
    Qwen2.5-VL (RMS norms, window attention on all but every ``n_wa_pattern``-th layer); also EXAONE 4.5's
    (``models/exaone4_5.cpp``: the same with a fused, grouped-KV qkv)."""
    g = Graph()
    size = hp.warmup_image_size
    e, dh = hp.n_embd, hp.d_head
    npx = size // hp.patch_size
    n_pos = npx * npx
    raw = inp_raw((size, size, 3, 1))
    inp = dual_patch_conv(g, hp, w, raw)
    inp_l = _merge_2x2(permute(inp, 1, 2, 0, 3), e, npx, npx)
    positions = graph_input("i32", (n_pos * 4,))
    pre_w = w("v.pre_ln.weight")
    if pre_w is not None:
        inp_l = _norm(inp_l, pre_w, w("v.pre_ln.bias"), rms)
    window_mask = None
    if n_wa_pattern > 0:
        inv_idx = graph_input("i32", (n_pos // 4,))
        window_mask = graph_input("f32", (n_pos, n_pos))
        if fa:
            window_mask = cast(window_mask, "f16")
        inp_l = reshape(inp_l, e * 4, n_pos // 4)
        inp_l = get_rows(inp_l, inv_idx)
        inp_l = reshape(inp_l, e, n_pos, 1)
    for il in range(hp.n_layer):
        p = f"v.blk.{il}."
        full = (il + 1) % n_wa_pattern == 0 if n_wa_pattern > 0 else True
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), rms)
        if w(p + "attn_qkv.weight") is not None:  # EXAONE 4.5: fused qkv with grouped K/V heads, as views
            cur = _add_b(mul_mat(w(p + "attn_qkv.weight"), cur), w(p + "attn_qkv.bias"))
            row = row_size(cur.ty, dh)
            q = view(cur, (dh, hp.n_head, n_pos), (row, cur.nb[1]))
            k = view(cur, (dh, hp.n_head_kv, n_pos), (row, cur.nb[1]))
            v = view(cur, (dh, hp.n_head_kv, n_pos), (row, cur.nb[1]))
        else:
            q = binary("ADD", mul_mat(w(p + "attn_q.weight"), cur), w(p + "attn_q.bias"))
            k = binary("ADD", mul_mat(w(p + "attn_k.weight"), cur), w(p + "attn_k.bias"))
            v = binary("ADD", mul_mat(w(p + "attn_v.weight"), cur), w(p + "attn_v.bias"))
            q = reshape(q, dh, hp.n_head, n_pos)
            k = reshape(k, dh, hp.n_head, n_pos)
            v = reshape(v, dh, hp.n_head, n_pos)
        q = new("f32", q.ne, "ROPE", (q, positions))
        k = new("f32", k.ne, "ROPE", (k, positions))
        mask = None if full else window_mask
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa, mask)
        cur = binary("ADD", cur, inp_l)
        inp_l = cur
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), rms)
        cur = layer_ffn(cur, w, p, hp.ffn_op)
        inp_l = binary("ADD", inp_l, cur)
    post_w = w("v.post_ln.weight")
    if post_w is not None:
        inp_l = _norm(inp_l, post_w, w("v.post_ln.bias"), rms)
    emb = reshape(inp_l, e * 4, n_pos // 4, 1)
    emb = mlp(w, emb, "mm.0", "mm.2", "gelu")
    if n_wa_pattern > 0:
        idx = graph_input("i32", (n_pos // 4,))
        emb = reshape(emb, emb.ne[0], n_pos // 4)
        emb = get_rows(emb, idx)
        emb = reshape(emb, emb.ne[0], n_pos // 4, 1)
    g.expand(emb)
    return g


def build_glm4v(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_glm4v::build`` (GLM-4.1V/4.5V/4.6V, ``models/glm4v.cpp``): two patch convolutions merged 2x2
    as in Qwen2-VL, the patch bias and the optional post-conv RMS norm, the learned grid resized to the image (and
    merged the same way), an RMS-norm ViT with M-RoPE, the conv patch merger, the FC + layer norm + GELU and the
    gated FFN projector."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    n_pos = npx * npx
    raw = inp_raw((size, size, 3, 1))
    inp = conv_2d(g, w("v.patch_embd.weight"), raw, hp.patch_size, hp.patch_size)
    positions = graph_input("i32", (n_pos * 4,))
    inp = binary("ADD", inp, conv_2d(g, w("v.patch_embd.weight.1"), raw, hp.patch_size, hp.patch_size))
    inp = _merge_2x2(permute(inp, 1, 2, 0, 3), e, npx, npx)
    inp = binary("ADD", inp, w("v.patch_embd.bias"))
    if w("v.norm_embd.weight") is not None:
        inp = _norm(inp, w("v.norm_embd.weight"), w("v.norm_embd.bias"), True)
    pos = None
    if w("v.position_embd.weight") is not None:
        pos = _merge_2x2(resize_position_embeddings(w, hp, npx, npx), e, npx, npx)

    add_pos = ropes(positions)

    cur = build_vit(g, hp, w, inp, n_pos, True, pos, fa, add_pos)
    m = hp.n_merge
    n_tok = n_pos // m // m
    cur = cont(permute(reshape(cur, e, m, m, n_tok), 2, 0, 1, 3))
    cur = conv_2d(g, w("mm.patch_merger.weight"), cur, m, m)
    cur = reshape(cur, cur.ne[2], n_tok)
    cur = binary("ADD", cur, w("mm.patch_merger.bias"))
    cur = mul_mat(w("mm.model.fc.weight"), cur)
    cur = unary("UNARY", _norm(cur, w("mm.post_norm.weight"), w("mm.post_norm.bias"), False))
    cur = build_ffn(
        cur,
        w("mm.up.weight"),
        w("mm.up.bias"),
        w("mm.gate.weight"),
        w("mm.gate.bias"),
        w("mm.down.weight"),
        w("mm.down.bias"),
        hp.ffn_op,
    )
    g.expand(cur)
    return g


def build_minimax_m3(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_minimax_m3::build`` (``models/minimax-m3.cpp``): two patch convolutions merged ``n_merge`` x
    ``n_merge``, a layer-norm ViT with 2D NeoX RoPE (two ropes on Q and K), the per-patch GELU MLP, then the merged
    patches' GELU MLP."""
    g = Graph()
    size = hp.warmup_image_size
    e, m = hp.n_embd, hp.n_merge
    npx = size // hp.patch_size
    n_pos = npx * npx
    raw = inp_raw((size, size, 3, 1))
    inp = dual_patch_conv(g, hp, w, raw)
    inp = cont_any(permute(inp, 1, 2, 0, 3), e * m, npx // m, npx, 1)
    inp = permute(reshape(inp, e * m, npx // m, m, npx // m), 0, 2, 1, 3)
    inp = cont_any(inp, e, n_pos, 1, 1)
    pos_h = graph_input("i32", (n_pos,))
    pos_w = graph_input("i32", (n_pos,))

    rope_2d = ropes(pos_h, pos_w)  # clip_graph::build_rope_2d: one rope a half

    hp_erf = ClipHParams(**{**hp.__dict__, "ffn_op": "gelu_erf"})
    cur = build_vit(g, hp_erf, w, inp, n_pos, False, None, fa, rope_2d)
    cur = mlp(w, cur, "mm.1", "mm.2", "gelu_erf")
    cur = reshape(cur, cur.ne[0] * m * m, n_pos // (m * m))
    cur = mlp(w, cur, "mm.merger.fc1", "mm.merger.fc2", "gelu_erf")
    g.expand(cur)
    return g


def build_pixtral(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_pixtral::build`` (``models/pixtral.cpp``): RMS-norm ViT with 2D RoPE, Mistral Small 3.1's
    patch merger (an im2col over the patch grid) when present, the LLaVA MLP and one [IMG_BREAK] per row."""
    g = Graph()
    size = hp.warmup_image_size
    e, nm = hp.n_embd, max(hp.n_merge, 1)
    npx = size // hp.patch_size
    n_patches = npx * npx
    pos_h = graph_input("i32", (n_patches,))
    pos_w = graph_input("i32", (n_patches,))

    rope_2d = ropes(pos_h, pos_w)  # clip_graph::build_rope_2d: one rope a half

    _raw, inp, _n = build_inp(g, hp, w, size)
    cur = build_vit(g, hp, w, inp, n_patches, True, None, fa, rope_2d)
    merger = w("mm.patch_merger.weight")
    if merger is not None:
        cur = binary("MUL", unary("RMS_NORM", cur), w("mm.input_norm.weight"))
        cur = reshape(cur, e, npx, npx)
        cur = cont(permute(cur, 2, 0, 1, 3))
        kernel = view(cur, (nm, nm, cur.ne[2]), (0, 0))
        ow = (npx - nm) // nm + 1
        cur = new("f32", (cur.ne[2] * nm * nm, ow, ow, 1), "IM2COL", (kernel, cur))
        cur = reshape(cur, cur.ne[0], cur.ne[1] * cur.ne[2])
        cur = mul_mat(merger, cur)
    cur = mlp(w, cur, "mm.1", "mm.2", "gelu")
    brk = w("v.token_embd.img_break")
    if brk is not None:
        p_y = p_x = npx // nm
        n_text = cur.ne[0]
        tmp = reshape(cur, n_text, p_x, p_y)
        tok = new(tmp.ty, (n_text, 1, p_y), NONE)
        tok = unary("SCALE", tok)
        tok = binary("ADD", tok, brk)
        tmp = concat(tmp, tok, 1)
        cur = view(tmp, (n_text, p_x * p_y + p_y - 1), (tmp.nb[1],))
    g.expand(cur)
    return g


def build_gemma4v(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_gemma4v::build`` (``models/gemma4v.cpp``): the scaled image, the patch conv, x/y position
    tables, an RMS-norm ViT with 2D NeoX RoPE, q/k/v norms and post norms, every matmul clamped
    (``Gemma4ClippableLinear``: each loaded weight gets clamp bounds, FLT_MAX where the file has none), the
    average pooler, the optional standardisation and the projection."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    n_patches = npx * npx

    def mm(wt: T, x: T) -> T:
        return unary("CLAMP", mul_mat(wt, unary("CLAMP", x)))

    raw = inp_raw((size, size, 3, 1))
    scaled = unary("SCALE", raw)
    inp = conv_2d(g, w("v.patch_embd.weight"), scaled, hp.patch_size, hp.patch_size)
    inp = reshape(inp, n_patches, e, 1)
    inp = cont(transpose(inp))
    pos_x = graph_input("i32", (n_patches,))
    pos_y = graph_input("i32", (n_patches,))
    pe = w("v.position_embd.weight")
    tbl_x = wview(pe, (e, pe.ne[1]), "VIEW")
    tbl_y = wview(pe, (e, pe.ne[1]), "VIEW")
    inp = binary("ADD", inp, get_rows(tbl_x, pos_x))
    inp = binary("ADD", inp, get_rows(tbl_y, pos_y))

    rope_2d = ropes(pos_x, pos_y)  # clip_graph::build_rope_2d: one rope a half

    cur = build_vit(g, hp, w, inp, n_patches, True, None, fa, rope_2d, mm, v_norm=True)
    k = hp.n_merge
    cur = cont(transpose(cur), npx, npx, e, 1)
    po = (npx - k) // k + 1
    cur = new("f32", (po, po, e, 1), "POOL_2D", (cur,))
    out = npx // k
    cur = reshape(cur, out * out, e, 1)
    cur = cont(transpose(cur))
    cur = unary("SCALE", cur)
    sb, ss = w("v.std_bias"), w("v.std_scale")
    if sb is not None and ss is not None:
        cur = binary("MUL", binary("SUB", cur, sb), ss)
    cur = unary("RMS_NORM", cur)
    cur = mm(w("mm.input_projection.weight"), cur)
    g.expand(cur)
    return g


def patch_merge_permute(cur: T, e: int, width: int, height: int, sf: int) -> T:
    """``clip_graph::build_patch_merge_permute``: pixel unshuffle by ``sf`` per side (padding the grid to it)."""
    cur = reshape(cur, e, width, height)
    pw = -width % sf
    ph = -height % sf
    if pw or ph:
        cur = new(cur.ty, (e, width + pw, height + ph, 1), "PAD", (cur,))
        width += pw
        height += ph
    cur = reshape(cur, e * sf, width // sf, height)
    cur = permute(cur, 0, 2, 1, 3)
    cur = cont(cur, e * sf * sf, height // sf, width // sf, 1)
    cur = permute(cur, 0, 2, 1, 3)
    return cont(cur, cur.ne[0], cur.ne[1] * cur.ne[2], 1, 1)


def build_kimik25(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_kimik25::build`` (Kimi K2.5's MoonViT, ``models/kimik25.cpp``): the patch conv, the learned
    [C, W, H] grid resized to the image and added, a layer-norm ViT with 2D RoPE, the pixel unshuffle by
    ``n_merge``, the projection layer norm over the unshuffled rows' ``n_embd`` pieces and the GELU MLP."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    pos_h = graph_input("i32", (npx * npx,))
    pos_w = graph_input("i32", (npx * npx,))
    pe = w("v.position_embd.weight")
    if pe.ne[1] == npx and pe.ne[2] == npx:
        pos = cont_any(pe, e, npx * npx, 1, 1)
    else:
        r = permute(wview(pe, pe.ne, "VIEW"), 2, 1, 0, 3)
        r = new(wtype(pe), (npx, npx, e, 1), "UPSCALE", (r,))
        pos = cont(permute(r, 2, 1, 0, 3), e, npx * npx, 1, 1)
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    inp = binary("ADD", inp, pos)

    rope_2d = ropes(pos_w, pos_h)  # clip_graph::build_rope_2d: one rope a half

    cur = build_vit(g, hp, w, inp, n_pos, False, None, fa, rope_2d)
    sf = hp.n_merge
    cur = patch_merge_permute(cur, e, npx, npx, sf)
    dim, n_merged = cur.ne[0], cur.ne[1]
    cur = view(cur, (e, n_merged * sf * sf), (row_size(cur.ty, e),))
    cur = _norm(cur, w("mm.input_norm.weight"), w("mm.input_norm.bias"), False)
    cur = view(cur, (dim, n_merged), (row_size(cur.ty, dim),))
    cur = mlp(w, cur, "mm.1", "mm.2", "gelu")
    g.expand(cur)
    return g


def build_unshuffle_vit(hp: ClipHParams, w, fa: bool, kind: str) -> Graph:
    """The ViTs with a pixel-unshuffle merger: ``kimivl`` (Kimi-VL, ``models/kimivl.cpp``: the learned grid resized,
    2D RoPE, layer norms, then the unshuffle, a norm over its ``n_embd`` pieces and a GELU MLP), ``paddleocr``
    (``models/paddleocr.cpp``: the resized grid, M-RoPE, a norm before the unshuffle and the ``mm.1``/``mm.2``
    MLP) and ``dots_ocr`` (``models/dotsocr.cpp``: no learned grid, M-RoPE, RMS norms with ``mm.post_norm`` as
    the post norm, norm, unshuffle and the ``mm.0``/``mm.2`` erf-GELU MLP)."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    if kind == "dots_ocr":
        inner = w
        w = lambda name: inner("mm.post_norm.weight") if name == "v.post_ln.weight" else inner(name)  # noqa: E731
    if kind == "kimivl":
        pos_h = graph_input("i32", (npx * npx,))
        pos_w = graph_input("i32", (npx * npx,))

        add_pos = ropes(pos_w, pos_h)  # clip_graph::build_rope_2d: one rope a half
    else:
        positions = graph_input("i32", (npx * npx * 4,))

        add_pos = ropes(positions)

    pos = resize_position_embeddings(w, hp, npx, npx) if kind != "dots_ocr" else None
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    cur = build_vit(g, hp, w, inp, n_pos, kind == "dots_ocr", pos, fa, add_pos)
    sf = hp.n_merge
    if kind == "kimivl":
        cur = patch_merge_permute(cur, e, npx, npx, sf)
        dim, n_merged = cur.ne[0], cur.ne[1]
        cur = view(cur, (e, n_merged * sf * sf), (row_size(cur.ty, e),))
        cur = _norm(cur, w("mm.input_norm.weight"), w("mm.input_norm.bias"), False)
        cur = view(cur, (dim, n_merged), (row_size(cur.ty, dim),))
        up, down, op = "mm.1", "mm.2", "gelu"
    else:
        cur = _norm(cur, w("mm.input_norm.weight"), w("mm.input_norm.bias"), False)
        cur = patch_merge_permute(cur, e, npx, npx, sf)
        up, down, op = ("mm.1", "mm.2", hp.ffn_op) if kind == "paddleocr" else ("mm.0", "mm.2", "gelu_erf")
    cur = mlp(w, cur, up, down, op)
    g.expand(cur)
    return g


def build_llama4(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_llama4::build`` (``models/llama4.cpp``): the patch embedding as im2col (f32) and a matmul with
    the 2-D weight, the CLS row appended, a layer-norm ViT with 2D RoPE and learned positions, the CLS row cut off,
    the pixel shuffle, the two GELU adapter layers and the projection."""
    g = Graph()
    size = hp.warmup_image_size
    e, p = hp.n_embd, hp.patch_size
    npx = size // p
    n_patches = npx * npx
    n_pos = n_patches + 1
    pos_h = graph_input("i32", (n_pos,))
    pos_w = graph_input("i32", (n_pos,))
    raw = inp_raw((size, size, 3, 1))
    pw = w("v.patch_embd.weight")
    kernel = wview(pw, (p, p, 3, e))
    inp = new("f32", (3 * p * p, npx, npx, 1), "IM2COL", (kernel, raw))
    inp = reshape(mul_mat(pw, inp), e, n_patches)
    cls = w("v.class_embd")
    inp = new(inp.ty, (e, n_patches + cls.ne[1], 1, 1), "CONCAT", (inp, cls))

    rope_2d = ropes(pos_w, pos_h)  # clip_graph::build_rope_2d: one rope a half

    cur = build_vit(g, hp, w, inp, n_pos, False, w("v.position_embd.weight"), fa, rope_2d)
    cur = view(cur, (e, n_patches), (row_size(cur.ty, e),))
    sf = hp.n_merge
    cur = permute(reshape(cur, e * sf, npx // sf, npx, 1), 0, 2, 1, 3)
    cur = cont(cur, e * sf * sf, npx // sf, npx // sf, 1)
    cur = cont(cur, e * sf * sf, n_patches // sf // sf, 1, 1)
    cur = unary("UNARY", mul_mat(w("mm.model.mlp.1.weight"), cur))
    cur = unary("UNARY", mul_mat(w("mm.model.mlp.2.weight"), cur))
    cur = mul_mat(w("mm.model.fc.weight"), cur)
    g.expand(cur)
    return g


def build_deepseek4v(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_deepseek4v::build`` (DeepSeek-V4 vision, ``models/deepseek4v.cpp``): the patch conv, an
    RMS-norm ViT with 2D M-RoPE and no learned positions, the aligner's n_merge x n_merge unfold (im2col of the
    grid with a view of itself as the kernel, the grid zero-padded to the merge), the GELU MLP, the four sentinel
    rows appended and the token block gathered by the ``layout_idx`` input (``dsv4_get_block_layout``)."""
    g = Graph()
    size = hp.warmup_image_size
    e, m = hp.n_embd, hp.n_merge
    npx = size // hp.patch_size
    positions = graph_input("i32", (npx * npx * 4,))

    add_pos = ropes(positions)

    _raw, inp, n_pos = build_inp(g, hp, w, size)
    cur = build_vit(g, hp, w, inp, n_pos, True, None, fa, add_pos)
    cur = cont(permute(reshape(cur, e, npx, npx), 2, 0, 1, 3))
    pad = -npx % m
    if pad:
        cur = new(cur.ty, (npx + pad, npx + pad, e, 1), "PAD", (cur,))
    side = cur.ne[0]
    kernel = view(cur, (m, m, e), (0, 0))
    cur = new("f32", (e * m * m, side // m, side // m, 1), "IM2COL", (kernel, cur))
    cur = reshape(cur, cur.ne[0], cur.ne[1] * cur.ne[2])
    cur = mlp(w, cur, "mm.1", "mm.2", "gelu_erf")
    d_out, n_grid = cur.ne[0], cur.ne[1]
    for name in ("v.token_embd.img_start", "v.token_embd.img_end", "v.image_newline", "v.token_embd.img_pad"):
        cur = new(cur.ty, (d_out, cur.ne[1] + 1, 1, 1), "CONCAT", (cur, wview(w(name), (d_out, 1))))
    n_llm = side // m
    rows, row_len = n_llm + n_llm % 2, n_llm + 1
    pad_last = (rows // 2 * row_len) % 2 * 2
    n_out = 1 + rows * row_len + pad_last + 1  # no lead pads at warmup
    assert n_grid == n_llm * n_llm
    idx = graph_input("i32", (n_out,), "layout_idx")
    cur = get_rows(cur, idx)
    g.expand(cur)
    return g


def build_hunyuanvl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_hunyuanvl::build`` (HunyuanVL, ``models/hunyuanvl.cpp``): the patch conv, a layer-norm ViT with
    its positions as a graph input, the pre-norm, two conv layers (the merge, then 1x1) with GELU, a newline column
    repeated per row and concatenated, the projection, begin/end rows and the post-norm."""
    g = Graph()
    size = hp.warmup_image_size
    e, m = hp.n_embd, hp.n_merge
    npx = size // hp.patch_size
    pos = graph_input("f32", (e, npx * npx))
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    cur = build_vit(g, hp, w, inp, n_pos, False, pos, fa)
    cur = _norm(cur, w("mm.pre_norm.weight"), None, True)
    cur = cont(permute(reshape(cur, e, npx, npx), 2, 0, 1, 3))
    cur = conv_2d(g, w("mm.0.weight"), cur, m, m)
    if w("mm.0.bias") is not None:
        cur = binary("ADD", cur, wview(w("mm.0.bias"), (1, 1, w("mm.0.bias").ne[0])))
    cur = unary("UNARY", cur)
    cur = conv_2d(g, w("mm.2.weight"), cur, 1, 1)
    if w("mm.2.bias") is not None:
        cur = binary("ADD", cur, wview(w("mm.2.bias"), (1, 1, w("mm.2.bias").ne[0])))
    ow, oh, idim = cur.ne[0], cur.ne[1], cur.ne[2]
    nl = w("v.image_newline")
    nl = new(wtype(nl), (1, oh, idim, 1), "REPEAT", (wview(nl, (1, 1, idim, 1)),))
    cur = new(cur.ty, (ow + 1, oh, idim, 1), "CONCAT", (cur, nl))
    cur = cont(permute(cur, 1, 2, 0, 3), idim, (ow + 1) * oh, 1, 1)
    cur = mul_mat(w("mm.model.fc.weight"), cur)
    if w("mm.model.fc.bias") is not None:
        cur = binary("ADD", cur, w("mm.model.fc.bias"))
    begin, end = w("mm.image_begin"), w("mm.image_end")
    cur = new(wtype(begin), (cur.ne[0], cur.ne[1] + 1, 1, 1), "CONCAT", (wview(begin, (begin.ne[0], 1)), cur))
    cur = new(cur.ty, (cur.ne[0], cur.ne[1] + 1, 1, 1), "CONCAT", (cur, wview(end, (end.ne[0], 1))))
    cur = _norm(cur, w("mm.post_norm.weight"), None, True)
    g.expand(cur)
    return g


def build_llava(hp: ClipHParams, w, fa: bool, kind: str = "mlp") -> Graph:
    """``clip_graph_llava::build`` (``models/llava.cpp``): the patch conv, the CLS row, learned positions gathered
    by a ``positions`` input, the pre-norm, the layers up to the second-to-last (or to the deepest
    ``feature_layers``, whose inputs are stacked; every layer for GLM-Edge), then per projector ``kind``:

    - ``mlp`` (LLaVA 1.5/1.6, Granite Vision): the ``patches`` gather (the CLS dropped) and the GELU MLP
      ``mm.0``/``mm.2``; with ``mm.3`` the file is Yi-type (``mlp_norm``: two linears each followed by a layer norm);
    - ``ldp`` (MobileVLM): the gather, a GELU MLP and two MobileNet blocks (:func:`_ldp`);
    - ``ldpv2`` (MobileVLM V2): the gather, a GELU MLP, a 2x2 average pool over the 24x24 grid and the depthwise
      3x3 position-encoding conv (``ggml_conv_2d_dw``: im2col and a batched matmul) added to it;
    - ``adapter`` (GLM-Edge): no gather; a stride-2 2x2 conv, a linear, layer norm, GELU in place, SwiGLU and the
      begin/end rows."""
    g = Graph()
    size = hp.warmup_image_size
    e, dh = hp.n_embd, hp.d_head
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    cls = w("v.class_embd")
    if cls is not None:
        inp = new(inp.ty, (e, inp.ne[1] + 1, 1, 1), "CONCAT", (inp, cls))
    n_pos = n_patches + (1 if cls is not None else 0)
    positions = graph_input("i32", (n_pos,))
    inp = binary("ADD", inp, get_rows(w("v.position_embd.weight"), positions))
    inp_l = inp
    if w("v.pre_ln.weight") is not None:
        inp_l = _norm(inp_l, w("v.pre_ln.weight"), w("v.pre_ln.bias"), False)
    feats = hp.feature_layers
    last = max(feats) if feats else hp.n_layer - (0 if kind == "adapter" else 1)
    stack = []
    for il in range(last):
        if il in feats:
            stack.append(inp_l)
        p = f"v.blk.{il}."
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        q = reshape(_add_b(mul_mat(w(p + "attn_q.weight"), cur), w(p + "attn_q.bias")), dh, hp.n_head, n_pos)
        k = reshape(_add_b(mul_mat(w(p + "attn_k.weight"), cur), w(p + "attn_k.bias")), dh, hp.n_head, n_pos)
        v = reshape(_add_b(mul_mat(w(p + "attn_v.weight"), cur), w(p + "attn_v.bias")), dh, hp.n_head, n_pos)
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa)
        cur = binary("ADD", cur, inp_l)
        inp_l = cur
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
        cur = layer_ffn(cur, w, p, hp.ffn_op)
        inp_l = binary("ADD", inp_l, cur)
    if w("v.post_ln.weight") is not None:
        inp_l = _norm(inp_l, w("v.post_ln.weight"), w("v.post_ln.bias"), False)
    emb = inp_l
    if last in feats:
        stack.append(inp_l)
    if stack:
        emb = stack[0]
        for t in stack[1:]:
            emb = concat(emb, t, 0)
    if kind == "adapter":
        g.expand(_glm_edge_adapter(g, w, emb))
        return g
    emb = reshape(emb, emb.ne[0], emb.ne[1])
    patches = graph_input("i32", (n_patches,))
    emb = get_rows(emb, patches)
    if kind == "ldpv2":
        g.expand(_ldpv2(g, w, emb))
        return g
    if kind == "ldp":
        g.expand(_ldp(w, emb))
        return g
    emb = binary("ADD", mul_mat(w("mm.0.weight"), emb), w("mm.0.bias"))
    if w("mm.3.weight") is not None:  # Yi-type: load_tensors turns the type into mlp_norm
        emb = binary("ADD", binary("MUL", unary("NORM", emb), w("mm.1.weight")), w("mm.1.bias"))
        emb = unary("UNARY", emb)
        emb = binary("ADD", mul_mat(w("mm.3.weight"), emb), w("mm.3.bias"))
        emb = binary("ADD", binary("MUL", unary("NORM", emb), w("mm.4.weight")), w("mm.4.bias"))
    else:
        emb = unary("UNARY", emb)
        if w("mm.2.weight") is not None:
            emb = binary("ADD", mul_mat(w("mm.2.weight"), emb), w("mm.2.bias"))
    g.expand(emb)
    return g


def _ldpv2(g: Graph, w, emb: T) -> T:
    """MobileVLM V2's projector (``PROJECTOR_TYPE_LDPV2`` in ``models/llava.cpp``) on the gathered patches."""
    n_patch = 24  # llava.cpp's constant: the 336 / 14 grid
    mlp_0 = unary("UNARY", binary("ADD", mul_mat(w("mm.model.mlp.0.weight"), emb), w("mm.model.mlp.0.bias")))
    mlp_2 = binary("ADD", mul_mat(w("mm.model.mlp.2.weight"), mlp_0), w("mm.model.mlp.2.bias"))
    mlp_2 = cont(permute(mlp_2, 1, 0, 2, 3), n_patch, n_patch, mlp_2.ne[0], mlp_2.ne[2])
    mlp_2 = new("f32", ((n_patch - 2) // 2 + 1, (n_patch - 2) // 2 + 1, mlp_2.ne[2], mlp_2.ne[3]), "POOL_2D", (mlp_2,))
    peg = conv_2d_dw(w("mm.model.peg.0.weight"), mlp_2, 1, 1)
    peg = cont(permute(peg, 1, 2, 0, 3))  # [C, W, H]
    peg = binary("ADD", peg, w("mm.model.peg.0.bias"))
    peg = binary("ADD", peg, cont(permute(mlp_2, 1, 2, 0, 3)))
    return reshape(peg, peg.ne[0], peg.ne[1] * peg.ne[2], peg.ne[3])


def _ldp(w, emb: T) -> T:
    """MobileVLM's LDP projector (``PROJECTOR_TYPE_LDP`` in ``models/llava.cpp``) on the gathered patches: a GELU MLP
    on the 24x24 grid, then two MobileNet blocks (depthwise 3x3 conv, stride 1 then 2; channel layer norm;
    hardswish; a squeeze-excite of average pool, ReLU and hardsigmoid; a pointwise matmul and layer norm; block 1
    with its residual)."""
    n_patch = 24  # llava.cpp's constant: the 336 / 14 grid
    mlp_1 = unary("UNARY", binary("ADD", mul_mat(w("mm.model.mlp.1.weight"), emb), w("mm.model.mlp.1.bias")))
    mlp_3 = binary("ADD", mul_mat(w("mm.model.mlp.3.weight"), mlp_1), w("mm.model.mlp.3.bias"))
    mlp_3 = cont(permute(mlp_3, 1, 0, 2, 3), n_patch, n_patch, mlp_3.ne[0], mlp_3.ne[2])

    def block(x: T, n: int, stride: int) -> T:
        pre = f"mm.model.mb_block.{n}.block."
        cur = conv_2d_dw(w(pre + "0.0.weight"), x, stride, 1)
        cur = cont(permute(cur, 1, 2, 0, 3))
        cur = binary("ADD", binary("MUL", unary("NORM", cur), w(pre + "0.1.weight")), w(pre + "0.1.bias"))
        hw = unary("UNARY", cont(permute(cur, 2, 0, 1, 3)))  # hardswish
        se = new("f32", (1, 1, hw.ne[2], hw.ne[3]), "POOL_2D", (hw,))
        se = reshape(se, se.ne[0] * se.ne[1] * se.ne[2], se.ne[3])
        se = unary("UNARY", binary("ADD", mul_mat(w(pre + "1.fc1.weight"), se), w(pre + "1.fc1.bias")))  # relu
        se = unary("UNARY", binary("ADD", mul_mat(w(pre + "1.fc2.weight"), se), w(pre + "1.fc2.bias")))
        cur = binary("MUL", hw, reshape(se, 1, 1, se.ne[0], se.ne[1]))
        wd, hd = cur.ne[0], cur.ne[1]
        cur = cont(permute(reshape(cur, wd * hd, cur.ne[2], cur.ne[3]), 1, 0, 2, 3))
        cur = mul_mat(w(pre + "2.0.weight"), cur)
        cur = reshape(cur, cur.ne[0], wd, hd, cur.ne[3])
        return binary("ADD", binary("MUL", unary("NORM", cur), w(pre + "2.1.weight")), w(pre + "2.1.bias"))

    b1 = binary("ADD", mlp_3, cont(permute(block(mlp_3, 1, 1), 2, 0, 1, 3)))
    b2 = block(b1, 2, 2)
    return reshape(b2, b2.ne[0], b2.ne[1] * b2.ne[2], b2.ne[3])


def _glm_edge_adapter(g: Graph, w, emb: T) -> T:
    """GLM-Edge's adapter (``PROJECTOR_TYPE_GLM_EDGE`` in ``models/llava.cpp``) on the encoder's output."""
    grid = math.isqrt(emb.ne[1])
    cur = cont(permute(emb, 1, 0, 2, 3), grid, grid, emb.ne[0])
    cur = conv_2d(g, w("adapter.conv.weight"), cur, 2, 2)
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2], 1)
    cur = cont(permute(cur, 1, 0, 2, 3))
    cur = binary("ADD", cur, w("adapter.conv.bias"))
    cur = mul_mat(w("adapter.linear.linear.weight"), cur)
    cur = _norm(cur, w("adapter.linear.norm1.weight"), w("adapter.linear.norm1.bias"), False)
    cur = view_tensor(cur, "UNARY", [cur])  # ggml_gelu_inplace
    return _swiglu_rows(
        w,
        cur,
        "adapter.linear.gate",
        "adapter.linear.dense_h_to_4h",
        "adapter.linear.dense_4h_to_h",
        "adapter.boi",
        "adapter.eoi",
    )


def _swiglu_rows(w, cur: T, gate: str, up: str, down: str, boi: str, eoi: str) -> T:
    """The SwiGLU MLP (``ggml_swiglu_split`` of the gate and up matmuls, the down matmul) and the begin/end rows
    concatenated around its output (CogVLM's and GLM-Edge's adapters)."""
    g_ = mul_mat(w(gate + ".weight"), cur)
    u = mul_mat(w(up + ".weight"), cur)
    cur = mul_mat(w(down + ".weight"), new(g_.ty, g_.ne, "GLU", (g_, u)))
    b, e = w(boi), w(eoi)
    cur = new(wtype(b), (cur.ne[0], cur.ne[1] + 1, 1, 1), "CONCAT", (b, cur))
    return new(cur.ty, (cur.ne[0], cur.ne[1] + 1, 1, 1), "CONCAT", (cur, e))


def build_minicpmv(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_minicpmv::build`` (MiniCPM-V 2.x-4.5, ``models/minicpmv.cpp``): the patch conv, a layer-norm
    ViT with learned positions gathered by a ``positions`` input, then the resampler: the learned queries and the
    ``kv`` projection of the patches, each layer-normed, 2-D sin/cos position embeddings from the ``omega`` and
    ``pos_h``/``pos_w`` inputs added to K, one attention of ``query_num`` queries over the patches with 128-wide
    heads, the post norm and the projection."""
    g = Graph()
    size = hp.warmup_image_size
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    proj = w("resampler.proj.weight")
    e_proj = proj.ne[0]
    omega = graph_input("f32", (e_proj // 4,))
    pos_h = graph_input("f32", (1, n_pos))
    pos_w = graph_input("f32", (1, n_pos))
    positions = graph_input("i32", (n_pos,))
    learned = get_rows(w("v.position_embd.weight"), positions)
    emb = build_vit(g, hp, w, inp, n_pos, False, learned, fa)
    query = w("resampler.query")
    q = new("f32", query.ne, "NORM", (query,))  # build_norm of the learned queries (a weight)
    q = binary("ADD", binary("MUL", q, w("resampler.ln_q.weight")), w("resampler.ln_q.bias"))
    v = mul_mat(w("resampler.kv.weight"), emb)
    v = _norm(v, w("resampler.ln_kv.weight"), w("resampler.ln_kv.bias"), False)
    omega_b = new("f32", (omega.ne[0], n_pos, 1, 1), "REPEAT", (omega,))

    def sincos(pos: T) -> T:
        theta = binary("MUL", omega_b, pos)
        return concat(new("f32", theta.ne, "SIN", (theta,)), new("f32", theta.ne, "COS", (theta,)), 0)

    pos_embed = concat(sincos(pos_w), sincos(pos_h), 0)
    k = binary("ADD", v, pos_embed)
    d_head, n_head, n_query = 128, e_proj // 128, hp.query_num
    q = binary("ADD", mul_mat(w("resampler.attn.q.weight"), q), w("resampler.attn.q.bias"))
    k = binary("ADD", mul_mat(w("resampler.attn.k.weight"), k), w("resampler.attn.k.bias"))
    v = binary("ADD", mul_mat(w("resampler.attn.v.weight"), v), w("resampler.attn.v.bias"))
    q = reshape(q, d_head, n_head, n_query)
    k = reshape(k, d_head, n_head, n_pos)
    v = reshape(v, d_head, n_head, n_pos)
    emb = build_attn(g, hp, w("resampler.attn.out.weight"), w("resampler.attn.out.bias"), q, k, v, fa)
    emb = _norm(emb, w("resampler.ln_post.weight"), w("resampler.ln_post.bias"), False)
    g.expand(mul_mat(proj, emb))
    return g


def _gather_2x2(x: T, idx: list[T]) -> tuple[list[T], T]:
    """The four ``ggml_get_rows`` of a 2x2 downsample's patches (one index input each), and their concatenation
    along the width."""
    parts = [get_rows(x, i) for i in idx]
    cat = parts[0]
    for part in parts[1:]:
        cat = concat(cat, part, 0)
    return parts, cat


def build_minicpmv4_6(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_minicpmv4_6::build`` (MiniCPM-V 4.6, ``models/minicpmv.cpp``): the patch conv plus the learned
    positions gathered by a ``positions`` input, the optional pre norm, a layer-norm ViT. With ``n_merge`` 4 (the
    default) the ViT merger follows layer ``insert_layer_id`` (``clip.vision.wa_layer_indexes[0]``): a window
    attention over the patches reordered window-major (GET_ROWS), four to a window through an ``n_pos^2`` mask,
    ordered back and added, then a 2x2 downsample: four gathered quarters, their mean as the residual, their
    concatenation layer-normed through a GELU MLP; the remaining layers run on the quarter. ``n_merge`` 2 has no
    ViT merger. Then the post norm and the final merger: another four gathered quarters concatenated, the
    ``mm.input_norm`` layer norm and the ``mm.up``/``mm.down`` MLP with exact GELU."""
    g = Graph()
    size = hp.warmup_image_size
    is_4x = hp.n_merge == 2
    npx = size // hp.patch_size
    n_pos = npx * npx
    half = npx // 2
    n_ds = half * half
    n_out = n_ds if is_4x else (half // 2) * (half // 2)
    positions = graph_input("i32", (n_pos,))
    learned = get_rows(w("v.position_embd.weight"), positions)
    if not is_4x:
        window_idx = graph_input("i32", (n_pos,))
        inv_window_idx = graph_input("i32", (n_pos,))
        window_mask = graph_input("f32", (n_pos, n_pos))
        if fa:
            window_mask = cast(window_mask, "f16")
        ds_idx = [graph_input("i32", (n_ds,)) for _ in range(4)]
    merger_idx = [graph_input("i32", (n_out,)) for _ in range(4)]
    _raw, inp, _ = build_inp(g, hp, w, size)
    inp_l = binary("ADD", inp, learned)
    if w("v.pre_ln.weight") is not None:
        inp_l = _norm(inp_l, w("v.pre_ln.weight"), w("v.pre_ln.bias"), False)
    if not is_4x:
        insert = hp.wa_layers[0] if hp.wa_layers else 0
        inp_l = vit_layers(g, hp, w, inp_l, range(insert + 1), n_pos, False, fa)
        m = "v.vit_merger."
        residual = inp_l
        cur = _norm(inp_l, w(m + "ln1.weight"), w(m + "ln1.bias"), False)
        cur = get_rows(cur, window_idx)
        q = _add_b(mul_mat(w(m + "attn_q.weight"), cur), w(m + "attn_q.bias"))
        k = _add_b(mul_mat(w(m + "attn_k.weight"), cur), w(m + "attn_k.bias"))
        v = _add_b(mul_mat(w(m + "attn_v.weight"), cur), w(m + "attn_v.bias"))
        q = reshape(q, hp.d_head, hp.n_head, n_pos)
        k = reshape(k, hp.d_head, hp.n_head, n_pos)
        v = reshape(v, hp.d_head, hp.n_head, n_pos)
        cur = build_attn(g, hp, w(m + "attn_out.weight"), w(m + "attn_out.bias"), q, k, v, fa, window_mask)
        inp_l = binary("ADD", get_rows(cur, inv_window_idx), residual)
        parts, cat = _gather_2x2(inp_l, ds_idx)
        mean_res = parts[0]
        for part in parts[1:]:
            mean_res = binary("ADD", mean_res, part)
        mean_res = unary("SCALE", mean_res)
        cur = _norm(cat, w(m + "ds_ln.weight"), w(m + "ds_ln.bias"), False)
        cur = mlp(w, cur, m + "ds_ffn_up", m + "ds_ffn_down", "gelu")
        inp_l = binary("ADD", cur, mean_res)
        inp_l = vit_layers(g, hp, w, inp_l, range(insert + 1, hp.n_layer), n_ds, False, fa)
    else:
        inp_l = vit_layers(g, hp, w, inp_l, range(hp.n_layer), n_pos, False, fa)
    if w("v.post_ln.weight") is not None:
        inp_l = _norm(inp_l, w("v.post_ln.weight"), w("v.post_ln.bias"), False)
    _parts, cat = _gather_2x2(inp_l, merger_idx)
    cur = _norm(cat, w("mm.input_norm.weight"), w("mm.input_norm.bias"), False)
    g.expand(mlp(w, cur, "mm.up", "mm.down", "gelu_erf"))
    return g


def _qformer_block(g: Graph, hp: ClipHParams, w, h: T, bid: int, side: int, spatial: bool, fa: bool) -> T:
    """``clip_graph_granite4_vision::build_block`` for one tile: a WindowQFormer block over the feature layer ``h``
    ([n_embd, side^2, 1], ``side`` patches a side). The layer-normed patches gathered into ``window_side``^2 windows (an index input); the
    queries from the patches gathered (a spatial block) or average-pooled to ``side / window_side * query_side`` a
    side, gathered into ``query_side``^2 windows and added to the learned queries; one QFormer layer over the
    windows as a batch (64-wide heads: self-attention, cross-attention to the windows plus their positions, an
    exact-GELU FFN, each residual and post-LN), its windows gathered back to raster order and the linear out."""
    e = h.ne[0]
    n = side // hp.window_side
    new_side = n * hp.query_side
    n_win = n * n
    enc_len = hp.window_side * hp.window_side
    query_len = hp.query_side * hp.query_side
    p = f"v.proj_blk.{bid}."

    def gather(src: T, idx_len: int) -> T:
        return get_rows(src, graph_input("i32", (idx_len, 1)))

    def linear(x: T, name: str) -> T:
        t = reshape(x, x.ne[0], x.ne[1] * x.ne[2])
        return _add_b(mul_mat(w(name + ".weight"), t), w(name + ".bias"))

    def heads(t: T, n_tok: int) -> T:
        return reshape(t, 64, e // 64, n_tok, n_win)

    x = _norm(h, w(p + "norm.weight"), w(p + "norm.bias"), False)
    enc = reshape(gather(x, side * side), e, enc_len, n_win)
    if spatial:
        d = gather(x, new_side * new_side)
    else:  # interp_down: the tile as [side, side, n_embd], average-pooled by side / new_side
        t = cont(permute(reshape(x, e, side, side, 1), 2, 0, 1, 3))
        t = reshape(t, side, side, e)
        k = side // new_side
        t = new("f32", ((side - k) // k + 1, (side - k) // k + 1, e, 1), "POOL_2D", (t,))
        t = cont(permute(reshape(t, new_side, new_side, e, 1), 1, 2, 0, 3))
        d = reshape(t, e, new_side * new_side, 1)
    q_in = binary("ADD", reshape(gather(d, new_side * new_side), e, query_len, n_win), w(p + "query"))
    e_in = binary("ADD", enc, w(p + "img_pos"))
    q = _norm(q_in, w(p + "post_norm.weight"), w(p + "post_norm.bias"), False)
    sa = build_attn(
        g,
        hp,
        w(p + "self_attn_out.weight"),
        w(p + "self_attn_out.bias"),
        heads(linear(q, p + "self_attn_q"), query_len),
        heads(linear(q, p + "self_attn_k"), query_len),
        heads(linear(q, p + "self_attn_v"), query_len),
        fa,
    )
    sa = binary("ADD", reshape(sa, e, query_len, n_win), q)
    sa = _norm(sa, w(p + "self_attn_norm.weight"), w(p + "self_attn_norm.bias"), False)
    ca = build_attn(
        g,
        hp,
        w(p + "cross_attn_out.weight"),
        w(p + "cross_attn_out.bias"),
        heads(linear(sa, p + "cross_attn_q"), query_len),
        heads(linear(e_in, p + "cross_attn_k"), enc_len),
        heads(linear(e_in, p + "cross_attn_v"), enc_len),
        fa,
    )
    ca = binary("ADD", reshape(ca, e, query_len, n_win), sa)
    ca = _norm(ca, w(p + "cross_attn_norm.weight"), w(p + "cross_attn_norm.bias"), False)
    t = reshape(ca, e, query_len * n_win)
    t = _add_b(mul_mat(w(p + "ffn_up.weight"), t), w(p + "ffn_up.bias"))
    t = _add_b(mul_mat(w(p + "ffn_down.weight"), unary("UNARY", t)), w(p + "ffn_down.bias"))
    ffn = binary("ADD", reshape(t, e, query_len, n_win), ca)
    ffn = _norm(ffn, w(p + "ffn_norm.weight"), w(p + "ffn_norm.bias"), False)
    unwinned = gather(reshape(ffn, e, query_len * n_win, 1), new_side * new_side)
    return _add_b(mul_mat(w(p + "linear.weight"), unwinned), w(p + "linear.bias"))


def build_granite4_vision(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_granite4_vision::build`` (Granite Vision 4.1, ``models/granite4-vision.cpp``) for the warmup's
    one tile: the patch conv plus the learned positions as stored, a layer-norm SigLIP ViT (its attention output
    reshaped per tile before the residual), then per feature layer a WindowQFormer block (:func:`_qformer_block`;
    spatial where ``clip.vision.projector.spatial_offsets`` is not -1), the blocks' outputs concatenated along the
    width. The anyres assembly (overview, tile grid, newlines) is for tiled images only: not the warmup."""
    g = Graph()
    size = hp.warmup_image_size
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    inp_l = binary("ADD", inp, w("v.position_embd.weight"))
    outs = []
    for il in range(hp.n_layer):
        p = f"v.blk.{il}."
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        q = _add_b(mul_mat(w(p + "attn_q.weight"), cur), w(p + "attn_q.bias"))
        k = _add_b(mul_mat(w(p + "attn_k.weight"), cur), w(p + "attn_k.bias"))
        v = _add_b(mul_mat(w(p + "attn_v.weight"), cur), w(p + "attn_v.bias"))
        q, k, v = (reshape(t, hp.d_head, hp.n_head, n_pos, 1) for t in (q, k, v))
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa)
        cur = binary("ADD", reshape(cur, hp.n_embd, n_pos, 1), inp_l)
        inp_l = cur
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
        inp_l = binary("ADD", inp_l, layer_ffn(cur, w, p, hp.ffn_op))
        outs.append(inp_l)
    out = None
    for bid, (layer, offset) in enumerate(zip(hp.feature_layers, hp.spatial_offsets)):
        stream = _qformer_block(g, hp, w, outs[layer], bid, size // hp.patch_size, offset >= 0, fa)
        out = stream if out is None else concat(out, stream, 0)
    g.expand(out)
    return g


def _conv_2d_f32(g: Graph, kernel: T, inp: T, s: int, p: int) -> T:
    """``conv_2d_f32`` of ``models/deepseekocr.cpp``: ``ggml_conv_2d`` with an f32 im2col (f16 for an f16
    kernel)."""
    return conv_2d(g, kernel, inp, s, s, p, p, "f16" if wtype(kernel) == "f16" else "f32")


def _sam_rel_pos(rel_pos: T, indices: T, size: int) -> T:
    """``get_rel_pos`` (``models/deepseekocr.cpp``): the ``[C, L]`` relative positions, linearly interpolated
    (UPSCALE) where ``L`` is not ``2 * size - 1``, gathered by the indices input into ``[C, size, size]``."""
    c, length = rel_pos.ne[0], rel_pos.ne[1]
    cur = rel_pos
    dist = 2 * size - 1
    if dist != length:
        cur = reshape(cont_any(permute(cur, 1, 0, 2, 3)), length, 1, c)
        cur = reshape(new(cur.ty, (dist, 1, c, 1), "UPSCALE", (cur,)), dist, c, 1, 1)
        cur = cont(permute(cur, 1, 0, 2, 3))
    return reshape(get_rows(cur, reshape(indices, size * size)), c, size, size)


def _sam(g: Graph, hp: ClipHParams, w, raw: T, fa: bool) -> T:
    """``clip_graph_deepseekocr::build_sam``: SAM's patch conv (the kernel's size as the stride) plus its bias and
    the learned positions (bicubic-interpolated where the grid differs), ``sam_n_layer`` blocks (layer norms,
    fused qkv as copies, windowed attention with partition/unpartition except on the global layers 2, 5, 8 and
    11, a mask made of the relative positions gathered by an index input, the GELU MLP), then the neck (1x1 and
    3x3 convs, each with a channel layer norm) and two stride-2 convs. Returns ``[side, side, channels, 1]``."""
    e, n_heads, window = hp.sam_n_embd, hp.sam_n_head, hp.attn_window_size
    d = e // n_heads
    kernel = w("v.sam.patch_embd.weight")
    inp_l = _conv_2d_f32(g, kernel, raw, kernel.ne[0], 0)
    inp_l = binary("ADD", inp_l, wview(w("v.sam.patch_embd.bias"), (1, 1, e)))
    inp_l = cont(permute(inp_l, 1, 2, 0, 3))
    local_idx = graph_input("i32", (window, window), "rel_pos_indices_local")
    global_idx = graph_input("i32", (inp_l.ne[1], inp_l.ne[2]), "rel_pos_indices_global")
    pos = w("v.sam.pos_embd.weight")
    tgt = inp_l.ne[1]
    if pos.ne[1] != tgt:
        old = cont_any(permute(pos, 2, 0, 1, 3))
        new_pos = new(old.ty, (tgt, tgt, e, 1), "UPSCALE", (old,))
        cur = binary("ADD", inp_l, cont(permute(new_pos, 1, 2, 0, 3)))
    else:
        cur = binary("ADD", inp_l, pos)
    for il in range(hp.sam_n_layer):
        p = f"v.sam.blk.{il}."
        shortcut = cur
        cur = _norm(cur, w(p + "pre_ln.weight"), w(p + "pre_ln.bias"), False)
        w0, h0 = cur.ne[1], cur.ne[2]
        is_global = il in (2, 5, 8, 11)
        if is_global:
            indices = global_idx
        else:  # window_partition
            c = cur.ne[0]
            px, py = (window - w0 % window) % window, (window - h0 % window) % window
            npw, nph = (w0 + px) // window, (h0 + py) // window
            n_img = cur.ne[3]
            if px or py:
                cur = new(cur.ty, (c, w0 + px, h0 + py, n_img), "PAD", (cur,))
            cur = reshape(cur, c * window, npw, window, nph * n_img)
            cur = reshape(cont(permute(cur, 0, 2, 1, 3)), c, window, window, npw * nph * n_img)
            indices = local_idx
        ww, hh, b = cur.ne[1], cur.ne[2], cur.ne[3]
        cur = binary("ADD", mul_mat(w(p + "attn.qkv.weight"), cur), w(p + "attn.qkv.bias"))
        cur = reshape(cur, e, 3, ww * hh, b)
        q, k, v = (
            reshape(cont(view(cur, (e, ww * hh, b), (cur.nb[2], cur.nb[3]))), d, n_heads, ww * hh, b) for _ in range(3)
        )
        rw = _sam_rel_pos(w(p + "attn.pos_w.weight"), indices, ww)
        rh = _sam_rel_pos(w(p + "attn.pos_h.weight"), indices, hh)
        qr = reshape(cont(permute(q, 0, 2, 1, 3)), d, ww, hh, b * n_heads)
        rw = mul_mat(rw, cont(permute(qr, 0, 2, 1, 3)))
        rw = reshape(cont(permute(rw, 0, 2, 1, 3)), ww, 1, ww * hh, n_heads * b)
        rw = new(rw.ty, (ww, hh, ww * hh, n_heads * b), "REPEAT", (rw,))
        rh = reshape(mul_mat(rh, qr), 1, hh, ww * hh, n_heads * b)
        mask = reshape(binary("ADD", rw, rh), ww * hh, ww * hh, n_heads, b)
        if fa:
            mask = cast(mask, "f16")
        cur = build_attn(g, hp, w(p + "attn.out.weight"), w(p + "attn.out.bias"), q, k, v, fa, mask)
        cur = reshape(cont(cur), e, ww, hh, b)
        if not is_global:  # window_unpartition
            cur = reshape(cur, e * window, window, npw, nph * n_img)
            cur = reshape(cont(permute(cur, 0, 2, 1, 3)), e, w0 + px, h0 + py, n_img)
            cur = cont(view(cur, (e, w0, h0, cur.ne[3]), (cur.nb[1], cur.nb[2], cur.nb[3])))
        cur = binary("ADD", cur, shortcut)
        inp_ff = cur
        cur = _norm(inp_ff, w(p + "post_ln.weight"), w(p + "post_ln.bias"), False)
        cur = mlp(w, cur, p + "mlp.lin1", p + "mlp.lin2", hp.ffn_op)
        cur = binary("ADD", cur, inp_ff)
    cur = cont(permute(cur, 2, 0, 1, 3))
    for i, (s, pad) in enumerate(((1, 0), (1, 1))):
        cur = _conv_2d_f32(g, w(f"v.sam.neck.{2 * i}.weight"), cur, s, pad)
        cur = cont(permute(cur, 1, 2, 0, 3))
        cur = _norm(cur, w(f"v.sam.neck.{2 * i + 1}.weight"), w(f"v.sam.neck.{2 * i + 1}.bias"), False)
        cur = cont(permute(cur, 2, 0, 1, 3))
    cur = _conv_2d_f32(g, w("v.sam.net_2.weight"), cur, 2, 1)
    cur = _conv_2d_f32(g, w("v.sam.net_3.weight"), cur, 2, 1)
    g.expand(cur)
    return cur


def build_deepseekocr(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_deepseekocr::build`` (DeepSeek-OCR, ``models/deepseekocr.cpp``) for the warmup: a 1024x1024
    image that is not an overview, so one "row" of one tile (the raw image reshaped through a copy), SAM
    (:func:`_sam`), then the CLIP ViT over SAM's output: the CLS row (repeated) before the patches, the learned
    positions (bicubic-interpolated past the CLS row where the grid differs) gathered by an ARANGE cast to i32,
    the layer-norm ViT; the CLIP patches (CLS cut off as a view) concatenated with SAM's, the ``mm.model.fc``
    projection, the tiles interleaved per row and a newline (repeated) after each row."""
    g = Graph()
    size = hp.warmup_image_size
    raw = reshape(inp_raw((size, size, 3, 1)), size * size, 1, 3, 1)
    raw = reshape(cont(permute(raw, 0, 2, 1, 3)), size, size, 3, 1)
    sam_out = _sam(g, hp, w, raw, fa)
    n_patches = sam_out.ne[0] * sam_out.ne[1]
    e = hp.n_embd
    inp = cont(permute(reshape(sam_out, n_patches, sam_out.ne[2], 1), 1, 0, 2, 3))
    pe = w("v.position_embd.weight")
    n_pos = pe.ne[1]
    tgt, src = math.isqrt(inp.ne[1]), math.isqrt(n_pos - 1)
    if tgt != src:
        old = wview(pe, (pe.ne[0], src * src), "VIEW")
        cls_tok = wview(pe, (pe.ne[0], 1), "VIEW")
        pe = reshape(new(wtype(pe), (tgt, tgt, pe.ne[0], 1), "UPSCALE", (old,)), e, tgt * tgt, 1)
        pe = concat(pe, cls_tok, 1)
        n_pos = tgt * tgt + 1
    cls = w("v.class_embd")
    inp = concat(new(wtype(cls), (e, 1, 1, 1), "REPEAT", (cls,)), inp, 1)
    positions = cast(new("f32", (n_pos,), "ARANGE"), "i32")
    cur = build_vit(g, hp, w, inp, n_pos, False, get_rows(pe, positions), fa)
    g.expand(cur)
    sam_out = reshape(cont(permute(sam_out, 1, 2, 0, 3)), sam_out.ne[2], n_patches, 1)
    clip_out = view(cur, (e, n_patches, 1), (cur.nb[1], cur.nb[2]))
    cur = _add_b(mul_mat(w("mm.model.fc.weight"), concat(clip_out, sam_out, 0)), w("mm.model.fc.bias"))
    grid, n_dim = math.isqrt(n_patches), cur.ne[0]
    cur = cont(permute(reshape(cur, n_dim * grid, grid, 1, 1), 0, 2, 1, 3))
    cur = reshape(cur, n_dim, grid, grid, 1)
    nl = w("v.image_newline")
    cur = concat(cur, new(wtype(nl), (n_dim, 1, grid, 1), "REPEAT", (nl,)), 1)
    g.expand(reshape(cur, n_dim, (grid + 1) * grid, 1))
    return g


def build_deepseekocr2(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_deepseekocr2::build`` (DeepSeek-OCR 2, ``models/deepseekocr2.cpp``): SAM (:func:`_sam`) on
    the raw 1024x1024 warmup image, then a Qwen2 encoder: SAM's 256 (16x16; 144 for 12x12) patches followed by
    as many learned queries (``v.resample_query_1024``/``_768``, cast and repeated), an ``seq_len^2`` mask input
    on every layer, NEOX RoPE over an ARANGE cast to i32, RMS norms and SwiGLU; the query rows copied out, the
    ``mm.model.fc`` projection. The warmup is no overview: no view separator."""
    g = Graph()
    size = hp.warmup_image_size
    sam_out = _sam(g, hp, w, inp_raw((size, size, 3, 1)), fa)
    inp = reshape(sam_out, sam_out.ne[0] * sam_out.ne[1], sam_out.ne[2], sam_out.ne[3])
    inp = cont(permute(inp, 1, 0, 2, 3))
    n_img = inp.ne[1]
    if n_img not in (144, 256):
        raise NotImplementedError(f"{n_img} SAM tokens (llama.cpp asserts 144 or 256)")
    query = w("v.resample_query_1024.weight" if n_img == 256 else "v.resample_query_768.weight")
    query = cast(query, inp.ty)
    query = new(query.ty, (query.ne[0], n_img, inp.ne[2], 1), "REPEAT", (query,))
    inp = concat(inp, query, 1)
    seq_len = inp.ne[1]
    mask = graph_input("f32", (seq_len, seq_len), "qwen2_attn_mask")
    pos = cast(new("f32", (seq_len,), "ARANGE"), "i32")
    cur = build_vit(g, hp, w, inp, seq_len, True, None, fa, ropes(pos), masks=[mask] * hp.n_layer)
    cur = cont(view(cur, (cur.ne[0], n_img, cur.ne[2]), (cur.nb[1], cur.nb[2])))
    g.expand(cur)
    g.expand(_add_b(mul_mat(w("mm.model.fc.weight"), cur), w("mm.model.fc.bias")))
    return g


def build_gemma3nv(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_mobilenetv5::build`` (Gemma 3n's MobileNetV5, ``models/mobilenetv5.cpp``): the SAME-padded
    stride-2 stem conv (CONV_2D, its bias, a channel RMS norm through two permuted copies, GELU), the blocks
    (:func:`app.model.projector.mobilenetv5_blocks`; each stage's first strided: edge residuals, universal inverted residuals with depthwise
    convs through im2col, multi-query attention blocks with strided key/value down-convs), the multi-scale fusion
    of the ends of stages 2 and 3 (or the last block): nearest upscales to the first, concatenated over the
    channels, the FFN's two 1x1 convs, an average pool to 16x16, the norm; then the tokens as rows, scaled, the
    soft-embedding RMS norm, the input projection and a last RMS norm. No attention of ggml's: ``fa`` changes
    nothing."""
    g = Graph()
    size = hp.warmup_image_size

    def conv(k: T, x: T, s: int, p: int) -> T:  # ggml_conv_2d_direct
        kw, kh = k.ne[0], k.ne[1]
        ow, oh = (x.ne[0] + 2 * p - kw) // s + 1, (x.ne[1] + 2 * p - kh) // s + 1
        return new(x.ty, (ow, oh, k.ne[3], x.ne[3]), "CONV_2D", (k, x))

    def norm_2d(x: T, weight: T | None) -> T:  # rms_norm_2d
        cur = unary("RMS_NORM", cont(permute(x, 2, 1, 0, 3)))
        if weight is not None:
            cur = binary("MUL", cur, weight)
        return cont(permute(cur, 2, 1, 0, 3))

    def pad_same(x: T, k: int, s: int) -> T:  # pad_same_2d
        oh, ow = (x.ne[1] + s - 1) // s, (x.ne[0] + s - 1) // s
        ph, pw = max(0, (oh - 1) * s + k - x.ne[1]), max(0, (ow - 1) * s + k - x.ne[0])
        return new(x.ty, (x.ne[0] + pw, x.ne[1] + ph, x.ne[2], x.ne[3]), "PAD", (x,)) if ph or pw else x

    def gelu(x: T) -> T:
        return unary("UNARY", x)

    def dw(k: T, x: T, s: int) -> T:  # SAME padding when strided, else symmetric
        if s > 1:
            return conv_2d_dw(k, pad_same(x, k.ne[0], s), s, 0)
        return conv_2d_dw(k, x, 1, k.ne[0] // 2)

    cur = conv(w("v.conv_stem.conv.weight"), pad_same(inp_raw((size, size, 3, 1)), 3, 2), 2, 0)
    cur = _add_b(cur, w("v.conv_stem.conv.bias"))
    if w("v.conv_stem.bn.weight") is not None:
        cur = norm_2d(cur, w("v.conv_stem.bn.weight"))
    cur = gelu(cur)
    blocks, ends = mobilenetv5_blocks(lambda name: w(name) is not None)
    fusion = ends[2:4] if len(ends) >= 4 else [len(blocks) - 1]
    feats = []
    for i, p in enumerate(blocks):
        stride = 2 if i == 0 or any(i == e + 1 for e in ends) else 1
        inp = cur
        if w(p + "conv_exp.weight") is not None:  # build_edge_residual
            k = w(p + "conv_exp.weight")
            cur = conv(k, pad_same(cur, 3, 2), 2, 0) if stride == 2 else conv(k, cur, stride, 1)
            if w(p + "bn1.weight") is not None:
                cur = norm_2d(cur, w(p + "bn1.weight"))
            cur = conv(w(p + "conv_pwl.weight"), gelu(cur), 1, 0)
            if w(p + "bn2.weight") is not None:
                cur = norm_2d(cur, w(p + "bn2.weight"))
            if stride == 1 and inp.ne[2] == cur.ne[2] and inp.ne[0] == cur.ne[0]:
                cur = binary("ADD", cur, inp)
        elif w(p + "attn.query.proj.weight") is not None:  # build_mobilenet_attn
            a = p + "attn."
            if w(p + "norm.weight") is not None:
                cur = norm_2d(cur, w(p + "norm.weight"))
            q = conv(w(a + "query.proj.weight"), cur, 1, 0)
            kv = []
            for part in ("key", "value"):
                x = cur
                down = w(a + part + ".down_conv.weight")
                if down is not None:
                    x = conv_2d_dw(down, pad_same(cur, down.ne[0], 2), 2, 0)
                    if w(a + part + ".norm.weight") is not None:
                        x = norm_2d(x, w(a + part + ".norm.weight"))
                kv.append(conv(w(a + part + ".proj.weight"), x, 1, 0))
            k, v = kv
            ww, hh = cur.ne[0], cur.ne[1]
            d = k.ne[2]
            n_head = q.ne[2] // d
            n, m = ww * hh, k.ne[0] * k.ne[1]
            q = cont(permute(reshape(reshape(q, n, d * n_head, 1), n, d, n_head, 1), 1, 0, 2, 3))
            k = cont(permute(reshape(reshape(k, m, d, 1), m, d, 1, 1), 1, 0, 2, 3))
            v = cont(reshape(reshape(v, m, d, 1), m, d, 1, 1))
            scores = unary("SOFT_MAX", unary("SCALE", mul_mat(k, q)))
            kqv = cont(permute(mul_mat(v, scores), 1, 0, 2, 3))
            kqv = cont(reshape(reshape(kqv, n, d * n_head, 1), ww, hh, d * n_head, 1))
            cur = conv(w(a + "output.proj.weight"), kqv, 1, 0)
            if inp.ne[0] == cur.ne[0] and inp.ne[2] == cur.ne[2]:
                if w(p + "layer_scale.gamma") is not None:
                    cur = binary("MUL", cur, w(p + "layer_scale.gamma"))
                cur = binary("ADD", cur, inp)
        else:  # build_inverted_residual
            if w(p + "dw_start.conv.weight") is not None:
                cur = dw(w(p + "dw_start.conv.weight"), cur, 1)
                if w(p + "dw_start.bn.weight") is not None:
                    cur = norm_2d(cur, w(p + "dw_start.bn.weight"))
            if w(p + "pw_exp.conv.weight") is not None:
                cur = conv(w(p + "pw_exp.conv.weight"), cur, 1, 0)
                if w(p + "pw_exp.bn.weight") is not None:
                    cur = norm_2d(cur, w(p + "pw_exp.bn.weight"))
                cur = gelu(cur)
            if w(p + "dw_mid.conv.weight") is not None:
                cur = dw(w(p + "dw_mid.conv.weight"), cur, stride)
                if w(p + "dw_mid.bn.weight") is not None:
                    cur = norm_2d(cur, w(p + "dw_mid.bn.weight"))
                cur = gelu(cur)
            if w(p + "pw_proj.conv.weight") is not None:
                cur = conv(w(p + "pw_proj.conv.weight"), cur, 1, 0)
                if w(p + "pw_proj.bn.weight") is not None:
                    cur = norm_2d(cur, w(p + "pw_proj.bn.weight"))
            if w(p + "layer_scale.gamma") is not None:
                cur = binary("MUL", cur, w(p + "layer_scale.gamma"))
            if inp.ne[0] == cur.ne[0] and inp.ne[1] == cur.ne[1] and inp.ne[2] == cur.ne[2]:
                cur = binary("ADD", cur, inp)
        if i in fusion:
            feats.append(cur)
    if feats:  # the multi-scale fusion adapter
        hi_w, hi_h = feats[0].ne[0], feats[0].ne[1]
        resized = []
        for f in feats:
            if f.ne[0] < hi_w or f.ne[1] < hi_h:
                s = hi_w // f.ne[0]
                f = new(f.ty, (f.ne[0] * s, f.ne[1] * s, f.ne[2], f.ne[3]), "UPSCALE", (f,))
            resized.append(f)
        cur = resized[0]
        for f in resized[1:]:
            cur = concat(cur, f, 2)
        if w("v.msfa.ffn.pw_exp.conv.weight") is not None:
            cur = conv(w("v.msfa.ffn.pw_exp.conv.weight"), cur, 1, 0)
            if w("v.msfa.ffn.pw_exp.bn.weight") is not None:
                cur = norm_2d(cur, w("v.msfa.ffn.pw_exp.bn.weight"))
            cur = gelu(cur)
        if w("v.msfa.ffn.pw_proj.conv.weight") is not None:
            cur = conv(w("v.msfa.ffn.pw_proj.conv.weight"), cur, 1, 0)
            if w("v.msfa.ffn.pw_proj.bn.weight") is not None:
                cur = norm_2d(cur, w("v.msfa.ffn.pw_proj.bn.weight"))
        if cur.ne[0] > 16:
            s = cur.ne[0] // 16
            po = (cur.ne[0] - s) // s + 1, (cur.ne[1] - s) // s + 1
            cur = new("f32", (po[0], po[1], cur.ne[2], cur.ne[3]), "POOL_2D", (cur,))
        if w("v.msfa.norm.weight") is not None:
            cur = norm_2d(cur, w("v.msfa.norm.weight"))
    ww, hh, c = cur.ne[0], cur.ne[1], cur.ne[2]
    cur = cont(permute(permute(cur, 2, 1, 0, 3), 0, 2, 1, 3))
    cur = cont(reshape(cur, c, ww * hh, 1))
    cur = unary("RMS_NORM", unary("SCALE", cur))
    cur = binary("MUL", cur, w("mm.soft_emb_norm.weight"))
    cur = unary("RMS_NORM", mul_mat(w("mm.input_projection.weight"), cur))
    g.expand(cur)
    return g


def build_cogvlm(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_cogvlm::build`` (CogVLM's EVA-CLIP, ``models/cogvlm.cpp``): the patch conv, the CLS row and the
    learned positions, post-norm layers (fused qkv as views, attention, layer norm, residual; FFN, layer norm,
    residual), the CLS cut off, the projection, a layer norm, GELU in place, the SwiGLU MLP (``mm.up``/``mm.gate``/
    ``mm.down``) and the begin/end rows."""
    g = Graph()
    size = hp.warmup_image_size
    e, dh = hp.n_embd, hp.d_head
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    inp = concat(inp, w("v.class_embd"), 1)
    n_pos = n_patches + 1
    inp_l = binary("ADD", inp, w("v.position_embd.weight"))
    for il in range(hp.n_layer):
        p = f"v.blk.{il}."
        cur = binary("ADD", mul_mat(w(p + "attn_qkv.weight"), inp_l), w(p + "attn_qkv.bias"))
        q, k, v = (view(cur, (dh, hp.n_head, n_pos, 1), (dh * 4, cur.nb[1], cur.nb[1] * n_pos)) for _ in range(3))
        cur = build_attn(g, hp, w(p + "attn_out.weight"), w(p + "attn_out.bias"), q, k, v, fa)
        cur = _norm(cur, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        inp_l = binary("ADD", cur, inp_l)
        cur = layer_ffn(inp_l, w, p, hp.ffn_op)
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
        inp_l = binary("ADD", cur, inp_l)
    cur = view(inp_l, (e, n_patches, 1, 1), (inp_l.nb[1], inp_l.nb[1] * n_patches, inp_l.nb[1] * n_patches))
    cur = mul_mat(w("mm.model.fc.weight"), cur)
    cur = _norm(cur, w("mm.post_fc_norm.weight"), w("mm.post_fc_norm.bias"), False)
    cur = view_tensor(cur, "UNARY", [cur])  # ggml_gelu_inplace
    g.expand(_swiglu_rows(w, cur, "mm.gate", "mm.up", "mm.down", "v.boi", "v.eoi"))
    return g


def build_youtuvl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_youtuvl::build`` (Youtu-VL, ``models/youtuvl.cpp``): the raw image cut into 2x2 groups of
    patches by four permuted copies, the patch matmul, a layer-norm ViT with M-RoPE (window attention with an
    ``n_pos^2`` mask except on the ``wa_layer_indexes`` layers, the patches reordered into windows and back), the
    post-norm, the merger's RMS norm and the 2x2-merge GELU MLP ``mm.0``/``mm.2``."""
    g = Graph()
    size = hp.warmup_image_size
    e, dh, p = hp.n_embd, hp.d_head, hp.patch_size
    npx = size // p
    n_pos = npx * npx
    m, hm = 2, npx // 2
    raw = inp_raw((size, size, 3, 1))
    inp = cont(permute(reshape(raw, hm * m * p, m * p, hm, 3), 1, 2, 3, 0), m * p * 3, hm, m * p, hm)
    inp = cont(permute(inp, 0, 2, 1, 3), m * p * 3, p, m, hm * hm)
    inp = cont(permute(inp, 1, 0, 2, 3), p, 3, p, hm * hm * m * m)
    inp = cont(permute(inp, 2, 0, 1, 3), 3 * p * p, hm * hm * m * m, 1)
    inp = _add_b(mul_mat(w("v.patch_embd.weight"), inp), w("v.patch_embd.bias"))
    inp_l = reshape(inp, e, n_pos)
    positions = graph_input("i32", (n_pos * 4,))
    if w("v.pre_ln.weight") is not None:
        inp_l = _norm(inp_l, w("v.pre_ln.weight"), w("v.pre_ln.bias"), False)
    window = bool(hp.wa_layers)
    mask = None
    if window:
        inv_idx = graph_input("i32", (n_pos // 4,))
        mask = graph_input("f32", (n_pos, n_pos))
        if fa:
            mask = cast(mask, "f16")
        inp_l = reshape(get_rows(reshape(inp_l, e * 4, n_pos // 4), inv_idx), e, n_pos, 1)
    for il in range(hp.n_layer):
        pre = f"v.blk.{il}."
        cur = _norm(inp_l, w(pre + "ln1.weight"), w(pre + "ln1.bias"), False)
        q = reshape(binary("ADD", mul_mat(w(pre + "attn_q.weight"), cur), w(pre + "attn_q.bias")), dh, hp.n_head, n_pos)
        k = reshape(binary("ADD", mul_mat(w(pre + "attn_k.weight"), cur), w(pre + "attn_k.bias")), dh, hp.n_head, n_pos)
        v = reshape(binary("ADD", mul_mat(w(pre + "attn_v.weight"), cur), w(pre + "attn_v.bias")), dh, hp.n_head, n_pos)
        q = new("f32", q.ne, "ROPE", (q, positions))
        k = new("f32", k.ne, "ROPE", (k, positions))
        full = il in hp.wa_layers if window else True
        cur = build_attn(
            g, hp, w(pre + "attn_out.weight"), w(pre + "attn_out.bias"), q, k, v, fa, None if full else mask
        )
        inp_l = binary("ADD", cur, inp_l)
        cur = _norm(inp_l, w(pre + "ln2.weight"), w(pre + "ln2.bias"), False)
        cur = layer_ffn(cur, w, pre, hp.ffn_op)
        inp_l = binary("ADD", inp_l, cur)
    emb = inp_l
    if window:
        idx = graph_input("i32", (n_pos // 4,))
        emb = reshape(get_rows(reshape(emb, e * 4, n_pos // 4), idx), e, n_pos, 1)
    if w("v.post_ln.weight") is not None:
        emb = _norm(emb, w("v.post_ln.weight"), w("v.post_ln.bias"), False)
    emb = _norm(emb, w("mm.input_norm.weight"), None, True)
    emb = reshape(emb, e * 4, n_pos // 4, 1)
    g.expand(mlp(w, emb, "mm.0", "mm.2", "gelu"))
    return g


def build_muse_glimmer(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_muse_glimmer::build`` (``models/muse-glimmer.cpp``): the patch conv, the learned grid resized
    (bilinear), the patches gathered into windows, a layer-norm ViT with 2D RoPE whose sparse layers (all but every
    4th and the last) attend through an ``n_tok^2`` block mask, the patches gathered back and pixel-shuffled by
    ``n_merge``, then three matmuls with exact GELU between."""
    g = Graph()
    size = hp.warmup_image_size
    e, ds, sf = hp.n_embd, hp.n_merge, 4
    npx = size // hp.patch_size
    n_out = (npx // ds) * (npx // ds)
    pos_w, pos_h = graph_input("i32", (npx * npx,)), graph_input("i32", (npx * npx,))
    sp_perm, inv_perm, ds_perm = (graph_input("i32", (npx * npx,)) for _ in range(3))
    sp_mask = graph_input("f32", (npx * npx, npx * npx))
    _raw, x, n_tok = build_inp(g, hp, w, size)
    x = binary("ADD", x, resize_position_embeddings(w, hp, npx, npx))
    x = get_rows(x, sp_perm)
    masks = [None if il == hp.n_layer - 1 or (il + 1) % sf == 0 else sp_mask for il in range(hp.n_layer)]
    hp_erf = ClipHParams(**{**hp.__dict__, "ffn_op": "gelu_erf"})
    x = build_vit(g, hp_erf, w, x, n_tok, False, None, fa, ropes(pos_w, pos_h), masks=masks)
    x = get_rows(x, inv_perm)
    x = get_rows(x, ds_perm)
    x = cont(permute(reshape(x, e, ds * ds, n_out), 1, 0, 2, 3))
    x = reshape(x, e * ds * ds, n_out)
    x = unary("UNARY", mul_mat(w("mm.0.weight"), x))
    x = unary("UNARY", mul_mat(w("mm.1.weight"), x))
    g.expand(mul_mat(w("mm.2.weight"), x))
    return g


def build_mimovl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_mimovl::build`` (MiMo-V2.5's vision, ``models/mimovl.cpp``): two patch convs merged 2x2 as in
    Qwen2-VL, an RMS-norm ViT with a fused grouped-KV qkv (the head width from its rows), M-RoPE from row or column
    positions, full layers and row/column window layers (``wa_pattern_mode``: a banded ``n_pos^2`` mask and
    per-head sinks; the merge units reordered column-major on entering a column run and back on leaving it, the
    inverse order an ARGSORT of the ``idx_col`` input), the post layer norm and the 2x2-merge GELU MLP."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    n_pos = npx * npx
    unit = hp.n_merge * hp.n_merge
    n_units = n_pos // unit
    n_kv = hp.n_head_kv
    raw = inp_raw((size, size, 3, 1))
    inp = dual_patch_conv(g, hp, w, raw)
    inp_l = _merge_2x2(permute(inp, 1, 2, 0, 3), e, npx, npx)
    pos_row = graph_input("i32", (n_pos * 4,))
    pos_col = graph_input("i32", (n_pos * 4,))
    idx_f = graph_input("f32", (n_units,))
    idx_col = cast(idx_f, "i32")
    idx_inv = new("i32", idx_f.ne, "ARGSORT", (idx_f,))
    window_mask = graph_input("f32", (n_pos, n_pos))
    mask_attn = cast(window_mask, "f16") if fa else window_mask

    def reorder(x: T, idx: T) -> T:
        return reshape(get_rows(reshape(x, e * unit, n_units), idx), e, n_pos, 1)

    rows = w("v.blk.0.attn_qkv.weight").ne[1]
    dh = rows // (hp.n_head + 2 * n_kv)
    prev = -1
    for il in range(hp.n_layer):
        p = f"v.blk.{il}."
        mode = hp.wa_modes[il] if il < len(hp.wa_modes) else -1
        if mode == 1 and prev != 1:
            inp_l = reorder(inp_l, idx_col)
        elif mode != 1 and prev == 1:
            inp_l = reorder(inp_l, idx_inv)
        cur = _norm(inp_l, w(p + "ln1.weight"), w(p + "ln1.bias"), True)
        qkv = binary("ADD", mul_mat(w(p + "attn_qkv.weight"), cur), w(p + "attn_qkv.bias"))
        row = row_size(qkv.ty, dh)
        q = view(qkv, (dh, hp.n_head, n_pos), (row, qkv.nb[1]))
        k = view(qkv, (dh, n_kv, n_pos), (row, qkv.nb[1]))
        v = view(qkv, (dh, n_kv, n_pos), (row, qkv.nb[1]))
        pos = pos_col if mode == 1 else pos_row
        q = new("f32", q.ne, "ROPE", (q, pos))
        k = new("f32", k.ne, "ROPE", (k, pos))
        full = mode == -1
        cur = build_attn(
            g,
            hp,
            w(p + "attn_out.weight"),
            w(p + "attn_out.bias"),
            q,
            k,
            v,
            fa,
            None if full else mask_attn,
            sinks=None if full else w(p + "attn_sinks"),
        )
        inp_l = binary("ADD", cur, inp_l)
        cur = _norm(inp_l, w(p + "ln2.weight"), w(p + "ln2.bias"), True)
        inp_l = binary("ADD", inp_l, layer_ffn(cur, w, p, hp.ffn_op))
        prev = mode
    if prev == 1:
        inp_l = reorder(inp_l, idx_inv)
    inp_l = _norm(inp_l, w("v.post_ln.weight"), w("v.post_ln.bias"), False)
    emb = reshape(inp_l, e * unit, n_units, 1)
    g.expand(mlp(w, emb, "mm.0", "mm.2", "gelu"))
    return g


def _channel(op: str, x: T, v: T | None) -> T:
    """``add_channel_bias``/``mul_channel_weight`` of ``models/yasa2.cpp``: a per-channel weight as [1, 1, C, 1]."""
    return x if v is None else binary(op, x, wview(v, (1, 1, v.ne[0], 1)))


def _ln_channels(x: T, w_: T | None, b: T | None) -> T:
    """``clip_graph_yasa2::layer_norm_channels``: a ConvNeXt channels-first layer norm spelled out (mean, centre,
    variance, clamp, sqrt, divide) over a [C, H, W] copy."""
    cur = cont(permute(x, 2, 1, 0, 3))
    u = new("f32", (1, cur.ne[1], cur.ne[2], cur.ne[3]), "MEAN", (cur,))
    xm = binary("SUB", cur, u)
    var = new("f32", (1, cur.ne[1], cur.ne[2], cur.ne[3]), "MEAN", (binary("MUL", xm, xm),))
    var = unary("SQRT", unary("CLAMP", var))
    xhat = cont(permute(binary("DIV", xm, var), 2, 1, 0, 3))
    return _channel("ADD", _channel("MUL", xhat, w_), b)


def _grn(x: T, w_: T | None, b: T | None) -> T:
    """``clip_graph_yasa2::convnext_grn``: ConvNeXt-V2's global response norm."""
    wd, hd, cd, bd = x.ne
    gx = unary("SQRT", sum_rows(reshape(binary("MUL", x, x), wd * hd, cd, 1, bd)))
    gxc = cont(permute(gx, 1, 0, 2, 3))
    mean = unary("CLAMP", new("f32", (1, gxc.ne[1], gxc.ne[2], gxc.ne[3]), "MEAN", (gxc,)))
    nx = cont(permute(binary("DIV", gx, mean), 0, 2, 1, 3))
    xnx = _channel("ADD", _channel("MUL", binary("MUL", x, nx), w_), b)
    return binary("ADD", x, xnx)


def _pointwise(x: T, weight: T, bias: T | None) -> T:
    """A ConvNeXt pointwise conv as yasa2.cpp runs it: the [W, H, C] map as tokens, a matmul, back to [W, H, C']."""
    wd, hd, bd = x.ne[0], x.ne[1], x.ne[3]
    tok = mul_mat(weight, cont(permute(reshape(x, wd * hd, x.ne[2], bd), 1, 0, 2, 3)))
    if bias is not None:
        tok = binary("ADD", tok, wview(bias, (bias.ne[0], 1, 1)))
    return reshape(cont(permute(tok, 1, 0, 2, 3)), wd, hd, tok.ne[0], bd)


def build_yasa2(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_yasa2::build`` (Reka's ConvNeXt-V2, ``models/yasa2.cpp``): the patch conv and its channel norm,
    then each stage (``v.stage.S``: an optional norm and stride-2 downsampling conv, blocks of a 7x7 depthwise
    conv, channel norm, pointwise matmuls around exact GELU and GRN, the residual), the position embedding where
    its token count matches, an average pool to at most 8x8 and the GELU MLP ``mm.0``/``mm.2``."""
    g = Graph()
    size = hp.warmup_image_size
    raw = inp_raw((size, size, 3, 1))
    cur = conv_2d(g, w("v.patch_embd.weight"), raw, hp.patch_size, hp.patch_size)
    cur = _channel("ADD", cur, w("v.patch_embd.bias"))
    cur = _ln_channels(cur, w("v.patch_ln.weight"), w("v.patch_ln.bias"))
    stage = 0
    while True:
        pre = f"v.stage.{stage}."
        down = w(pre + "down.conv.weight")
        if down is None and w(pre + "blk.0.dw.weight") is None:
            break
        if down is not None:
            cur = _ln_channels(cur, w(pre + "down.ln.weight"), w(pre + "down.ln.bias"))
            cur = _channel("ADD", conv_2d(g, down, cur, 2, 2), w(pre + "down.conv.bias"))
        blk = 0
        while w(f"{pre}blk.{blk}.dw.weight") is not None:
            bp = f"{pre}blk.{blk}."
            res = cur
            x = _channel("ADD", conv_2d_dw(w(bp + "dw.weight"), cur, 1, 3), w(bp + "dw.bias"))
            x = _ln_channels(x, w(bp + "ln.weight"), w(bp + "ln.bias"))
            x = unary("UNARY", _pointwise(x, w(bp + "pw1.weight"), w(bp + "pw1.bias")))
            x = _grn(x, w(bp + "grn.weight"), w(bp + "grn.bias"))
            cur = binary("ADD", res, _pointwise(x, w(bp + "pw2.weight"), w(bp + "pw2.bias")))
            blk += 1
        stage += 1
    pw, ph = cur.ne[0], cur.ne[1]
    tok = cont(permute(reshape(cur, pw * ph, cur.ne[2], cur.ne[3]), 1, 0, 2, 3))
    pos = w("v.vision_pos_embed")
    if pos is not None and tok.ne[1] == pos.ne[1]:
        tok = binary("ADD", tok, wview(pos, (pos.ne[0], pos.ne[1], 1)))
    cur = reshape(cont(permute(tok, 1, 0, 2, 3)), pw, ph, tok.ne[0], tok.ne[2])
    kw = max(1, pw // min(8, pw))
    kh = max(1, ph // min(8, ph))
    cur = new("f32", ((pw - kw) // kw + 1, (ph - kh) // kh + 1, cur.ne[2], cur.ne[3]), "POOL_2D", (cur,))
    tok = cont(permute(reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2], cur.ne[3]), 1, 0, 2, 3))
    g.expand(mlp(w, tok, "mm.0", "mm.2", "gelu_erf"))
    return g


def build_nemotron_v2_vl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_nemotron_v2_vl::build`` (Nemotron Nano V2 VL's RADIO, ``models/nemotron-v2-vl.cpp``): the patch
    conv, positions added as stored, the register rows in front, a layer-norm ViT, the registers cut off, the
    pixel unshuffle, an RMS norm and the squared-ReLU MLP."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    inp = binary("ADD", inp, w("v.position_embd.weight"))
    cls = w("v.class_embd")
    n_reg = cls.ne[1]
    inp = new(wtype(cls), (e, n_reg + n_patches, 1, 1), "CONCAT", (cls, inp))
    cur = build_vit(g, hp, w, inp, n_reg + n_patches, False, None, fa)
    cur = view(cur, (e, n_patches), (row_size(cur.ty, e),))
    cur = patch_merge_permute(cur, e, npx, npx, hp.n_merge)
    cur = _norm(cur, w("mm.model.mlp.0.weight"), None, True)
    cur = build_ffn(cur, w("mm.model.mlp.1.weight"), None, None, None, w("mm.model.mlp.3.weight"), None, "relu_sqr")
    g.expand(cur)
    return g


def build_gemma4uv(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_gemma4uv::build`` (Gemma 4's encoder-free "unified" vision, ``models/gemma4uv.cpp``): im2col
    of the image with a kernel tensor of its own (a leaf the compute buffer holds), a layer norm, the patch
    matmul and bias, a layer norm, x/y position tables, a layer norm, then RMS norm and the projection."""
    g = Graph()
    size, p, e = hp.warmup_image_size, hp.patch_size, hp.n_embd
    npx = size // p
    raw = inp_raw((size, size, 3, 1))
    kernel = new("f32", (p, p, 3), NONE)  # ggml_new_tensor_3d: no data, only im2col's shape
    cur = new("f32", (3 * p * p, npx, npx, 1), "IM2COL", (kernel, raw))
    cur = reshape(cur, cur.ne[0], npx * npx)
    cur = _norm(cur, w("v.patch_norm.1.weight"), w("v.patch_norm.1.bias"), False)
    cur = binary("ADD", mul_mat(w("v.patch_embd.weight"), cur), w("v.patch_embd.bias"))
    cur = _norm(cur, w("v.patch_norm.2.weight"), w("v.patch_norm.2.bias"), False)
    pos_x = graph_input("i32", (npx * npx,))
    pos_y = graph_input("i32", (npx * npx,))
    pe = w("v.position_embd.weight")
    cur = binary("ADD", cur, get_rows(wview(pe, (e, pe.ne[1]), "VIEW"), pos_x))
    cur = binary("ADD", cur, get_rows(wview(pe, (e, pe.ne[1]), "VIEW"), pos_y))
    cur = _norm(cur, w("v.patch_norm.3.weight"), w("v.patch_norm.3.bias"), False)
    cur = mul_mat(w("mm.input_projection.weight"), unary("RMS_NORM", cur))
    g.expand(cur)
    return g


def build_step3vl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_step3vl::build`` (Step3-VL, ``models/step3vl.cpp``): the patch conv, the resized learned grid,
    a layer-norm ViT with 2D RoPE, two stride-2 3x3 convolutions each with its channel bias added through a
    transposed copy, the flatten and the projection."""
    g = Graph()
    size = hp.warmup_image_size
    e = hp.n_embd
    npx = size // hp.patch_size
    pos_h = graph_input("i32", (npx * npx,))
    pos_w = graph_input("i32", (npx * npx,))
    _raw, inp, n_pos = build_inp(g, hp, w, size)
    pos = resize_position_embeddings(w, hp, npx, npx)

    rope_2d = ropes(pos_w, pos_h)  # clip_graph::build_rope_2d: one rope a half

    def spatial_bias(cur: T, bias: T | None) -> T:
        if bias is None:
            return cur
        wd, ht, ch = cur.ne[0], cur.ne[1], cur.ne[2]
        cur = cont(transpose(reshape(cur, wd * ht, ch)))
        cur = cont(transpose(binary("ADD", cur, bias)))
        return reshape(cur, wd, ht, ch)

    cur = build_vit(g, hp, w, inp, n_pos, False, pos, fa, rope_2d)
    cur = cont(permute(cur, 1, 0, 2, 3), npx, npx, e, 1)
    cur = spatial_bias(conv_2d(g, w("mm.0.weight"), cur, 2, 2, 1, 1), w("mm.0.bias"))
    cur = spatial_bias(conv_2d(g, w("mm.1.weight"), cur, 2, 2, 1, 1), w("mm.1.bias"))
    cur = cont(permute(reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2], cur.ne[3]), 1, 0, 2, 3))
    cur = mul_mat(w("mm.model.fc.weight"), cur)
    g.expand(cur)
    return g


def build_siglip(hp: ClipHParams, w, fa: bool, kind: str) -> Graph:
    """``clip_graph_siglip::build`` for ``idefics3`` (SmolVLM: pixel shuffle, one linear), ``lfm2`` (LFM2-VL:
    position grid resized to the image, pixel shuffle, optional layer norm, a GELU MLP), ``phi4`` (Phi-4
    multimodal: the grid resized, no merge, a GELU MLP) and ``janus_pro`` (Janus-Pro: an MLP on the patches)."""
    g = Graph()
    size = hp.warmup_image_size
    npx = size // hp.patch_size
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    pos = w("v.position_embd.weight")
    if kind in ("lfm2", "phi4") and pos is not None:
        pos = resize_position_embeddings(w, hp, npx, npx)
    cur = build_vit(g, hp, w, inp, n_patches, False, pos, fa)
    if kind in ("phi4", "janus_pro"):  # no merge: a GELU MLP (janus: the file's FFN op) straight on the patches
        up, down = ("mm.0", "mm.2") if kind == "phi4" else ("mm.0", "mm.1")
        cur = build_ffn(
            cur,
            w(up + ".weight"),
            w(up + ".bias"),
            None,
            None,
            w(down + ".weight"),
            w(down + ".bias"),
            "gelu" if kind == "phi4" else hp.ffn_op,
        )
        g.expand(cur)
        return g
    cur = patch_merge_permute(cur, hp.n_embd, npx, npx, hp.n_merge)
    if kind == "idefics3":
        cur = mul_mat(w("mm.model.fc.weight"), cur)
    else:
        nw, nb = w("mm.input_norm.weight"), w("mm.input_norm.bias")
        if nw is not None:
            cur = binary("MUL", unary("NORM", cur), nw)
        if nb is not None:
            cur = binary("ADD", cur, nb)
        cur = mlp(w, cur, "mm.1", "mm.2", "gelu")
    g.expand(cur)
    return g


def build_internvl(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_internvl::build`` (``models/internvl.cpp``): InternViT with the CLS token (repeated and
    concatenated, dropped again after the ViT), layer scales, the pixel shuffle and the ``mm.model.mlp`` MLP."""
    g = Graph()
    size = hp.warmup_image_size
    e, sf = hp.n_embd, hp.n_merge
    npx = size // hp.patch_size
    _raw, inp, n_patches = build_inp(g, hp, w, size)
    cls = w("v.class_embd")
    rep = new(wtype(cls), (cls.ne[0], 1, 1, 1), "REPEAT", (cls,))
    inp = concat(inp, rep, 1)
    rms = hp.n_embd == 3200 and hp.n_layer == 45  # the 6B ViT (InternVL 2.5/3 26B, 38B, 78B)
    cur = build_vit(g, hp, w, inp, n_patches + 1, rms, w("v.position_embd.weight"), fa)
    cur = view(cur, (e, n_patches, 1), (cur.nb[1], cur.nb[2]))
    cur = cont(cur)
    cur = reshape(cur, e * sf, npx // sf, npx, 1)
    cur = permute(cur, 0, 2, 1, 3)
    cur = cont(cur, e * sf * sf, npx // sf, npx // sf, 1)
    cur = permute(cur, 0, 2, 1, 3)
    cur = cont(cur, e * sf * sf, cur.ne[1] * cur.ne[2], cur.ne[3], 1)
    cur = _norm(cur, w("mm.model.mlp.0.weight"), w("mm.model.mlp.0.bias"), False)
    cur = mlp(w, cur, "mm.model.mlp.1", "mm.model.mlp.3", "gelu")
    g.expand(cur)
    return g


def conv_1d_ph(kernel: T, inp: T, s0: int) -> T:
    """``ggml_conv_1d_ph``: :func:`conv_1d` padded by half the kernel."""
    return conv_1d(kernel, inp, s0, kernel.ne[0] // 2)


def conv_1d(kernel: T, inp: T, s0: int, p0: int) -> T:
    """``ggml_conv_1d`` (dilation 1): im2col (f16, f32 for a bf16 kernel) of [IC * K, OL], a matmul against the
    kernel reshaped to [K * IC, OC], reshaped to [OL, OC, 1]."""
    k, ic, oc = kernel.ne[0], kernel.ne[1], kernel.ne[2]
    ol = (inp.ne[0] + 2 * p0 - (k - 1) - 1) // s0 + 1  # ggml_calc_conv_output_size, dilation 1
    col_ty = "f32" if wtype(kernel) == "bf16" else "f16"
    im2col = new(col_ty, (ic * k, ol, inp.ne[2], 1), "IM2COL", (kernel, inp))
    a = reshape(im2col, im2col.ne[0], im2col.ne[2] * im2col.ne[1])
    r = mul_mat(a, wview(kernel, (k * ic, oc)))
    return reshape(r, im2col.ne[1], oc, im2col.ne[2])


#: the whisper-encoder projector types (``models/whisper-enc.cpp``) whose adapter is replayed
WHISPER_TYPES = ("ultravox", "qwen2a", "voxtral", "musicflamingo", "meralion", "glma")


def build_whisper(hp: ClipHParams, w, fa: bool, proj_type: str) -> Graph:
    """``clip_graph_whisper_enc::build`` for the warmup audio (``warmup_frames`` x ``n_mel``): two 1-D
    convolutions with GELU (the second halves the frames), the learned positions, the transformer, the average
    pool of Qwen2-Audio/Voxtral/Music Flamingo, frame stacking (Ultravox, Voxtral, MERaLiON), then the type's
    adapter."""
    g = Graph()
    raw = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    n_pos = hp.warmup_frames // 2
    cur = conv_1d_ph(w("a.conv1d.1.weight"), raw, 1)
    cur = unary("UNARY", binary("ADD", cur, w("a.conv1d.1.bias")))
    cur = conv_1d_ph(w("a.conv1d.2.weight"), cur, 2)
    cur = unary("UNARY", binary("ADD", cur, w("a.conv1d.2.bias")))
    inp = cont(transpose(cur))
    pos = w("a.position_embd.weight")
    pos = wview(pos, (pos.ne[0], n_pos), "VIEW")
    avgpool = proj_type in ("qwen2a", "voxtral", "musicflamingo")
    cur = build_vit(g, hp, w, inp, n_pos, False, pos, fa, avgpool=avgpool)
    e = hp.n_embd

    def stack(cur: T) -> T:  # build_stack
        if hp.stack_factor <= 1:
            return cur
        total = cur.ne[0] * cur.ne[1] * cur.ne[2] * cur.ne[3]
        stride = e * hp.stack_factor
        padded = (total + stride - 1) // stride * stride
        if padded > total:
            cur = view(cur, (total,), ())
            cur = new(cur.ty, (padded, 1, 1, 1), "PAD", (cur,))
        return view(cur, (stride, padded // stride), (row_size(cur.ty, stride),))

    if proj_type in ("ultravox", "voxtral", "meralion"):  # audio_has_stack_frames
        cur = stack(cur)
    if proj_type == "glma":  # norm, stack, GELU MLP, then the begin/end-of-audio rows around it
        cur = _norm(cur, w("mm.a.norm_pre.weight"), w("mm.a.norm_pre.bias"), False)
        cur = stack(cur)
        cur = mlp(w, cur, "mm.a.mlp.1", "mm.a.mlp.2", "gelu_erf")
        boi, eoi = w("v.boi"), w("v.eoi")
        cur = new(wtype(boi), (cur.ne[0], boi.ne[1] + cur.ne[1], 1, 1), "CONCAT", (boi, cur))
        cur = new(cur.ty, (cur.ne[0], cur.ne[1] + eoi.ne[1], 1, 1), "CONCAT", (cur, eoi))
    elif proj_type == "ultravox":
        cur = binary("MUL", unary("RMS_NORM", cur), w("mm.a.norm_pre.weight"))
        cur = mul_mat(w("mm.a.mlp.1.weight"), cur)
        cur = new(cur.ty, (cur.ne[0] // 2, cur.ne[1], cur.ne[2], cur.ne[3]), "GLU", (cur,))  # swiglu_swapped
        cur = binary("MUL", unary("RMS_NORM", cur), w("mm.a.norm_mid.weight"))
        cur = mul_mat(w("mm.a.mlp.2.weight"), cur)
    elif proj_type == "qwen2a":
        cur = binary("ADD", mul_mat(w("mm.a.fc.weight"), cur), w("mm.a.fc.bias"))
    elif proj_type in ("voxtral", "musicflamingo"):
        cur = mlp(w, cur, "mm.a.mlp.1", "mm.a.mlp.2", "gelu_erf")
    elif proj_type == "meralion":
        cur = _norm(cur, w("mm.a.norm_pre.weight"), w("mm.a.norm_pre.bias"), False)
        cur = unary("UNARY", binary("ADD", mul_mat(w("mm.a.mlp.0.weight"), cur), w("mm.a.mlp.0.bias")))
        gate = unary("UNARY", binary("ADD", mul_mat(w("mm.a.mlp.1.weight"), cur), w("mm.a.mlp.1.bias")))
        pool = binary("ADD", mul_mat(w("mm.a.mlp.2.weight"), cur), w("mm.a.mlp.2.bias"))
        cur = binary("MUL", gate, pool)
        cur = binary("ADD", mul_mat(w("mm.a.mlp.3.weight"), cur), w("mm.a.mlp.3.bias"))
    else:
        raise NotImplementedError(f"{proj_type} audio adapter")
    g.expand(cur)
    return g


def build_qwen3a(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_qwen3a::build`` (Qwen3-Omni / Qwen3-ASR audio, ``models/qwen3a.cpp``): the warmup frames as
    chunks of 100, three stride-2 3x3 convolutions with GELU, the flattened channels projected to the encoder
    width, 13 positions repeated per chunk, the transformer, a GELU MLP."""
    g = Graph()
    raw = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    chunk = 100
    n_chunks = hp.warmup_frames // chunk
    if hp.warmup_frames % chunk:
        raise NotImplementedError("frames not a multiple of the chunk")
    f4 = 4  # sizeof(float)
    cur = view(raw, (chunk, hp.n_mel, 1, n_chunks), (hp.warmup_frames * f4, chunk * f4, chunk * f4))
    cur = cont(cur)
    for i in (1, 2, 3):
        cur = conv_2d(g, w(f"a.conv2d.{i}.weight"), cur, 2, 2, 1, 1)
        b = w(f"a.conv2d.{i}.bias")
        if b is not None:
            cur = binary("ADD", cur, wview(b, (1, 1, cur.ne[2], 1)))
        cur = unary("UNARY", cur)
    cur = cont(permute(cur, 2, 0, 1, 3))
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    cur = mul_mat(w("a.conv_out.weight"), cur)
    bias = w("a.conv_out.bias")
    if bias is not None:
        cur = binary("ADD", cur, bias)
    n_pos = cur.ne[1]
    pos = w("a.position_embd.weight")
    pos = wview(pos, (pos.ne[0], n_pos // n_chunks), "VIEW")
    cur = binary("ADD", cur, new("f32", (pos.ne[0], n_pos, 1, 1), "REPEAT", (pos,)))
    cur = build_vit(g, hp, w, cur, n_pos, False, None, fa)
    cur = mlp(w, cur, "mm.a.mlp.1", "mm.a.mlp.2", "gelu_erf")
    g.expand(cur)
    return g


def build_gemma4a(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_gemma4a::build`` (Gemma 4's audio conformer, ``models/gemma4a.cpp``): two padded stride-2 3x3
    convolutions with channel layer norms and ReLU, the input projection, then per block a half-step SiLU FFN,
    chunked local attention (chunks of 12 with 12 past positions, padded and cut with overlapping views, relative
    positions shifted Transformer-XL style, a softcap, a blocked mask input), a GLU + causal depthwise
    convolution (SSM_CONV) module and a second half-step FFN; the output projection and the embedder. Every
    ``build_mm`` is clamped (``clamp_info_map`` holds every loaded weight). Flash attention is not used."""
    g = Graph()
    nh, dh = hp.n_head, hp.d_head

    def mm(wt: T, x: T) -> T:
        return unary("CLAMP", mul_mat(wt, unary("CLAMP", x)))

    def rms(x: T, wt: T | None) -> T:
        x = unary("RMS_NORM", x)
        return binary("MUL", x, wt) if wt is not None else x

    def pad4(x: T, *ne) -> T:
        return new(x.ty, ne4(ne), "PAD", (x,))

    raw = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    cur = cont(transpose(raw))
    for i in (0, 1):
        cur = conv_2d(g, w(f"a.conv1d.{i}.weight"), cur, 2, 2, 1, 1)
        if w(f"a.conv1d.{i}.bias") is not None:
            cur = binary("ADD", cur, w(f"a.conv1d.{i}.bias"))
        nw = w(f"a.conv1d.{i}.norm.weight")
        if nw is not None:  # nn.LayerNorm over the channels
            cur = cont(permute(cur, 1, 2, 0, 3))
            cur = binary("MUL", unary("NORM", cur), nw)
            cur = cont(permute(cur, 2, 0, 1, 3))
        cur = unary("UNARY", cur)  # relu
    cur = cont(permute(cur, 1, 2, 0, 3))
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2])
    cur = mm(w("a.input_projection.weight"), cur)
    if w("a.input_projection.bias") is not None:
        cur = binary("ADD", cur, w("a.input_projection.bias"))
    n_pos = cur.ne[1]
    C = P = 12
    S, R = C + P, P + 1
    B = (n_pos + C - 1) // C
    pad_seq = B * C - n_pos
    pos_emb = graph_input("f32", (nh * dh, R), "pos_emb")
    kq_mask = graph_input("f32", (S, C, B), "kq_mask")

    def half_ffn(residual: T, x: T, norm: str, up: str, down: str, post: str, p: str) -> T:
        x = rms(x, w(p + norm))
        x = build_ffn(x, w(p + up), None, None, None, w(p + down), None, "silu", mm)
        if w(p + post) is not None:
            x = rms(x, w(p + post))
        return binary("ADD", residual, unary("SCALE", x))

    def blocks(t: T) -> T:  # extract_blocks: left pad P, right pad to S*B, overlapping windows of S, stride C
        t = pad4(t, dh, nh, S * B)
        t = view(t, (dh, nh, S, B), (t.nb[1], t.nb[2], C * t.nb[2]))
        return cont(t)

    for il in range(hp.n_layer):
        p = f"a.blk.{il}."
        residual = cur
        if w(p + "ffn_norm.weight") is not None and w(p + "ffn_up.weight") is not None:
            residual = half_ffn(
                residual, cur, "ffn_norm.weight", "ffn_up.weight", "ffn_down.weight", "ffn_post_norm.weight", p
            )
        qw, kw_, vw, ow = (w(p + f"attn_{x}.weight") for x in ("q", "k", "v", "out"))
        if qw is not None and kw_ is not None and vw is not None and ow is not None:
            nw = w(p + "attn_pre_norm.weight") or w(p + "ln1.weight")
            x = rms(residual, nw) if nw is not None else residual
            q = reshape(mm(qw, x), dh, nh, n_pos)
            k = reshape(mm(kw_, x), dh, nh, n_pos)
            v = reshape(mm(vw, x), dh, nh, n_pos)
            q = unary("SCALE", q)
            if w(p + "per_dim_scale.weight") is not None:
                q = binary("MUL", q, wview(w(p + "per_dim_scale.weight"), (dh, 1, 1)))
            k = unary("SCALE", k)
            if w(p + "per_dim_k_scale.weight") is not None:
                k = binary("MUL", k, wview(w(p + "per_dim_k_scale.weight"), (dh, 1, 1)))
            q = pad4(q, dh, nh, n_pos + pad_seq)
            q = cont(permute(reshape(q, dh, nh, C, B), 0, 3, 1, 2))
            kb = cont(permute(blocks(k), 0, 3, 1, 2))
            vb = cont(permute(blocks(v), 1, 3, 0, 2))
            ac = mul_mat(kb, q)
            krel = w(p + "attn_k_rel.weight")
            if krel is not None:
                pe = reshape(mul_mat(krel, pos_emb), dh, nh, R)
                pe = cont(permute(pe, 0, 2, 1, 3))
                bd = mul_mat(pe, reshape(q, dh, C * B, nh))
                bd = reshape(bd, R, C, B, nh)
                bd = pad4(bd, S + 1, C, B, nh)
                bd = reshape(bd, (S + 1) * C, B, nh)
                bd = cont(view(bd, (C * S, B, nh), (bd.nb[1], bd.nb[2])))
                bd = reshape(bd, S, C, B, nh)
                ac = binary("ADD", ac, bd)
            scores = unary("SCALE", unary("UNARY", unary("SCALE", ac)))  # the softcap: scale, tanh, scale
            scores = binary("ADD", scores, kq_mask)
            attn = unary("SOFT_MAX", scores)
            x = mul_mat(vb, attn)
            x = cont(permute(x, 0, 2, 3, 1))
            x = cont(x, dh * nh, C * B)
            if pad_seq > 0:
                x = cont(view(x, (dh * nh, n_pos), (x.nb[1],)))
            x = mm(ow, x)
            if w(p + "attn_out.bias") is not None:
                x = binary("ADD", x, w(p + "attn_out.bias"))
            if w(p + "attn_post_norm.weight") is not None:
                x = rms(x, w(p + "attn_post_norm.weight"))
            residual = binary("ADD", residual, x)
        pw1, dw, pw2 = w(p + "conv_pw1.weight"), w(p + "conv_dw.weight"), w(p + "conv_pw2.weight")
        pre = w(p + "conv_norm.weight")  # the GGUF's conv_norm is the module's pre-norm (names swapped upstream)
        if pre is not None and pw1 is not None and dw is not None and pw2 is not None:
            x = mm(pw1, rms(residual, pre))
            d = x.ne[0] // 2
            gate = unary("UNARY", cont(view(x, (d, x.ne[1]), (x.nb[1],))))  # sigmoid of the second half
            x = binary("MUL", view(x, (d, x.ne[1]), (x.nb[1],)), gate)
            x = cont(transpose(x))
            x = pad4(x, x.ne[0] + 4, x.ne[1])
            x = new("f32", (dw.ne[1], x.ne[0] - dw.ne[0] + 1, x.ne[2]), "SSM_CONV", (x, dw))
            if w(p + "conv_dw.bias") is not None:
                x = binary("ADD", x, w(p + "conv_dw.bias"))
            if w(p + "norm_conv.weight") is not None:
                x = rms(x, w(p + "norm_conv.weight"))
            x = mm(pw2, unary("UNARY", x))  # silu
            residual = binary("ADD", residual, x)
        if w(p + "ffn_norm_1.weight") is not None and w(p + "ffn_up_1.weight") is not None:
            residual = half_ffn(
                residual,
                residual,
                "ffn_norm_1.weight",
                "ffn_up_1.weight",
                "ffn_down_1.weight",
                "ffn_post_norm_1.weight",
                p,
            )
        cur = rms(residual, w(p + "ln2.weight")) if w(p + "ln2.weight") is not None else residual
    if w("a.pre_encode.out.weight") is not None:
        cur = mm(w("a.pre_encode.out.weight"), cur)
        if w("a.pre_encode.out.bias") is not None:
            cur = binary("ADD", cur, w("a.pre_encode.out.bias"))
    cur = rms(cur, w("mm.a.soft_emb_norm.weight"))
    if w("mm.a.input_projection.weight") is not None:
        cur = mm(w("mm.a.input_projection.weight"), cur)
    g.expand(cur)
    return g


def build_gemma4ua(hp: ClipHParams, w) -> Graph:
    """``clip_graph_gemma4ua::build`` (Gemma 4's encoder-free audio, ``models/gemma4ua.cpp``): the raw waveform in
    640-sample frames, transposed, RMS-normed and projected."""
    g = Graph()
    raw = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    cur = unary("RMS_NORM", cont(permute(raw, 1, 0, 2, 3)))
    g.expand(mul_mat(w("mm.a.input_projection.weight"), cur))
    return g


def _half_step_ffn(w, x: T, p: str, sfx: str, bias: bool = True) -> T:
    """A conformer block's half-step feed-forward: ``ffn_norm{sfx}``, the SiLU ``ffn_up``/``ffn_down``, scaled by
    half and added to ``x`` (LFM2-Audio's and Granite Speech's with their biases, Parakeet's without:
    ``models/conformer.cpp``, ``granite-speech.cpp``, ``parakeet.cpp``)."""
    up_b, down_b = (w(f"{p}ffn_up{sfx}.bias"), w(f"{p}ffn_down{sfx}.bias")) if bias else (None, None)
    y = _norm(x, w(f"{p}ffn_norm{sfx}.weight"), w(f"{p}ffn_norm{sfx}.bias"), False)
    y = build_ffn(y, w(f"{p}ffn_up{sfx}.weight"), up_b, None, None, w(f"{p}ffn_down{sfx}.weight"), down_b, "silu")
    return binary("ADD", x, unary("SCALE", y))


def _conv_glu(w, residual: T, p: str) -> T:
    """The head of a conformer block's conv module: ``norm_conv``, the biased pointwise ``conv_pw1`` to twice the
    width and its GLU (the first half times the sigmoid of the second half's view), as LFM2-Audio's and Granite
    Speech's build it (``models/conformer.cpp``, ``granite-speech.cpp``)."""
    x = _norm(residual, w(p + "norm_conv.weight"), w(p + "norm_conv.bias"), False)
    x = binary("ADD", mul_mat(w(p + "conv_pw1.weight"), x), w(p + "conv_pw1.bias"))
    d = x.ne[0] // 2
    gate = unary("UNARY", view(x, (d, x.ne[1]), (x.nb[1],)))  # sigmoid of the second half's view
    return binary("MUL", view(x, (d, x.ne[1]), (x.nb[1],)), gate)


def build_conformer(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_conformer::build`` (LFM2-Audio, ``lfm2a``; ``models/conformer.cpp``): the 512-wide relative
    positions input first, then the subsampling (a conv, two depthwise + pointwise pairs, in-place ReLUs), the
    output projection, and per block a half-step SiLU FFN, attention with u/v position biases and the relative
    shift (PAD, reshape, view), the GLU + padded/rolled depthwise SSM_CONV module, a second half-step FFN and the
    norm; then the adapter's norm and erf-GELU MLP."""
    g = Graph()
    nh, dh = hp.n_head, hp.d_head
    n_frames = hp.warmup_frames
    n_pos_embd = ((((n_frames + 1) // 2 + 1) // 2 + 1) // 2) * 2 - 1
    pos_emb = graph_input("f32", (512, n_pos_embd), "pos_emb")
    g.expand(pos_emb)
    raw = inp_raw((n_frames, hp.n_mel, 1, 1))

    def relu_inplace(x: T) -> T:
        return view_tensor(x, "UNARY", [x])

    def dw(x: T, k: T, s_: int, p_: int) -> T:  # ggml_conv_2d_dw_direct
        ne0 = (x.ne[0] + 2 * p_ - k.ne[0]) // s_ + 1
        ne1 = (x.ne[1] + 2 * p_ - k.ne[1]) // s_ + 1
        return new(x.ty, (ne0, ne1, x.ne[2], x.ne[3]), "CONV_2D_DW", (k, x))

    def direct(x: T, k: T) -> T:  # ggml_conv_2d_direct, 1x1 without padding
        return new(x.ty, (x.ne[0] - k.ne[0] + 1, x.ne[1] - k.ne[1] + 1, k.ne[3], x.ne[3]), "CONV_2D", (k, x))

    cur = cont(transpose(raw))
    cur = conv_2d(g, w("a.conv1d.0.weight"), cur, 2, 2, 1, 1)
    cur = relu_inplace(binary("ADD", cur, w("a.conv1d.0.bias")))
    cur = binary("ADD", dw(cur, w("a.conv1d.2.weight"), 2, 1), w("a.conv1d.2.bias"))
    cur = relu_inplace(binary("ADD", direct(cur, w("a.conv1d.3.weight")), w("a.conv1d.3.bias")))
    cur = binary("ADD", dw(cur, w("a.conv1d.5.weight"), 2, 1), w("a.conv1d.5.bias"))
    cur = relu_inplace(binary("ADD", direct(cur, w("a.conv1d.6.weight")), w("a.conv1d.6.bias")))
    cur = cont(permute(cur, 0, 2, 1, 3))
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2])
    cur = binary("ADD", mul_mat(w("a.pre_encode.out.weight"), cur), w("a.pre_encode.out.bias"))

    for il in range(hp.n_layer):
        p = f"a.blk.{il}."
        residual = _half_step_ffn(w, cur, p, "")
        x = _norm(residual, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        q = binary("ADD", mul_mat(w(p + "attn_q.weight"), x), w(p + "attn_q.bias"))
        q = reshape(q, dh, nh, q.ne[1])
        qu = permute(binary("ADD", q, w(p + "pos_bias_u")), 0, 2, 1, 3)
        qv = permute(binary("ADD", q, w(p + "pos_bias_v")), 0, 2, 1, 3)
        k = binary("ADD", mul_mat(w(p + "attn_k.weight"), x), w(p + "attn_k.bias"))
        k = cont(permute(reshape(k, dh, nh, k.ne[1]), 0, 2, 1, 3))
        v = binary("ADD", mul_mat(w(p + "attn_v.weight"), x), w(p + "attn_v.bias"))
        v = cont(permute(reshape(v, dh, nh, v.ne[1]), 1, 2, 0, 3))
        ac = cont(permute(mul_mat(qu, k), 1, 0, 2, 3))
        pe = mul_mat(w(p + "linear_pos.weight"), pos_emb)
        pe = permute(reshape(pe, dh, nh, pe.ne[1]), 0, 2, 1, 3)
        bd = cont(permute(mul_mat(qv, pe), 1, 0, 2, 3))
        pos_len, q_len, h = bd.ne[0], bd.ne[1], bd.ne[2]
        bd = new(bd.ty, (pos_len + 1, q_len, h, 1), "PAD", (bd,))
        bd = reshape(bd, q_len, pos_len + 1, h)
        bd = view(bd, (q_len, pos_len, h), (bd.nb[1], bd.nb[2]))
        bd = cont(bd, pos_len, q_len, h, 1)
        bd = view(bd, (ac.ne[0], bd.ne[1], bd.ne[2]), (bd.nb[1], bd.nb[2]))
        scores = unary("SOFT_MAX", unary("SCALE", binary("ADD", ac, bd)))
        x = permute(mul_mat(scores, v), 2, 0, 1, 3)
        x = cont(x, x.ne[0] * x.ne[1], x.ne[2], 1, 1)
        x = binary("ADD", mul_mat(w(p + "attn_out.weight"), x), w(p + "attn_out.bias"))
        residual = binary("ADD", residual, x)
        x = cont(transpose(_conv_glu(w, residual, p)))
        x = new(x.ty, (x.ne[0] + 4, x.ne[1], 1, 1), "PAD", (x,))
        x = new(x.ty, x.ne, "ROLL", (x,))
        x = new(x.ty, (x.ne[0] + 4, x.ne[1], 1, 1), "PAD", (x,))
        cw = w(p + "conv_dw.weight")
        x = new("f32", (cw.ne[1], x.ne[0] - cw.ne[0] + 1, x.ne[2]), "SSM_CONV", (x, cw))
        x = binary("ADD", x, w(p + "conv_dw.bias"))
        x = binary("ADD", binary("MUL", x, w(p + "conv_norm.weight")), w(p + "conv_norm.bias"))
        x = unary("UNARY", x)  # silu
        x = binary("ADD", mul_mat(w(p + "conv_pw2.weight"), x), w(p + "conv_pw2.bias"))
        residual = binary("ADD", residual, x)
        residual = _half_step_ffn(w, residual, p, "_1")
        cur = _norm(residual, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
    cur = _norm(cur, w("mm.a.mlp.0.weight"), w("mm.a.mlp.0.bias"), False)
    cur = mlp(w, cur, "mm.a.mlp.1", "mm.a.mlp.3", "gelu_erf")
    g.expand(cur)
    return g


def build_parakeet(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_parakeet::build`` (``models/parakeet.cpp``) for the warmup's frames (full attention: the
    local-attention path starts past 8192 subsampled frames): the subsampling (a conv, two direct depthwise +
    pointwise conv pairs, each with a ReLU), the output projection, the sinusoidal relative positions built in
    the graph from its two inputs (REPEAT, MUL, SIN, COS, CONCAT), then per block a half-step SiLU FFN,
    attention with u/v position biases and the relative shift (PAD, reshape, copies of views) scaled and masked
    before the softmax, the GLU + padded depthwise ``SSM_CONV`` module with its batch norm (SUB, SQRT, DIV), a
    second half-step FFN and the norm; then an RMS norm and the squared-ReLU MLP without biases."""
    g = Graph()
    nh = hp.n_head
    inp = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))

    def dw(x: T, k: T) -> T:  # ggml_conv_2d_dw_direct, stride 2, padding 1
        ne0, ne1 = (x.ne[0] + 2 - k.ne[0]) // 2 + 1, (x.ne[1] + 2 - k.ne[1]) // 2 + 1
        return new(x.ty, (ne0, ne1, x.ne[2], x.ne[3]), "CONV_2D_DW", (k, x))

    cur = cont(transpose(inp))
    cur = unary("UNARY", binary("ADD", conv_2d(g, w("a.conv1d.0.weight"), cur, 2, 2, 1, 1), w("a.conv1d.0.bias")))
    cur = binary("ADD", dw(cur, w("a.conv1d.2.weight")), w("a.conv1d.2.bias"))
    cur = unary("UNARY", binary("ADD", conv_2d(g, w("a.conv1d.3.weight"), cur, 1, 1), w("a.conv1d.3.bias")))
    cur = binary("ADD", dw(cur, w("a.conv1d.5.weight")), w("a.conv1d.5.bias"))
    cur = unary("UNARY", binary("ADD", conv_2d(g, w("a.conv1d.6.weight"), cur, 1, 1), w("a.conv1d.6.bias")))
    cur = cont(permute(cur, 0, 2, 1, 3))
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2])
    cur = binary("ADD", mul_mat(w("a.pre_encode.out.weight"), cur), w("a.pre_encode.out.bias"))
    n_state, n_time = cur.ne[0], cur.ne[1]
    dh, d_half, window = n_state // nh, n_state // 2, 2 * n_time - 1
    attn_mask = graph_input("f32", (n_time, n_time), "attn_mask")
    pos_freqs = graph_input("f32", (d_half,), "pos_freqs")
    rel_positions = graph_input("f32", (1, window), "rel_positions")
    theta = binary("MUL", new("f32", (d_half, window), "REPEAT", (pos_freqs,)), rel_positions)
    sin = reshape(unary("SIN", theta), 1, d_half, window)
    cos = reshape(unary("COS", theta), 1, d_half, window)
    pos_emb = reshape(cont(concat(sin, cos, 0)), n_state, window)

    for il in range(hp.n_layer):
        p = f"a.blk.{il}."
        cur = _half_step_ffn(w, cur, p, "", bias=False)
        residual = cur
        x = _norm(cur, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        q = reshape(mul_mat(w(p + "attn_q.weight"), x), dh, nh, n_time)
        k = reshape(mul_mat(w(p + "attn_k.weight"), x), dh, nh, n_time)
        v = reshape(mul_mat(w(p + "attn_v.weight"), x), dh, nh, n_time)
        pos = reshape(mul_mat(w(p + "linear_pos.weight"), pos_emb), dh, nh, window)
        pos = cont(permute(pos, 0, 2, 1, 3))
        qu = binary("ADD", q, w(p + "pos_bias_u"))
        content = mul_mat(permute(k, 0, 2, 1, 3), permute(qu, 0, 2, 1, 3))
        qv = cont(permute(binary("ADD", q, w(p + "pos_bias_v")), 0, 2, 1, 3))
        rel = mul_mat(pos, qv)
        rel = cont(reshape(new(rel.ty, (window + 1, n_time, nh), "PAD", (rel,)), n_time, window + 1, nh))
        rel = cont(view(rel, (n_time, window, nh), (window * 4, rel.nb[2])))
        rel = cont(view(rel, (content.ne[0], content.ne[1], nh), (rel.nb[1], rel.nb[2])))
        scores = binary("ADD", unary("SCALE", binary("ADD", content, rel)), attn_mask)
        probs = unary("SOFT_MAX", scores)
        v = cont(permute(v, 1, 2, 0, 3))
        x = permute(mul_mat(probs, v), 2, 0, 1, 3)
        x = mul_mat(w(p + "attn_out.weight"), cont(x, n_state, n_time))
        cur = binary("ADD", residual, x)
        residual = cur
        x = _norm(cur, w(p + "norm_conv.weight"), w(p + "norm_conv.bias"), False)
        x = mul_mat(w(p + "conv_pw1.weight"), x)
        d = x.ne[0] // 2
        signal = view(x, (d, x.ne[1]), (x.nb[1],))
        x = binary("MUL", signal, unary("UNARY", view(x, (d, x.ne[1]), (x.nb[1],))))
        x = cont(transpose(x))
        x = new(x.ty, (x.ne[0] + 2 * ((hp.conv_kernel - 1) // 2), x.ne[1]), "PAD", (x,))
        cw = w(p + "conv_dw.weight")
        x = new("f32", (cw.ne[1], x.ne[0] - cw.ne[0] + 1, x.ne[2]), "SSM_CONV", (x, cw))
        x = binary("SUB", x, w(p + "conv_norm_mean"))
        var = w(p + "conv_norm_var")
        x = binary("DIV", x, new(wtype(var), var.ne, "SQRT", (var,)))
        x = binary("ADD", binary("MUL", x, w(p + "conv_norm.weight")), w(p + "conv_norm.bias"))
        x = mul_mat(w(p + "conv_pw2.weight"), unary("UNARY", x))
        cur = _half_step_ffn(w, binary("ADD", residual, x), p, "_1", bias=False)
        cur = _norm(cur, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
    cur = binary("MUL", unary("RMS_NORM", cur), w("mm.a.norm_pre.weight"))
    cur = build_ffn(cur, w("mm.a.mlp.1.weight"), None, None, None, w("mm.a.mlp.2.weight"), None, "relu_sqr")
    g.expand(cur)
    return g


def build_mimo_audio(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_mimo_audio::build`` (MiMo-Audio's tokenizer encoder and MiMo-V2.5's connector,
    ``models/mimo-audio.cpp``): two 1-D convolutions with erf-GELU (the second halves the frames), a layer-norm
    transformer with NeoX RoPE and a full or a window ``n_pos^2`` mask input per layer (``wa_pattern_mode``), the
    residual after layer 2's attention added back before the post norm, a stride-2 convolution + GELU + norm, the
    residual vector quantizer (per codebook: a copied view of it, its squared norms, the scores, ARGMAX, the rows
    taken and subtracted), the code embeddings' rows summed, then the local transformer (RMS norms, NeoX RoPE of
    theta 640000 over in-group positions, a block-diagonal mask input, a SiLU-gated FFN) over the frames padded to
    whole groups, each group flattened into one row of the erf-GELU MLP without biases."""
    g = Graph()
    e = hp.n_embd
    raw = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    cur = unary("UNARY", binary("ADD", conv_1d_ph(w("a.conv1d.1.weight"), raw, 1), w("a.conv1d.1.bias")))
    cur = unary("UNARY", binary("ADD", conv_1d_ph(w("a.conv1d.2.weight"), cur, 2), w("a.conv1d.2.bias")))
    inp = cont(transpose(cur))
    n_pos = inp.ne[1]
    add_pos = ropes(graph_input("i32", (n_pos,), "mimo_audio_positions"))
    full_mask = graph_input("f32", (n_pos, n_pos), "mimo_audio_full_mask")
    window_mask = graph_input("f32", (n_pos, n_pos), "mimo_audio_window_mask")
    masks = [full_mask if mode == -1 else window_mask for mode in hp.wa_modes]
    # build_vit without its post norm; callback_layer_out keeps layer 2's residual after attention, the first
    # source of that layer's output (the residual plus its FFN)
    inp_l = reshape(inp, e, n_pos)
    if w("a.pre_ln.weight") is not None:
        inp_l = _norm(inp_l, w("a.pre_ln.weight"), w("a.pre_ln.bias"), False)
    inp_l = vit_layers(g, hp, w, inp_l, range(3), n_pos, False, fa, add_pos, masks=masks)
    skip = inp_l.src[0]
    inp_l = vit_layers(g, hp, w, inp_l, range(3, hp.n_layer), n_pos, False, fa, add_pos, masks=masks)
    cur = binary("ADD", reshape(reshape(inp_l, e, n_pos, 1), e, n_pos), skip)
    cur = _norm(cur, w("a.post_ln.weight"), w("a.post_ln.bias"), False)
    ds = unary("UNARY", conv_1d(w("a.downsample.conv.weight"), cont(transpose(cur)), 2, 0))
    ds = _norm(cont(transpose(ds)), w("a.downsample.norm.weight"), w("a.downsample.norm.bias"), False)

    def table(t: T, rows: int) -> T:  # ggml_cont of a ggml_view_2d of one codebook or embedding table
        return new(wtype(t), (t.ne[0], rows), "CONT", (wview(t, (t.ne[0], rows), "VIEW"),))

    codebook, code_embd = w("a.rvq.codebook.weight"), w("mm.a.code_embd.weight")
    residual, codes = ds, []
    for bins in hp.rvq_bins:
        cb = table(codebook, bins)
        norm = cont(transpose(sum_rows(unary("SQR", cb))))
        idx = new("i32", (residual.ne[1],), "ARGMAX", (binary("SUB", unary("SCALE", mul_mat(cb, residual)), norm),))
        codes.append(idx)
        residual = binary("SUB", residual, get_rows(cb, idx))
    cur = None
    for idx in codes:
        rows = get_rows(table(code_embd, code_embd.ne[1]), idx)
        cur = rows if cur is None else binary("ADD", cur, rows)
    n_ds, group = cur.ne[1], hp.local_group
    n_groups = (n_ds + group - 1) // group
    if n_groups * group != n_ds:
        cur = new(cur.ty, (cur.ne[0], n_groups * group), "PAD", (cur,))
    n_padded = n_groups * group
    local_rope = ropes(graph_input("i32", (n_padded,), "mimo_audio_local_positions"))
    local_mask = graph_input("f32", (n_padded, n_padded), "mimo_audio_local_mask")
    for il in range(hp.local_layers):
        p = f"mm.a.local_blk.{il}."
        x = _norm(cur, w(p + "ln1.weight"), None, True)
        q, k, v = (
            reshape(
                _add_b(mul_mat(w(f"{p}attn_{n}.weight"), x), w(f"{p}attn_{n}.bias")), hp.d_head, hp.n_head, n_padded
            )
            for n in "qkv"
        )
        x = build_attn(g, hp, w(p + "attn_out.weight"), None, local_rope(q), local_rope(k), v, fa, local_mask)
        cur = binary("ADD", cur, x)
        x = _norm(cur, w(p + "ln2.weight"), None, True)
        x = build_ffn(
            x, w(p + "ffn_up.weight"), None, w(p + "ffn_gate.weight"), None, w(p + "ffn_down.weight"), None, "silu"
        )
        cur = binary("ADD", cur, x)
    cur = _norm(cur, w("mm.a.local_norm.weight"), None, True)
    cur = reshape(cur, e * group, n_groups)
    g.expand(build_ffn(cur, w("mm.a.mlp.1.weight"), None, None, None, w("mm.a.mlp.2.weight"), None, "gelu_erf"))
    return g


def build_granite_speech(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_granite_speech::build`` (``models/granite-speech.cpp``) for the warmup's frames: the
    relative-distance input (and, where the frames do not fill the last chunk, the chunks' mask), the input
    projection, then per conformer block a half-step SiLU FFN, block attention over chunks of ``chunk_size`` frames
    (the normed input padded to whole chunks) with Shaw relative positions (rows of the block's
    ``attn_rel_pos_emb`` taken by the distances, multiplied with Q and added to the scores before the masked
    softmax), the GLU + padded depthwise ``SSM_CONV`` module, a second half-step FFN and the norm; the feature
    layers concatenated, the CTC branch after the middle block; then the QFormer projector over windows of
    ``projector.window_size`` frames: the normed learned queries repeated per window, two blocks of
    self-attention, cross-attention to the window and a GELU FFN, each followed by a residual norm, and the output
    linear."""
    g = Graph()
    e, nh, dh = hp.n_embd, hp.n_head, hp.d_head
    n_frames, ctx = hp.warmup_frames, hp.chunk_size
    n_blocks = (n_frames + ctx - 1) // ctx
    padded = n_blocks * ctx
    attn_dists = graph_input("i32", (ctx * ctx,), "attn_dists")
    attn_mask = graph_input("f32", (ctx, ctx, 1, n_blocks), "attn_mask") if n_frames % ctx else None
    cur = cont(transpose(inp_raw((n_frames, hp.n_mel, 1, 1))))
    cur = binary("ADD", mul_mat(w("a.input_projection.weight"), cur), w("a.input_projection.bias"))
    features = cur if 0 in hp.feature_layers else None

    for il in range(hp.n_layer):
        p = f"a.blk.{il}."
        residual = _half_step_ffn(w, cur, p, "")
        x = _norm(residual, w(p + "ln1.weight"), w(p + "ln1.bias"), False)
        if n_frames < padded:
            x = new(x.ty, (e, padded), "PAD", (x,))
        q = reshape(mul_mat(w(p + "attn_q.weight"), x), dh, nh, ctx, n_blocks)
        k = reshape(mul_mat(w(p + "attn_k.weight"), x), dh, nh, ctx, n_blocks)
        v = reshape(mul_mat(w(p + "attn_v.weight"), x), dh, nh, ctx, n_blocks)
        kq = mul_mat(cont(permute(k, 0, 2, 1, 3)), permute(q, 0, 2, 1, 3))
        pos = reshape(get_rows(w(p + "attn_rel_pos_emb"), attn_dists), dh, ctx, ctx)
        pos = reshape(pos, dh, ctx, 1, ctx)
        pos_attn = cont(permute(mul_mat(pos, permute(q, 0, 1, 3, 2)), 0, 2, 3, 1))
        scores = binary("ADD", kq, pos_attn)
        probs = unary("SOFT_MAX", scores) if attn_mask is None else binary("SOFT_MAX", scores, attn_mask)
        x = permute(mul_mat(cont(permute(v, 1, 2, 0, 3)), probs), 0, 2, 1, 3)
        x = cont(x, e, padded)
        if n_frames < padded:
            x = view(x, (e, n_frames), (x.nb[1],))
        x = binary("ADD", mul_mat(w(p + "attn_out.weight"), x), w(p + "attn_out.bias"))
        residual = binary("ADD", residual, x)
        x = cont(transpose(_conv_glu(w, residual, p)))
        x = new(x.ty, (x.ne[0] + 2 * (hp.conv_kernel // 2), x.ne[1]), "PAD", (x,))
        cw = w(p + "conv_dw.weight")
        x = new("f32", (cw.ne[1], x.ne[0] - cw.ne[0] + 1, x.ne[2]), "SSM_CONV", (x, cw))
        x = binary("ADD", binary("MUL", x, w(p + "conv_norm.weight")), w(p + "conv_norm.bias"))
        x = unary("UNARY", x)  # silu
        x = binary("ADD", mul_mat(w(p + "conv_pw2.weight"), x), w(p + "conv_pw2.bias"))
        residual = _half_step_ffn(w, binary("ADD", residual, x), p, "_1")
        cur = _norm(residual, w(p + "ln2.weight"), w(p + "ln2.bias"), False)
        if il + 1 in hp.feature_layers:
            features = cur if features is None else concat(features, cur, 0)
        if il + 1 == hp.n_layer // 2:  # the CTC branch
            mid = binary("ADD", mul_mat(w("a.enc_ctc_out.weight"), cur), w("a.enc_ctc_out.bias"))
            mid = unary("SOFT_MAX", mid)
            mid = binary("ADD", mul_mat(w("a.enc_ctc_out_mid.weight"), mid), w("a.enc_ctc_out_mid.bias"))
            cur = binary("ADD", cur, mid)
    if hp.feature_layers and features is not None:
        cur = concat(features, cur, 0)
    window, n_q, pnh = hp.proj_window, hp.proj_window // hp.proj_downsample, hp.proj_heads
    pdh = e // pnh
    n_win = (n_frames + window - 1) // window
    if n_frames < n_win * window:
        cur = new(cur.ty, (cur.ne[0], n_win * window), "PAD", (cur,))
    windows = reshape(cur, e * (len(hp.feature_layers) + 1), window, n_win)
    query = w("a.proj_query")
    queries = binary("MUL", new(wtype(query), query.ne, "NORM", (query,)), w("a.proj_norm.weight"))
    queries = binary("ADD", queries, w("a.proj_norm.bias"))
    queries = new(queries.ty, (e, n_q, n_win), "REPEAT", (reshape(queries, e, n_q, 1),))

    def attn(p: str, src: T, n_kv: int) -> T:
        q = binary("ADD", mul_mat(w(p + "_q.weight"), queries), w(p + "_q.bias"))
        k = binary("ADD", mul_mat(w(p + "_k.weight"), src), w(p + "_k.bias"))
        v = binary("ADD", mul_mat(w(p + "_v.weight"), src), w(p + "_v.bias"))
        q, k, v = reshape(q, pdh, pnh, n_q, n_win), reshape(k, pdh, pnh, n_kv, n_win), reshape(v, pdh, pnh, n_kv, n_win)
        out = build_attn(g, hp, w(p + "_out.weight"), w(p + "_out.bias"), q, k, v, fa)
        return reshape(out, e, n_q, n_win)

    for il in range(2):
        p = f"a.proj_blk.{il}."
        x = attn(p + "self_attn", queries, n_q)
        queries = _norm(binary("ADD", x, queries), w(p + "self_attn_norm.weight"), w(p + "self_attn_norm.bias"), False)
        x = attn(p + "cross_attn", windows, window)
        queries = _norm(
            binary("ADD", x, queries), w(p + "cross_attn_norm.weight"), w(p + "cross_attn_norm.bias"), False
        )
        x = mlp(w, queries, p + "ffn_up", p + "ffn_down", "gelu")
        queries = _norm(binary("ADD", x, queries), w(p + "ffn_norm.weight"), w(p + "ffn_norm.bias"), False)
    cur = reshape(queries, e, n_q * n_win)
    g.expand(binary("ADD", mul_mat(w("a.proj_linear.weight"), cur), w("a.proj_linear.bias")))
    return g


def build_dots3note_a(hp: ClipHParams, w, fa: bool) -> Graph:
    """``clip_graph_dots3note_a::build`` (dots.3 note's audio, ``models/dots3note.cpp``): three padded stride-2 3x3
    convolutions with GELU over the whole warmup, the flattened channels projected, an RMS-norm transformer with
    partial NeoX RoPE, then a layer norm and the erf-GELU adapter."""
    g = Graph()
    cur = inp_raw((hp.warmup_frames, hp.n_mel, 1, 1))
    for i in (1, 2, 3):
        cur = conv_2d(g, w(f"a.conv2d.{i}.weight"), cur, 2, 2, 1, 1)
        cur = unary("UNARY", binary("ADD", cur, wview(w(f"a.conv2d.{i}.bias"), (1, 1, cur.ne[2], 1))))
    cur = cont(permute(cur, 2, 0, 1, 3))
    cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2])
    cur = mul_mat(w("a.conv_out.weight"), cur)
    n_pos = cur.ne[1]
    positions = graph_input("i32", (n_pos,))

    add_pos = ropes(positions)

    cur = build_vit(g, hp, w, cur, n_pos, True, None, fa, add_pos)
    cur = _norm(cur, w("mm.a.norm_pre.weight"), w("mm.a.norm_pre.bias"), False)
    cur = mlp(w, cur, "mm.a.mlp.1", "mm.a.mlp.3", "gelu_erf")
    g.expand(cur)
    return g


#: audio projector type -> graph builder (types not here are not counted, and the estimate says so)
AUDIO_GRAPHS = {
    **{t: functools.partial(build_whisper, proj_type=t) for t in WHISPER_TYPES},
    "qwen3a": build_qwen3a,
    "gemma4a": build_gemma4a,
    "gemma4ua": lambda hp, w, fa: build_gemma4ua(hp, w),
    "lfm2a": build_conformer,
    "dots3note_a": build_dots3note_a,
    "parakeet": build_parakeet,
    "mimo_audio": build_mimo_audio,
    "granite_speech": build_granite_speech,
}


#: projector type -> graph builder (types not here get an approximate compute figure)
GRAPHS = {
    "gemma3": build_gemma3,
    "glm4v": build_glm4v,
    "glm5v": build_glm4v,
    "minimax_m3": build_minimax_m3,
    "ling3vl": build_ling3vl,
    "kimik25": build_kimik25,
    "llama4": build_llama4,
    "deepseek4v": build_deepseek4v,
    "hunyuanvl": build_hunyuanvl,
    "mlp": build_llava,
    "lightonocr": build_pixtral,  # Pixtral's graph (clip.cpp builds clip_graph_pixtral for both)
    "phi4": functools.partial(build_siglip, kind="phi4"),
    "janus_pro": functools.partial(build_siglip, kind="janus_pro"),
    "nemotron_v2_vl": build_nemotron_v2_vl,
    "resampler": build_minicpmv,  # MiniCPM-V (clip-impl.h names PROJECTOR_TYPE_MINICPMV "resampler")
    "minicpmv4_6": build_minicpmv4_6,
    "granite4_vision": build_granite4_vision,
    "deepseekocr": build_deepseekocr,
    "deepseekocr2": build_deepseekocr2,
    "gemma3nv": build_gemma3nv,
    "cogvlm": build_cogvlm,
    "youtuvl": build_youtuvl,
    "muse-glimmer": build_muse_glimmer,
    "mimovl": build_mimovl,
    "yasa2": build_yasa2,
    "dots3note_v": functools.partial(build_unshuffle_vit, kind="dots_ocr"),  # dots.ocr's graph, MoE in build_vit
    "ldpv2": functools.partial(build_llava, kind="ldpv2"),
    "ldp": functools.partial(build_llava, kind="ldp"),
    "adapter": functools.partial(build_llava, kind="adapter"),  # GLM-Edge-V
    "gemma4uv": build_gemma4uv,
    "step3vl": build_step3vl,
    "exaone4_5": lambda hp, w, fa: build_qwen2vl(hp, w, fa, rms=True, n_wa_pattern=hp.n_wa_pattern),
    "kimivl": functools.partial(build_unshuffle_vit, kind="kimivl"),
    "paddleocr": functools.partial(build_unshuffle_vit, kind="paddleocr"),
    "dots_ocr": functools.partial(
        build_unshuffle_vit, kind="dots_ocr"
    ),  # the same tower, its SwiGLU clamped (a GLU all the same)
    "pixtral": build_pixtral,
    "gemma4v": build_gemma4v,
    "internvl": build_internvl,
    "idefics3": lambda hp, w, fa: build_siglip(hp, w, fa, "idefics3"),
    "lfm2": lambda hp, w, fa: build_siglip(hp, w, fa, "lfm2"),
    "qwen3vl_merger": build_qwen3vl,
    "qwen2vl_merger": build_qwen2vl,
    "qwen2.5vl_merger": lambda hp, w, fa: build_qwen2vl(hp, w, fa, rms=True, n_wa_pattern=hp.n_wa_pattern),
}
