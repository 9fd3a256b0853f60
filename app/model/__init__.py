"""GGUF reading and the model-as-blocks view."""

from .blocks import Block, Role
from .errors import (
    CorruptGGUFError,
    FileAccessError,
    GGUFError,
    LayerCountError,
    MetadataError,
    MissingShardError,
    NotGGUFError,
    TruncatedGGUFError,
    UnsupportedArchitectureError,
    UnsupportedVersionError,
)
from .hparams import ModelParams
from .index import BlockId, BlockIdError, ModelIndex
from .model import Model, open_model

__all__ = [
    "Block",
    "BlockId",
    "BlockIdError",
    "ModelIndex",
    "Role",
    "Model",
    "ModelParams",
    "open_model",
    "GGUFError",
    "NotGGUFError",
    "TruncatedGGUFError",
    "CorruptGGUFError",
    "FileAccessError",
    "LayerCountError",
    "MetadataError",
    "MissingShardError",
    "UnsupportedArchitectureError",
    "UnsupportedVersionError",
]
