"""Quantizations a repository does not have, predicted from one of its headers by llama-quantize's rules.

:func:`app.model.requant.predict_model` (the pinned llama.cpp's ``llama_tensor_get_type``, proven against
``llama-quantize``) is applied to the header of the repository's highest-precision file (the most bits per
weight: BF16/F16 where the repository has one, else Q8_0, ...), so its tensor types and the file size are those
``llama-quantize SOURCE TYPE`` writes. The header is given to it as a sparse stand-in file
(:func:`app.remote.load_check.write_stand_ins`: the header bytes, then a hole), so the predicted file size
includes the exact header, as for a file on disk.

Choices that depend on an importance matrix: ``assume_imatrix=None`` takes the repository's own practice (its
files' ``quantize.imatrix.*`` keys say whether they were made with one); the types that llama-quantize refuses
to make without one (IQ1/IQ2, Q2_K_S) are always predicted with one. Each prediction says which was assumed
and how many tensors would differ the other way.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..model import Model
from ..model.requant import FTYPE_NAMES, RequantError, parse_ftype, plan, predict_model
from .hub import split_info
from .load_check import write_stand_ins
from .open import RemoteRead

__all__ = [
    "COMMON_TYPES",
    "Prediction",
    "bits_per_weight",
    "made_with_imatrix",
    "parse_targets",
    "predict_missing",
    "predicted_file_name",
]

#: The quantizations people download most (the default set of predicted rows).
COMMON_TYPES: tuple[str, ...] = ("Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M", "IQ4_XS", "Q5_K_M", "Q6_K", "Q8_0")
#: Not predicted with ``all``: no quantization (COPY, F32) or types hardly anyone runs.
_NOT_IN_ALL = ("COPY", "F32")


@dataclass
class Prediction:
    """One predicted quantization: its llama-quantize name, the model (None with ``error``), whether it was
    predicted as made with an importance matrix, and what that assumption means."""

    target: str
    model: Model | None
    imatrix: bool
    imatrix_note: str = ""
    error: str | None = None


def bits_per_weight(model: Model) -> float:
    return 8 * model.tensor_bytes / max(model.n_params, 1)


def made_with_imatrix(models: Iterable[Model]) -> bool:
    """Whether any of the files was quantized with an importance matrix (``quantize.imatrix.*`` keys)."""
    return any(any(k.startswith("quantize.imatrix.") for k in m.metadata) for m in models)


def parse_targets(text: str | Sequence[str] | None) -> list[str]:
    """The types to predict: ``common`` (:data:`COMMON_TYPES`), ``all`` (every llama-quantize type but COPY
    and F32), ``none``, or names separated by commas (any case; aliases like Q4_K are Q4_K_M). Raises
    :class:`RequantError` naming a type llama-quantize does not have."""
    if text is None:
        return list(COMMON_TYPES)
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    items = [t for t in items if t]
    out: list[str] = []
    for t in items:
        low = t.lower()
        if low == "common":
            names: Iterable[str] = COMMON_TYPES
        elif low == "all":
            names = [n for n in FTYPE_NAMES if n not in _NOT_IN_ALL]
        elif low == "none":
            names = []
        else:
            if len(t) > 32:
                raise RequantError(f"{t[:32]!r}…: not a quantization type; give names like Q4_K_M,Q6_K")
            name = parse_ftype(t)[0]
            if name in ("Q3_K", "Q4_K", "Q5_K"):  # llama-quantize's aliases of the _M mixtures
                name += "_M"
            if name == "COPY":
                raise RequantError("COPY is not a quantization (llama-quantize copies the tensors as they are)")
            names = [name]
        for n in names:
            if n not in out:
                out.append(n)
    return out


def predicted_file_name(source_path: str, target: str) -> str:
    """The file name the prediction stands for: the source's name with its quantization tag replaced
    (``Qwen3-8B-BF16.gguf`` as Q4_K_M: ``Qwen3-8B-Q4_K_M.gguf``; a split set's shards become one file)."""
    s = split_info(source_path)
    base = PurePosixPath(s.prefix if s is not None else source_path).name
    if s is not None and s.tag and base.upper().endswith(s.tag):
        return base[: len(base) - len(s.tag)] + target + ".gguf"
    return f"{base.removesuffix('.gguf')}-{target}.gguf"


def _diff(source: Model, target: str, a: bool, b: bool) -> int:
    pa, pb = plan(source, target, imatrix=a), plan(source, target, imatrix=b)
    return sum(x.new_type != y.new_type for x, y in zip(pa.tensors, pb.tensors))


def predict_missing(
    source: Model,
    read: RemoteRead | None,
    targets: Sequence[str],
    *,
    assume_imatrix: bool,
    repo: str = "",
) -> list[Prediction]:
    """``source`` (a header-only model of the repository, ``read`` what reading it took: its header bytes) as
    each of ``targets``. A type llama-quantize refuses for this model gets ``error``."""
    out: list[Prediction] = []
    source_name = PurePosixPath(read.headers[0].header.path).name if read is not None and read.headers else ""
    with tempfile.TemporaryDirectory(prefix="layerdeck-predict-") as tmp:
        basis = source
        if read is not None:
            try:  # the header as a file: predict_model then counts the exact header size, as for a local file
                files = write_stand_ins(read, Path(tmp))
                basis = dataclasses.replace(source, paths=files, source="")
            except OSError:
                basis = source  # the size is then the tensor data only (predict_model says so in its warnings)
        for target in targets:
            imatrix = assume_imatrix
            note = ""
            try:
                needs = plan(basis, target, imatrix=False).needs_imatrix
                if needs and not imatrix:
                    imatrix = True
                    note = f"llama-quantize makes {target} only with an importance matrix: predicted with one"
                else:
                    n = _diff(basis, target, imatrix, not imatrix)
                    how = "with" if imatrix else "without"
                    other = "without" if imatrix else "with"
                    if n:
                        note = (
                            f"assumed made {how} an importance matrix; {other} one, {n} tensor"
                            f"{'s' if n != 1 else ''} would get other types"
                        )
                model = predict_model(basis, target, imatrix=imatrix)
            except RequantError as exc:
                out.append(Prediction(target, None, imatrix, note, exc.message))
                continue
            file_name = predicted_file_name(source_name or source.path.name, target)
            model.paths = [Path(file_name)]
            model.source = ""
            model.title = f"{file_name} (predicted from {source_name or source.path.name}" + (
                f"; {repo} has no such file)" if repo else ")"
            )
            model.predicted_from = f"{source_name or source.path.name} as {target}" + (f" ({repo})" if repo else "")
            if note:
                model.warnings.append(note)
            out.append(Prediction(target, model, imatrix, note))
    return out
