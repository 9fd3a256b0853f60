"""Tiny multimodal projector files (``--mmproj``, GGUF architecture ``clip``) that the real llama-server loads
through libmtmd beside a tiny text model (``tools/mtmd/clip.cpp`` ``clip_model_loader``).

``write_gemma3_projector``: Gemma 3's SigLIP ViT (``models/siglip.cpp``, projector type ``gemma3``): patch
embedding (conv 2d, with bias), learned position embeddings, ``n_layer`` pre-norm blocks with biased q/k/v/out
and a GELU FFN, the post-layernorm, then the average pool by ``n_merge`` per side, the soft-embedding RMS norm
and the input projection to the text model's ``n_embd``. Data is random (the files are small; nothing
reads the values for memory).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gguf import GGUFWriter


def _start(path, seed: int, matrix_type: str, *, name: str, proj_type: str, image_size: int, patch_size: int,
           n_embd: int, n_ff: int, n_layer: int, n_embd_text: int, n_head: int, eps: float, mean: float = 0.5,
           std: float = 0.5):
    """A vision projector's writer with the keys every type has (the image normalisation ``mean``/``std`` per
    channel too), ``add(name, ne, dtype)`` writing random tensors (``ne`` in ggml order), and the matrix dtype."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(Path(path)), "clip")
    w.add_string("general.name", name)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_string("clip.projector_type", proj_type)
    w.add_uint32("clip.vision.image_size", image_size)
    w.add_uint32("clip.vision.patch_size", patch_size)
    w.add_uint32("clip.vision.embedding_length", n_embd)
    w.add_uint32("clip.vision.feed_forward_length", n_ff)
    w.add_uint32("clip.vision.block_count", n_layer)
    w.add_uint32("clip.vision.projection_dim", n_embd_text)
    w.add_uint32("clip.vision.attention.head_count", n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", eps)
    w.add_array("clip.vision.image_mean", [mean] * 3)
    w.add_array("clip.vision.image_std", [std] * 3)

    def add(name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        # numpy shape is ggml's ne reversed
        w.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.02).astype(dtype))

    return w, add, np.float16 if matrix_type == "f16" else np.float32


def _start_audio(path, seed: int, matrix_type: str, *, name: str, proj_type: str, eps: float, keys) -> tuple:
    """An audio projector's writer (no vision encoder) with the ``clip.audio.*`` u32 ``keys`` ((name, value) pairs)
    and the layer-norm epsilon, ``add(name, ne, dtype)`` writing random tensors (``ne`` in ggml order), and the
    matrix dtype."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(Path(path)), "clip")
    w.add_string("general.name", name)
    w.add_bool("clip.has_vision_encoder", False)
    w.add_bool("clip.has_audio_encoder", True)
    w.add_string("clip.projector_type", proj_type)
    for key, v in keys:
        w.add_uint32(f"clip.audio.{key}", v)
    w.add_float32("clip.audio.attention.layer_norm_epsilon", eps)

    def add(name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        w.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.02).astype(dtype))

    return w, add, np.float16 if matrix_type == "f16" else np.float32


def _conformer_subsampling(add, mt, *, n_mel: int, n_embd: int, channels: int, f32_convs: tuple[int, ...]) -> None:
    """A FastConformer's subsampling (``models/conformer.cpp``, ``parakeet.cpp``): a 3x3 conv, two depthwise 3x3 +
    pointwise 1x1 pairs, ``channels`` wide, biased, the convs of ``f32_convs`` in f32 and the others in f16 (as each
    converter keeps them), then ``a.pre_encode.out``."""
    c = channels
    for i, shape in ((0, (3, 3, 1, c)), (2, (3, 3, 1, c)), (3, (1, 1, c, c)), (5, (3, 3, 1, c)), (6, (1, 1, c, c))):
        add(f"a.conv1d.{i}.weight", shape, np.float32 if i in f32_convs else np.float16)
        add(f"a.conv1d.{i}.bias", (1, 1, c))
    add("a.pre_encode.out.weight", ((n_mel // 8) * c, n_embd), mt)
    add("a.pre_encode.out.bias", (n_embd,))


def _conformer_norms(add, p: str, n_embd: int) -> None:
    """A conformer block's six layer norms (the two half-step FFNs', attention's, the output's, the conv module's
    input and batch norms), each with its bias."""
    for n in ("ffn_norm", "ffn_norm_1", "ln1", "ln2", "norm_conv", "conv_norm"):
        add(f"{p}.{n}.weight", (n_embd,))
        add(f"{p}.{n}.bias", (n_embd,))


def _finish(w, path) -> Path:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def _vit_blocks(add, mt, n_layer: int, n_embd: int, n_ff: int, *, prefix: str = "v", attn_bias: bool = True,
                k_bias: bool = True, norm_bias: bool = True, ffn_bias: bool = True, gate: bool = False,
                skip_ffn: tuple[int, ...] = ()) -> None:
    """The tensors of ``n_layer`` pre-norm ViT blocks (``{prefix}.blk.N``): q/k/v/out, ``ln1``/``ln2`` and an FFN
    (``ffn_gate`` too with ``gate``; none on the ``skip_ffn`` layers), biases as asked."""
    for il in range(n_layer):
        p = f"{prefix}.blk.{il}"
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{p}.{t}.weight", (n_embd, n_embd), mt)
            if attn_bias and (k_bias or t != "attn_k"):
                add(f"{p}.{t}.bias", (n_embd,))
        for n in ("ln1", "ln2"):
            add(f"{p}.{n}.weight", (n_embd,))
            if norm_bias:
                add(f"{p}.{n}.bias", (n_embd,))
        if il in skip_ffn:
            continue
        if gate:
            add(f"{p}.ffn_gate.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
        if ffn_bias:
            add(f"{p}.ffn_up.bias", (n_ff,))
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        if ffn_bias:
            add(f"{p}.ffn_down.bias", (n_embd,))


def write_gemma3_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 128,
    n_ff: int = 256,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 448,
    patch_size: int = 14,
    n_merge: int | None = 4,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A gemma3 projector whose output matches a text model of ``n_embd_text`` (tiny gemma3: 64).
    ``n_merge`` None leaves ``clip.vision.projector.scale_factor`` out (llama.cpp's default 4)."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-gemma3-mmproj", proj_type="gemma3",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    if n_merge is not None:
        w.add_uint32("clip.vision.projector.scale_factor", n_merge)


    n_pos = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.soft_emb_norm.weight", (n_embd,))
    add("mm.input_projection.weight", (n_embd_text, n_embd), mt)
    return _finish(w, path)


def write_qwen3vl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 3,
    n_head: int = 2,
    patch_size: int = 4,
    n_pos_train: int = 256,
    deepstack: tuple[int, ...] = (0, 1),
    kind: str = "qwen3vl_merger",
    patch_bias: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """``kind`` ``ling3vl``: Ling 3 VL's (the same tower, no deepstack, a merger norm ``mm.input_norm`` and the
    ``mm.0``/``mm.2`` MLP; ``patch_bias`` optional).

    A Qwen3-VL projector (``qwen3vl_merger``, ``models/qwen3vl.cpp``): two patch embeddings (the temporal
    pair), fused biased qkv, M-RoPE, learned position embeddings interpolated to the image, a 2x2 merger MLP
    and a deepstack merger after each layer of ``deepstack``. Its output row is ``n_embd_text * (1 +
    len(deepstack))``, which the tiny qwen3vl text model (2 deepstack layers of 64) takes."""
    if kind == "ling3vl":
        deepstack = ()
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{kind}-mmproj", proj_type=kind,
                        image_size=768, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.spatial_merge_size", 2)
    if kind != "ling3vl":
        w.add_array("clip.vision.is_deepstack_layers", [i in deepstack for i in range(n_layer)])
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.weight.1", (patch_size, patch_size, 3, n_embd), mt)
    if patch_bias:
        add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos_train))
    for il in range(n_layer):
        p = f"v.blk.{il}"
        _fused_block(add, mt, p, n_embd, n_ff)
        if il in deepstack:
            d = f"v.deepstack.{il}"
            add(f"{d}.norm.weight", (4 * n_embd,))
            add(f"{d}.norm.bias", (4 * n_embd,))
            add(f"{d}.fc1.weight", (4 * n_embd, 4 * n_embd), mt)
            add(f"{d}.fc1.bias", (4 * n_embd,))
            add(f"{d}.fc2.weight", (4 * n_embd, n_embd_text), mt)
            add(f"{d}.fc2.bias", (n_embd_text,))
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    if kind == "ling3vl":
        add("mm.input_norm.weight", (n_embd,))
        add("mm.input_norm.bias", (n_embd,))
    add("mm.0.weight", (4 * n_embd, 4 * n_embd), mt)
    add("mm.0.bias", (4 * n_embd,))
    add("mm.2.weight", (4 * n_embd, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_qwen2vl_projector(
    path: str | os.PathLike,
    *,
    version: str = "2.5",
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 4,
    n_head: int = 2,
    n_head_kv: int | None = None,
    patch_size: int = 4,
    n_wa_pattern: int = 2,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Qwen2-VL (``version`` "2": layer norms, GELU-quick FFN) or Qwen2.5-VL ("2.5": RMS norms, SwiGLU FFN,
    window attention with full attention every ``n_wa_pattern`` layers) projector (``models/qwen2vl.cpp``); or
    EXAONE 4.5's ("exaone4_5", ``models/exaone4_5.cpp``: Qwen2.5-VL's with a fused qkv of ``n_head_kv`` K/V heads,
    no biases but the FFN's)."""
    v25 = version in ("2.5", "exaone4_5")
    exaone = version == "exaone4_5"
    proj_type = "exaone4_5" if exaone else "qwen2.5vl_merger" if v25 else "qwen2vl_merger"
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{proj_type}-mmproj", proj_type=proj_type,
                        image_size=560, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    if v25:
        w.add_bool("clip.use_silu", True)
        w.add_uint32("clip.vision.n_wa_pattern", n_wa_pattern)
    if exaone:
        n_kv = n_head_kv or n_head
        w.add_uint32("clip.vision.attention.head_count_kv", n_kv)
        w.add_uint32("clip.vision.image_min_pixels", 64 * 64)
        w.add_uint32("clip.vision.image_max_pixels", 1024 * 1024)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.weight.1", (patch_size, patch_size, 3, n_embd), mt)
    for il in range(n_layer):
        p = f"v.blk.{il}"
        if exaone:
            kv = n_embd // n_head * n_kv
            add(f"{p}.attn_qkv.weight", (n_embd, n_embd + 2 * kv), mt)
            add(f"{p}.attn_out.weight", (n_embd, n_embd), mt)
        else:
            for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
                add(f"{p}.{t}.weight", (n_embd, n_embd), mt)
                add(f"{p}.{t}.bias", (n_embd,))
        for n in ("ln1", "ln2"):
            add(f"{p}.{n}.weight", (n_embd,))
            if not v25:
                add(f"{p}.{n}.bias", (n_embd,))
        add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_up.bias", (n_ff,))
        if v25:
            add(f"{p}.ffn_gate.weight", (n_embd, n_ff), mt)
            add(f"{p}.ffn_gate.bias", (n_ff,))
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        add(f"{p}.ffn_down.bias", (n_embd,))
    add("v.post_ln.weight", (n_embd,))
    if not v25:
        add("v.post_ln.bias", (n_embd,))
    add("mm.0.weight", (4 * n_embd, 4 * n_embd), mt)
    add("mm.0.bias", (4 * n_embd,))
    add("mm.2.weight", (4 * n_embd, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_pixtral_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 128,
    n_ff: int = 256,
    n_layer: int = 2,
    n_head: int = 4,
    patch_size: int = 14,
    spatial_merge: int | None = 2,
    kind: str = "pixtral",
    img_break: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """``kind`` ``lightonocr``: LightOnOCR's (Pixtral's graph), usually without ``img_break``.

    A Pixtral / Mistral Small 3.1 projector (``pixtral``, ``models/pixtral.cpp``): RMS-norm ViT with 2D RoPE and
    a SwiGLU FFN, no biases; with ``spatial_merge`` the Mistral 3 patch merger (``mm.input_norm``,
    ``mm.patch_merger``); the LLaVA MLP ``mm.1``/``mm.2`` and the [IMG_BREAK] embedding."""
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{kind}-mmproj", proj_type=kind, image_size=1540,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_silu", True)
    if spatial_merge:
        w.add_uint32("clip.vision.spatial_merge_size", spatial_merge)


    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.pre_ln.weight", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, attn_bias=False, norm_bias=False, ffn_bias=False, gate=True)
    if spatial_merge:
        add("mm.input_norm.weight", (n_embd,))
        add("mm.patch_merger.weight", (n_embd * spatial_merge * spatial_merge, n_embd), mt)
    add("mm.1.weight", (n_embd, n_embd_text), mt)
    add("mm.1.bias", (n_embd_text,))
    add("mm.2.weight", (n_embd_text, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    if img_break:
        add("v.token_embd.img_break", (n_embd_text,))
    return _finish(w, path)


def write_gemma4v_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 128,
    n_embd: int = 128,
    n_ff: int = 256,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 8,
    pos_size: int = 64,
    clamps: bool = True,
    std: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Gemma 4 vision projector (``gemma4v``, ``models/gemma4v.cpp``): x/y position tables, RMS-norm ViT with
    per-head q/k norms, post-attention and post-FFN norms and a GELU-gated FFN, the 3x3 pooler, optional
    ``v.std_bias``/``v.std_scale`` and the input projection; with ``clamps`` the clippable-linear bounds
    (scalar tensors clip.cpp reads, not loads) on the first layer's q projection."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-gemma4v-mmproj", proj_type="gemma4v", image_size=768,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6, mean=0.0, std=1.0)
    w.add_bool("clip.use_gelu", True)
    dh = n_embd // n_head


    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.position_embd.weight", (n_embd, pos_size, 2))
    for il in range(n_layer):
        p = f"v.blk.{il}"
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{p}.{t}.weight", (n_embd, n_embd), mt)
        add(f"{p}.attn_q_norm.weight", (dh,))
        add(f"{p}.attn_k_norm.weight", (dh,))
        for n in ("ln1", "ln2", "attn_post_norm", "ffn_post_norm"):
            add(f"{p}.{n}.weight", (n_embd,))
        add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_gate.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
    if clamps:
        for sfx, v in (("input_max", 10.0), ("input_min", -10.0), ("output_max", 10.0), ("output_min", -10.0)):
            w.add_tensor(f"v.blk.0.attn_q.{sfx}", np.array([v], dtype=np.float32))
    if std:
        add("v.std_bias", (n_embd,))
        add("v.std_scale", (n_embd,))
    add("mm.input_projection.weight", (n_embd, n_embd_text), mt)
    return _finish(w, path)


def write_siglip_projector(
    path: str | os.PathLike,
    *,
    kind: str = "idefics3",
    n_embd_text: int = 64,
    n_embd: int = 128,
    n_ff: int = 256,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 512,
    patch_size: int = 16,
    scale_factor: int = 4,
    n_pos_train: int = 256,
    input_norm: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A SigLIP projector of ``kind`` ``idefics3`` (SmolVLM: pixel shuffle by ``scale_factor``, ``mm.model.fc``),
    ``phi4`` (a grid resized, pixel limits, the ``mm.0``/``mm.2`` MLP), ``janus_pro`` (``mm.0``/``mm.1``) or ``lfm2`` (LFM2-VL: a position grid of ``n_pos_train`` resized to the image, pixel shuffle, optional input
    layer norm, ``mm.1``/``mm.2`` MLP)."""
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{kind}-mmproj", proj_type=kind, image_size=image_size,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", scale_factor)


    if kind == "phi4":
        w.add_uint32("clip.vision.image_min_pixels", 32 * 32)
        w.add_uint32("clip.vision.image_max_pixels", 448 * 448)
    n_pos = (image_size // patch_size) ** 2 if kind in ("idefics3", "janus_pro") else n_pos_train
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    merged = n_embd * scale_factor * scale_factor
    if kind in ("phi4", "janus_pro"):
        second = "mm.2" if kind == "phi4" else "mm.1"
        add("mm.0.weight", (n_embd, n_embd_text), mt)
        add("mm.0.bias", (n_embd_text,))
        add(f"{second}.weight", (n_embd_text, n_embd_text), mt)
        add(f"{second}.bias", (n_embd_text,))
    elif kind == "idefics3":
        add("mm.model.fc.weight", (merged, n_embd_text), mt)
    else:
        if input_norm:
            add("mm.input_norm.weight", (merged,))
            add("mm.input_norm.bias", (merged,))
        add("mm.1.weight", (merged, n_embd_text), mt)
        add("mm.1.bias", (n_embd_text,))
        add("mm.2.weight", (n_embd_text, n_embd_text), mt)
        add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_internvl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 128,
    n_ff: int = 512,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 448,
    patch_size: int = 14,
    scale_factor: int = 2,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """An InternVL projector (``internvl``, ``models/internvl.cpp``): InternViT (CLS token, biased q/k/v, layer
    scales ``ls1``/``ls2``, GELU FFN), pixel shuffle by ``scale_factor`` and the ``mm.model.mlp`` 0/1/3 MLP."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-internvl-mmproj", proj_type="internvl",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", scale_factor)


    n_pos = (image_size // patch_size) ** 2 + 1
    add("v.class_embd", (n_embd,))
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    for il in range(n_layer):
        p = f"v.blk.{il}"
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{p}.{t}.weight", (n_embd, n_embd), mt)
            add(f"{p}.{t}.bias", (n_embd,))
        for n in ("ln1", "ln2"):
            add(f"{p}.{n}.weight", (n_embd,))
            add(f"{p}.{n}.bias", (n_embd,))
        add(f"{p}.ls1.weight", (n_embd,))
        add(f"{p}.ls2.weight", (n_embd,))
        add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_up.bias", (n_ff,))
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        add(f"{p}.ffn_down.bias", (n_embd,))
    merged = n_embd * scale_factor * scale_factor
    add("mm.model.mlp.0.weight", (merged,))
    add("mm.model.mlp.0.bias", (merged,))
    add("mm.model.mlp.1.weight", (merged, n_embd_text), mt)
    add("mm.model.mlp.1.bias", (n_embd_text,))
    add("mm.model.mlp.3.weight", (n_embd_text, n_embd_text), mt)
    add("mm.model.mlp.3.bias", (n_embd_text,))
    return _finish(w, path)


def _fused_block(add, mt, p: str, n_embd: int, n_ff: int) -> None:
    """One ViT block ``p`` with a fused qkv: ``attn_qkv``/``attn_out``, ``ln1``/``ln2`` and an ungated FFN, biases
    everywhere."""
    add(f"{p}.attn_qkv.weight", (n_embd, 3 * n_embd), mt)
    add(f"{p}.attn_qkv.bias", (3 * n_embd,))
    add(f"{p}.attn_out.weight", (n_embd, n_embd), mt)
    add(f"{p}.attn_out.bias", (n_embd,))
    for n in ("ln1", "ln2"):
        add(f"{p}.{n}.weight", (n_embd,))
        add(f"{p}.{n}.bias", (n_embd,))
    add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
    add(f"{p}.ffn_up.bias", (n_ff,))
    add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
    add(f"{p}.ffn_down.bias", (n_embd,))


def _copy_vision(w: GGUFWriter, vision_from, keep_type: bool = True) -> None:
    """Copy a vision projector file's clip keys (its projector type as ``clip.vision.projector_type``, unless not
    ``keep_type``) and tensors into ``w``: a file with both encoders."""
    from gguf import GGUFReader, GGUFValueType

    r = GGUFReader(str(vision_from))
    for f in r.fields.values():
        if not f.name.startswith("clip.") or f.name in ("clip.has_audio_encoder", "clip.has_vision_encoder"):
            continue
        if f.name == "clip.projector_type" and not keep_type:
            continue
        name = "clip.vision.projector_type" if f.name == "clip.projector_type" else f.name
        vt = f.types[0]
        if vt == GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[f.data[0]]).decode())
        elif vt == GGUFValueType.ARRAY:
            w.add_array(name, [f.parts[i].tolist()[0] for i in f.data])
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], vt)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed([int(x) for x in t.shape])),
                     raw_dtype=t.tensor_type)


