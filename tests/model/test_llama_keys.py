"""Architecture-specific keys: refused with a wrong type where llama.cpp reads them, ignored where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model import open_model
from app.model.errors import MetadataError
from app.model.llama_keys import KEYS, KNOWN_ARCHS, READERS, UNSUPPORTED_ARCHS
from tests.model.gguf_edit import T_STR, T_U8, apply

PINNED = sorted(Path.home().glob(".cache/layerdeck/llama.cpp-0.3.36-*/src/src/models"))


@pytest.mark.skipif(not PINNED, reason="the pinned llama.cpp source is not unpacked here")
def test_table_matches_the_pinned_source():
    from tests.model.llama_keys_source import _arch_names, _classes, readers

    src = PINNED[0].parents[1]
    assert readers(src) == READERS
    names = _arch_names(src)
    assert KNOWN_ARCHS == {names[a] for a in _classes(src) if a in names}
    # named in LLM_ARCH_NAMES without a model (the "(unknown)" placeholder aside): refused as llama.cpp does
    assert set(names.values()) - KNOWN_ARCHS - {"(unknown)"} == UNSUPPORTED_ARCHS
    assert set(READERS) == set(KEYS)
    # spot checks against what the factory models need
    assert "gpt-oss" in READERS["attention.sliding_window"] and "llama" not in READERS["attention.sliding_window"]
    assert "deepseek2" in READERS["attention.kv_lora_rank"] and "granitehybrid" in READERS["ssm.conv_kernel"]


def test_a_key_llama_cpp_never_reads_for_the_architecture_is_ignored(tmp_path, tiny_models):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["llama"]).read_bytes(),
                        [["meta", "{arch}.attention.sliding_window", T_STR, "llamax"]]))
    m = open_model(p)
    assert m.params.n_swa == 0 and not m.params.has_swa
    assert m.warnings == ["metadata key llama.attention.sliding_window holds str ('llamax') instead of u32; "
                          "llama.cpp does not read it for a llama model, so Layerdeck ignores it too"]


def test_the_same_key_is_refused_where_llama_cpp_reads_it(tmp_path, tiny_models):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(Path(tiny_models["gpt-oss"]).read_bytes(),
                        [["meta", "{arch}.attention.sliding_window", T_U8, 128]]))
    with pytest.raises(MetadataError) as exc:
        open_model(p)
    assert (exc.value.key, exc.value.found, exc.value.wanted) == ("gpt-oss.attention.sliding_window", "u8 (128)",
                                                                 "u32")
