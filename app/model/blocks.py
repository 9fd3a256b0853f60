"""Placeable blocks: every tensor of a model, grouped the way a user moves them.

Per layer: ``attn`` (norms, q/k/v/o, MLA projections, sinks), ``ffn`` (dense
FFN, shared experts and router), ``experts`` (routed experts, with parts
gate/up/down or fused gate_up that can be placed separately), ``ssm``
(recurrent state tensors of hybrid layers: ``ssm_*`` including ``ssm_norm``, and in a recurrent layer the
linear-attention projections ``attn_qkv``/``attn_gate`` of the gated delta-net layers of qwen3next/qwen35) and
``other`` (anything unknown
in a layer, plus NextN/MTP extras). Global blocks: ``input`` (token
embeddings), ``output`` (output norm and head) and ``global`` (anything
else). Every tensor lands in exactly one block, so block sizes add up to the
file's tensor bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from .gguf_reader import TensorInfo
from .hparams import NEMOTRON_H_ARCHS, ModelParams


class Role(str, Enum):
    INPUT = "input"
    OUTPUT = "output"
    GLOBAL = "global"
    ATTN = "attn"
    FFN = "ffn"
    EXPERTS = "experts"
    SSM = "ssm"
    OTHER = "other"


LAYER_ROLES = (Role.ATTN, Role.FFN, Role.EXPERTS, Role.SSM, Role.OTHER)

#: ``blk.N.``, or T5's ``enc.blk.N.`` / ``dec.blk.N.`` (its encoder's and decoder's layer N share layer N's device)
_LAYER_RE = re.compile(r"^(?:enc\.|dec\.)?blk\.(\d+)\.(.+)$")
# Same family as llama.cpp's LLM_FFN_EXPS_REGEX: \.ffn_(up|down|gate|gate_up)_(ch|)exps
_EXPS_RE = re.compile(r"^ffn_(gate_up|gate|up|down)_(?:ch)?exps(?:\.|$)")
_INPUT_NAMES = (
    "token_embd.",
    "token_embd_norm.",
    "per_layer_token_embd.",
    "token_types.",
    "pos_embd.",
    "position_embd.",  # LLM_TENSOR_POS_EMBD (GPT-2, StarCoder): LLM_TENSOR_LAYER_INPUT
)
# AltUp's projections (gemma3n) are output-layer tensors (LLM_TENSOR_LAYER_OUTPUT): on the output's device.
# So is Kimi K3's final attention-residual score (output_res_score), and the hyper-connection head (output_hc_*:
# LLM_TENSOR_HC_HEAD_*, hy_v4's fn/base/scale).
_OUTPUT_NAMES = (
    "output.",
    "output_norm.",
    "altup_proj.",
    "altup_unembd_proj.",
    "output_res_score.",
    "output_hc_",
    "dec.output_norm.",  # T5's decoder output norm (LLM_TENSOR_DEC_OUTPUT_NORM, LAYER_OUTPUT)
)
# EAGLE-3/DFlash heads and Gemma 4's assistant (llama-arch.cpp: LLM_TENSOR_FC, LLM_TENSOR_D2T,
# LLM_TENSOR_ENC_OUTPUT_NORM and LLM_TENSOR_NEXTN_PROJ_POST are LAYER_OUTPUT, and so are DSpark's Markov and
# confidence heads, LLM_TENSOR_DSPARK_*, and DFlash2's selector, LLM_TENSOR_DFLASH_SELECTOR_*)
_HEAD_OUTPUT_NAMES = (
    "fc.",
    "d2t",
    "enc.output_norm.",
    "nextn.post_projection.",
    "markov_w1.",
    "markov_w2.",
    "conf_proj.",
    "selector_predecessor.",
    "selector_successor.",
    "selector_hidden.",
)
#: Tensors without a ``blk.N.`` name that llama.cpp creates with layer 0 (LLM_TENSOR_LAYER_REPEATING, bid 0):
#: gemma3n/gemma4's per-layer-input projection and its norm, Gemma 4's assistant's input projection
#: (LLM_TENSOR_NEXTN_PROJ_PRE, created with i = 0), HRM-Text's learned low-stack start state (LLM_TENSOR_HRM_Z_L_INIT,
#: tn(..., 0)). They join layer 0's ``other`` block, on its device.
_LAYER0_NAMES = ("per_layer_model_proj.", "per_layer_proj_norm.", "nextn.pre_projection.", "hrm.z_l_init")
#: Architectures whose output norm is stored as ``token_embd_norm`` (llama-arch.cpp: "fix for wrong tensor name").
OUTPUT_NORM_AS_EMBD_NORM = frozenset({"lfm2", "lfm2moe"})
#: Architectures whose LN0 after the embeddings (``token_embd_norm``) llama.cpp creates with layer 0 (tn(..., 0),
#: LLM_TENSOR_LAYER_REPEATING): it sits on layer 0's device, in layer 0's ``other`` block.
EMBD_NORM_ON_LAYER0 = frozenset({"bloom", "rwkv6", "rwkv7"})
_SSM_PREFIXES = ("ssm_", "time_mix_", "channel_mix_", "shortconv", "conv1d")
EXPERT_PARTS = ("gate", "up", "down", "gate_up")
#: In a recurrent layer these are the linear-attention (gated delta-net) input projections, not attention.
_RECURRENT_ATTN = ("attn_qkv.", "attn_gate.")


def classify(name: str, recurrent: bool = False) -> tuple[int | None, Role, str | None]:
    """(layer, role, expert part) for a tensor name; ``recurrent``: its layer is a recurrent one."""
    m = _LAYER_RE.match(name)
    if m is None:
        if name.startswith(_INPUT_NAMES):
            return None, Role.INPUT, None
        if name.startswith(_OUTPUT_NAMES) or name.startswith(_HEAD_OUTPUT_NAMES):
            return None, Role.OUTPUT, None
        if name.startswith(_LAYER0_NAMES):
            return 0, Role.OTHER, None
        return None, Role.GLOBAL, None
    layer, suffix = int(m.group(1)), m.group(2)
    e = _EXPS_RE.match(suffix)
    if e is not None:
        return layer, Role.EXPERTS, e.group(1)
    if suffix.startswith("nextn."):
        return layer, Role.OTHER, None
    if suffix.startswith(_SSM_PREFIXES) or (recurrent and suffix.startswith(_RECURRENT_ATTN)):
        return layer, Role.SSM, None
    if (
        suffix.startswith(("attn_", "cross_attn_"))  # T5's decoder attends to the encoder's output too
        or "norm" in suffix.split(".")[0]
        or suffix.startswith(("rope_", "wq", "wk", "wv", "wo", "indexer"))  # DSA's lightning indexer feeds attention
    ):
        return layer, Role.ATTN, None
    if suffix.startswith(("ffn_", "exp_probs_b")):
        return layer, Role.FFN, None
    return layer, Role.OTHER, None


def block_id(layer: int | None, role: Role, part: str | None = None) -> str:
    base = role.value if layer is None else f"{layer}:{role.value}"
    return base if part is None else f"{base}:{part}"


@dataclass
class Block:
    """A group of tensors that move together, unless the block is an expert block opened into parts."""

    id: str
    layer: int | None
    role: Role
    tensors: list[TensorInfo] = field(default_factory=list)
    parts: dict[str, list[TensorInfo]] = field(default_factory=dict)  # expert part -> tensors
    nextn: bool = False  # layer is a NextN/MTP block: in the file, not loaded by default

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    def part_bytes(self, part: str) -> int:
        return sum(t.nbytes for t in self.parts.get(part, ()))

    @property
    def label(self) -> str:
        if self.layer is None:
            return {"input": "Embeddings", "output": "Output head", "global": "Global"}[self.role.value]
        return f"L{self.layer} {self.role.value}"


def build_blocks(tensors: list[TensorInfo], params: ModelParams) -> list[Block]:
    """Group tensors into blocks, ordered input, layers (attn, ffn, experts, ssm, other), output, global."""
    by_id: dict[str, Block] = {}
    first_nextn = params.n_layer - params.nextn_layers if params.nextn_layers else None
    recurrent = params.recurrent_layers
    for t in tensors:
        m = _LAYER_RE.match(t.name)
        il = int(m.group(1)) if m is not None else -1
        layer, role, part = classify(t.name, 0 <= il < len(recurrent) and recurrent[il])
        if role is Role.INPUT and params.arch in OUTPUT_NORM_AS_EMBD_NORM and t.name.startswith("token_embd_norm."):
            role = Role.OUTPUT  # LLM_TENSOR_OUTPUT_NORM_LFM2: the output norm under the input norm's name
        elif role is Role.INPUT and params.arch in EMBD_NORM_ON_LAYER0 and t.name.startswith("token_embd_norm."):
            layer, role = 0, Role.OTHER  # LLM_TENSOR_TOKEN_EMBD_NORM is LAYER_REPEATING, created with bid 0
        if (
            role is Role.ATTN
            and (params.arch in NEMOTRON_H_ARCHS or params.arch == "jamba")
            and 0 <= il < len(recurrent)
            and not params.n_head_kv[il]
        ):
            # Nemotron-H, Jamba: a layer without attention (Mamba, or Nemotron-H's FFN-only layers) keeps its
            # norms in its own block, not in an attention block of norms alone
            role = Role.SSM if recurrent[il] else Role.FFN
        bid = block_id(layer, role)
        blk = by_id.get(bid)
        if blk is None:
            blk = by_id[bid] = Block(
                bid, layer, role, nextn=first_nextn is not None and layer is not None and layer >= first_nextn
            )
        blk.tensors.append(t)
        if part is not None:
            blk.parts.setdefault(part, []).append(t)
    order = {Role.INPUT: (-1, 0), Role.OUTPUT: (1 << 30, 0), Role.GLOBAL: (1 << 30, 1)}
    role_rank = {r: i for i, r in enumerate(LAYER_ROLES)}

    def key(b: Block) -> tuple[int, int]:
        if b.layer is None:
            return order[b.role]
        return b.layer, role_rank[b.role]

    return sorted(by_id.values(), key=key)
