"""Derive :data:`app.model.llama_keys.READERS` from a llama.cpp source tree (the pinned build's).

For each architecture-specific key Layerdeck reads, the architectures whose ``load_arch_hparams`` (in
``src/models/<file>.cpp``, including the classes it derives from, and ``load_swa_pattern`` for the
sliding-window pattern) mention its ``LLM_KV_*`` name. Run as a script to print the table::

    python3 -m tests.model.llama_keys_source ~/.cache/layerdeck/llama.cpp-*/src
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from app.model.llama_keys import KEYS


def _arch_names(src: Path) -> dict[str, str]:
    text = (src / "src" / "llama-arch.cpp").read_text()
    return dict(re.findall(r"\{\s*(LLM_ARCH_[A-Z0-9_]+)\s*,\s*\"([^\"]+)\"\s*\}", text))


def _kv_names(src: Path) -> dict[str, str]:
    text = (src / "src" / "llama-arch.cpp").read_text()
    return dict(re.findall(r"\{\s*(LLM_KV_[A-Z0-9_]+)\s*,\s*\"%s\.([^\"]+)\"\s*\}", text))


def _classes(src: Path) -> dict[str, str]:
    """LLM_ARCH_* -> the llama_model_* class llama_model_mapping creates for it."""
    text = (src / "src" / "llama-model.cpp").read_text()
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in text.splitlines():
        m = re.match(r"\s*case (LLM_ARCH_[A-Z0-9_]+):", line)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*return new (llama_model_[a-z0-9_]+)\(params\);", line)
        if m and pending:
            for arch in pending:
                out[arch] = m.group(1)
            pending = []
        elif line.strip() and not line.strip().startswith("//"):
            pending = []
    return out


def _bases(src: Path) -> dict[str, str]:
    text = (src / "src" / "models" / "models.h").read_text()
    return dict(re.findall(r"struct (llama_model_[a-z0-9_]+)\s*:\s*public (llama_model_[a-z0-9_]+)", text))


def _hparams_bodies(src: Path) -> dict[str, str]:
    """class -> the text of its load_arch_hparams (and of any other member it defines in the same file)."""
    out: dict[str, str] = {}
    for f in sorted((src / "src" / "models").glob("*.cpp")):
        text = f.read_text()
        for m in re.finditer(r"void (llama_model_[a-z0-9_]+)::load_arch_hparams\(", text):
            start = m.end()
            end = text.find("\nvoid ", start)
            out[m.group(1)] = out.get(m.group(1), "") + text[start:end if end >= 0 else len(text)]
    return out


def readers(src: Path) -> dict[str, frozenset[str]]:
    """``{key suffix: architectures that read it}`` for the keys of :data:`app.model.llama_keys.KEYS`."""
    arch_names, kv_names, classes = _arch_names(src), _kv_names(src), _classes(src)
    bases, bodies = _bases(src), _hparams_bodies(src)
    by_suffix = {v: k for k, v in kv_names.items()}
    swa_helper = "LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN"
    out: dict[str, set[str]] = {key: set() for key in KEYS}
    for arch_enum, cls in classes.items():
        name = arch_names.get(arch_enum)
        if name is None:
            continue
        text, c = "", cls
        while c is not None:
            text += bodies.get(c, "")
            c = bases.get(c)
        if "load_swa_pattern(" in text:
            text += swa_helper
        for key in KEYS:
            enum = by_suffix.get(key)
            if enum is not None and re.search(rf"\b{enum}\b", text):
                out[key].add(name)
    return {k: frozenset(v) for k, v in out.items()}


if __name__ == "__main__":
    table = readers(Path(sys.argv[1]))
    for key in KEYS:
        print(f"    {key!r}: frozenset({sorted(table[key])!r}),")
