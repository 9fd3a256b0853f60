"""The multimodal projector (--mmproj): where libmtmd puts it and what it allocates there, against the real
llama-server's -lv 4 log (``clip_ctx: CLIP using <backend> backend``, ``load_hparams: model size``,
``reserve_compute_meta: <buft> compute buffer size``)."""

from __future__ import annotations

import os
import re

import pytest

from app.lanes import CPU, DeviceKind, Lane
from app.memory.projector import ProjectorDeviceError, projector_lane, projector_memory, weights_bytes
from app.memory.settings import LlamaSettings
from app.model.projector import open_projector
from tests.projector_factory import (
    write_deepseek4v_projector,
    write_deepseekocr_projector,
    write_gemma3nv_projector,
    write_dots3note_a_projector,
    write_cogvlm_projector,
    write_glm_edge_projector,
    write_granite4_vision_projector,
    write_granite_speech_projector,
    write_hunyuanvl_projector,
    write_mimovl_projector,
    write_minicpmv4_6_projector,
    write_mimo_audio_projector,
    write_minicpmv_projector,
    write_mobilevlm_projector,
    write_muse_glimmer_projector,
    write_gemma3_projector,
    write_gemma4v_projector,
    write_internvl_projector,
    write_pixtral_projector,
    write_qwen2vl_projector,
    write_qwen3vl_projector,
    write_step3vl_projector,
    write_siglip_projector,
    write_gemma4a_projector,
    write_gemma4ua_projector,
    write_gemma4uv_projector,
    write_glm4v_projector,
    write_kimik25_projector,
    write_lfm2a_projector,
    write_llama4_projector,
    write_llava_projector,
    write_minimax_m3_projector,
    write_nemotron_v2_vl_projector,
    write_parakeet_projector,
    write_unshuffle_projector,
    write_whisper_projector,
    write_yasa2_projector,
    write_youtuvl_projector,
)

from .accuracy import MiB, list_rpc_devices, record


def _lane(name: str, kind: DeviceKind = DeviceKind.GPU) -> Lane:
    return Lane(name, f"{name}[127.0.0.1:1]" if kind is DeviceKind.RPC else name, kind=kind)


RPC0, RPC1 = _lane("RPC0", DeviceKind.RPC), _lane("RPC1", DeviceKind.RPC)
VK0, CUDA0 = _lane("Vulkan0"), _lane("CUDA0")


def _s(**kw) -> LlamaSettings:
    return LlamaSettings(**kw)


# --------------------------------------------------------------------------- the device rule


@pytest.mark.parametrize(
    "devices,kw,expect",
    [
        ([], {}, None),  # CPU only
        ([RPC0, RPC1], {}, "RPC0"),  # RPC devices are GPU-type: the first one
        ([RPC0, RPC1, VK0], {}, "Vulkan0"),  # registry order: local backends before the RPC devices
        ([CUDA0, VK0], {}, "CUDA0"),
        ([RPC0, RPC1], {"mmproj_device": "RPC1"}, "RPC1"),
        ([RPC0, RPC1], {"devices": ["RPC1", "RPC0"]}, "RPC1"),  # follows the first -dev
        ([RPC0, RPC1], {"devices": ["RPC1"], "mmproj_device": "RPC0"}, "RPC0"),  # -mmdev wins
        ([RPC0, RPC1], {"devices": ["none"]}, None),
        ([RPC0, RPC1], {"mmproj_device": "none"}, None),
        ([RPC0, RPC1], {"mmproj_offload": False}, None),
        ([_lane("Vulkan0", DeviceKind.IGPU)], {}, "Vulkan0"),  # no GPU: the first IGPU
        ([_lane("BLAS", DeviceKind.ACCEL)], {}, None),  # an accelerator is never chosen
    ],
)
def test_the_projector_device_is_chosen_as_clip_ctx_chooses_it(devices, kw, expect):
    lane = projector_lane(devices, _s(**kw))
    assert (lane.name if lane else None) == expect


def test_an_unknown_mmproj_device_is_refused():
    with pytest.raises(ProjectorDeviceError, match="RPC3"):
        projector_lane([RPC0], _s(mmproj_device="RPC3"))


@pytest.fixture(scope="module")
def proj_file(tmp_path_factory):
    return write_gemma3_projector(tmp_path_factory.mktemp("mmproj") / "mmproj.gguf")