def write_whisper_projector(
    path: str | os.PathLike,
    *,
    proj_type: str = "ultravox",
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 256,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 128,
    stack_factor: int = 8,
    n_ff_proj: int = 128,
    n_pos: int = 1500,
    conv_channels: int = 16,
    matrix_type: str = "f16",
    vision_from: str | os.PathLike | None = None,
    common_type: str | None = None,
    seed: int = 0,
) -> Path:
    """``common_type``: one ``clip.projector_type`` for both encoders instead of one each (Qwen2.5-Omni's legacy
    ``qwen2.5o``, which clip.cpp turns into ``qwen2.5vl_merger`` and ``qwen2a``).

    An audio projector over a Whisper encoder (``models/whisper-enc.cpp``): two 1-D convolutions (f16 kernels,
    as the converter writes them), ``n_pos`` learned positions (at least the warmup's 1500), pre-norm blocks with
    biased q/v/out and an unbiased k, GELU FFN, the post norm, then the ``proj_type`` adapter: ``ultravox``
    (stack by ``stack_factor``, RMS norm, SwiGLU MLP), ``qwen2a`` (one linear), ``voxtral`` (stack, GELU MLP
    without biases), ``musicflamingo`` (GELU MLP with biases), ``qwen3a`` (Qwen3-Omni: three stride-2 3x3
    convolutions of ``conv_channels`` over 100-frame chunks instead of the 1-D ones, 13 positions a chunk, biased
    GELU MLP), ``glma`` (GLM-ASR: layer norm, stack, GELU MLP, begin/end rows) or ``meralion`` (stack, layer norm,
    SiLU linear,
    SiLU-gated GLU, linear).

    ``vision_from``: a vision projector file whose keys and tensors are copied in, making a file with both
    encoders (each with its own projector type, as Qwen2.5-Omni's and Voxtral's mixed files have)."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(Path(path)), "clip")
    w.add_string("general.name", f"tiny-{proj_type}-mmproj")
    w.add_bool("clip.has_vision_encoder", vision_from is not None)
    w.add_bool("clip.has_audio_encoder", True)
    if vision_from is None or common_type:
        w.add_string("clip.projector_type", common_type or proj_type)
    else:
        w.add_string("clip.audio.projector_type", proj_type)
    w.add_uint32("clip.audio.num_mel_bins", n_mel)
    w.add_uint32("clip.audio.embedding_length", n_embd)
    w.add_uint32("clip.audio.feed_forward_length", n_ff)
    w.add_uint32("clip.audio.block_count", n_layer)
    w.add_uint32("clip.audio.projection_dim", n_embd_text)
    w.add_uint32("clip.audio.attention.head_count", n_head)
    w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    if proj_type in ("ultravox", "voxtral", "meralion", "glma"):
        w.add_uint32("clip.audio.projector.stack_factor", stack_factor)
    mt = np.float16 if matrix_type == "f16" else np.float32

    def add(name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        w.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.02).astype(dtype))

    if vision_from is not None:
        _copy_vision(w, vision_from, keep_type=not common_type)

    if proj_type == "qwen3a":  # three 3x3 stride-2 convolutions over 100-frame chunks, then a projection
        for i in (1, 2, 3):
            add(f"a.conv2d.{i}.weight", (3, 3, 1 if i == 1 else conv_channels, conv_channels), np.float16)
            add(f"a.conv2d.{i}.bias", (1, 1, conv_channels))  # as the converter writes it
        add("a.conv_out.weight", ((n_mel // 8) * conv_channels, n_embd), mt)
        add("a.position_embd.weight", (n_embd, 16))
    else:
        add("a.conv1d.1.weight", (3, n_mel, n_embd), np.float16)
        add("a.conv1d.1.bias", (1, n_embd))
        add("a.conv1d.2.weight", (3, n_embd, n_embd), np.float16)
        add("a.conv1d.2.bias", (1, n_embd))
        add("a.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, prefix="a", k_bias=proj_type == "qwen3a")  # Whisper: K unbiased
    add("a.post_ln.weight", (n_embd,))
    add("a.post_ln.bias", (n_embd,))
    stacked = n_embd * (stack_factor if proj_type in ("ultravox", "voxtral", "meralion", "glma") else 1)
    if proj_type == "ultravox":
        add("mm.a.norm_pre.weight", (stacked,))
        add("mm.a.mlp.1.weight", (stacked, 2 * n_ff_proj), mt)
        add("mm.a.norm_mid.weight", (n_ff_proj,))
        add("mm.a.mlp.2.weight", (n_ff_proj, n_embd_text), mt)
    elif proj_type == "qwen2a":
        add("mm.a.fc.weight", (n_embd, n_embd_text), mt)
        add("mm.a.fc.bias", (n_embd_text,))
    elif proj_type in ("voxtral", "musicflamingo", "qwen3a"):
        add("mm.a.mlp.1.weight", (stacked, n_ff_proj), mt)
        add("mm.a.mlp.2.weight", (n_ff_proj, n_embd_text), mt)
        if proj_type != "voxtral":
            add("mm.a.mlp.1.bias", (n_ff_proj,))
            add("mm.a.mlp.2.bias", (n_embd_text,))
    elif proj_type == "glma":
        add("mm.a.norm_pre.weight", (n_embd,))
        add("mm.a.norm_pre.bias", (n_embd,))
        add("mm.a.mlp.1.weight", (stacked, n_ff_proj), mt)
        add("mm.a.mlp.1.bias", (n_ff_proj,))
        add("mm.a.mlp.2.weight", (n_ff_proj, n_embd_text), mt)
        add("mm.a.mlp.2.bias", (n_embd_text,))
        add("v.boi", (n_embd_text, 1))
        add("v.eoi", (n_embd_text, 1))
    elif proj_type == "meralion":
        add("mm.a.norm_pre.weight", (stacked,))
        add("mm.a.norm_pre.bias", (stacked,))
        add("mm.a.mlp.0.weight", (stacked, n_ff_proj), mt)
        add("mm.a.mlp.0.bias", (n_ff_proj,))
        for i in (1, 2):
            add(f"mm.a.mlp.{i}.weight", (n_ff_proj, n_ff_proj), mt)
            add(f"mm.a.mlp.{i}.bias", (n_ff_proj,))
        add("mm.a.mlp.3.weight", (n_ff_proj, n_embd_text), mt)
        add("mm.a.mlp.3.bias", (n_embd_text,))
    else:
        raise ValueError(proj_type)
    return _finish(w, path)


def write_gemma4a_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 128,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 128,
    channels: tuple[int, int] = (8, 16),
    out_proj: bool = True,
    clamps: bool = True,
    matrix_type: str = "f16",
    vision_from: str | os.PathLike | None = None,
    seed: int = 0,
) -> Path:
    """A Gemma 4 audio projector (``gemma4a``, ``models/gemma4a.cpp``): two 3x3 stride-2 subsampling convolutions
    of ``channels`` with layer norms, the input projection, conformer blocks (half-step FFNs with post norms,
    attention with a pre-norm, a per-dimension Q scale and relative-position keys, the GLU + depthwise conv
    module with the upstream-swapped ``conv_norm``/``norm_conv`` names), the optional output projection and the
    embedder (``mm.a.soft_emb_norm``, ``mm.a.input_projection``); with ``clamps`` clippable-linear bounds on the
    first layer's q projection (scalars clip.cpp reads, not loads). ``vision_from``: a vision projector copied in
    (Gemma 4's mmproj files hold both encoders)."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(Path(path)), "clip")
    w.add_string("general.name", "tiny-gemma4a-mmproj")
    w.add_bool("clip.has_vision_encoder", vision_from is not None)
    w.add_bool("clip.has_audio_encoder", True)
    if vision_from is None:
        w.add_string("clip.projector_type", "gemma4a")
    else:
        w.add_string("clip.audio.projector_type", "gemma4a")
        _copy_vision(w, vision_from)
    w.add_uint32("clip.audio.num_mel_bins", n_mel)
    w.add_uint32("clip.audio.embedding_length", n_embd)
    w.add_uint32("clip.audio.feed_forward_length", n_ff)
    w.add_uint32("clip.audio.block_count", n_layer)
    w.add_uint32("clip.audio.projection_dim", n_embd_text)
    w.add_uint32("clip.audio.attention.head_count", n_head)
    w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-6)
    mt = np.float16 if matrix_type == "f16" else np.float32

    def add(name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        w.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.02).astype(dtype))

    c0, c1 = channels
    add("a.conv1d.0.weight", (3, 3, 1, c0), np.float16)
    add("a.conv1d.0.norm.weight", (c0,))
    add("a.conv1d.1.weight", (3, 3, c0, c1), np.float16)
    add("a.conv1d.1.norm.weight", (c1,))
    add("a.input_projection.weight", (c1 * (n_mel // 4), n_embd), mt)
    dh = n_embd // n_head
    for il in range(n_layer):
        p = f"a.blk.{il}"
        for n in ("ffn_norm", "ffn_post_norm", "attn_pre_norm", "attn_post_norm", "conv_norm", "norm_conv",
                  "ffn_norm_1", "ffn_post_norm_1", "ln2"):
            add(f"{p}.{n}.weight", (n_embd,))
        for n in ("ffn_up", "ffn_up_1"):
            add(f"{p}.{n}.weight", (n_embd, n_ff), mt)
        for n in ("ffn_down", "ffn_down_1"):
            add(f"{p}.{n}.weight", (n_ff, n_embd), mt)
        for n in ("attn_q", "attn_k", "attn_v", "attn_out", "attn_k_rel", "conv_pw2"):
            add(f"{p}.{n}.weight", (n_embd, n_embd), mt)
        add(f"{p}.per_dim_scale.weight", (dh,))
        add(f"{p}.conv_pw1.weight", (n_embd, 2 * n_embd), mt)
        add(f"{p}.conv_dw.weight", (5, n_embd))
    if clamps:
        for b in ("input_min", "input_max", "output_min", "output_max"):
            w.add_tensor(f"a.blk.0.attn_q.{b}", np.array([-10.0 if "min" in b else 10.0], dtype=np.float32))
    n_out = n_embd
    if out_proj:
        add("a.pre_encode.out.weight", (n_embd, n_out), mt)
        add("a.pre_encode.out.bias", (n_out,))
    add("mm.a.soft_emb_norm.weight", (n_out,))
    add("mm.a.input_projection.weight", (n_out, n_embd_text), mt)
    return _finish(w, path)


def write_gemma4ua_projector(path: str | os.PathLike, *, n_embd_text: int = 128, seed: int = 0) -> Path:
    """Gemma 4's encoder-free audio (``gemma4ua``, ``models/gemma4ua.cpp``): no blocks, the raw waveform in
    640-sample frames RMS-normed and projected by ``mm.a.input_projection`` (clip.cpp sets the 640 itself)."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(Path(path)), "clip")
    w.add_string("general.name", "tiny-gemma4ua-mmproj")
    w.add_bool("clip.has_vision_encoder", False)
    w.add_bool("clip.has_audio_encoder", True)
    w.add_string("clip.projector_type", "gemma4ua")
    for key, v in (("num_mel_bins", 128), ("embedding_length", 640), ("feed_forward_length", 0), ("block_count", 0),
                   ("projection_dim", n_embd_text), ("attention.head_count", 1)):
        w.add_uint32(f"clip.audio.{key}", v)
    w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-6)
    w.add_tensor("mm.a.input_projection.weight", (rng.standard_normal((n_embd_text, 640)) * 0.02).astype(np.float16))
    return _finish(w, path)


def write_glm4v_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 2,
    n_pos_train: int = 256,
    norm_embd: bool = True,
    ctx_dim: int = 96,
    proj_type: str = "glm4v",
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A GLM-4.xV projector (``glm4v``, or ``glm5v`` with its SwiGLU clamp and pixel limits; ``models/glm4v.cpp``): two patch convolutions with a bias, the post-conv
    RMS norm (``norm_embd``), a learned ``n_pos_train`` grid, RMS-norm SwiGLU ViT blocks without biases, the post
    norm, the 2x2 conv patch merger, and the FC / layer norm / gated-FFN projector to ``n_embd_text``. The warmup
    is 46x46 merged tokens whatever the patch size (a small patch keeps the raw image small)."""
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{proj_type}-mmproj", proj_type=proj_type, image_size=336,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_silu", True)
    if proj_type == "glm5v":
        w.add_float32("clip.vision.swiglu_clamp", 7.0)
        w.add_uint32("clip.vision.image_min_pixels", 64 * 64)
        w.add_uint32("clip.vision.image_max_pixels", 1024 * 1024)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.weight.1", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    if norm_embd:
        add("v.norm_embd.weight", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos_train))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, attn_bias=False, norm_bias=False, ffn_bias=False, gate=True)
    add("v.post_ln.weight", (n_embd,))
    add("mm.patch_merger.weight", (2, 2, n_embd, n_embd_text), mt)
    add("mm.patch_merger.bias", (n_embd_text,))
    add("mm.model.fc.weight", (n_embd_text, n_embd_text), mt)
    add("mm.post_norm.weight", (n_embd_text,))
    add("mm.post_norm.bias", (n_embd_text,))
    add("mm.gate.weight", (n_embd_text, ctx_dim), mt)
    add("mm.up.weight", (n_embd_text, ctx_dim), mt)
    add("mm.down.weight", (ctx_dim, n_embd_text), mt)
    return _finish(w, path)


