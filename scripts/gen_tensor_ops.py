"""Generate app/model/tensor_ops.py from the pinned llama.cpp's src/llama-arch.cpp.

LLM_TENSOR_NAMES gives each tensor kind its name template ("blk.%d.attn_q"); LLM_TENSOR_INFOS gives the
layer kind (input, repeating, output) and the ggml op the loader tests a weight with
(weight_buft_supported in src/llama-model-loader.cpp) before it puts the weight on a device.

    python scripts/gen_tensor_ops.py [LLAMA_CPP_SRC]   (default: the pinned build's source folder)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def read_tables(src: Path) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    text = (src / "src" / "llama-arch.cpp").read_text()
    names_block = text[text.index("LLM_TENSOR_NAMES = {") :]
    names_block = names_block[: names_block.index("};")]
    names = dict(re.findall(r"\{\s*(LLM_TENSOR_\w+)\s*,\s*\"([^\"]+)\"\s*\}", names_block))
    infos_block = text[text.index("LLM_TENSOR_INFOS = {") :]
    infos_block = infos_block[: infos_block.index("};")]
    infos = {
        k: (layer, op)
        for k, layer, op in re.findall(
            r"\{\s*(LLM_TENSOR_\w+)\s*,\s*\{\s*LLM_TENSOR_LAYER_(\w+)\s*,\s*GGML_OP_(\w+)\s*\}\s*\}", infos_block
        )
    }
    return names, infos


def table(names: dict[str, str], infos: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Name template -> (layer kind, op). Three templates name two kinds each (token_embd_norm, ssm_a,
    indexer_compressor_ape); the last in sorted order is kept (all three are small: no size rule turns on them)."""
    return {name: (layer, op) for name, layer, op in sorted((names[k], *infos[k]) for k in names if k in infos)}


def main(argv: list[str]) -> int:
    from app.llamacpp.build import build_key, cache_root

    src = Path(argv[0]) if argv else cache_root() / build_key() / "src"
    names, infos = read_tables(src)
    rows = [(name, layer, op) for name, (layer, op) in table(names, infos).items()]
    out = ROOT / "app" / "model" / "tensor_ops.py"
    lines = [
        '"""The ggml op llama.cpp tests each weight with before it puts it on a device (generated: do not edit).',
        "",
        "From the pinned llama.cpp's ``src/llama-arch.cpp`` (``LLM_TENSOR_NAMES`` and ``LLM_TENSOR_INFOS``) by",
        "``scripts/gen_tensor_ops.py``. ``weight_buft_supported`` in ``src/llama-model-loader.cpp`` builds this op",
        "with the weight and asks the device's ``supports_op``; a device that refuses it leaves the weight to the",
        "next buffer type (in the end the CPU). Biases are tested with ADD (ADD_ID for MUL_MAT_ID weights).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "#: name template (``%d`` is the layer) -> (layer kind, op)",
        "TENSOR_OPS: dict[str, tuple[str, str]] = {",
    ]
    lines += [f'    "{name}": ("{layer}", "{op}"),' for name, layer, op in rows]
    lines.append("}")
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(rows)} tensor kinds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