def test_the_weights_are_padded_to_the_backend_alignment(proj_file):
    p = open_projector(proj_file)
    raw = p.weight_bytes
    assert weights_bytes(p, None) >= raw  # CPU: 32
    cuda = weights_bytes(p, CUDA0)  # 128
    assert cuda >= weights_bytes(p, None)
    assert cuda == sum((t.nbytes + 127) // 128 * 128 for t in p.tensors)


def test_gemma3_compute_is_replayed_and_flash_attention_matters(proj_file):
    p = open_projector(proj_file)
    on = projector_memory(p, [RPC0], _s(flash_attn="auto"))
    off = projector_memory(p, [RPC0], _s(flash_attn="off"))
    assert on.exact and off.exact and on.device == "RPC0"
    assert set(on.compute) == {"RPC0", CPU}
    assert on.compute[CPU] == 448 * 448 * 3 * 4  # the raw image input, copied to the device
    assert off.compute["RPC0"] > on.compute["RPC0"]  # the attention scores
    cpu = projector_memory(p, [], _s())
    assert set(cpu.compute) == {CPU} and cpu.device == CPU


def test_a_projector_type_without_a_graph_is_approximate_and_says_so(tmp_path):
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "pixtral.gguf"
    w = GGUFWriter(str(path), "clip")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "somethingnew")
    for k, v in (("image_size", 224), ("patch_size", 14), ("embedding_length", 64), ("feed_forward_length", 128),
                 ("block_count", 1), ("attention.head_count", 2), ("projection_dim", 64)):
        w.add_uint32(f"clip.vision.{k}", v)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_tensor("v.blk.0.attn_out.weight", np.zeros((64, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    m = projector_memory(open_projector(path), [RPC0], _s())
    assert not m.exact and m.weights == 64 * 64 * 4
    assert m.compute["RPC0"] > 0 and m.compute[CPU] == 224 * 224 * 3 * 4
    assert any("approximate" in n and "Verify" in n for n in m.notes)


# --------------------------------------------------------------------------- against llama-server

_USING = re.compile(r"clip_ctx: CLIP using (\S+) backend")
_SIZE = re.compile(r"load_hparams: model size:\s*([\d.]+) MiB")
_COMPUTE = re.compile(r"reserve_compute_meta:\s+(\S+) compute buffer size =\s*([\d.]+) MiB")
_TOTAL = re.compile(r"estimated worst-case memory usage of mmproj is ([\d.]+) MiB")

#: projector shapes: the default, and a larger one (buffers of several MiB, 8 heads, 3 layers, a 46-patch side
#: that the 4x4 pool does not divide)
SHAPES = {
    "small": ("gemma3", dict()),
    "large": ("gemma3", dict(n_embd=256, n_ff=1024, n_layer=3, n_head=8, image_size=644, n_merge=None)),
    # Qwen3-VL: the warmup is 46x46 merged tokens (92x92 patches) whatever the patch size
    "qwen3vl": ("qwen3vl", dict()),
    "qwen3vl-1head": ("qwen3vl", dict(n_head=1, n_layer=2, deepstack=(1,), n_embd_text=48, patch_size=2)),
    # Qwen2.5-VL: RMS norms, SwiGLU, window attention (a 92x92-patch mask) on every other layer; Qwen2-VL
    "qwen2.5vl": ("qwen2vl", dict()),
    "qwen2vl": ("qwen2vl", dict(version="2", n_layer=2)),
    # Mistral Small 3.1 (pixtral with the 2x2 patch merger; warmup 16x16 merged tokens) and the original Pixtral
    "mistral3": ("pixtral", dict(n_embd=256, n_ff=512, n_layer=3, n_head=4)),
    "pixtral": ("pixtral", dict(spatial_merge=None)),
    # Gemma 4: clamped matmuls, x/y position tables, 3x3 pooler (warmup 16x16 pooled tokens); clamp scalars
    # in the file are read, not loaded
    "gemma4v": ("gemma4v", dict()),
    "gemma4v-plain": ("gemma4v", dict(clamps=False, std=False, n_layer=3, n_head=4, n_ff=512)),
    # SmolVLM (idefics3: pixel shuffle by 4) and LFM2-VL (a 16x16 position grid resized to the image; the warmup
    # image is the largest that --image-max-tokens allows: 256 tokens by default)
    "idefics3": ("siglip", dict()),
    "lfm2": ("siglip", dict(kind="lfm2", scale_factor=2, image_size=256, n_layer=3)),
    # InternVL: the CLS token, layer scales, pixel shuffle by 2
    "internvl": ("internvl", dict()),
    # audio over a Whisper encoder (3000 warmup frames): Ultravox (stacked frames, SwiGLU adapter), Qwen2-Audio
    # (average pool, one linear), Voxtral (pool and stack), Music Flamingo; 80 mel bins and f32 matrices for one
    "ultravox": ("whisper", dict(proj_type="ultravox")),
    "qwen2a": ("whisper", dict(proj_type="qwen2a", n_mel=80, matrix_type="f32")),
    "voxtral": ("whisper", dict(proj_type="voxtral", n_embd=128, n_head=8, n_layer=3, stack_factor=4)),
    "musicflamingo": ("whisper", dict(proj_type="musicflamingo", n_head=2)),
    "meralion": ("whisper", dict(proj_type="meralion", stack_factor=3)),
    # Qwen3-Omni's audio encoder: 2-D convolutions over 100-frame chunks, 390 positions
    "qwen3a": ("whisper", dict(proj_type="qwen3a", n_embd=128, n_head=4, conv_channels=32)),
    # both encoders in one file (Qwen2.5-Omni): a clip_ctx each, their buffers added up per device
    "omni": ("omni", dict()),
    # Qwen3-Omni: Qwen3-VL vision (its output 64 x 3 with deepstack) and the qwen3a audio encoder, whose context
    # loads the vision's deepstack tensors of its own layer indices again
    "omni3": ("omni3", dict()),
    # the legacy single type for both encoders ("qwen2.5o": clip.cpp turns it into qwen2.5vl_merger and qwen2a)
    "omni-legacy": ("omni", dict(common_type="qwen2.5o")),
    # Gemma 4's audio conformer (chunked local attention, relative positions, depthwise conv module): alone, plain
    # (no output projection, no clamp bounds, 3 layers, 2 heads), and in a file with Gemma 4's vision encoder
    "gemma4a": ("gemma4a", dict()),
    "gemma4a-plain": ("gemma4a", dict(out_proj=False, clamps=False, n_layer=3, n_head=2, n_mel=80,
                                      channels=(4, 32))),
    "gemma4-both": ("gemma4-both", dict()),
    # GLM-ASR (glma: the Whisper encoder, norm, stack, MLP, begin/end rows) and Gemma 4's encoder-free audio
    "glma": ("whisper", dict(proj_type="glma", stack_factor=4)),
    "gemma4ua": ("gemma4ua", dict()),
    # GLM-4.xV: a learned 16x16 grid resized to the 92x92-patch warmup, or one of the image's size (no resize) and
    # no post-conv norm
    "glm4v": ("glm4v", dict()),
    "glm4v-grid": ("glm4v", dict(n_pos_train=92 * 92, norm_embd=False, n_head=4, n_layer=3)),
    "glm5v": ("glm4v", dict(proj_type="glm5v")),
    # MiniMax-M3: 2D NeoX RoPE, per-patch MLP then the 2x2 merge MLP; a gated FFN and 16-pixel patches for one
    "minimax_m3": ("minimax_m3", dict()),
    "minimax_m3-gated": ("minimax_m3", dict(gated=True, patch_size=16, n_layer=3, n_head=4)),
    # Ling 3 VL: Qwen3-VL's tower (fused qkv) with a norm-only merger; without the patch bias for one
    "ling3vl": ("ling3vl", dict(kind="ling3vl")),
    "ling3vl-nobias": ("ling3vl", dict(kind="ling3vl", patch_bias=False, n_layer=2, n_head=4)),
    # Kimi K2.5: the warmup side from the file's pixel limits (a grid resized to it, or one of its size), or from
    # --image-max-tokens without them
    "kimik25": ("kimik25", dict()),
    "kimik25-grid": ("kimik25", dict(max_pixels=16 * 16, n_layer=3, n_head=4)),
    "kimik25-tokens": ("kimik25", dict(max_pixels=None, grid=16)),
    # pixel-unshuffle mergers: Kimi-VL (2D RoPE), PaddleOCR-VL and dots.ocr (M-RoPE; dots RMS and gated)
    "kimivl": ("kimivl", dict(kind="kimivl")),
    "paddleocr": ("unshuffle", dict(kind="paddleocr")),
    "dots_ocr": ("unshuffle", dict(kind="dots_ocr", n_head=4)),
    # dots.3 note's vision: dots.ocr's ViT with a MoE FFN (2 of 4 experts, a selection bias); 1 of 8 on two layers
    "dots3note_v": ("unshuffle", dict(kind="dots3note_v", moe_layers=(1,), n_head=4)),
    "dots3note_v-1of8": ("unshuffle", dict(kind="dots3note_v", moe_layers=(0, 2), n_layer=3, n_expert=8,
                                           n_expert_used=1, probs_bias=False, n_head=4)),
    # Llama 4: the 2-D patch weight as im2col + matmul, the CLS row, pixel shuffle, adapter MLP; a 24x24 grid
    "llama4": ("llama4", dict()),
    "llama4-large": ("llama4", dict(image_size=336, n_embd=64, n_ff=128, n_head=4, n_layer=3)),
    # DeepSeek-V4 vision: the 3x3 unfold aligner, the sentinel rows and the layout gather
    "deepseek4v": ("deepseek4v", dict()),
    # HunyuanVL: positions as an input, a conv merger, the newline column, begin/end rows
    "hunyuanvl": ("hunyuanvl", dict()),
    # LLaVA (mlp): 576 patches + CLS as LLaVA 1.5's, up to the second-to-last layer; Granite Vision's stacked
    # feature layers; Yi-type (mlp_norm)
    "llava": ("llava", dict(image_size=336)),
    "llava-granite": ("llava", dict(feature_layers=(0, 1, 3))),
    "llava-yi": ("llava", dict(yi=True, n_layer=2)),
    # more SigLIP heads (Phi-4 multimodal: a resized grid, no merge; Janus-Pro) and LightOnOCR (Pixtral's graph)
    "phi4": ("siglip", dict(kind="phi4", image_size=448, patch_size=14, n_pos_train=256)),
    "janus_pro": ("siglip", dict(kind="janus_pro", image_size=384, patch_size=16)),
    "lightonocr": ("pixtral", dict(kind="lightonocr", img_break=False)),
    # Nemotron Nano V2 VL (RADIO: register rows, squared-ReLU MLP) at its fixed 512x512
    "nemotron_v2_vl": ("nemotron_v2_vl", dict(image_size=512, n_embd=64, n_ff=128, n_head=4)),
    # Gemma 4's encoder-free vision: the merge in the patch, an im2col kernel tensor the buffer holds
    "gemma4uv": ("gemma4uv", dict()),
    # LFM2-Audio's FastConformer (depthwise/pointwise subsampling, relative-position attention, rolled conv)
    "lfm2a": ("lfm2a", dict()),
    "lfm2a-small": ("lfm2a", dict(n_mel=80, channels=8, n_layer=3, n_head=2)),
    # Step3-VL: two stride-2 downsampling convs with biases added through transposed copies; a 32x32 grid
    "step3vl": ("step3vl", dict(image_size=448, n_embd=64, n_ff=128, n_head=4)),
    # EXAONE 4.5: Qwen2.5-VL's window attention with a fused qkv of 2 K/V heads for 4
    "exaone4_5": ("qwen2vl", dict(version="exaone4_5", n_head=4, n_head_kv=2)),
    # dots.3 note's audio: a 2-D conv stem over the whole warmup, an RMS transformer with partial RoPE
    "dots3note_a": ("dots3note_a", dict()),
    # Parakeet's FastConformer (full attention over the 375 subsampled frames, the in-graph sinusoidal positions,
    # batch-normed conv module); 80 mel bins, 8 channels, 3 blocks of 2 heads, a 31-tap kernel
    "parakeet": ("parakeet", dict()),
    "parakeet-small": ("parakeet", dict(n_mel=80, channels=8, n_layer=3, n_head=2, conv_kernel=31)),
    # MiMo-Audio: full and window masks over 1500 positions, two quantizers, 750 frames padded to groups of 4; one
    # quantizer, groups of 5 (none padded), 80 mel bins, 2 heads
    "mimo_audio": ("mimo_audio", dict()),
    "mimo_audio-small": ("mimo_audio", dict(modes=(0, -1, 0), n_mel=80, n_head=2, bins=(16,), max_bins=16, group=5,
                                            local_layers=1)),
    # Granite Speech: chunks of 64 (the last one masked), windows of 15 frames, 3 queries each; chunks of 100 (no
    # mask), windows of 16 (the last one padded), feature layers 0 and 2 concatenated, 3 blocks with the CTC branch
    "granite_speech": ("granite_speech", dict()),
    "granite_speech-features": ("granite_speech", dict(chunk=100, window=16, downsample=4, feature_layers=(0, 2),
                                                       n_layer=3, n_head=2, n_mel=128, proj_heads=4)),
    # MiniCPM-V: the resampler's 64 queries (version 4) over 256 patches, two 128-wide heads; version 2's 96
    # queries over a 20x20 grid; the query count from its own key
    "minicpmv": ("minicpmv", dict()),
    "minicpmv-v2": ("minicpmv", dict(version=2, n_layer=3, image_size=280)),
    "minicpmv-queries": ("minicpmv", dict(version=None, query_num=32, n_embd_text=128)),
    # MiniCPM-V 4.6: the ViT merger (window attention, 2x2 downsample) after layer 1 of 3 on a 32x32 grid, then the
    # final 2x2 merger; without the scale-factor key, its window layer key (layer 0) and the merger's biases, with a
    # pre norm; scale factor 2 (no ViT merger)
    "minicpmv4_6": ("minicpmv4_6", dict()),
    "minicpmv4_6-bare": ("minicpmv4_6", dict(n_merge=None, insert_layer=None, merger_bias=False, pre_ln=True,
                                             image_size=224)),
    "minicpmv4_6-2x": ("minicpmv4_6", dict(n_merge=2, n_layer=2, image_size=224)),
    # Granite Vision 4.1: a SigLIP ViT and WindowQFormer blocks on a 24x24 grid of 8x8 windows, one pooling its
    # queries (layer 1), one gathering them (layer 2); a single pooling block on layer 0 of 2
    "granite4_vision": ("granite4_vision", dict()),
    "granite4_vision-pool": ("granite4_vision", dict(feature_layers=(0,), spatial_offsets=(-1,), projection_dim=64,
                                                     n_layer=2)),
    # DeepSeek-OCR: SAM on a 64x64 grid (windows of 14, padded; layer 2 global) and a CLIP ViT on its 16x16 output;
    # a 32-pixel patch kernel (a 32x32 grid, windows of 16, two heads), f32 matrices, SAM's positions, relative
    # positions and CLIP's positions all interpolated. DeepSeek-OCR 2: SAM and a GQA Qwen2 encoder with 256 queries
    "deepseekocr": ("deepseekocr", dict()),
    "deepseekocr-interp": ("deepseekocr", dict(sam_kernel=32, sam_n_head=2, sam_n_layer=4, window=16, sam_pos_side=20,
                                               rel_pos_len=20, clip_pos_side=5, matrix_type="f32")),
    "deepseekocr2": ("deepseekocr", dict(version=2)),
    # Gemma 3n's MobileNetV5: edge and inverted residuals, multi-query attention blocks and the fusion adapter on a
    # 512x512 image (fused at 32x32, pooled to 16x16); without attention or the adapter's FFN at 768x768
    "gemma3nv": ("gemma3nv", dict()),
    "gemma3nv-plain": ("gemma3nv", dict(attention=False, msfa=False, image_size=768)),
    # CogVLM: EVA-CLIP post-norm layers with a fused qkv, the SwiGLU adapter and begin/end rows; a 24x24 grid
    "cogvlm": ("cogvlm", dict()),
    "cogvlm-336": ("cogvlm", dict(n_layer=3, image_size=336)),
    # MobileVLM V2 (ldpv2): LLaVA's ViT on the 24x24 grid, a GELU MLP, the 2x2 pool and the depthwise PEG conv
    "ldpv2": ("ldpv2", dict()),
    # MobileVLM (ldp): two MobileNet blocks after the MLP; both heads 512 wide, where they outweigh the ViT
    "ldp": ("ldpv2", dict(v1=True)),
    "ldp-wide": ("ldpv2", dict(v1=True, n_embd_text=512)),
    "ldpv2-wide": ("ldpv2", dict(n_embd_text=512)),
    # GLM-Edge-V (adapter): every layer, a stride-2 conv, SwiGLU, begin/end rows
    "adapter": ("adapter", dict()),
    "adapter-336": ("adapter", dict(image_size=336, n_layer=3)),
    # Youtu-VL: the patches cut by permuted copies, window attention with one full layer; 14-pixel patches, two full
    "youtuvl": ("youtuvl", dict()),
    "youtuvl-p14": ("youtuvl", dict(patch_size=14, n_layer=2, wa_layers=(0, 1))),
    # MuseGlimmer: a 16x16 learned grid resized to the 64x64 warmup grid, sparse (block-masked) and global layers;
    # a grid of the warmup's size (not resized)
    "muse-glimmer": ("muse-glimmer", dict()),
    "muse-glimmer-grid": ("muse-glimmer", dict(n_side=64, n_layer=4, patch_size=2)),
    # MiMo-VL: row and column window layers with sinks around a full one (the column runs reordered); another mix
    "mimovl": ("mimovl", dict()),
    "mimovl-mix": ("mimovl", dict(modes=(1, -1, 0), patch_size=8)),
    # Yasa2 (Reka's ConvNeXt-V2): two stages with a position embedding; three stages without
    "yasa2": ("yasa2", dict()),
    "yasa2-3stage": ("yasa2", dict(channels=(8, 16, 32), blocks=(1, 1, 2), image_size=224, pos_embed=False)),
}
_WRITERS = {"gemma3": write_gemma3_projector, "qwen3vl": write_qwen3vl_projector, "qwen2vl": write_qwen2vl_projector,
            "pixtral": write_pixtral_projector, "gemma4v": write_gemma4v_projector, "siglip": write_siglip_projector,
            "internvl": write_internvl_projector, "whisper": write_whisper_projector,
            "omni": lambda path, **kw: write_whisper_projector(
                path, proj_type="qwen2a", vision_from=write_qwen2vl_projector(path.with_name("vision.gguf")), **kw),
            "gemma4a": write_gemma4a_projector, "gemma4ua": write_gemma4ua_projector, "glm4v": write_glm4v_projector,
            "minimax_m3": write_minimax_m3_projector, "ling3vl": write_qwen3vl_projector,
            "kimik25": write_kimik25_projector, "kimivl": write_unshuffle_projector,
            "unshuffle": write_unshuffle_projector, "llama4": write_llama4_projector,
            "deepseek4v": write_deepseek4v_projector, "hunyuanvl": write_hunyuanvl_projector,
            "llava": write_llava_projector, "nemotron_v2_vl": write_nemotron_v2_vl_projector,
            "gemma4uv": write_gemma4uv_projector, "lfm2a": write_lfm2a_projector,
            "step3vl": write_step3vl_projector, "dots3note_a": write_dots3note_a_projector,
            "parakeet": write_parakeet_projector, "mimo_audio": write_mimo_audio_projector,
            "granite_speech": write_granite_speech_projector,
            "minicpmv": write_minicpmv_projector, "minicpmv4_6": write_minicpmv4_6_projector,
            "cogvlm": write_cogvlm_projector, "granite4_vision": write_granite4_vision_projector,
            "deepseekocr": write_deepseekocr_projector, "gemma3nv": write_gemma3nv_projector,
            "ldpv2": write_mobilevlm_projector, "adapter": write_glm_edge_projector,
            "youtuvl": write_youtuvl_projector, "muse-glimmer": write_muse_glimmer_projector,
            "mimovl": write_mimovl_projector, "yasa2": write_yasa2_projector,
            "gemma4-both": lambda path, **kw: write_gemma4a_projector(
                path, vision_from=write_gemma4v_projector(path.with_name("vision.gguf")), **kw),
            "omni3": lambda path, **kw: write_whisper_projector(
                path, proj_type="qwen3a", n_embd_text=192,
                vision_from=write_qwen3vl_projector(path.with_name("vision.gguf")), **kw)}
_TEXT = {"gemma3": "gemma3", "qwen2vl": "qwen2vl", "pixtral": "llama", "gemma4v": "gemma4", "siglip": "llama", "internvl": "llama",
         "whisper": "llama", "omni": "qwen2vl", "omni3": "qwen3vl",
         "gemma4a": "gemma4", "gemma4-both": "gemma4", "gemma4ua": "gemma4", "glm4v": "glm4", "minimax_m3": "minimax-m3", "ling3vl": "bailingmoe3",
         "kimik25": "deepseek2", "kimivl": "deepseek2", "unshuffle": "llama",
         "llama4": "llama4", "deepseek4v": "llama", "hunyuanvl": "llama", "llava": "llama",
         "nemotron_v2_vl": "llama", "gemma4uv": "gemma4",
         "lfm2a": "lfm2", "step3vl": "llama", "dots3note_a": "llama", "cogvlm": "llama", "parakeet": "llama",
         "mimo_audio": "llama", "granite_speech": "llama",
         "ldpv2": "llama", "adapter": "llama", "youtuvl": "llama",
         "muse-glimmer": "llama", "mimovl": "llama", "yasa2": "llama", "minicpmv4_6": "llama",
         "granite4_vision": "llama", "deepseekocr": "llama", "gemma3nv": "llama"}  # deepseek4v: the tiny deepseek4 crashes in its warmup on lavapipe


def _write(shape: str, path, tiny_models):
    """(projector file, text model) for a shape: the qwen3vl text model takes 64 x (1 + 2 deepstack) rows;
    the one-deepstack projector gets a text model of 48 x 2."""
    kind, kw = SHAPES[shape]
    proj = _WRITERS[kind](path, **kw)
    if kind == "minicpmv" or (kind in ("ldpv2", "cogvlm") and "n_embd_text" in kw):
        # a llama text model as wide as the projector's output (MiniCPM-V's heads are 128 wide: 256 by default)
        from tests import gguf_factory as gf

        return proj, gf.write_tiny_model("llama", path.parent / "text.gguf", n_embd=kw.get("n_embd_text", 256))
    if kind in _TEXT:
        return proj, tiny_models[_TEXT[kind]]
    if kw.get("n_embd_text", 64) == 64:
        return proj, tiny_models["qwen3vl"]
    from tests import gguf_factory as gf

    text = gf.write_tiny_model("qwen3vl", path.parent / "text.gguf", n_embd=48, n_deepstack=1, n_head=2,
                               n_head_kv=1, head_dim=24, rope_sections=(4, 4, 4, 0))
    return proj, text

#: (case, projector shape, RPC servers, arguments)
CASES = [
    ("cpu", "large", 0, ""),
    ("cpu-fa-off", "small", 0, "-fa off"),
    ("rpc1", "large", 1, ""),
    ("rpc1-fa-off", "large", 1, "-fa off"),
    ("rpc2", "small", 2, "-ngl all"),
    ("rpc2-mmdev", "large", 2, "-mmdev RPC1"),
    ("rpc2-dev", "small", 2, "-dev RPC1"),
    ("rpc2-no-offload", "large", 2, "--no-mmproj-offload"),
    ("rpc2-mmdev-none", "small", 2, "-mmdev none -fa off"),
    ("qwen3vl-cpu", "qwen3vl", 0, ""),
    ("qwen3vl-rpc1", "qwen3vl", 1, ""),
    ("qwen3vl-rpc2-mmdev-fa-off", "qwen3vl-1head", 2, "-mmdev RPC1 -fa off"),
    ("qwen2.5vl-rpc1", "qwen2.5vl", 1, ""),
    ("qwen2.5vl-cpu-fa-off", "qwen2.5vl", 0, "-fa off"),
    ("qwen2vl-rpc1-fa-off", "qwen2vl", 1, "-fa off"),
    ("mistral3-rpc2", "mistral3", 2, ""),
    ("mistral3-cpu-fa-off", "mistral3", 0, "-fa off"),
    ("pixtral-rpc1", "pixtral", 1, "-fa off"),
    ("gemma4v-cpu", "gemma4v", 0, ""),
    ("gemma4v-rpc2-fa-off", "gemma4v", 2, "-fa off"),
    ("gemma4v-rpc1", "gemma4v-plain", 1, ""),
    ("idefics3-rpc1", "idefics3", 1, ""),
    ("idefics3-cpu-fa-off", "idefics3", 0, "-fa off"),
    ("lfm2-rpc2-max-tokens", "lfm2", 2, "--image-max-tokens 400"),
    ("lfm2-cpu-fa-off", "lfm2", 0, "-fa off --image-max-tokens 100"),
    ("internvl-rpc1", "internvl", 1, ""),
    ("internvl-rpc2-dev-fa-off", "internvl", 2, "-dev RPC1,RPC0 -fa off"),
    ("ultravox-cpu", "ultravox", 0, ""),
    ("ultravox-rpc1-fa-off", "ultravox", 1, "-fa off"),
    ("qwen2a-rpc2-mmdev", "qwen2a", 2, "-mmdev RPC1"),
    ("qwen2a-cpu-fa-off", "qwen2a", 0, "-fa off"),
    ("voxtral-rpc1", "voxtral", 1, ""),
    ("voxtral-rpc2-no-offload-fa-off", "voxtral", 2, "--no-mmproj-offload -fa off"),
    ("musicflamingo-rpc1-fa-off", "musicflamingo", 1, "-fa off"),
    ("meralion-cpu", "meralion", 0, ""),
    ("meralion-rpc1-fa-off", "meralion", 1, "-fa off"),
    ("qwen3a-cpu", "qwen3a", 0, ""),
    ("qwen3a-rpc1-fa-off", "qwen3a", 1, "-fa off"),
    ("qwen3a-rpc2-mmdev", "qwen3a", 2, "-mmdev RPC1"),
    ("omni-cpu", "omni", 0, ""),
    ("omni-rpc1-fa-off", "omni", 1, "-fa off"),
    ("omni-rpc2", "omni", 2, "-ngl all"),
    ("omni-legacy-rpc1", "omni-legacy", 1, ""),
    ("omni3-cpu-fa-off", "omni3", 0, "-fa off"),
    ("omni3-rpc1", "omni3", 1, ""),
    ("gemma4a-cpu", "gemma4a", 0, ""),
    ("gemma4a-rpc1", "gemma4a-plain", 1, ""),
    ("gemma4a-rpc2-mmdev-fa-off", "gemma4a", 2, "-mmdev RPC1 -fa off"),
    ("gemma4-both-cpu", "gemma4-both", 0, ""),
    ("gemma4-both-rpc2", "gemma4-both", 2, "-fa off"),
    ("glma-cpu", "glma", 0, ""),
    ("glma-rpc1-fa-off", "glma", 1, "-fa off"),
    ("gemma4ua-cpu", "gemma4ua", 0, ""),
    ("gemma4ua-rpc1", "gemma4ua", 1, ""),
    ("glm4v-cpu", "glm4v", 0, ""),
    ("glm4v-rpc1-fa-off", "glm4v", 1, "-fa off"),
    ("glm4v-rpc2-grid", "glm4v-grid", 2, "-mmdev RPC1"),
    ("glm5v-rpc1", "glm5v", 1, ""),
    ("minimax_m3-cpu", "minimax_m3", 0, ""),
    ("minimax_m3-rpc1-fa-off", "minimax_m3", 1, "-fa off"),
    ("minimax_m3-rpc2-gated", "minimax_m3-gated", 2, ""),
    ("ling3vl-cpu", "ling3vl", 0, ""),
    ("ling3vl-rpc1-fa-off", "ling3vl", 1, "-fa off"),
    ("ling3vl-rpc2-nobias", "ling3vl-nobias", 2, "-dev RPC1"),
    ("kimik25-cpu", "kimik25", 0, ""),
    ("kimik25-rpc1-fa-off", "kimik25", 1, "-fa off"),
    ("kimik25-rpc1-grid", "kimik25-grid", 1, ""),
    ("kimik25-rpc2-tokens", "kimik25-tokens", 2, "--image-max-tokens 256"),
    ("kimivl-cpu", "kimivl", 0, ""),
    ("kimivl-rpc1-fa-off", "kimivl", 1, "-fa off"),
    ("paddleocr-rpc1", "paddleocr", 1, ""),
    ("paddleocr-cpu-fa-off", "paddleocr", 0, "-fa off"),
    ("dots_ocr-rpc2", "dots_ocr", 2, ""),
    ("llama4-cpu", "llama4", 0, ""),
    ("llama4-rpc1-fa-off", "llama4-large", 1, "-fa off"),
    ("llama4-rpc2", "llama4-large", 2, "-mmdev RPC1"),
    ("deepseek4v-cpu", "deepseek4v", 0, ""),
    ("deepseek4v-rpc1-fa-off", "deepseek4v", 1, "-fa off"),
    ("deepseek4v-rpc2-max-tokens", "deepseek4v", 2, "--image-max-tokens 100"),
    ("hunyuanvl-cpu", "hunyuanvl", 0, ""),
    ("hunyuanvl-rpc1-fa-off", "hunyuanvl", 1, "-fa off"),
    ("llava-cpu", "llava", 0, ""),
    ("llava-rpc1-fa-off", "llava", 1, "-fa off"),
    ("llava-granite-rpc2", "llava-granite", 2, "-fa off"),
    ("llava-yi-cpu", "llava-yi", 0, ""),
    ("phi4-rpc1", "phi4", 1, ""),
    ("janus_pro-cpu-fa-off", "janus_pro", 0, "-fa off"),
    ("lightonocr-rpc2", "lightonocr", 2, ""),
    ("nemotron_v2_vl-cpu", "nemotron_v2_vl", 0, ""),
    ("nemotron_v2_vl-rpc1-fa-off", "nemotron_v2_vl", 1, "-fa off"),
    ("gemma4uv-cpu", "gemma4uv", 0, ""),
    ("gemma4uv-rpc1", "gemma4uv", 1, ""),
    ("minicpmv-cpu", "minicpmv", 0, ""),
    ("minicpmv-rpc1-fa-off", "minicpmv", 1, "-fa off"),
    ("minicpmv-v2-rpc2-mmdev", "minicpmv-v2", 2, "-mmdev RPC1"),
    ("minicpmv-queries-cpu-fa-off", "minicpmv-queries", 0, "-fa off"),
    ("minicpmv4_6-cpu", "minicpmv4_6", 0, ""),
    ("minicpmv4_6-rpc1-fa-off", "minicpmv4_6", 1, "-fa off"),
    ("minicpmv4_6-bare-cpu-fa-off", "minicpmv4_6-bare", 0, "-fa off"),
    ("minicpmv4_6-2x-rpc2-mmdev", "minicpmv4_6-2x", 2, "-mmdev RPC1"),
    ("granite4_vision-cpu", "granite4_vision", 0, ""),
    ("granite4_vision-rpc1-fa-off", "granite4_vision", 1, "-fa off"),
    ("granite4_vision-pool-rpc2-mmdev", "granite4_vision-pool", 2, "-mmdev RPC1"),
    ("deepseekocr-cpu", "deepseekocr", 0, ""),
    ("deepseekocr-rpc1-fa-off", "deepseekocr", 1, "-fa off"),
    ("deepseekocr-interp-rpc2-mmdev", "deepseekocr-interp", 2, "-mmdev RPC1"),
    ("deepseekocr2-cpu-fa-off", "deepseekocr2", 0, "-fa off"),
    ("deepseekocr2-rpc1", "deepseekocr2", 1, ""),
    ("gemma3nv-cpu", "gemma3nv", 0, ""),
    ("gemma3nv-rpc1-fa-off", "gemma3nv", 1, "-fa off"),
    ("gemma3nv-plain-rpc2-mmdev", "gemma3nv-plain", 2, "-mmdev RPC1"),
    ("cogvlm-cpu", "cogvlm", 0, ""),
    ("cogvlm-rpc1-fa-off", "cogvlm-336", 1, "-fa off"),
    ("cogvlm-rpc2-mmdev", "cogvlm", 2, "-mmdev RPC1"),
    ("ldpv2-cpu", "ldpv2", 0, ""),
    ("ldpv2-rpc1-fa-off", "ldpv2", 1, "-fa off"),
    ("ldpv2-wide-rpc2-mmdev", "ldpv2-wide", 2, "-mmdev RPC1"),
    ("ldp-cpu", "ldp", 0, ""),
    ("ldp-wide-rpc1", "ldp-wide", 1, ""),
    ("ldp-wide-cpu-fa-off", "ldp-wide", 0, "-fa off"),
    ("adapter-cpu", "adapter", 0, ""),
    ("adapter-rpc1-fa-off", "adapter-336", 1, "-fa off"),
    ("adapter-rpc2-mmdev", "adapter", 2, "-mmdev RPC1"),
    ("youtuvl-cpu", "youtuvl", 0, ""),
    ("youtuvl-rpc1-fa-off", "youtuvl", 1, "-fa off"),
    ("youtuvl-p14-rpc2-mmdev", "youtuvl-p14", 2, "-mmdev RPC1"),
    ("muse-glimmer-cpu", "muse-glimmer", 0, ""),
    ("muse-glimmer-rpc1-fa-off", "muse-glimmer-grid", 1, "-fa off"),
    ("mimovl-cpu", "mimovl", 0, ""),
    ("mimovl-mix-rpc1", "mimovl-mix", 1, ""),
    ("yasa2-cpu", "yasa2", 0, ""),
    ("yasa2-3stage-rpc1", "yasa2-3stage", 1, ""),
    ("yasa2-rpc2-mmdev", "yasa2", 2, "-mmdev RPC1"),
    ("dots3note_v-cpu", "dots3note_v", 0, ""),
    ("dots3note_v-1of8-rpc1", "dots3note_v-1of8", 1, ""),
    ("lfm2a-cpu", "lfm2a", 0, ""),
    ("lfm2a-rpc1", "lfm2a-small", 1, ""),
    ("lfm2a-rpc2-mmdev", "lfm2a", 2, "-mmdev RPC1 -fa off"),
    ("step3vl-cpu", "step3vl", 0, ""),
    ("step3vl-rpc1-fa-off", "step3vl", 1, "-fa off"),
    ("exaone4_5-cpu", "exaone4_5", 0, ""),
    ("exaone4_5-rpc1", "exaone4_5", 1, ""),
    ("dots3note_a-cpu", "dots3note_a", 0, ""),
    ("dots3note_a-rpc1-fa-off", "dots3note_a", 1, "-fa off"),
    ("parakeet-cpu", "parakeet", 0, ""),
    ("parakeet-cpu-fa-off", "parakeet", 0, "-fa off"),
    ("parakeet-rpc1", "parakeet-small", 1, ""),
    ("parakeet-rpc2-mmdev-fa-off", "parakeet", 2, "-mmdev RPC1 -fa off"),
    ("mimo_audio-cpu", "mimo_audio", 0, ""),
    ("mimo_audio-cpu-fa-off", "mimo_audio", 0, "-fa off"),
    ("mimo_audio-rpc1", "mimo_audio-small", 1, ""),
    ("mimo_audio-rpc2-mmdev-fa-off", "mimo_audio-small", 2, "-mmdev RPC1 -fa off"),
    ("granite_speech-cpu", "granite_speech", 0, ""),
    ("granite_speech-cpu-fa-off", "granite_speech-features", 0, "-fa off"),
    ("granite_speech-rpc1", "granite_speech-features", 1, ""),
    ("granite_speech-rpc2-mmdev-fa-off", "granite_speech", 2, "-mmdev RPC1 -fa off"),
]


def _compare(text: str, proj, lanes: list[Lane], settings: LlamaSettings) -> list[str]:
    ours = projector_memory(proj, lanes, settings)
    by_buft = {d.buft: d.name for d in lanes}
    misses = []
    using = _USING.findall(text)
    assert using, text[-3000:]
    where = CPU if using[-1] == "CPU" else by_buft.get(using[-1], using[-1])
    if where != ours.device:
        misses.append(f"device: ours {ours.device}, llama-server {where}")
    size = float(_SIZE.findall(text)[-1])  # the file's tensors (load_hparams), once per context
    if abs(proj.weight_bytes / MiB - size) > 0.005 + 1e-9:
        misses.append(f"model size: ours {proj.weight_bytes / MiB:.4f} MiB, llama-server {size:.2f} MiB")
    # what the contexts load (a file with both encoders loads its fixed-name patch embeddings twice), which the
    # mtmd total below checks to the byte's rounding
    raw = ours.weights_raw
    if not raw <= ours.weights <= raw + 2 * len(proj.tensors) * 127:
        misses.append(f"weights buffer {ours.weights} not the tensors padded ({raw})")
    logged: dict[str, float] = {}
    sections = text.split("clip_ctx: CLIP using")[1:]  # one clip_ctx per encoder (vision, audio)
    for section in sections:
        last: dict[str, float] = {}
        for buft, mib in _COMPUTE.findall(section):  # the last reserve's figures (auto -fa may reserve twice)
            last[CPU if buft == "CPU" else by_buft.get(buft, buft)] = float(mib)
        for name, mib in last.items():
            logged[name] = logged.get(name, 0.0) + mib
    for name in set(logged) | set(ours.compute):
        mine = ours.compute.get(name, 0) / MiB
        if abs(mine - logged.get(name, 0.0)) > 0.005 * len(sections) + 1e-9:  # each figure rounded apart
            misses.append(f"{name} compute: ours {mine:.4f} MiB, llama-server {logged.get(name, 0.0):.2f} MiB")
    total = _TOTAL.findall(text)
    if total:  # libmtmd's own figure: the unpadded weights plus the compute buffers (what --fit reserves)
        mine = sum(ours.mtmd_usage().values()) / MiB
        if abs(mine - float(total[-1])) > 0.005 + 1e-9:
            misses.append(f"mtmd total: ours {mine:.4f} MiB, llama-server {total[-1]} MiB")
    return misses


@pytest.mark.llama
@pytest.mark.parametrize("case,shape,n_rpc,args", CASES, ids=[c[0] for c in CASES])
def test_projector_buffers_match_llama_server(case, shape, n_rpc, args, llama_bin, rpc_servers, llama_server,
                                              tiny_models, tmp_path):
    from app.command.parse import settings_from_args

    path, text_model = _write(shape, tmp_path / "mmproj.gguf", tiny_models)
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    lanes = list_rpc_devices(llama_bin / "llama-server", endpoints)
    extra = (["--rpc", ",".join(endpoints)] if endpoints else []) + args.split()
    srv = llama_server(text_model, "--mmproj", str(path), *extra, "--no-repack", "-lv", "4",
                       timeout=120)
    text = srv.output()
    srv.stop()
    settings = settings_from_args(["--mmproj", str(path), *args.split()], tool="server")
    misses = _compare(text, open_projector(path), lanes, settings)
    record("server-log", case=f"mmproj-{case}", arch="clip", backends=["CPU"] + (["RPC"] if n_rpc else []),
           ok=not misses, features=["mmproj"])
    assert not misses, "\n".join(misses)
    # llama-server ran it: the estimate must not say llama.cpp stops on it
    said = projector_memory(open_projector(path), lanes, settings).notes
    assert not any("llama.cpp stops" in n for n in said), said


VULKAN_CASES = [
    ("vulkan", "large", ""),
    ("vulkan-fa-off", "small", "-fa off"),
    ("vulkan-cpu", "large", "-mmdev none"),
    ("vulkan-qwen3vl", "qwen3vl", ""),
    ("vulkan-qwen2.5vl", "qwen2.5vl", ""),
    ("vulkan-mistral3", "mistral3", "-fa off"),
    ("vulkan-gemma4v", "gemma4v", ""),
    ("vulkan-internvl", "internvl", "-fa off"),
    ("vulkan-ultravox", "ultravox", ""),
    ("vulkan-voxtral-fa-off", "voxtral", "-fa off"),
    ("vulkan-omni", "omni", ""),
    ("vulkan-qwen3a", "qwen3a", ""),
    ("vulkan-gemma4a", "gemma4a", ""),
    ("vulkan-gemma4-both", "gemma4-both", "-fa off"),
    ("vulkan-glm4v", "glm4v", ""),
    ("vulkan-minimax_m3", "minimax_m3", ""),
    ("vulkan-ling3vl", "ling3vl", ""),
    ("vulkan-kimik25", "kimik25", ""),
    ("vulkan-paddleocr", "paddleocr", ""),
    ("vulkan-llama4", "llama4-large", ""),
    ("vulkan-deepseek4v", "deepseek4v", ""),
    ("vulkan-hunyuanvl", "hunyuanvl", ""),
    ("vulkan-llava", "llava", ""),
    ("vulkan-lightonocr", "lightonocr", "-fa off"),
    ("vulkan-nemotron_v2_vl", "nemotron_v2_vl", ""),
    ("vulkan-gemma4uv", "gemma4uv", ""),
    ("vulkan-lfm2a", "lfm2a", ""),
    ("vulkan-step3vl", "step3vl", ""),
    ("vulkan-dots3note_a", "dots3note_a", ""),
    ("vulkan-parakeet", "parakeet", ""),
    ("vulkan-mimo_audio", "mimo_audio", ""),
    ("vulkan-granite_speech", "granite_speech", ""),
    ("vulkan-minicpmv", "minicpmv", ""),
    ("vulkan-minicpmv-v2-fa-off", "minicpmv-v2", "-fa off"),
    ("vulkan-minicpmv4_6", "minicpmv4_6", ""),
    ("vulkan-minicpmv4_6-2x-fa-off", "minicpmv4_6-2x", "-fa off"),
    ("vulkan-granite4_vision", "granite4_vision", ""),
    ("vulkan-deepseekocr", "deepseekocr", ""),
    ("vulkan-deepseekocr2-fa-off", "deepseekocr2", "-fa off"),
    ("vulkan-gemma3nv", "gemma3nv", ""),
    ("vulkan-cogvlm", "cogvlm-336", ""),
    ("vulkan-ldpv2", "ldpv2", ""),
    ("vulkan-ldp-wide", "ldp-wide", ""),
    ("vulkan-adapter", "adapter-336", ""),
    ("vulkan-youtuvl", "youtuvl", ""),
    ("vulkan-muse-glimmer", "muse-glimmer", ""),
    ("vulkan-yasa2", "yasa2", ""),
    ("vulkan-dots3note_v", "dots3note_v", ""),
]


@pytest.mark.llama
@pytest.mark.parametrize("case,shape,args", VULKAN_CASES, ids=[c[0] for c in VULKAN_CASES])
def test_projector_buffers_match_llama_server_on_vulkan(case, shape, args, llama_vulkan_bin, tiny_models, tmp_path):
    """On Vulkan0 (lavapipe), with the backend's graph reordering (ggml_vk_graph_optimize) replayed."""
    from app.command.parse import settings_from_args
    from app.devices.detect import detect
    from app.memory.device_adapter import from_detected
    from tests.llama_fixtures import VULKAN_ENV, start_llama_server

    env = dict(VULKAN_ENV)
    lanes = from_detected(detect(llama_vulkan_bin, rpc=[], env={**os.environ, **env}, cuda_probe=None,
                                 amd=False).devices)
    path, text_model = _write(shape, tmp_path / "mmproj.gguf", tiny_models)
    srv = start_llama_server(llama_vulkan_bin, text_model, "--mmproj", str(path), *args.split(),
                             "--no-repack", "-lv", "4", log=tmp_path / "vk.log", timeout=120, env=env)
    try:
        text = srv.output()
    finally:
        srv.stop()
    settings = settings_from_args(["--mmproj", str(path), *args.split()], tool="server")
    misses = _compare(text, open_projector(path), lanes, settings)
    record("server-log", case=f"mmproj-{case}", arch="clip", backends=["Vulkan"], ok=not misses,
           features=["mmproj"])
    assert not misses, "\n".join(misses)


# --------------------------------------------------------------------------- refusals


def _mutated(path, tmp_path, mutations):
    from tests.model.gguf_edit import apply

    out = tmp_path / f"bad-{path.name}"
    out.write_bytes(apply(path.read_bytes(), mutations))
    return out


#: (projector, mutation, what Layerdeck says, what llama-server says)
REFUSALS = [
    ("llava", ["meta", "clip.vision.feature_layer", 9, {"arr": 5, "values": [0, 9]}],
     "feature layer index 9 is out of range (n_layer: 3)", "feature layer index 9 is out of range (n_layer: 3)"),
    ("ultravox", ["meta", "clip.audio.block_count", 4, 3], "unable to find tensor a.blk.2.attn_out.weight",
     "unable to find tensor a.blk.2.attn_out.weight"),
    ("ultravox", ["meta", "clip.audio.num_mel_bins", 4, 300], "n_mel_bins (300) must be in range [1, 256]",
     "n_mel_bins (300) must be in range [1, 256]"),
    ("gemma3", ["meta", "clip.vision.block_count", 4, 1 << 31], "exceeds INT32_MAX", "exceeds INT32_MAX"),
    ("gemma3", ["del", "clip.vision.projection_dim"], "Key not found: clip.vision.projection_dim",
     "Key not found: clip.vision.projection_dim"),
    # Youtu-VL without its full-attention layers' key
    ("youtuvl", ["del", "clip.vision.wa_layer_indexes"], "Key not found: clip.vision.wa_layer_indexes",
     "Key not found: clip.vision.wa_layer_indexes"),
    # MiMo-VL: a window mode per layer, one short
    ("mimovl", ["meta", "clip.vision.wa_pattern_mode", 9, {"arr": 5, "values": [0, 1, -1]}],
     "wa_pattern_mode length must equal n_layer", "mimovl wa_pattern_mode length must equal n_layer"),
    # MiniCPM-V 4.6: a scale factor other than 2 or 4; its ViT merger after a layer past the last
    ("minicpmv4_6", ["meta", "clip.vision.projector.scale_factor", 4, 3], "GGML_ASSERT(hparams.n_merge == 2 || "
     "hparams.n_merge == 4)", "GGML_ASSERT(hparams.n_merge == 2 || hparams.n_merge == 4) failed"),
    ("minicpmv4_6", ["meta", "clip.vision.wa_layer_indexes", 9, {"arr": 5, "values": [3]}],
     "layer index 3 is out of range (n_layer: 3)", "layer index 3 is out of range (n_layer: 3)"),
    # Granite Vision 4.1 without its window side
    ("granite4_vision", ["del", "clip.vision.projector.window_side"],
     "Key not found: clip.vision.projector.window_side", "Key not found: clip.vision.projector.window_side"),
    # ... with windows of 7 on its 24x24 grid; with a feature layer past the ViT's 3
    ("granite4_vision", ["meta", "clip.vision.projector.window_side", 4, 7], "does not make whole windows of 7",
     "GGML_ASSERT(ggml_nelements(a) == ne0*ne1*ne2) failed"),
    ("granite4_vision", ["meta", "clip.vision.feature_layer", 9, {"arr": 5, "values": [1, 3]}],
     "GGML_ASSERT(vlayer >= 0 && vlayer < n_layer)", "GGML_ASSERT(vlayer >= 0 && vlayer < n_layer) failed"),
    # MiniCPM-V: 32 learned queries where the key says 48; llama.cpp asserts reshaping them
    ("minicpmv", ["meta", "clip.minicpmv_query_num", 4, 48], "has 32 learned queries 128 wide, where the file's "
     "minicpmv keys say 48", "GGML_ASSERT(ggml_nelements(a) == ne0*ne1*ne2) failed"),
    # DeepSeek-OCR without its SAM layer count; with one SAM layer more than the file has; a window past 4096;
    # DeepSeek-OCR 2 with KV heads that do not divide its heads
    ("deepseekocr", ["del", "clip.vision.sam.block_count"], "Key not found: clip.vision.sam.block_count",
     "Key not found: clip.vision.sam.block_count"),
    ("deepseekocr", ["meta", "clip.vision.sam.block_count", 4, 4], "unable to find tensor v.sam.blk.3.attn.qkv.weight",
     "unable to find tensor v.sam.blk.3.attn.qkv.weight"),
    ("deepseekocr", ["meta", "clip.vision.window_size", 4, 5000], "attn_window_size (5000) is too large (max 4096)",
     "attn_window_size (5000) is too large (max 4096)"),
    ("deepseekocr2", ["meta", "clip.vision.attention.head_count_kv", 4, 3],
     "GGML_ASSERT(n_head % hparams.n_head_kv == 0)", "GGML_ASSERT(n_head % hparams.n_head_kv == 0) failed"),
    # Gemma 3n: a width its MobileNetV5's 64 output channels do not make
    ("gemma3nv", ["meta", "clip.vision.embedding_length", 4, 48], "GGML_ASSERT(C == hparams.n_embd)",
     "GGML_ASSERT(C == hparams.n_embd) failed"),
    # Parakeet without its conv kernel; with a subsampling factor its three stride-2 convs do not make
    ("parakeet", ["del", "clip.audio.conv_kernel_size"], "Key not found: clip.audio.conv_kernel_size",
     "Key not found: clip.audio.conv_kernel_size"),
    ("parakeet", ["meta", "clip.audio.subsampling_factor", 4, 4], "GGML_ASSERT(hparams.subsampling_factor == 8)",
     "GGML_ASSERT(hparams.subsampling_factor == 8 &&"),
    # MiMo-Audio without its local group size; a window mode short; a codebook size past the codebook's rows
    ("mimo_audio", ["del", "clip.audio.local_group_size"], "Key not found: clip.audio.local_group_size",
     "Key not found: clip.audio.local_group_size"),
    ("mimo_audio", ["meta", "clip.audio.wa_pattern_mode", 9, {"arr": 5, "values": [-1, 0, 0]}],
     "mimo_audio: clip.audio.wa_pattern_mode length (3) must equal n_layer (4)",
     "mimo_audio: clip.audio.wa_pattern_mode length (3) must equal n_layer (4)"),
    ("mimo_audio", ["meta", "clip.audio.rvq.codebook_size", 9, {"arr": 5, "values": [65, 32]}],
     "mimo_audio: clip.audio.rvq.codebook_size entry (65) out of range",
     "mimo_audio: clip.audio.rvq.codebook_size entry (65) out of range"),
    # Granite Speech without its QFormer's head count; with chunks past 8192 frames
    ("granite_speech", ["del", "clip.audio.projector.head_count"], "Key not found: clip.audio.projector.head_count",
     "Key not found: clip.audio.projector.head_count"),
    ("granite_speech", ["meta", "clip.audio.chunk_size", 4, 9000], "GGML_ASSERT(hparams.audio_chunk_size > 0 && "
     "hparams.audio_chunk_size <= 8192)", "GGML_ASSERT(hparams.audio_chunk_size > 0 && hparams.audio_chunk_size <= "
     "8192) failed"),
]


_REFUSAL_BASES = {"ultravox": write_whisper_projector, "gemma3": write_gemma3_projector, "llava": write_llava_projector,
                  "minicpmv": lambda path: write_minicpmv_projector(path, version=None, query_num=32, n_embd_text=128),
                  "youtuvl": write_youtuvl_projector, "mimovl": write_mimovl_projector,
                  "minicpmv4_6": write_minicpmv4_6_projector, "granite4_vision": write_granite4_vision_projector,
                  "parakeet": write_parakeet_projector, "mimo_audio": write_mimo_audio_projector,
                  "granite_speech": write_granite_speech_projector,
                  "deepseekocr": write_deepseekocr_projector,
                  "deepseekocr2": lambda path: write_deepseekocr_projector(path, version=2),
                  "gemma3nv": write_gemma3nv_projector}


@pytest.mark.parametrize("kind,mutation,ours,theirs", REFUSALS, ids=[r[2][:24] for r in REFUSALS])
def test_a_projector_llama_cpp_refuses_is_refused_with_its_reason(kind, mutation, ours, theirs, tmp_path):
    from app.model.errors import MetadataError

    base = _REFUSAL_BASES[kind](tmp_path / f"{kind}.gguf")
    with pytest.raises(MetadataError, match=re.escape(ours)):
        open_projector(_mutated(base, tmp_path, [mutation]))


@pytest.mark.llama
@pytest.mark.parametrize("kind,mutation,ours,theirs", REFUSALS, ids=[r[2][:24] for r in REFUSALS])
def test_llama_server_refuses_the_same_projectors(kind, mutation, ours, theirs, llama_bin, tiny_models, tmp_path):
    from .accuracy import server_refusal

    base = _REFUSAL_BASES[kind](tmp_path / f"{kind}.gguf")
    if kind == "minicpmv":  # a text model as wide as the resampler's projection
        from tests import gguf_factory as gf

        target = gf.write_tiny_model("llama", tmp_path / "text.gguf", n_embd=128)
    else:
        target = tiny_models["gemma3" if kind == "gemma3" else "llama"]
    text = server_refusal(llama_bin, target, ["--mmproj", str(_mutated(base, tmp_path, [mutation]))])
    assert theirs in text, text[-2000:]


#: projectors whose depthwise kernels (ggml_conv_2d_dw) are F32: MobileVLM V2's PEG, Gemma 3n's MobileNetV5
_F32_DEPTHWISE = {
    "ldpv2": (lambda p, f32: write_mobilevlm_projector(p, peg_f32=f32), "mm.model.peg.0.weight (F32)", "llama"),
    "gemma3nv": (lambda p, f32: write_gemma3nv_projector(p, matrix_type="f32" if f32 else "f16"), "(F32)", "llama"),
}


@pytest.mark.parametrize("kind", sorted(_F32_DEPTHWISE))
def test_an_f32_depthwise_kernel_on_the_cpu_is_said_to_stop_llama_cpp(kind, tmp_path):
    write, named, _ = _F32_DEPTHWISE[kind]
    path = write(tmp_path / f"{kind}.gguf", True)
    notes = projector_memory(open_projector(path), [], LlamaSettings()).notes
    assert any("llama.cpp stops on this projector on the CPU" in n and named in n for n in notes), notes
    good = write(tmp_path / f"{kind}16.gguf", False)
    assert projector_memory(open_projector(good), [], LlamaSettings()).notes == []
    # on a GPU-type lane the products run there: nothing to say
    on_rpc = projector_memory(open_projector(path), [_lane("RPC0", DeviceKind.RPC)], LlamaSettings()).notes
    assert not any("stops" in n for n in on_rpc), on_rpc


@pytest.mark.llama
@pytest.mark.parametrize("kind", sorted(_F32_DEPTHWISE))
def test_llama_server_stops_on_an_f32_depthwise_kernel_on_the_cpu(kind, llama_bin, tiny_models, tmp_path):
    from .accuracy import server_refusal

    write, _, text_model = _F32_DEPTHWISE[kind]
    path = write(tmp_path / f"{kind}.gguf", True)
    text = server_refusal(llama_bin, tiny_models[text_model], ["--mmproj", str(path)])
    assert "GGML_ASSERT(*cur_backend_id != -1) failed" in text, text[-2000:]


def test_wrong_key_types_and_zero_divisors_are_refused(tmp_path):
    from app.model.errors import MetadataError

    base = write_whisper_projector(tmp_path / "a.gguf")
    with pytest.raises(MetadataError, match="clip.audio.embedding_length is a str.*32-bit unsigned"):
        open_projector(_mutated(base, tmp_path, [["meta", "clip.audio.embedding_length", 8, "64"]]))
    with pytest.raises(MetadataError, match="clip.audio.attention.head_count is 0"):
        open_projector(_mutated(base, tmp_path, [["meta", "clip.audio.attention.head_count", 4, 0]]))
    with pytest.raises(MetadataError, match="clip.has_audio_encoder is not a boolean"):
        open_projector(_mutated(base, tmp_path, [["meta", "clip.has_audio_encoder", 4, 1]]))


def test_granite4_vision_needs_an_offset_per_feature_layer_and_whole_windows(tmp_path):
    """load_hparams throws where the counts differ (its message's format string is broken, so no text to compare);
    the graph divides the patch grid by the window side and pools it to the query grid (the REFUSALS compare a
    window side that does not divide it with llama-server)."""
    from app.model.errors import MetadataError

    base = write_granite4_vision_projector(tmp_path / "g.gguf")
    offsets = ["meta", "clip.vision.projector.spatial_offsets", 9, {"arr": 5, "values": [-1]}]
    with pytest.raises(MetadataError, match="spatial_offsets has 1 entries for 2 feature layers"):
        open_projector(_mutated(base, tmp_path, [offsets]))
    for key, value in (("window_side", 0), ("query_side", 0), ("query_side", 5)):  # 5: pooled to 15 of 24
        with pytest.raises(MetadataError, match="does not make whole windows"):
            open_projector(_mutated(base, tmp_path, [["meta", f"clip.vision.projector.{key}", 4, value]]))


def test_deepseekocr_files_llama_cpp_would_crash_on_are_refused(tmp_path):
    """What would crash llama.cpp rather than stop it with a message (no text to compare with llama-server): a
    zero SAM head count or window (divisions), a SAM patch kernel that does not make OCR 2's 144 or 256 tokens
    (a GGML_ASSERT), a tensor the warmup graph reads but load_tensors takes as optional (a null pointer)."""
    from app.model.errors import MetadataError

    base = write_deepseekocr_projector(tmp_path / "o.gguf")
    for key in ("sam.head_count", "window_size"):
        with pytest.raises(MetadataError, match=f"clip.vision.{key} is 0"):
            open_projector(_mutated(base, tmp_path, [["meta", f"clip.vision.{key}", 4, 0]]))
    with pytest.raises(MetadataError, match="kernel 32x32 makes 64 tokens"):
        open_projector(write_deepseekocr_projector(tmp_path / "o2.gguf", version=2, sam_kernel=32))
    newline = [t.name for t in open_projector(base).tensors].index("v.image_newline")
    with pytest.raises(MetadataError, match="warmup graph reads v.image_newline"):
        open_projector(_mutated(base, tmp_path, [["rename", newline, "v.image_newlin"]]))


def test_an_audio_encoder_without_a_replayed_graph_is_not_counted_and_says_so(tmp_path):
    base = write_whisper_projector(tmp_path / "a.gguf")
    p = open_projector(_mutated(base, tmp_path, [["meta", "clip.projector_type", 8, "gemma4a"]]))
    m = projector_memory(p, [RPC0], _s())
    assert not m.exact and m.compute == {}  # nothing counted, and said so
    assert any("'gemma4a' audio encoder" in n and "not counted" in n and "Verify" in n for n in m.notes)


def test_both_encoders_count_both_buffers_and_the_patch_embeddings_twice(tmp_path):
    vision = write_qwen2vl_projector(tmp_path / "v.gguf")
    both = open_projector(write_whisper_projector(tmp_path / "omni.gguf", proj_type="qwen2a", vision_from=vision))
    v = projector_memory(open_projector(vision), [], _s())
    a = projector_memory(open_projector(write_whisper_projector(tmp_path / "a.gguf", proj_type="qwen2a")), [], _s())
    m = projector_memory(both, [], _s())
    assert m.exact and both.vision and both.audio and both.audio_type == "qwen2a"
    assert m.compute[CPU] == v.compute[CPU] + a.compute[CPU]
    patch = sum(t.nbytes for t in both.tensors if t.name.startswith("v.patch_embd"))
    assert patch > 0 and m.weights_raw == both.weight_bytes + patch


def test_the_projector_is_replayed_once_per_file_lanes_and_flags_not_per_placement(tmp_path, monkeypatch):
    """A drag re-estimates on every move; the projector's figures do not depend on the model's placement, so the
    estimator keeps them per (file, lanes, projector flags) and replays again only when one of those changes."""
    import app.memory.projector as pmod
    from app.command.parse import settings_from_args
    from app.memory.estimator import Estimator
    from app.model import open_model
    from tests import gguf_factory as gf

    calls = []
    real = pmod.projector_memory
    monkeypatch.setattr(pmod, "projector_memory", lambda *a: calls.append(a) or real(*a))
    proj = open_projector(write_whisper_projector(tmp_path / "a.gguf"))
    est = Estimator(open_model(gf.write_tiny_model("llama", tmp_path / "m.gguf")), projector=proj)
    lanes = [RPC0, RPC1]
    base = ["--mmproj", str(proj.path), "-c", "4096"]
    first = est.estimate(lanes, settings_from_args([*base, "-ngl", "all"], tool="server"))
    again = est.estimate(lanes, settings_from_args([*base, "-ngl", "2"], tool="server"))
    assert len(calls) == 1 and again.projector.compute == first.projector.compute
    off = est.estimate(lanes, settings_from_args([*base, "-fa", "off"], tool="server"))
    moved = est.estimate(lanes, settings_from_args([*base, "-mmdev", "RPC1"], tool="server"))
    assert len(calls) == 3 and off.projector.compute["RPC0"] > first.projector.compute["RPC0"]
    assert moved.projector.device == "RPC1"