def write_minimax_m3_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 48,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 14,
    proj: int = 80,
    gated: bool = False,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MiniMax-M3 projector (``minimax_m3``, ``models/minimax-m3.cpp``): two patch convolutions without bias,
    layer-norm ViT blocks with biased q/k/v/out (a GELU FFN, or SwiGLU-style gated with ``gated``), the per-patch
    ``mm.1``/``mm.2`` MLP to ``proj`` and the 2x2 merge MLP ``mm.merger.fc1``/``fc2`` to ``n_embd_text``; the
    warmup is 16x16 merged tokens."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-minimax-m3-mmproj", proj_type="minimax_m3",
                        image_size=448, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.weight.1", (patch_size, patch_size, 3, n_embd), mt)
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, gate=gated)
    add("mm.1.weight", (n_embd, proj), mt)
    add("mm.1.bias", (proj,))
    add("mm.2.weight", (proj, proj), mt)
    add("mm.2.bias", (proj,))
    add("mm.merger.fc1.weight", (proj * 4, n_embd_text), mt)
    add("mm.merger.fc1.bias", (n_embd_text,))
    add("mm.merger.fc2.weight", (n_embd_text, n_embd_text), mt)
    add("mm.merger.fc2.bias", (n_embd_text,))
    return _finish(w, path)


