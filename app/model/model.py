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
from .errors import CorruptGGUFError, MissingShardError
from .gguf_reader import GGUFHeader, TensorInfo, read_header
from .hparams import ModelParams, extract_params
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


def open_model(path: str | os.PathLike, progress=None) -> Model:
    """Read a GGUF model's header(s). Opening any shard of a split set opens the whole set.

    ``progress(done, total)`` is called after each shard when given.
    Raises :class:`~app.model.errors.GGUFError` subclasses with actionable messages.
    """
    path = Path(path)
    shards = split_siblings(path)
    headers: list[GGUFHeader] = []
    if shards is None:
        headers.append(read_header(path))
        count = int(headers[0].metadata.get("split.count", 1) or 1)
        if count > 1:
            raise MissingShardError(
                f"{path.name} is shard {int(headers[0].metadata.get('split.no', 0)) + 1} of a {count}-part model, but "
                "its name does not follow the NAME-00001-of-0000N.gguf pattern, so the other parts cannot be found; "
                "restore the original file names.",
                str(path),
            )
    else:
        missing = [p for p in shards if not p.is_file()]
        if missing:
            names = ", ".join(p.name for p in missing)
            raise MissingShardError(
                f"{path.name} is part of a {len(shards)}-part model, but {names} "
                f"{'is' if len(missing) == 1 else 'are'} missing from {path.parent}: download the missing "
                f"part{'s' if len(missing) > 1 else ''} into the same folder.",
                str(missing[0]),
            )
        for i, shard in enumerate(shards):
            headers.append(read_header(shard, shard=i))
            if progress is not None:
                progress(i + 1, len(shards))
        for i, h in enumerate(headers):
            no = h.metadata.get("split.no")
            if no is not None and int(no) != i:
                raise CorruptGGUFError(
                    f"{Path(h.path).name} says it is part {int(no) + 1}, but its name says part "
                    f"{i + 1}: the files were renamed or mixed up.",
                    h.path,
                )
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
        raise CorruptGGUFError(f"tensor {dup!r} appears in more than one shard: the split set is mixed up.", str(path))
    expected = first.metadata.get("split.tensors.count")
    if expected is not None and int(expected) != len(tensors):
        raise CorruptGGUFError(
            f"the split set should hold {int(expected)} tensors but its parts hold {len(tensors)}: "
            "a part is from a different download.",
            str(path),
        )
    params = extract_params(first.metadata, tensor_names)
    blocks = build_blocks(tensors, params)
    warnings = [w for h in headers for w in h.warnings]
    if params.arch == "unknown":
        warnings.append("the file does not name its architecture (general.architecture)")
    if params.n_layer == 0:
        warnings.append(f"no {params.arch}.block_count in the metadata: layer placement cannot be computed")
    return Model(
        paths=[Path(h.path) for h in headers],
        file_size=sum(h.file_size for h in headers),
        version=first.version,
        metadata=first.metadata,
        params=params,
        tensors=tensors,
        blocks=blocks,
        warnings=warnings,
    )
