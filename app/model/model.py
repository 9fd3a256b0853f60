"""Open a GGUF model (one file or a split set) into params, tensors and blocks."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .blocks import Block, Role, build_blocks
from .errors import CorruptGGUFError, LayerCountError, MissingShardError
from .gguf_reader import GGUFHeader, TensorInfo, read_header
from .hparams import Meta, ModelParams, extract_params, layer_numbers
from .index import ModelIndex

log = logging.getLogger(__name__)

SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


@dataclass
class QuantShare:
    type_name: str
    n_tensors: int
    nbytes: int


@dataclass(eq=False)
class Model:
    """A model as Layerdeck sees it: files, metadata, parameters, tensors and blocks."""

    paths: list[Path]
    file_size: int
    version: int
    metadata: dict[str, Any]
    params: ModelParams
    tensors: list[TensorInfo]
    blocks: list[Block]
    warnings: list[str] = field(default_factory=list)
    is_demo: bool = False  # the built-in demo: no file behind it, launching is disabled
    title: str = ""
    #: the size of each file in ``paths``, in bytes
    file_sizes: list[int] = field(default_factory=list)
    #: where a header-only model was read from over HTTP (``hf://ORG/REPO/FILE.gguf``, a URL; see
    #: :mod:`app.remote`): no file on disk, ``paths`` are its file names there
    source: str = ""
    #: set on a model predicted from another one's header (:func:`app.model.requant.predict_model`): what it
    #: was predicted from; its tensors are what llama-quantize would write, there is no such file
    predicted_from: str = ""

    @property
    def header_only(self) -> bool:
        """No weights on disk behind it (the demo, a header read over HTTP, a predicted quantization): it cannot be
        launched as it is."""
        return self.is_demo or bool(self.source) or bool(self.predicted_from)

    @property
    def path(self) -> Path:
        return self.paths[0]

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def n_params(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def n_params_active(self) -> int:
        """Parameters touched per token: everything except the routed experts not selected."""
        p = self.params
        total = 0
        for t in self.tensors:
            b = self.block_of(t.name)
            if b.role is Role.EXPERTS and p.n_expert:
                total += t.n_elements * p.n_expert_used // p.n_expert
            elif b.nextn:
                continue
            else:
                total += t.n_elements
        return total

    def quant_mix(self) -> list[QuantShare]:
        mix: dict[str, QuantShare] = {}
        for t in self.tensors:
            q = mix.setdefault(t.type_name, QuantShare(t.type_name, 0, 0))
            q.n_tensors += 1
            q.nbytes += t.nbytes
        return sorted(mix.values(), key=lambda q: -q.nbytes)

    @cached_property
    def index(self) -> ModelIndex:
        """Tensor positions, tensor -> block, block -> tensors, per-tensor layer and skip flags (built once)."""
        return ModelIndex(self)

    def block(self, block_id: str) -> Block:
        return self.index.blocks[block_id]

    def block_of(self, tensor_name: str) -> Block:
        return self.index.block_of[tensor_name]

    def layer_blocks(self, layer: int) -> list[Block]:
        return list(self.index.layer_blocks.get(layer, ()))


def split_siblings(path: Path) -> list[Path] | None:
    """All shard paths of a split set named like ``name-00001-of-00003.gguf``, or None."""
    m = SPLIT_RE.match(path.name)
    if m is None:
        return None
    count = int(m.group("count"))
    if count < 1:
        return None
    return [path.with_name(f"{m.group('prefix')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


#: How many missing shard names a message lists before it says "and N more".
MISSING_NAMES_SHOWN = 3


def _missing_message(path: Path, count: int, missing: list[Path]) -> str:
    shown = ", ".join(p.name for p in missing[:MISSING_NAMES_SHOWN])
    more = len(missing) - MISSING_NAMES_SHOWN
    if len(missing) == 1:
        what = f"{shown} is missing"
    elif more > 0:
        what = f"{len(missing):,} parts are missing ({shown} and {more:,} more)"
    else:
        what = f"{len(missing)} parts are missing ({shown})"
    return (
        f"{path.name} is part of a {count:,}-part model, but {what} from {path.parent}: download the missing "
        f"part{'s' if len(missing) > 1 else ''} into the same folder."
    )


def _split_count(h: GGUFHeader) -> int:
    """``split.count`` as llama.cpp reads it (u16, optional; 0 or 1 is a single file)."""
    return Meta(h.metadata, h.metadata_types, h.path).u16("split.count")


def _read_split_set(
    path: Path, given: GGUFHeader, count: int, progress, read=read_header, exists=os.path.lexists
) -> list[GGUFHeader]:
    """All shards of the split set ``given`` belongs to, checked the way llama-model-loader checks them.

    ``read(shard_path, shard=i)`` reads a shard's header and ``exists(shard_path)`` says whether it is there
    (the files on disk, or on a server for :mod:`app.remote`, whose ``path`` is a ``PurePosixPath``)."""
    m = SPLIT_RE.match(path.name)
    if m is None:
        raise MissingShardError(
            f"{path.name} is part {Meta(given.metadata, given.metadata_types).u16('split.no') + 1} of a "
            f"{count}-part model, but its name does not follow the NAME-00001-of-0000N.gguf pattern, so the other "
            "parts cannot be found; restore the original file names.",
            str(path),
        )
    if int(m.group("count")) != count:
        raise CorruptGGUFError(
            f"{path.name}: its name says {int(m.group('count')):,} parts, but its split.count says {count}: "
            f'the file was renamed (llama.cpp: "invalid split file name"); restore the original file name.',
            str(path),
        )
    shards = [path.with_name(f"{m.group('prefix')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p for p in shards if p != path and not exists(p)]
    if missing:
        raise MissingShardError(_missing_message(path, count, missing), str(missing[0]))
    headers: list[GGUFHeader] = []
    for i, shard in enumerate(shards):
        # the given file was read as shard 0; its tensors need their shard number, so read it again unless it is 0
        h = given if shard == path and i == 0 else read(shard, shard=i)
        meta = Meta(h.metadata, h.metadata_types, h.path)
        if "split.no" not in h.metadata:
            raise CorruptGGUFError(
                f"{shard.name} has no split.no, so it is not a part of this split model (llama.cpp: "
                f'"missing key split.no in GGUF split {shard.name}"): the parts are mixed up; download them again.',
                h.path,
            )
        no = meta.u16("split.no")
        if no != i:
            raise CorruptGGUFError(
                f"{shard.name} says it is part {no + 1}, but its name says part {i + 1}: the files were renamed "
                f'or mixed up (llama.cpp: "invalid split file idx: {no} (file: {shard.name}), expected {i}").',
                h.path,
            )
        headers.append(h)
        if progress is not None:
            progress(i + 1, len(shards))
    first_count = _split_count(headers[0])
    if first_count != count:
        raise CorruptGGUFError(
            f"{shards[0].name} says the model has {first_count} parts but {path.name} says {count}: "
            "the parts come from different downloads; download them again.",
            headers[0].path,
        )
    return headers


#: Architectures whose K/V projections llama.cpp creates as ``{n_embd, n_head_kv * head size}`` through
#: ``create_tensor_qkv`` (src/models/*.cpp), using layer 0's head counts for every layer except where noted.
_QKV_ARCHS = {"llama", "qwen3moe", "qwen2moe", "llama4", "glm4moe", "gpt-oss", "granitehybrid"}
_PER_LAYER_HEADS = {"granitehybrid"}  # n_embd_k_gqa_i: each layer its own head count


def _check_attention_shapes(p: ModelParams, m: Meta, tensors: list[TensorInfo]) -> None:
    """The K/V projections against the head counts the KV cache is sized from.

    llama.cpp checks every tensor's shape against the hyperparameters (``check_tensor_dims``) and refuses a
    file where they disagree; for the K and V projections that disagreement would also make the KV-cache
    estimate wrong, so the architectures above are checked here the way llama.cpp checks them.
    """
    if p.arch not in _QKV_ARCHS or not p.n_head:
        return
    m.arch = p.arch
    # llama_model_base::load_hparams: with no heads, no head size (and then no K/V projection fits)
    head = p.n_embd // p.n_head[0] if p.n_head[0] else 0
    full_k = m.u32("{arch}.attention.key_length", head) if p.n_head[0] else 0
    full_v = m.u32("{arch}.attention.value_length", head) if p.n_head[0] else 0
    swa_k = m.u32("{arch}.attention.key_length_swa", full_k)
    swa_v = m.u32("{arch}.attention.value_length_swa", full_v)
    for t in tensors:
        if not t.name.startswith("blk.") or len(t.shape) != 2:
            continue
        layer, _, rest = t.name[4:].partition(".")
        if rest not in ("attn_k.weight", "attn_v.weight"):
            continue
        il = int(layer)
        ref = il if p.arch in _PER_LAYER_HEADS else 0
        swa = bool(p.swa_layers[ref]) if p.n_swa else False
        head = (swa_k if swa else full_k) if rest == "attn_k.weight" else (swa_v if swa else full_v)
        want = (p.n_embd, p.n_head_kv[ref] * head)
        if t.shape != want:
            raise LayerCountError(
                f"{os.path.basename(m.path or '')}: tensor {t.name!r} has shape {t.shape}, but the metadata gives "
                f"{want} ({p.arch}.embedding_length, and {p.arch}.attention.head_count_kv times the head size): "
                f"llama.cpp refuses the file (\"check_tensor_dims: tensor '{t.name}' has wrong shape\"), and the "
                "KV cache could not be sized from it; convert or download it again.",
                m.path,
            )


_OPTIONAL_NEXTN = ("nextn.embed_tokens.", "nextn.shared_head_head.", "nextn.shared_head_norm.")


def _short_count(h: GGUFHeader, p: ModelParams, warnings: list[str]) -> None:
    """A header whose tensor count leaves out the entry that follows the table: llama.cpp misses that tensor
    and refuses the file, unless it is one of the optional NextN/MTP tensors (``nextn.embed_tokens``,
    ``nextn.shared_head_head``, ``nextn.shared_head_norm``: TENSOR_NOT_REQUIRED in src/models/glm4-moe.cpp)."""
    name = Path(h.path).name
    layer = layer_numbers([h.stray_entry or ""]).get(h.stray_entry or "")
    said = (
        f"{name}: the header says {len(h.tensors):,} tensors, but another tensor entry ({h.stray_entry!r}) follows "
        "the last one: the tensor count in the header is too small"
    )
    optional = (h.stray_entry or "").split(".", 2)[-1].startswith(_OPTIONAL_NEXTN)
    if p.nextn_layers and layer is not None and layer >= p.n_layer - p.nextn_layers and optional:
        warnings.append(
            f"{said}; llama.cpp does without that optional NextN tensor and loads the file, with every tensor's data read from "
            "shifted offsets (the sizes planned here are right, the weights are not: download the file again)"
        )
        return
    raise CorruptGGUFError(
        f"{said}, so llama.cpp would read every tensor's data from the wrong place and miss that tensor "
        '("check_tensor_dims: tensor ... not found"): the file is corrupt; convert or download it again.',
        h.path,
        h.header_size,
    )


def open_model(path: str | os.PathLike, progress=None) -> Model:
    """Read a GGUF model's header(s). Opening any shard of a split set opens the whole set.

    ``progress(done, total)`` is called after each shard when given.
    Raises :class:`~app.model.errors.GGUFError` subclasses with actionable messages for every file
    llama.cpp would refuse to load for a reason the header shows (see :mod:`app.model.hparams`).
    """
    path = Path(path).absolute()  # plans and autosaves name the model from any working folder
    given = read_header(path)
    count = _split_count(given)
    headers = [given] if count <= 1 else _read_split_set(path, given, count, progress)
    return model_from_headers(headers, path)


def read_split_set(path, given: GGUFHeader, progress=None, *, read=read_header, exists=os.path.lexists):
    """The headers of the model ``given`` (read from ``path``) belongs to: ``[given]`` for one file, else every
    shard of its split set, read with ``read`` and checked like :func:`open_model` checks them."""
    count = _split_count(given)
    return [given] if count <= 1 else _read_split_set(path, given, count, progress, read, exists)


def model_from_headers(headers: list[GGUFHeader], path) -> Model:
    """The :class:`Model` of a file's or a split set's headers (``path``: the one opened, for messages).

    Every check :func:`open_model` makes after reading is made here; raises the same errors."""
    first = headers[0]
    tensors: list[TensorInfo] = [t for h in headers for t in h.tensors]
    tensor_names = {t.name for t in tensors}
    if len(tensor_names) != len(tensors):
        seen: set[str] = set()
        dup = ""
        for t in tensors:  # the first name seen a second time
            if t.name in seen:
                dup = t.name
                break
            seen.add(t.name)
        raise CorruptGGUFError(
            f"tensor {dup!r} appears in more than one shard (llama.cpp: \"invalid model: tensor '{dup}' is "
            'duplicated"): the split set is mixed up.',
            str(path),
        )
    if len(headers) > 1:
        expected = Meta(first.metadata, first.metadata_types, first.path).i32("split.tensors.count", required=True)
        if expected != len(tensors):
            raise CorruptGGUFError(
                f"the split set should hold {expected} tensors but its parts hold {len(tensors)} (llama.cpp: "
                f'"corrupted model: {expected} tensors expected but {len(tensors)} found"): a part is from a '
                "different download.",
                str(path),
            )
    for t in tensors:
        if not t.name:
            raise CorruptGGUFError(
                f"{Path(headers[t.shard].path).name}: a tensor has an empty name; llama.cpp looks tensors up by "
                'name and refuses a file with one it does not use ("done_getting_tensors: wrong number of '
                'tensors"): the tensor table is corrupt; convert or download it again.',
                headers[t.shard].path,
            )
        if t.n_elements == 0:
            raise CorruptGGUFError(
                f"{Path(headers[t.shard].path).name}: tensor {t.name!r} has shape {t.shape}, with a dimension of "
                f"0 elements: llama.cpp checks every tensor against the shape the model needs and refuses the file "
                f"(\"check_tensor_dims: tensor '{t.name}' has wrong shape\"); convert or download it again.",
                headers[t.shard].path,
            )
    names = [t.name for t in tensors]  # in table order, so messages name the first offending tensor
    warnings = [w for h in headers for w in h.warnings]
    params = extract_params(
        first.metadata, names, first.metadata_types, first.path, first.array_types, warnings=warnings
    )
    _check_attention_shapes(params, Meta(first.metadata, first.metadata_types, first.path), tensors)
    for h in headers:
        if h.stray_entry is not None:
            _short_count(h, params, warnings)
    blocks = build_blocks(tensors, params)
    return Model(
        paths=[Path(h.path) for h in headers],
        file_size=sum(h.file_size for h in headers),
        version=first.version,
        metadata=first.metadata,
        params=params,
        tensors=tensors,
        blocks=blocks,
        warnings=warnings,
        file_sizes=[h.file_size for h in headers],
    )
