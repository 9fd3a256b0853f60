"""A multimodal projector file (``--mmproj``): a GGUF of architecture ``clip`` that llama-server loads beside
the model through libmtmd (``tools/mtmd/clip.cpp``).

Only the header is read: the projector type (``clip.projector_type``, or ``clip.vision.projector_type`` /
``clip.audio.projector_type`` for files with both encoders), which encoders it has, the hyperparameters under
``clip.vision.*`` / ``clip.audio.*`` and the tensor table. Memory is :mod:`app.memory.projector`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MetadataError
from .gguf_reader import GGUFHeader, TensorInfo, read_header


class NotAProjectorError(MetadataError):
    """The file is a GGUF, but not a projector (``general.architecture`` is not ``clip``)."""


@dataclass(frozen=True)
class Projector:
    path: Path
    header: GGUFHeader
    proj_type: str  # the vision projector type (or the audio one for an audio-only file)
    audio_type: str | None  # the audio projector type of a file with an audio encoder
    vision: bool
    audio: bool

    @property
    def tensors(self) -> list[TensorInfo]:
        return self.header.tensors

    @property
    def metadata(self) -> dict[str, Any]:
        return self.header.metadata

    def get(self, key: str, default: Any = None) -> Any:
        return self.header.metadata.get(key, default)

    def vision_hp(self, name: str, default: Any = None) -> Any:
        """``clip.vision.<name>``."""
        return self.header.metadata.get(f"clip.vision.{name}", default)

    def audio_hp(self, name: str, default: Any = None) -> Any:
        return self.header.metadata.get(f"clip.audio.{name}", default)

    @property
    def weight_bytes(self) -> int:
        """The tensors' bytes as the file holds them (before the backend's alignment padding)."""
        return sum(t.nbytes for t in self.header.tensors)

    @property
    def title(self) -> str:
        name = self.header.metadata.get("general.name")
        kinds = "+".join(k for k, on in (("vision", self.vision), ("audio", self.audio)) if on) or "no encoder"
        return f"{name or self.path.name} ({self.proj_type}, {kinds})"


def open_projector(path: str | os.PathLike) -> Projector:
    """Read the projector file at ``path``. Raises :class:`~app.model.errors.GGUFError` for a file that is not a
    readable GGUF, :class:`NotAProjectorError` for a GGUF that is not a projector (a model given as --mmproj)."""
    header = read_header(path)
    md = header.metadata
    arch = md.get("general.architecture")
    name = os.path.basename(os.fspath(path))
    if arch != "clip":
        raise NotAProjectorError(
            f"{name} is not a projector file: its architecture is {arch!r}, and a --mmproj file is one of "
            "architecture 'clip' (usually named mmproj-*.gguf, next to the model on its download page)."
        )
    vision = bool(md.get("clip.has_vision_encoder", False))
    audio = bool(md.get("clip.has_audio_encoder", False))
    common = md.get("clip.projector_type")
    v_type = md.get("clip.vision.projector_type", common)
    a_type = md.get("clip.audio.projector_type", common) if audio else None
    proj = v_type if vision else a_type
    if not isinstance(proj, str) or not proj:
        raise MetadataError(
            f"{name} names no projector type (clip.projector_type): llama.cpp refuses it; get the file again."
        )
    return Projector(Path(os.fspath(path)), header, proj, a_type if isinstance(a_type, str) else None, vision, audio)
