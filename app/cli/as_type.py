"""``--as TYPE [--imatrix]`` of ``inspect`` and ``estimate``: the model as ``llama-quantize`` would write it.

:func:`app.model.requant.predict_model` applies the pinned llama.cpp's quantization rules to the model's
header, so the sizes (and everything estimated from them) are those of the file ``llama-quantize MODEL TYPE``
would write, without writing it.
"""

from __future__ import annotations

import argparse

from ..model import Model
from ..model.requant import FTYPE_NAMES, predict_model


def add_requant_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--as",
        dest="as_type",
        metavar="TYPE",
        help="predict the model as llama-quantize would write it as TYPE (by the pinned llama.cpp's rules; "
        f"TYPE is one of {', '.join(FTYPE_NAMES)})",
    )
    p.add_argument(
        "--imatrix",
        action="store_true",
        help="with --as: predict the quantization made with an importance matrix (llama-quantize --imatrix; "
        "the IQ1/IQ2 types and Q2_K_S need one)",
    )


def predicted(model: Model, args: argparse.Namespace) -> Model:
    """``model`` as ``--as`` asks (unchanged without it). Raises :class:`app.model.requant.RequantError`."""
    if not getattr(args, "as_type", None):
        return model
    return predict_model(model, args.as_type, imatrix=args.imatrix)
