"""The built-in demo model: a Qwen3-30B-A3B tensor table from ``resources/demo``, no weights.

Opening it needs no file: the board shows a realistic MoE layout on the
detected devices (or on planned ones) and says it is a demo; launching is
disabled for it.
"""

from __future__ import annotations

import json
from pathlib import Path

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from .blocks import build_blocks
from .gguf_reader import TensorInfo
from .hparams import extract_params
from .model import Model

DEMO_RESOURCE = ("demo", "qwen3-30b-a3b.json")


def _resource_text() -> str:
    import resources

    return resources.path(*DEMO_RESOURCE).read_text(encoding="utf-8")


def load_demo() -> Model:
    doc = json.loads(_resource_text())
    tensors = []
    offset = 0
    for name, type_name, shape in doc["tensors"]:
        q = GGMLQuantizationType[type_name]
        block, size = GGML_QUANT_SIZES[q]
        n_el = 1
        for d in shape:
            n_el *= d
        nbytes = n_el // block * size
        tensors.append(TensorInfo(name, int(q), type_name, tuple(shape), n_el, nbytes, offset))
        offset += (nbytes + 31) // 32 * 32
    meta = doc["metadata"]
    params = extract_params(meta, {t.name for t in tensors})
    return Model(
        [Path(doc["file_name"])],
        offset,
        3,
        meta,
        params,
        tensors,
        build_blocks(tensors, params),
        warnings=[],
        is_demo=True,
        title=doc["title"],
    )
