"""Block identities and the per-model index: everything derived from the tensor table, built once.

A block id is text the user sees and plans store (``12:attn``, ``12:experts``,
``12:experts:gate``, ``input``, ``output``); :class:`BlockId` is that text
parsed once into ``(layer, role, part)``. :class:`ModelIndex` (``model.index``)
maps between tensors, blocks and parts and keeps the per-tensor facts every
later stage needs (llama.cpp's layer index, whether llama.cpp skips it), so no
module recomputes or re-caches them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ReadError
from .blocks import EXPERT_PARTS, Block, Role, block_id

if TYPE_CHECKING:
    from .model import Model

_GLOBAL_ROLES = {Role.INPUT.value: Role.INPUT, Role.OUTPUT.value: Role.OUTPUT, Role.GLOBAL.value: Role.GLOBAL}
_LAYER_ROLES = {r.value: r for r in Role if r.value not in _GLOBAL_ROLES}

#: Tensor name endings llama.cpp's weights carry; some tensors have none (``ssm_a``, ``ssm_d``).
WEIGHT_SUFFIXES = (".weight", ".bias", ".scale")

#: Architectures whose NextN/MTP layers skip only the tensors created with the MTP flags (``TENSOR_SKIP`` without
#: MTP): the others (q/k norms, the attention gate, the FFN, the shared head) are only ``TENSOR_NOT_REQUIRED`` and
#: llama.cpp loads them in a normal context (``src/models/step35.cpp`` load_block_mtp). Base names, no ``blk.N.``.
NEXTN_SKIPPED_ONLY: dict[str, frozenset[str]] = {
    "step35": frozenset(
        ("attn_norm", "attn_qkv", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm")
        + ("nextn.eh_proj", "nextn.enorm", "nextn.hnorm")
    ),
    # src/models/hy-v3.cpp: load_block(i, mtp_flags) skips the attention and norms; FFN, router and experts load
    "hy_v3": frozenset(
        ("attn_norm", "attn_qkv", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm")
        + ("ffn_norm", "nextn.eh_proj", "nextn.enorm", "nextn.hnorm")
    ),
}


class BlockIdError(ReadError, ValueError):
    """Text that is not a block or expert-part id."""


@dataclass(frozen=True, order=True)
class BlockId:
    """A block (``part`` None) or an expert part of a block."""

    layer: int | None
    role: Role
    part: str | None = None

    @classmethod
    def parse(cls, text: str) -> BlockId:
        pieces = text.split(":")
        if len(pieces) == 1 and pieces[0] in _GLOBAL_ROLES:
            return cls(None, _GLOBAL_ROLES[pieces[0]])
        if len(pieces) in (2, 3) and pieces[0].isdigit() and pieces[1] in _LAYER_ROLES:
            role = _LAYER_ROLES[pieces[1]]
            part = pieces[2] if len(pieces) == 3 else None
            if part is not None and (role is not Role.EXPERTS or part not in EXPERT_PARTS):
                raise BlockIdError(f"{text!r}: only expert blocks have parts ({', '.join(EXPERT_PARTS)}).")
            return cls(int(pieces[0]), role, part)
        raise BlockIdError(f"{text!r} is not a block id (like 12:attn, 12:experts:gate, input or output).")

    @property
    def block(self) -> BlockId:
        """The block this id belongs to (itself for a whole block)."""
        return self if self.part is None else BlockId(self.layer, self.role)

    def __str__(self) -> str:
        return block_id(self.layer, self.role, self.part)


def tensor_base(name: str) -> tuple[int | None, str]:
    """(layer, base name without ``blk.N.`` and without the ``.weight``/``.bias`` suffix)."""
    if name.startswith("blk."):
        _, num, rest = name.split(".", 2)
        base = rest.rsplit(".", 1)[0] if rest.endswith(WEIGHT_SUFFIXES) else rest
        return int(num), base
    base = name.rsplit(".", 1)[0] if name.endswith(WEIGHT_SUFFIXES) else name
    return None, base


class ModelIndex:
    """Lookups over one model's tensor table; built once per model (``model.index``)."""

    def __init__(self, model: Model):
        n = model.params.n_layer
        self.tensor_pos: dict[str, int] = {t.name: i for i, t in enumerate(model.tensors)}
        self.blocks: dict[str, Block] = {b.id: b for b in model.blocks}
        self.ids: dict[str, BlockId] = {}
        self.item_tensors: dict[str, tuple[int, ...]] = {}
        block_of: dict[str, Block] = {}
        for b in model.blocks:
            self.ids[b.id] = BlockId(b.layer, b.role)
            self.item_tensors[b.id] = tuple(self.tensor_pos[t.name] for t in b.tensors)
            for t in b.tensors:
                block_of[t.name] = b
            for part, tensors in b.parts.items():
                pid = block_id(b.layer, b.role, part)
                self.ids[pid] = BlockId(b.layer, b.role, part)
                self.item_tensors[pid] = tuple(self.tensor_pos[t.name] for t in tensors)
        self.block_of: dict[str, Block] = block_of
        #: each tensor's bytes, parallel to ``model.tensors``
        self.tensor_nbytes: list[int] = [t.nbytes for t in model.tensors]
        #: the block of each tensor, parallel to ``model.tensors``
        self.tensor_block: list[Block] = [block_of[t.name] for t in model.tensors]
        #: llama.cpp's layer index per tensor: -1 input (CPU), ``n_layer`` for output, else the block's layer
        #: (0 for other global tensors such as rope_freqs, created with layer 0)
        self.tensor_layer: list[int] = [
            -1 if b.role is Role.INPUT else n if b.role is Role.OUTPUT else 0 if b.layer is None else b.layer
            for b in self.tensor_block
        ]
        #: bytes per llama.cpp layer index (:attr:`tensor_layer`'s values)
        self.layer_nbytes: dict[int, int] = {}
        for il, nb in zip(self.tensor_layer, self.tensor_nbytes):
            self.layer_nbytes[il] = self.layer_nbytes.get(il, 0) + nb
        #: tensors llama.cpp does not load in a normal context (NextN/MTP layers: ``TENSOR_SKIP``)
        only = NEXTN_SKIPPED_ONLY.get(model.params.arch)
        self.skipped: list[bool] = [
            b.nextn and (only is None or tensor_base(t.name)[1] in only)
            for b, t in zip(self.tensor_block, model.tensors)
        ]
        #: the indices of the tensors in :attr:`skipped`
        self.skipped_ids: tuple[int, ...] = tuple(i for i, skip in enumerate(self.skipped) if skip)
        #: per tensor, where it goes with no overrides, as an index into ``[*layer_device, CPU, ""]``: its
        #: layer's (``n_layer`` for the output), -2 for an input tensor (the CPU), -1 for a skipped one (nowhere)
        self.default_slot: list[int] = [
            -1 if skip else -2 if il < 0 else min(il, n) for il, skip in zip(self.tensor_layer, self.skipped)
        ]
        #: :func:`tensor_base` of each tensor, parallel to ``model.tensors``
        self.tensor_bases: list[tuple[int | None, str]] = [tensor_base(t.name) for t in model.tensors]
        self.token_embd: int | None = self.tensor_pos.get("token_embd.weight")
        self.layer_blocks: dict[int, list[Block]] = {}
        for b in model.blocks:
            if b.layer is not None:
                self.layer_blocks.setdefault(b.layer, []).append(b)
        #: base names (no ``blk.N.``) of tensors whose name has no weight suffix (``ssm_a``): an ``-ot``
        #: pattern for them must end at the end of the name instead of at a dot
        self.suffixless_bases: frozenset[str] = frozenset(
            tensor_base(t.name)[1] for t in model.tensors if not t.name.endswith(WEIGHT_SUFFIXES)
        )

    def block_id(self, item: str) -> BlockId:
        """The parsed id of a block or part of this model (raises KeyError for an id it does not have)."""
        return self.ids[item]

    def block_of_item(self, item: str) -> Block:
        """The block of a block or part id."""
        return self.blocks[str(self.ids[item].block)]