def write_kimik25_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 2,
    grid: int = 8,
    max_pixels: int | None = 96 * 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Kimi K2.5 projector (``kimik25``, ``models/kimik25.cpp``): the patch conv with a bias, a learned
    ``grid`` x ``grid`` position table stored 3-D, layer-norm ViT blocks with biases and a GELU FFN, the 2x2 pixel
    unshuffle, the projection layer norm and the ``mm.1``/``mm.2`` MLP. ``max_pixels`` (with a minimum) sets the
    warmup side; None leaves the pixel keys out (4096 merged tokens, or --image-max-tokens)."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-kimik25-mmproj", proj_type="kimik25", image_size=448,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", 2)
    if max_pixels is not None:
        w.add_uint32("clip.vision.image_min_pixels", 16 * 16)
        w.add_uint32("clip.vision.image_max_pixels", max_pixels)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, grid, grid))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.input_norm.weight", (n_embd,))
    add("mm.input_norm.bias", (n_embd,))
    add("mm.1.weight", (4 * n_embd, 4 * n_embd), mt)
    add("mm.1.bias", (4 * n_embd,))
    add("mm.2.weight", (4 * n_embd, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_unshuffle_projector(
    path: str | os.PathLike,
    *,
    kind: str = "kimivl",
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 4,
    grid: int = 8,
    moe_layers: tuple[int, ...] = (),
    n_expert: int = 4,
    n_expert_used: int = 2,
    probs_bias: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A ViT with a pixel-unshuffle merger: ``kimivl`` (Kimi-VL), ``paddleocr`` (PaddleOCR-VL), ``dots_ocr``
    (dots.ocr: RMS norms, a gated FFN, no learned grid, ``mm.post_norm`` as the post norm) or ``dots3note_v``
    (dots.3 note's vision: dots.ocr's with MoE FFNs on ``moe_layers``: a router, ``n_expert`` gated experts of
    which ``n_expert_used`` run, a selection bias with ``probs_bias``): the patch conv with a bias, a learned
    ``grid`` x ``grid`` table (not dots), biased q/k/v/out, the ``mm.input_norm`` and the MLP (``mm.1``/``mm.2``,
    dots ``mm.0``/``mm.2``)."""
    dots3 = kind == "dots3note_v"
    if dots3:
        kind = "dots_ocr"
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-{kind}-mmproj",
                        proj_type="dots3note_v" if dots3 else kind, image_size=448, patch_size=patch_size,
                        n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text, n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_gelu" if kind != "dots_ocr" else "clip.use_silu", True)
    if dots3:
        w.add_uint32("clip.vision.spatial_merge_size", 2)
        w.add_uint32("clip.vision.expert_used_count", n_expert_used)
    if kind != "paddleocr":
        w.add_uint32("clip.vision.projector.scale_factor", 2)
    if kind in ("paddleocr", "dots_ocr"):
        w.add_uint32("clip.vision.image_min_pixels", 16 * 16)
        w.add_uint32("clip.vision.image_max_pixels", 1024 * 1024)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    if kind != "dots_ocr":
        add("v.position_embd.weight", (n_embd, grid * grid))
    dots = kind == "dots_ocr"
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, norm_bias=not dots, ffn_bias=False, gate=dots, skip_ffn=moe_layers)
    for il in moe_layers:
        p = f"v.blk.{il}"
        add(f"{p}.ffn_gate_inp.weight", (n_embd, n_expert), mt)
        if probs_bias:
            add(f"{p}.exp_probs_b.weight", (n_expert,))
        add(f"{p}.ffn_gate_exps.weight", (n_embd, n_ff, n_expert), mt)
        add(f"{p}.ffn_up_exps.weight", (n_embd, n_ff, n_expert), mt)
        add(f"{p}.ffn_down_exps.weight", (n_ff, n_embd, n_expert), mt)
    if kind == "dots_ocr":
        add("mm.post_norm.weight", (n_embd,))
    else:
        add("v.post_ln.weight", (n_embd,))
        add("v.post_ln.bias", (n_embd,))
    add("mm.input_norm.weight", (n_embd,))
    add("mm.input_norm.bias", (n_embd,))
    up = "mm.0" if kind == "dots_ocr" else "mm.1"
    add(f"{up}.weight", (4 * n_embd, 4 * n_embd), mt)
    add(f"{up}.bias", (4 * n_embd,))
    add("mm.2.weight", (4 * n_embd, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_llama4_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    image_size: int = 112,
    patch_size: int = 14,
    scale_factor: int = 2,
    adapter: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Llama 4 projector (``llama4``, ``models/llama4.cpp``): the patch embedding stored 2-D (im2col + matmul),
    a CLS row, learned positions for every patch and the CLS, layer-norm ViT blocks with biases and a GELU FFN,
    the pixel shuffle by ``scale_factor``, the two-layer adapter MLP and ``mm.model.fc``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-llama4-mmproj", proj_type="llama4", image_size=image_size,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", scale_factor)
    n_pos = (image_size // patch_size) ** 2 + 1
    add("v.patch_embd.weight", (patch_size * patch_size * 3, n_embd), mt)
    add("v.class_embd", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.pre_ln.weight", (n_embd,))
    add("v.pre_ln.bias", (n_embd,))
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.model.mlp.1.weight", (n_embd * scale_factor * scale_factor, adapter), mt)
    add("mm.model.mlp.2.weight", (adapter, adapter), mt)
    add("mm.model.fc.weight", (adapter, n_embd_text), mt)
    return _finish(w, path)


def write_deepseek4v_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 4,
    scale_factor: int = 3,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A DeepSeek-V4 vision projector (``deepseek4v``, ``models/deepseek4v.cpp``): the patch conv with a bias, RMS
    ViT blocks with a gated SiLU FFN, the ``scale_factor`` x ``scale_factor`` aligner MLP (``mm.1``/``mm.2``) and
    the four sentinel embeddings."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-deepseek4v-mmproj", proj_type="deepseek4v",
                        image_size=448, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_silu", True)
    w.add_uint32("clip.vision.projector.scale_factor", scale_factor)
    w.add_uint32("clip.vision.image_min_pixels", 32 * 32)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, attn_bias=False, norm_bias=False, ffn_bias=False, gate=True)
    add("v.post_ln.weight", (n_embd,))
    merged = n_embd * scale_factor * scale_factor
    add("mm.1.weight", (merged, n_embd_text), mt)
    add("mm.1.bias", (n_embd_text,))
    add("mm.2.weight", (n_embd_text, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    for name in ("v.image_newline", "v.token_embd.img_start", "v.token_embd.img_end", "v.token_embd.img_pad"):
        add(name, (n_embd_text,))
    return _finish(w, path)


def write_hunyuanvl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    patch_size: int = 4,
    c1: int = 64,
    c2: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A HunyuanVL projector (``hunyuanvl``, ``models/hunyuanvl.cpp``): the patch conv with a bias, layer-norm ViT
    blocks with biases and a GELU FFN (positions come in as an input), the pre-norm, the 2x2 then 1x1 conv
    merger (``mm.0``, ``mm.2``), the newline column, ``mm.model.fc``, begin/end rows and the post-norm."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-hunyuanvl-mmproj", proj_type="hunyuanvl",
                        image_size=448, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-5)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("mm.pre_norm.weight", (n_embd,))
    add("mm.0.weight", (2, 2, n_embd, c1), mt)
    add("mm.0.bias", (c1,))
    add("mm.2.weight", (1, 1, c1, c2), mt)
    add("mm.2.bias", (c2,))
    add("v.image_newline", (c2,))
    add("mm.model.fc.weight", (c2, n_embd_text), mt)
    add("mm.model.fc.bias", (n_embd_text,))
    add("mm.image_begin", (n_embd_text,))
    add("mm.image_end", (n_embd_text,))
    add("mm.post_norm.weight", (n_embd_text,))
    return _finish(w, path)


def write_minicpmv_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 256,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 224,
    patch_size: int = 14,
    version: int | None = 4,
    query_num: int | None = None,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MiniCPM-V projector (``resampler``, ``models/minicpmv.cpp``): a SigLIP-style ViT (patch conv with a bias,
    learned positions, biases everywhere, post-norm) and the resampler: learned queries (``clip.minicpmv_query_num``
    of them, else as ``clip.minicpmv_version`` says: 64 for 3-6, 96 for 2), the ``kv`` projection, q/kv/post
    layer norms, an attention of 128-wide heads (``n_embd_text`` / 128 of them) and the projection."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-minicpmv-mmproj", proj_type="resampler",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    if version is not None:
        w.add_int32("clip.minicpmv_version", version)
    if query_num is not None:
        w.add_uint32("clip.minicpmv_query_num", query_num)
    n_query = query_num or (64 if version in (3, 4, 5, 6, 100045) else 96)
    n_pos = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    e = n_embd_text
    add("resampler.pos_embed_k", (e, n_pos))
    add("resampler.query", (e, n_query))
    add("resampler.proj.weight", (e, e), mt)
    add("resampler.kv.weight", (n_embd, e), mt)
    for t in ("q", "k", "v", "out"):
        add(f"resampler.attn.{t}.weight", (e, e), mt)
        add(f"resampler.attn.{t}.bias", (e,))
    for t in ("q", "kv", "post"):
        add(f"resampler.ln_{t}.weight", (e,))
        add(f"resampler.ln_{t}.bias", (e,))
    return _finish(w, path)


def write_minicpmv4_6_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 3,
    n_head: int = 4,
    image_size: int = 448,
    patch_size: int = 14,
    n_merge: int | None = None,
    insert_layer: int | None = 1,
    pre_ln: bool = False,
    merger_bias: bool = True,
    n_ff_merger: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MiniCPM-V 4.6 projector (``minicpmv4_6``, ``models/minicpmv.cpp``): a SigLIP-style ViT (patch conv with a
    bias, learned positions, biased q/k/v/out, GELU FFN, post norm; a pre norm with ``pre_ln``), with ``n_merge``
    None or 4 (``clip.vision.projector.scale_factor``; None leaves it out, llama.cpp's default 4) the ViT merger
    (``v.vit_merger.*``: a window attention, biased with ``merger_bias``, and a 2x2 downsample MLP) after layer
    ``insert_layer`` (``clip.vision.wa_layer_indexes``; None leaves it out: layer 0), and the final merger's
    ``mm.input_norm`` and ``mm.up``/``mm.down`` MLP to ``n_embd_text``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-minicpmv4_6-mmproj", proj_type="minicpmv4_6",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    if n_merge is not None:
        w.add_uint32("clip.vision.projector.scale_factor", n_merge)
    if insert_layer is not None:
        w.add_array("clip.vision.wa_layer_indexes", [insert_layer])
    n_pos = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    if pre_ln:
        add("v.pre_ln.weight", (n_embd,))
        add("v.pre_ln.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    if n_merge in (None, 4):
        m = "v.vit_merger"
        for t in ("ln1", "ds_ln"):
            add(f"{m}.{t}.weight", (n_embd if t == "ln1" else 4 * n_embd,))
            add(f"{m}.{t}.bias", (n_embd if t == "ln1" else 4 * n_embd,))
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{m}.{t}.weight", (n_embd, n_embd), mt)
            if merger_bias:
                add(f"{m}.{t}.bias", (n_embd,))
        add(f"{m}.ds_ffn_up.weight", (4 * n_embd, n_ff_merger), mt)
        add(f"{m}.ds_ffn_down.weight", (n_ff_merger, n_embd), mt)
        if merger_bias:
            add(f"{m}.ds_ffn_up.bias", (n_ff_merger,))
            add(f"{m}.ds_ffn_down.bias", (n_embd,))
    add("mm.input_norm.weight", (4 * n_embd,))
    add("mm.input_norm.bias", (4 * n_embd,))
    add("mm.up.weight", (4 * n_embd, n_ff_merger), mt)
    add("mm.up.bias", (n_ff_merger,))
    add("mm.down.weight", (n_ff_merger, n_embd_text), mt)
    add("mm.down.bias", (n_embd_text,))
    return _finish(w, path)


def write_granite4_vision_projector(
    path: str | os.PathLike,
    *,
    n_embd: int = 128,
    n_ff: int = 192,
    n_layer: int = 3,
    n_head: int = 2,
    image_size: int = 384,
    patch_size: int = 16,
    feature_layers: tuple[int, ...] = (1, 2),
    spatial_offsets: tuple[int, ...] = (-1, 0),
    projection_dim: int = 32,
    query_side: int = 4,
    window_side: int = 8,
    n_ff_qformer: int = 160,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Granite Vision 4.1 projector (``granite4_vision``, ``models/granite4-vision.cpp``): a SigLIP ViT (patch
    conv with a bias, learned positions, biased q/k/v/out, GELU FFN) and one WindowQFormer block per feature layer
    (``clip.vision.feature_layer``; ``clip.vision.projector.spatial_offsets`` -1 pools the block's queries, another
    gathers them), each ``v.proj_blk.N.*``: norms, learned queries and image positions, one QFormer layer of 64-wide
    heads (self- and cross-attention, FFN, biased, each post-normed) and the linear to ``projection_dim``; the
    text model takes ``projection_dim`` x the blocks."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-granite4-vision-mmproj", proj_type="granite4_vision",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=projection_dim, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_array("clip.vision.feature_layer", list(feature_layers))
    w.add_array("clip.vision.projector.spatial_offsets", list(spatial_offsets))
    w.add_uint32("clip.vision.projector.query_side", query_side)
    w.add_uint32("clip.vision.projector.window_side", window_side)
    n_pos = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.image_newline", (projection_dim,))
    for bid in range(len(feature_layers)):
        p = f"v.proj_blk.{bid}"
        add(f"{p}.img_pos", (n_embd, window_side * window_side))
        add(f"{p}.query", (n_embd, query_side * query_side))
        add(f"{p}.linear.weight", (n_embd, projection_dim), mt)
        add(f"{p}.linear.bias", (projection_dim,))
        for t in ("norm", "post_norm", "self_attn_norm", "cross_attn_norm", "ffn_norm"):
            add(f"{p}.{t}.weight", (n_embd,))
            add(f"{p}.{t}.bias", (n_embd,))
        for t in ("self_attn_q", "self_attn_k", "self_attn_v", "self_attn_out", "cross_attn_q", "cross_attn_k",
                  "cross_attn_v", "cross_attn_out"):
            add(f"{p}.{t}.weight", (n_embd, n_embd), mt)
            add(f"{p}.{t}.bias", (n_embd,))
        add(f"{p}.ffn_up.weight", (n_embd, n_ff_qformer), mt)
        add(f"{p}.ffn_up.bias", (n_ff_qformer,))
        add(f"{p}.ffn_down.weight", (n_ff_qformer, n_embd), mt)
        add(f"{p}.ffn_down.bias", (n_embd,))
    return _finish(w, path)


def write_deepseekocr_projector(
    path: str | os.PathLike,
    *,
    version: int = 1,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    n_head_kv: int = 1,
    sam_n_embd: int = 32,
    sam_n_head: int = 1,
    sam_n_layer: int = 3,
    window: int = 14,
    sam_kernel: int = 16,
    sam_pos_side: int | None = None,
    rel_pos_len: int | None = None,
    neck: int = 16,
    clip_pos_side: int | None = None,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A DeepSeek-OCR projector (``deepseekocr``, ``models/deepseekocr.cpp``; ``version`` 2: ``deepseekocr2``,
    ``models/deepseekocr2.cpp``). SAM (``v.sam.*``, ``clip.vision.sam.*`` and ``clip.vision.window_size``): a
    ``sam_kernel`` patch conv with a bias, learned positions on a ``sam_pos_side`` grid (None: SAM's own, 1024 /
    ``sam_kernel``), ``sam_n_layer`` blocks (fused qkv, relative positions of ``rel_pos_len`` rows, None: as the
    window or the global grid needs them, a GELU MLP), the neck (``neck`` channels) and two stride-2 convs to
    ``n_embd``. Version 1: a CLIP ViT (fused qkv, pre norm, CLS row, learned positions on a ``clip_pos_side`` grid,
    None: SAM's output grid) and ``mm.model.fc`` from CLIP's and SAM's ``2 * n_embd`` to ``n_embd_text``, the
    newline and the view separator. Version 2: a Qwen2 encoder (``n_head_kv`` KV heads, biased q/k/v, SwiGLU, RMS
    post norm) with the 256- and 144-query embeddings, ``mm.model.fc`` from ``n_embd``."""
    w, add, mt = _start(path, seed, matrix_type, name=f"tiny-deepseekocr{version}-mmproj",
                        proj_type="deepseekocr" if version == 1 else "deepseekocr2", image_size=1024,
                        patch_size=16, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.window_size", window)
    w.add_uint32("clip.vision.sam.block_count", sam_n_layer)
    w.add_uint32("clip.vision.sam.head_count", sam_n_head)
    w.add_uint32("clip.vision.sam.embedding_length", sam_n_embd)
    if version == 2:
        w.add_uint32("clip.vision.attention.head_count_kv", n_head_kv)
    grid = 1024 // sam_kernel
    pos_side = sam_pos_side or grid
    d = sam_n_embd // sam_n_head
    add("v.sam.patch_embd.weight", (sam_kernel, sam_kernel, 3, sam_n_embd), mt)
    add("v.sam.patch_embd.bias", (sam_n_embd,))
    add("v.sam.pos_embd.weight", (sam_n_embd, pos_side, pos_side))
    for il in range(sam_n_layer):
        p = f"v.sam.blk.{il}"
        side = grid if il in (2, 5, 8, 11) else window
        for t in ("pos_h", "pos_w"):
            add(f"{p}.attn.{t}.weight", (d, rel_pos_len or 2 * side - 1))
        add(f"{p}.attn.qkv.weight", (sam_n_embd, 3 * sam_n_embd), mt)
        add(f"{p}.attn.qkv.bias", (3 * sam_n_embd,))
        add(f"{p}.attn.out.weight", (sam_n_embd, sam_n_embd), mt)
        add(f"{p}.attn.out.bias", (sam_n_embd,))
        for t in ("pre_ln", "post_ln"):
            add(f"{p}.{t}.weight", (sam_n_embd,))
            add(f"{p}.{t}.bias", (sam_n_embd,))
        add(f"{p}.mlp.lin1.weight", (sam_n_embd, 4 * sam_n_embd), mt)
        add(f"{p}.mlp.lin1.bias", (4 * sam_n_embd,))
        add(f"{p}.mlp.lin2.weight", (4 * sam_n_embd, sam_n_embd), mt)
        add(f"{p}.mlp.lin2.bias", (sam_n_embd,))
    add("v.sam.neck.0.weight", (1, 1, sam_n_embd, neck))
    add("v.sam.neck.2.weight", (3, 3, neck, neck))
    for i in (1, 3):
        add(f"v.sam.neck.{i}.weight", (neck,))
        add(f"v.sam.neck.{i}.bias", (neck,))
    add("v.sam.net_2.weight", (3, 3, neck, 2 * neck))
    add("v.sam.net_3.weight", (3, 3, 2 * neck, n_embd))
    add("v.view_seperator", (n_embd_text, 1))
    if version == 1:
        out_side = ((grid - 1) // 2) // 2 + 1
        add("v.class_embd", (n_embd,))
        add("v.position_embd.weight", (n_embd, (clip_pos_side or out_side) ** 2 + 1))
        add("v.pre_ln.weight", (n_embd,))
        add("v.pre_ln.bias", (n_embd,))
        for il in range(n_layer):
            _fused_block(add, mt, f"v.blk.{il}", n_embd, n_ff)
        add("v.image_newline", (n_embd_text,))
        add("mm.model.fc.weight", (2 * n_embd, n_embd_text), mt)
    else:
        n_kv = n_embd // n_head * n_head_kv
        for il in range(n_layer):
            p = f"v.blk.{il}"
            add(f"{p}.attn_q.weight", (n_embd, n_embd), mt)
            add(f"{p}.attn_q.bias", (n_embd,))
            for t in ("attn_k", "attn_v"):
                add(f"{p}.{t}.weight", (n_embd, n_kv), mt)
                add(f"{p}.{t}.bias", (n_kv,))
            add(f"{p}.attn_out.weight", (n_embd, n_embd), mt)
            add(f"{p}.ln1.weight", (n_embd,))
            add(f"{p}.ln2.weight", (n_embd,))
            for t in ("ffn_gate", "ffn_up"):
                add(f"{p}.{t}.weight", (n_embd, n_ff), mt)
            add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        add("v.post_ln.weight", (n_embd,))
        add("v.resample_query_1024.weight", (n_embd, 256))
        add("v.resample_query_768.weight", (n_embd, 144))
        add("mm.model.fc.weight", (n_embd, n_embd_text), mt)
    add("mm.model.fc.bias", (n_embd_text,))
    return _finish(w, path)


def write_gemma3nv_projector(
    path: str | os.PathLike,
    *,
    n_embd: int = 64,
    image_size: int = 512,
    channels: tuple[int, int, int, int, int] = (8, 8, 16, 16, 24),
    n_head: int = 2,
    d_head: int = 8,
    attention: bool = True,
    msfa: bool = True,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Gemma 3n vision projector (``gemma3nv``, ``models/mobilenetv5.cpp``): a MobileNetV5 of ``channels`` (stem,
    then stages 0-3): the stem conv with its bias and norm; stage 0 two edge residuals, stage 1 two universal
    inverted residuals (one with both depthwise convs, one with neither), stages 2 and 3 a strided inverted residual,
    then (``attention``) a multi-query attention block of ``n_head`` heads ``d_head`` wide with key/value
    down-convs and a layer scale, and stage 2 a 5x5 ``dw_start`` block; with ``msfa`` the fusion adapter (its FFN
    and norm) to ``n_embd``, else stage 3 has the channels stage 2's need to make ``n_embd``; the soft-embedding
    norm and the input projection, ``n_embd`` square (mtmd takes its first dimension as the text model's width)."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-gemma3nv-mmproj", proj_type="gemma3nv",
                        image_size=image_size, patch_size=16, n_embd=n_embd, n_ff=4 * n_embd, n_layer=1,
                        n_embd_text=n_embd, n_head=n_head, eps=1e-6)
    c0, c1, c2, c3, c4 = channels
    if not msfa:  # the fused ends of stages 2 and 3, concatenated, are the output
        c4 = n_embd - c3

    def uir(p, cin, cout, *, start=0, mid=0, expand=2):
        e = cin * expand
        if start:
            add(f"{p}.dw_start.conv.weight", (start, start, 1, cin), mt)
            add(f"{p}.dw_start.bn.weight", (cin,))
        add(f"{p}.pw_exp.conv.weight", (1, 1, cin, e), mt)
        add(f"{p}.pw_exp.bn.weight", (e,))
        if mid:
            add(f"{p}.dw_mid.conv.weight", (mid, mid, 1, e), mt)
            add(f"{p}.dw_mid.bn.weight", (e,))
        add(f"{p}.pw_proj.conv.weight", (1, 1, e, cout), mt)
        add(f"{p}.pw_proj.bn.weight", (cout,))
        add(f"{p}.layer_scale.gamma", (1, 1, cout))

    def attn(p, c):
        add(f"{p}.norm.weight", (c,))
        add(f"{p}.attn.query.proj.weight", (1, 1, c, n_head * d_head), mt)
        for part in ("key", "value"):
            add(f"{p}.attn.{part}.down_conv.weight", (3, 3, 1, c), mt)
            add(f"{p}.attn.{part}.norm.weight", (c,))
            add(f"{p}.attn.{part}.proj.weight", (1, 1, c, d_head), mt)
        add(f"{p}.attn.output.proj.weight", (1, 1, n_head * d_head, c), mt)
        add(f"{p}.layer_scale.gamma", (1, 1, c))

    add("v.conv_stem.conv.weight", (3, 3, 3, c0), mt)
    add("v.conv_stem.conv.bias", (1, 1, c0))
    add("v.conv_stem.bn.weight", (c0,))
    for i, cin in enumerate((c0, c1)):  # stage 0: edge residuals, the first strided
        add(f"v.blk.0.{i}.conv_exp.weight", (3, 3, cin, 2 * cin), mt)
        add(f"v.blk.0.{i}.bn1.weight", (2 * cin,))
        add(f"v.blk.0.{i}.conv_pwl.weight", (1, 1, 2 * cin, c1), mt)
        add(f"v.blk.0.{i}.bn2.weight", (c1,))
    uir("v.blk.1.0", c1, c2, start=3, mid=3)
    uir("v.blk.1.1", c2, c2)
    uir("v.blk.2.0", c2, c3, mid=3)
    if attention:
        attn("v.blk.2.1", c3)
        uir("v.blk.2.2", c3, c3, start=5)
    uir("v.blk.3.0", c3, c4, mid=3)
    if attention:
        attn("v.blk.3.1", c4)
    if msfa:
        add("v.msfa.ffn.pw_exp.conv.weight", (1, 1, c3 + c4, 2 * n_embd), mt)
        add("v.msfa.ffn.pw_exp.bn.weight", (2 * n_embd,))
        add("v.msfa.ffn.pw_proj.conv.weight", (1, 1, 2 * n_embd, n_embd), mt)
        add("v.msfa.ffn.pw_proj.bn.weight", (n_embd,))
        add("v.msfa.norm.weight", (n_embd,))
    add("mm.soft_emb_norm.weight", (n_embd,))
    add("mm.input_projection.weight", (n_embd, n_embd), mt)
    return _finish(w, path)


def write_cogvlm_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 224,
    patch_size: int = 14,
    hidden: int = 96,
    n_ff_proj: int = 160,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A CogVLM projector (``cogvlm``, ``models/cogvlm.cpp``): an EVA-CLIP ViT (patch conv with a bias, CLS, learned
    positions, fused qkv with a bias, post-norm layers with a GELU FFN) and the adapter: ``mm.model.fc``, the post
    FC norm, the SwiGLU MLP ``mm.up``/``mm.gate``/``mm.down`` and the begin/end rows ``v.boi``/``v.eoi``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-cogvlm-mmproj", proj_type="cogvlm", image_size=image_size,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    n_pos = (image_size // patch_size) ** 2 + 1
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.class_embd", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    for il in range(n_layer):
        p = f"v.blk.{il}"
        _fused_block(add, mt, p, n_embd, n_ff)
    add("mm.model.fc.weight", (n_embd, hidden), mt)
    add("mm.post_fc_norm.weight", (hidden,))
    add("mm.post_fc_norm.bias", (hidden,))
    add("mm.up.weight", (hidden, n_ff_proj), mt)
    add("mm.gate.weight", (hidden, n_ff_proj), mt)
    add("mm.down.weight", (n_ff_proj, n_embd_text), mt)
    add("v.boi", (n_embd_text,))
    add("v.eoi", (n_embd_text,))
    return _finish(w, path)


def write_mobilevlm_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 3,
    n_head: int = 4,
    peg_f32: bool = False,
    v1: bool = False,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MobileVLM V2 projector (``ldpv2``, ``models/llava.cpp``): LLaVA's CLIP ViT at 336 / 14 (the 24x24 grid
    llava.cpp assumes) and the LDPv2 head: a GELU MLP ``mm.model.mlp.0``/``.2``, the 2x2 pool and the depthwise
    3x3 ``mm.model.peg.0``; ``v1``: MobileVLM's LDP (``ldp``) head instead, ``mm.model.mlp.1``/``.3`` and two
    MobileNet blocks ``mm.model.mb_block.1``/``.2``."""
    image_size, patch_size = 336, 14
    w, add, mt = _start(path, seed, matrix_type, name="tiny-mobilevlm-mmproj", proj_type="ldp" if v1 else "ldpv2",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-5)
    n_pos = (image_size // patch_size) ** 2 + 1
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.class_embd", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    add("v.pre_ln.weight", (n_embd,))
    add("v.pre_ln.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    e = n_embd_text
    if v1:  # LDP: mlp.1/mlp.3, then two MobileNet blocks (depthwise kernels f16, squeeze-excite to e / 4)
        add("mm.model.mlp.1.weight", (n_embd, e), mt)
        add("mm.model.mlp.1.bias", (e,))
        add("mm.model.mlp.3.weight", (e, e), mt)
        add("mm.model.mlp.3.bias", (e,))
        for n in (1, 2):
            pre = f"mm.model.mb_block.{n}.block."
            add(pre + "0.0.weight", (3, 3, 1, e), mt)
            for t in ("0.1", "2.1"):
                add(f"{pre}{t}.weight", (e,))
                add(f"{pre}{t}.bias", (e,))
            add(pre + "1.fc1.weight", (e, e // 4), mt)
            add(pre + "1.fc1.bias", (e // 4,))
            add(pre + "1.fc2.weight", (e // 4, e), mt)
            add(pre + "1.fc2.bias", (e,))
            add(pre + "2.0.weight", (e, e), mt)
        return _finish(w, path)
    add("mm.model.mlp.0.weight", (n_embd, e), mt)
    add("mm.model.mlp.0.bias", (e,))
    add("mm.model.mlp.2.weight", (e, e), mt)
    add("mm.model.mlp.2.bias", (e,))
    # f16 (``peg_f32``: f32, which llama.cpp's CPU backend cannot multiply by the f16 im2col)
    add("mm.model.peg.0.weight", (3, 3, 1, e), np.float32 if peg_f32 else mt)
    add("mm.model.peg.0.bias", (e,))
    return _finish(w, path)


def write_glm_edge_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 224,
    patch_size: int = 14,
    hidden: int = 96,
    n_ff_proj: int = 160,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A GLM-Edge-V projector (``adapter``, ``models/llava.cpp``): a SigLIP-style ViT without CLS (every layer
    run) and the adapter: a stride-2 2x2 conv, ``adapter.linear.linear``, ``norm1``, the SwiGLU MLP
    (``gate``/``dense_h_to_4h``/``dense_4h_to_h``) and the ``adapter.boi``/``eoi`` rows."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-glm-edge-mmproj", proj_type="adapter",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    n_pos = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("adapter.conv.weight", (2, 2, n_embd, hidden), mt)
    add("adapter.conv.bias", (hidden,))
    add("adapter.linear.linear.weight", (hidden, hidden), mt)
    add("adapter.linear.norm1.weight", (hidden,))
    add("adapter.linear.norm1.bias", (hidden,))
    add("adapter.linear.gate.weight", (hidden, n_ff_proj), mt)
    add("adapter.linear.dense_h_to_4h.weight", (hidden, n_ff_proj), mt)
    add("adapter.linear.dense_4h_to_h.weight", (n_ff_proj, n_embd_text), mt)
    add("adapter.boi", (n_embd_text,))
    add("adapter.eoi", (n_embd_text,))
    return _finish(w, path)


def write_youtuvl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 3,
    n_head: int = 2,
    patch_size: int = 8,
    wa_layers: tuple[int, ...] = (1,),
    n_ff_proj: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Youtu-VL projector (``youtuvl``, ``models/youtuvl.cpp``): the patch embedding as a 2-D matrix over
    3 x patch x patch pixels with a bias, layer-norm ViT blocks with biases and a GELU FFN, window attention but on
    the ``wa_layers`` (``clip.vision.wa_layer_indexes``; empty: every layer full), pre- and post-norms, the merger's
    RMS norm ``mm.input_norm`` and the GELU MLP ``mm.0``/``mm.2`` over 2x2 merged patches."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-youtuvl-mmproj", proj_type="youtuvl", image_size=512,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.window_size", 4 * patch_size * 2)
    w.add_array("clip.vision.wa_layer_indexes", list(wa_layers))
    add("v.patch_embd.weight", (3 * patch_size * patch_size, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.pre_ln.weight", (n_embd,))
    add("v.pre_ln.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.input_norm.weight", (n_embd,))
    add("mm.0.weight", (4 * n_embd, n_ff_proj), mt)
    add("mm.0.bias", (n_ff_proj,))
    add("mm.2.weight", (n_ff_proj, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_muse_glimmer_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 5,
    n_head: int = 2,
    patch_size: int = 4,
    n_side: int = 16,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MuseGlimmer projector (``muse-glimmer``, ``models/muse-glimmer.cpp``): the patch conv with a bias, a learned
    ``n_side`` x ``n_side`` grid (resized to the 64x64 warmup grid), pre-/post-norms and layer-norm ViT blocks
    (every 4th and the last global, the others sparse), the 2x2 pixel shuffle and the three adapter matmuls
    ``mm.0``/``mm.1``/``mm.2``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-muse-glimmer-mmproj", proj_type="muse-glimmer",
                        image_size=512, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_side * n_side))
    add("v.pre_ln.weight", (n_embd,))
    add("v.pre_ln.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.0.weight", (4 * n_embd, hidden), mt)
    add("mm.1.weight", (hidden, hidden), mt)
    add("mm.2.weight", (hidden, n_embd_text), mt)
    return _finish(w, path)


def write_mimovl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_head: int = 2,
    n_head_kv: int = 1,
    head_dim: int = 16,
    patch_size: int = 4,
    modes: tuple[int, ...] = (0, 1, 1, -1),
    n_ff_proj: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MiMo-VL projector (``mimovl``, MiMo-V2.5, ``models/mimovl.cpp``): two patch convs, RMS-norm blocks with a
    fused grouped-KV qkv of ``head_dim``-wide heads (not ``n_embd / n_head``), biases and a SwiGLU FFN, per-head
    sinks on the windowed layers, one layer per ``modes`` entry (``clip.vision.wa_pattern_mode``: -1 full, 0 row
    window, 1 column window), the post layer norm and the ``mm.0``/``mm.2`` GELU MLP."""
    n_layer = len(modes)
    w, add, mt = _start(path, seed, matrix_type, name="tiny-mimovl-mmproj", proj_type="mimovl", image_size=512,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_silu", True)
    w.add_uint32("clip.vision.attention.head_count_kv", n_head_kv)
    w.add_uint32("clip.vision.window_size", 64)
    w.add_array("clip.vision.wa_pattern_mode", list(modes))
    w.add_uint32("clip.vision.image_min_pixels", 64 * 64)
    w.add_uint32("clip.vision.image_max_pixels", 1024 * 1024)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.weight.1", (patch_size, patch_size, 3, n_embd), mt)
    rows = (n_head + 2 * n_head_kv) * head_dim
    for il, mode in enumerate(modes):
        p = f"v.blk.{il}"
        add(f"{p}.attn_qkv.weight", (n_embd, rows), mt)
        add(f"{p}.attn_qkv.bias", (rows,))
        add(f"{p}.attn_out.weight", (n_head * head_dim, n_embd), mt)
        add(f"{p}.attn_out.bias", (n_embd,))
        if mode != -1:
            add(f"{p}.attn_sinks", (n_head,))
        add(f"{p}.ln1.weight", (n_embd,))
        add(f"{p}.ln2.weight", (n_embd,))
        for t in ("ffn_gate", "ffn_up"):
            add(f"{p}.{t}.weight", (n_embd, n_ff), mt)
            add(f"{p}.{t}.bias", (n_ff,))
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        add(f"{p}.ffn_down.bias", (n_embd,))
    add("v.post_ln.weight", (n_embd,))
    add("v.post_ln.bias", (n_embd,))
    add("mm.0.weight", (4 * n_embd, n_ff_proj), mt)
    add("mm.2.weight", (n_ff_proj, n_embd_text), mt)
    return _finish(w, path)


def write_yasa2_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    channels: tuple[int, ...] = (16, 32),
    blocks: tuple[int, ...] = (2, 1),
    image_size: int = 256,
    patch_size: int = 4,
    pos_embed: bool = True,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Yasa2 projector (``yasa2``, Reka's ConvNeXt-V2, ``models/yasa2.cpp``): the patch conv and its channel norm,
    one stage per ``channels`` entry (the later ones open with a norm and a stride-2 conv) of ``blocks`` ConvNeXt
    blocks (7x7 depthwise conv in f16, channel norm, pointwise matmuls around GRN), the position embedding over the
    last stage's tokens (``pos_embed``), and the ``mm.0``/``mm.2`` MLP. No ViT layers (block count 0)."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-yasa2-mmproj", proj_type="yasa2", image_size=image_size,
                        patch_size=patch_size, n_embd=channels[0], n_ff=4 * channels[0], n_layer=0,
                        n_embd_text=n_embd_text, n_head=1, eps=1e-6)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, channels[0]), mt)
    add("v.patch_embd.bias", (channels[0],))
    add("v.patch_ln.weight", (channels[0],))
    add("v.patch_ln.bias", (channels[0],))
    side = image_size // patch_size
    for st, (c, n) in enumerate(zip(channels, blocks)):
        pre = f"v.stage.{st}"
        if st:
            add(f"{pre}.down.ln.weight", (channels[st - 1],))
            add(f"{pre}.down.ln.bias", (channels[st - 1],))
            add(f"{pre}.down.conv.weight", (2, 2, channels[st - 1], c), mt)
            add(f"{pre}.down.conv.bias", (c,))
            side //= 2
        for bi in range(n):
            bp = f"{pre}.blk.{bi}"
            add(f"{bp}.dw.weight", (7, 7, 1, c), mt)
            add(f"{bp}.dw.bias", (c,))
            add(f"{bp}.ln.weight", (c,))
            add(f"{bp}.ln.bias", (c,))
            add(f"{bp}.pw1.weight", (c, 4 * c), mt)
            add(f"{bp}.pw1.bias", (4 * c,))
            add(f"{bp}.grn.weight", (4 * c,))
            add(f"{bp}.grn.bias", (4 * c,))
            add(f"{bp}.pw2.weight", (4 * c, c), mt)
            add(f"{bp}.pw2.bias", (c,))
    if pos_embed:
        add("v.vision_pos_embed", (channels[-1], side * side))
    add("mm.0.weight", (channels[-1], hidden), mt)
    add("mm.0.bias", (hidden,))
    add("mm.2.weight", (hidden, n_embd_text), mt)
    add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_llava_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 3,
    n_head: int = 4,
    image_size: int = 224,
    patch_size: int = 14,
    feature_layers: tuple[int, ...] | None = None,
    yi: bool = False,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A LLaVA projector (``mlp``, ``models/llava.cpp``): a CLIP ViT (patch conv without bias, CLS, learned
    positions, pre-norm, quick-GELU FFN, biases everywhere) and the ``mm.0``/``mm.2`` MLP; ``feature_layers``
    (Granite Vision) stacks those layers' inputs (the MLP input grows by their count); ``yi`` writes the Yi-type
    ``mm.0``/``mm.1``/``mm.3``/``mm.4`` (linear, norm, linear, norm)."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-llava-mmproj", proj_type="mlp", image_size=image_size,
                        patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer, n_embd_text=n_embd_text,
                        n_head=n_head, eps=1e-5)
    if feature_layers is not None:
        w.add_array("clip.vision.feature_layer", list(feature_layers))
    n_pos = (image_size // patch_size) ** 2 + 1
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.class_embd", (n_embd,))
    add("v.position_embd.weight", (n_embd, n_pos))
    add("v.pre_ln.weight", (n_embd,))
    add("v.pre_ln.bias", (n_embd,))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    width = n_embd * (len(feature_layers) if feature_layers else 1)
    add("mm.0.weight", (width, n_embd_text), mt)
    add("mm.0.bias", (n_embd_text,))
    if yi:
        add("mm.1.weight", (n_embd_text,))
        add("mm.1.bias", (n_embd_text,))
        add("mm.3.weight", (n_embd_text, n_embd_text), mt)
        add("mm.3.bias", (n_embd_text,))
        add("mm.4.weight", (n_embd_text,))
        add("mm.4.bias", (n_embd_text,))
    else:
        add("mm.2.weight", (n_embd_text, n_embd_text), mt)
        add("mm.2.bias", (n_embd_text,))
    return _finish(w, path)


def write_nemotron_v2_vl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    image_size: int = 256,
    patch_size: int = 16,
    n_registers: int = 8,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Nemotron Nano V2 VL projector (``nemotron_v2_vl``, ``models/nemotron-v2-vl.cpp``): RADIO's patch conv,
    positions for every patch, ``n_registers`` register rows (``v.class_embd``), layer-norm ViT blocks with biases
    and a GELU FFN, the 2x2 unshuffle and the RMS-normed squared-ReLU MLP ``mm.model.mlp.0/1/3``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-nemotron-v2-vl-mmproj", proj_type="nemotron_v2_vl",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", 2)
    n_patches = (image_size // patch_size) ** 2
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.position_embd.weight", (n_embd, n_patches))
    add("v.class_embd", (n_embd, n_registers))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("mm.model.mlp.0.weight", (4 * n_embd,))
    add("mm.model.mlp.1.weight", (4 * n_embd, hidden), mt)
    add("mm.model.mlp.3.weight", (hidden, n_embd_text), mt)
    return _finish(w, path)


def write_gemma4uv_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 128,
    n_embd: int = 64,
    patch_size: int = 8,
    pos_size: int = 64,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """Gemma 4's encoder-free "unified" vision (``gemma4uv``, ``models/gemma4uv.cpp``): no blocks; the 3x3-merged
    patch (``patch_size`` * 3 a side) layer-normed, projected by ``v.patch_embd`` (stored 2-D) with a bias,
    normed, the x/y position tables (``pos_size`` rows each, stored as one table) and the embedder."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-gemma4uv-mmproj", proj_type="gemma4uv", image_size=768,
                        patch_size=patch_size, n_embd=n_embd, n_ff=0, n_layer=0, n_embd_text=n_embd_text, n_head=1,
                        eps=1e-6)
    k = 3 * (patch_size * 3) ** 2
    add("v.patch_norm.1.weight", (k,))
    add("v.patch_norm.1.bias", (k,))
    add("v.patch_embd.weight", (k, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.patch_norm.2.weight", (n_embd,))
    add("v.patch_norm.2.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, pos_size, 2))
    add("v.patch_norm.3.weight", (n_embd,))
    add("v.patch_norm.3.bias", (n_embd,))
    add("mm.input_projection.weight", (n_embd, n_embd_text), mt)
    return _finish(w, path)


def write_lfm2a_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 128,
    channels: int = 16,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """An LFM2-Audio projector (``lfm2a``, ``models/conformer.cpp``): the FastConformer subsampling (a 3x3 conv,
    two depthwise 3x3 + pointwise 1x1 pairs, ``channels`` wide), ``a.pre_encode.out``, conformer blocks (two
    half-step FFNs, attention with ``pos_bias_u``/``v`` and a 512-wide ``linear_pos``, the conv module with a
    9-tap depthwise kernel), every weight biased, and the ``mm.a.mlp.0/1/3`` adapter."""
    w, add, mt = _start_audio(
        path, seed, matrix_type, name="tiny-lfm2a-mmproj", proj_type="lfm2a", eps=1e-5, keys=(
        ("num_mel_bins", n_mel), ("embedding_length", n_embd), ("feed_forward_length", n_ff),
        ("block_count", n_layer), ("projection_dim", n_embd_text), ("attention.head_count", n_head)
    ))

    _conformer_subsampling(add, mt, n_mel=n_mel, n_embd=n_embd, channels=channels, f32_convs=(2, 3, 5, 6))
    add("a.position_embd.weight", (n_embd, 1500))
    dh = n_embd // n_head
    for il in range(n_layer):
        p = f"a.blk.{il}"
        _conformer_norms(add, p, n_embd)
        for n in ("ffn_up", "ffn_up_1"):
            add(f"{p}.{n}.weight", (n_embd, n_ff), mt)
            add(f"{p}.{n}.bias", (n_ff,))
        for n in ("ffn_down", "ffn_down_1"):
            add(f"{p}.{n}.weight", (n_ff, n_embd), mt)
            add(f"{p}.{n}.bias", (n_embd,))
        for n in ("attn_q", "attn_k", "attn_v", "attn_out", "conv_pw2"):
            add(f"{p}.{n}.weight", (n_embd, n_embd), mt)
            add(f"{p}.{n}.bias", (n_embd,))
        add(f"{p}.pos_bias_u", (dh, n_head))
        add(f"{p}.pos_bias_v", (dh, n_head))
        add(f"{p}.linear_pos.weight", (512, n_embd), mt)
        add(f"{p}.conv_pw1.weight", (n_embd, 2 * n_embd), mt)
        add(f"{p}.conv_pw1.bias", (2 * n_embd,))
        add(f"{p}.conv_dw.weight", (9, n_embd))
        add(f"{p}.conv_dw.bias", (n_embd,))
    add("mm.a.mlp.0.weight", (n_embd,))
    add("mm.a.mlp.0.bias", (n_embd,))
    add("mm.a.mlp.1.weight", (n_embd, hidden), mt)
    add("mm.a.mlp.1.bias", (hidden,))
    add("mm.a.mlp.3.weight", (hidden, n_embd_text), mt)
    add("mm.a.mlp.3.bias", (n_embd_text,))
    return _finish(w, path)


def write_step3vl_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    image_size: int = 224,
    patch_size: int = 14,
    grid: int = 8,
    c1: int = 48,
    c2: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Step3-VL projector (``step3vl``, ``models/step3vl.cpp``): the patch conv with a bias, a learned ``grid``^2
    table, layer-norm ViT blocks with biases, two 3x3 stride-2 downsampling convs (``mm.0``, ``mm.1``) with
    channel biases and ``mm.model.fc``."""
    w, add, mt = _start(path, seed, matrix_type, name="tiny-step3vl-mmproj", proj_type="step3vl",
                        image_size=image_size, patch_size=patch_size, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                        n_embd_text=n_embd_text, n_head=n_head, eps=1e-5)
    w.add_bool("clip.use_gelu", True)
    add("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), mt)
    add("v.patch_embd.bias", (n_embd,))
    add("v.position_embd.weight", (n_embd, grid * grid))
    _vit_blocks(add, mt, n_layer, n_embd, n_ff)
    add("mm.0.weight", (3, 3, n_embd, c1), mt)
    add("mm.0.bias", (c1,))
    add("mm.1.weight", (3, 3, c1, c2), mt)
    add("mm.1.bias", (c2,))
    add("mm.model.fc.weight", (c2, n_embd_text), mt)
    return _finish(w, path)


def write_dots3note_a_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 128,
    channels: int = 16,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A dots.3 note audio projector (``dots3note_a``, ``models/dots3note.cpp``): three 3x3 stride-2 convolutions
    of ``channels`` with biases, ``a.conv_out``, RMS-norm blocks without biases and a SiLU-gated FFN, the post
    norm, and the ``mm.a.norm_pre`` + ``mm.a.mlp.1``/``mm.a.mlp.3`` adapter."""
    w, add, mt = _start_audio(
        path, seed, matrix_type, name="tiny-dots3note-a-mmproj", proj_type="dots3note_a", eps=1e-6, keys=(
        ("num_mel_bins", n_mel), ("embedding_length", n_embd), ("feed_forward_length", n_ff),
        ("block_count", n_layer), ("projection_dim", n_embd_text), ("attention.head_count", n_head)
    ))
    w.add_bool("clip.use_silu", True)

    for i in (1, 2, 3):
        add(f"a.conv2d.{i}.weight", (3, 3, 1 if i == 1 else channels, channels), np.float16)
        add(f"a.conv2d.{i}.bias", (channels,))
    add("a.conv_out.weight", ((n_mel // 8) * channels, n_embd), mt)
    _vit_blocks(add, mt, n_layer, n_embd, n_ff, prefix="a", attn_bias=False, norm_bias=False, ffn_bias=False,
                gate=True)
    add("a.post_ln.weight", (n_embd,))
    add("mm.a.norm_pre.weight", (n_embd,))
    add("mm.a.norm_pre.bias", (n_embd,))
    add("mm.a.mlp.1.weight", (n_embd, hidden), mt)
    add("mm.a.mlp.1.bias", (hidden,))
    add("mm.a.mlp.3.weight", (hidden, n_embd_text), mt)
    add("mm.a.mlp.3.bias", (n_embd_text,))
    return _finish(w, path)


def write_parakeet_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 128,
    channels: int = 16,
    hidden: int = 96,
    conv_kernel: int = 9,
    subsampling: int = 8,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Parakeet projector (``parakeet``, ``models/parakeet.cpp``): the subsampling (a 3x3 conv, two depthwise
    3x3 + pointwise 1x1 pairs, ``channels`` wide, with biases), ``a.pre_encode.out``, conformer blocks without
    matrix biases (two half-step FFNs, attention with ``pos_bias_u``/``v`` and an ``n_embd``-wide ``linear_pos``,
    the conv module with a ``conv_kernel``-tap depthwise kernel and its batch-norm mean/var), the
    ``mm.a.norm_pre`` + ``mm.a.mlp.1``/``mm.a.mlp.2`` adapter, and the ``mm.model.mlp.0/1/3`` weights
    ``load_tensors`` requires (the graph does not read them)."""
    w, add, mt = _start_audio(
        path, seed, matrix_type, name="tiny-parakeet-mmproj", proj_type="parakeet", eps=1e-5, keys=(
        ("num_mel_bins", n_mel), ("embedding_length", n_embd), ("feed_forward_length", n_ff),
        ("block_count", n_layer), ("projection_dim", n_embd_text), ("attention.head_count", n_head),
        ("subsampling_factor", subsampling), ("conv_kernel_size", conv_kernel)
    ))

    add("a.mel_filters", (257, n_mel))  # mtmd's preprocessor asserts n_mel x (512 / 2 + 1) and a 400-wide window
    add("a.window", (400,))
    _conformer_subsampling(add, mt, n_mel=n_mel, n_embd=n_embd, channels=channels, f32_convs=(2, 5))
    dh = n_embd // n_head
    for il in range(n_layer):
        p = f"a.blk.{il}"
        _conformer_norms(add, p, n_embd)
        for n in ("ffn_up", "ffn_up_1"):
            add(f"{p}.{n}.weight", (n_embd, n_ff), mt)
        for n in ("ffn_down", "ffn_down_1"):
            add(f"{p}.{n}.weight", (n_ff, n_embd), mt)
        for n in ("attn_q", "attn_k", "attn_v", "attn_out", "conv_pw2", "linear_pos"):
            add(f"{p}.{n}.weight", (n_embd, n_embd), mt)
        add(f"{p}.pos_bias_u", (dh, n_head))
        add(f"{p}.pos_bias_v", (dh, n_head))
        add(f"{p}.conv_pw1.weight", (n_embd, 2 * n_embd), mt)
        add(f"{p}.conv_dw.weight", (conv_kernel, n_embd))
        add(f"{p}.conv_norm_mean", (n_embd,))
        add(f"{p}.conv_norm_var", (n_embd,))
    add("mm.a.norm_pre.weight", (n_embd,))
    add("mm.a.mlp.1.weight", (n_embd, hidden), mt)
    add("mm.a.mlp.2.weight", (hidden, n_embd_text), mt)
    for i in (0, 1, 3):
        add(f"mm.model.mlp.{i}.weight", (n_embd_text, n_embd_text), mt)
    return _finish(w, path)


def write_mimo_audio_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    modes: tuple[int, ...] = (-1, 0, 0, -1),
    n_head: int = 4,
    n_mel: int = 128,
    bins: tuple[int, ...] = (64, 32),
    max_bins: int = 64,
    local_layers: int = 2,
    group: int = 4,
    hidden: int = 96,
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A MiMo-Audio projector (``mimo_audio``, ``models/mimo-audio.cpp``): Whisper's two 1-D convs, layer-norm
    blocks with biases, one per ``modes`` entry (``clip.audio.wa_pattern_mode``: -1 full, 0 window), the post
    norm, the stride-2 downsampling conv and norm, an RVQ codebook of ``max_bins`` rows per quantizer (``bins``
    used) and as many code-embedding tables, ``local_layers`` RMS-norm blocks with biased q/k/v and a gated FFN,
    the local norm and the ``mm.a.mlp.1``/``mm.a.mlp.2`` projection of ``group`` frames a row."""
    w, add, mt = _start_audio(
        path, seed, matrix_type, name="tiny-mimo-audio-mmproj", proj_type="mimo_audio", eps=1e-5, keys=(
        ("num_mel_bins", n_mel), ("embedding_length", n_embd), ("feed_forward_length", n_ff),
        ("block_count", len(modes)), ("projection_dim", n_embd_text), ("attention.head_count", n_head),
        ("window_size", 8), ("local_block_count", local_layers), ("local_group_size", group),
        ("rvq.num_quantizers", len(bins))
    ))
    w.add_array("clip.audio.wa_pattern_mode", list(modes))
    w.add_array("clip.audio.rvq.codebook_size", list(bins))

    add("a.conv1d.1.weight", (3, n_mel, n_embd), np.float16)
    add("a.conv1d.1.bias", (1, n_embd))
    add("a.conv1d.2.weight", (3, n_embd, n_embd), np.float16)
    add("a.conv1d.2.bias", (1, n_embd))
    _vit_blocks(add, mt, len(modes), n_embd, n_ff, prefix="a")
    add("a.post_ln.weight", (n_embd,))
    add("a.post_ln.bias", (n_embd,))
    add("a.downsample.conv.weight", (2, n_embd, n_embd), np.float16)
    add("a.downsample.norm.weight", (n_embd,))
    add("a.downsample.norm.bias", (n_embd,))
    add("a.rvq.codebook.weight", (n_embd, max_bins, len(bins)))
    add("mm.a.code_embd.weight", (n_embd, max_bins, len(bins)))
    for il in range(local_layers):
        p = f"mm.a.local_blk.{il}"
        for n in ("attn_q", "attn_k", "attn_v"):
            add(f"{p}.{n}.weight", (n_embd, n_embd), mt)
            add(f"{p}.{n}.bias", (n_embd,))
        add(f"{p}.attn_out.weight", (n_embd, n_embd), mt)
        add(f"{p}.ffn_gate.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_up.weight", (n_embd, n_ff), mt)
        add(f"{p}.ffn_down.weight", (n_ff, n_embd), mt)
        add(f"{p}.ln1.weight", (n_embd,))
        add(f"{p}.ln2.weight", (n_embd,))
    add("mm.a.local_norm.weight", (n_embd,))
    add("mm.a.mlp.1.weight", (n_embd * group, hidden), mt)
    add("mm.a.mlp.2.weight", (hidden, n_embd_text), mt)
    return _finish(w, path)


def write_granite_speech_projector(
    path: str | os.PathLike,
    *,
    n_embd_text: int = 64,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_mel: int = 160,
    chunk: int = 64,
    max_pos: int = 64,
    conv_kernel: int = 15,
    window: int = 15,
    downsample: int = 5,
    proj_heads: int = 2,
    n_ctc: int = 48,
    feature_layers: tuple[int, ...] = (),
    matrix_type: str = "f16",
    seed: int = 0,
) -> Path:
    """A Granite Speech projector (``granite_speech``, ``models/granite-speech.cpp``): the input projection,
    conformer blocks with biases (two half-step FFNs, block attention with a Shaw ``attn_rel_pos_emb`` of
    ``2 * max_pos + 1`` rows, the conv module with a ``conv_kernel``-tap depthwise kernel), the CTC pair, the
    feature layers concatenated where given, and the QFormer: ``window / downsample`` learned queries, two blocks
    of self-attention, cross-attention and a GELU FFN with their norms, the output linear."""
    w, add, mt = _start_audio(
        path, seed, matrix_type, name="tiny-granite-speech-mmproj", proj_type="granite_speech", eps=1e-5, keys=(
        ("num_mel_bins", n_mel), ("embedding_length", n_embd), ("feed_forward_length", n_ff),
        ("block_count", n_layer), ("projection_dim", n_embd_text), ("attention.head_count", n_head),
        ("chunk_size", chunk), ("conv_kernel_size", conv_kernel), ("max_pos_emb", max_pos),
        ("projector.window_size", window), ("projector.downsample_rate", downsample),
        ("projector.head_count", proj_heads)
    ))
    if feature_layers:
        w.add_array("clip.audio.feature_layer", list(feature_layers))

    def linear(name: str, n_in: int, n_out: int) -> None:
        add(f"{name}.weight", (n_in, n_out), mt)
        add(f"{name}.bias", (n_out,))

    def norm(name: str, n: int = n_embd) -> None:
        add(f"{name}.weight", (n,))
        add(f"{name}.bias", (n,))

    linear("a.input_projection", n_mel, n_embd)
    linear("a.enc_ctc_out", n_embd, n_ctc)
    linear("a.enc_ctc_out_mid", n_ctc, n_embd)
    for il in range(n_layer):
        p = f"a.blk.{il}"
        for n in ("attn_q", "attn_k", "attn_v"):
            add(f"{p}.{n}.weight", (n_embd, n_embd), mt)
        linear(f"{p}.attn_out", n_embd, n_embd)
        _conformer_norms(add, p, n_embd)
        for sfx in ("", "_1"):
            linear(f"{p}.ffn_up{sfx}", n_embd, n_ff)
            linear(f"{p}.ffn_down{sfx}", n_ff, n_embd)
        add(f"{p}.attn_rel_pos_emb", (n_embd // n_head, 2 * max_pos + 1))
        add(f"{p}.conv_dw.weight", (conv_kernel, n_embd))
        linear(f"{p}.conv_pw1", n_embd, 2 * n_embd)
        linear(f"{p}.conv_pw2", n_embd, n_embd)
    add("a.proj_query", (n_embd, window // downsample))
    norm("a.proj_norm")
    linear("a.proj_linear", n_embd, n_embd_text)
    width = n_embd * (len(feature_layers) + 1)
    for il in range(2):
        p = f"a.proj_blk.{il}"
        for n in ("self_attn_q", "self_attn_k", "self_attn_v", "self_attn_out", "cross_attn_q", "cross_attn_out"):
            linear(f"{p}.{n}", n_embd, n_embd)
        for n in ("cross_attn_k", "cross_attn_v"):
            linear(f"{p}.{n}", width, n_embd)
        for n in ("self_attn_norm", "cross_attn_norm", "ffn_norm"):
            norm(f"{p}.{n}")
        linear(f"{p}.ffn_up", n_embd, 2 * n_embd)
        linear(f"{p}.ffn_down", 2 * n_embd, n_embd)
    return _finish(w, path)
