"""Which spelling the builder writes for a build: the table's aliases against the build's --help."""

from __future__ import annotations

import pytest

from app.command.accepts import accepts, need, spelling
from app.command.spec import InexpressibleError
from app.llamacpp.capabilities import UNKNOWN, parse_help

HELP = """
--n-gpu-layers N        layers on the GPU
-kvu, --kv-unified      unified KV cache
--no-kv-offload         no KV offload
                        see also --fit and -ot
"""


def test_spelling_uses_the_aliases_the_build_lists():
    caps = parse_help(HELP)
    assert spelling(caps, "-ngl") == "--n-gpu-layers" and need(caps, "--gpu-layers") == "--n-gpu-layers"
    assert spelling(caps, "-nkvo") == "--no-kv-offload" and accepts(caps, "--kv-unified")
    assert not accepts(caps, "-kvo")  # the positive form of that option is not listed
    assert not accepts(caps, "--fit") and not accepts(caps, "-ot")  # only mentioned in a description
    with pytest.raises(InexpressibleError, match="does not accept -ot"):
        need(caps, "-ot")


def test_unknown_build_accepts_the_name_given():
    assert spelling(UNKNOWN, "--n-gpu-layers") == "--n-gpu-layers" and spelling(UNKNOWN, "-ngl") == "-ngl"
    with pytest.raises(KeyError):
        spelling(UNKNOWN, "--typo")
