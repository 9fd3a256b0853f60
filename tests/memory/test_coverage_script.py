"""scripts/coverage.py: one row per architecture of the pinned table, failures shown, docs/coverage.md current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from app.llamacpp.build import build_key, cache_root

ROOT = Path(__file__).resolve().parents[2]
SRC = cache_root() / build_key() / "src"


@pytest.fixture(scope="module")
def cov():
    spec = importlib.util.spec_from_file_location("layerdeck_coverage_script", ROOT / "scripts" / "coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


needs_src = pytest.mark.skipif(not (SRC / "src" / "llama-arch.cpp").is_file(), reason="no pinned llama.cpp tree")


def _fit(arch, ok=True, compute=True):
    return dict(test="fit-print", case=f"{arch}-x", arch=arch, backends=["CPU", "RPC"], approximate=False,
                compute_off="", ok=dict(model=ok, context=True, compute=compute))


@needs_src
def test_every_table_architecture_has_one_row(cov):
    archs = cov.arch_table(SRC)
    assert len(archs) > 150 and "llama" in archs and "gemma3" in archs
    text = cov.render(archs, [_fit("llama")])
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "|---" not in line]
    for a in archs:
        assert rows.count(a) >= 1, a
    assert "| llama | `llama` | — | ✓ | ✓ | exact | CPU, RPC |" in text
    for name, _key, _pending in cov.FEATURES:
        assert f"| {name} | not yet |" in text  # no result carries a feature


@needs_src
def test_the_features_table_comes_from_the_results(cov):
    tensor = dict(_fit("llama"), args="-c 8192 -ngl all -sm tensor -fa on")
    refused = dict(test="refusal", case="-sm row", arch="llama", backends=["CPU", "RPC"], features=["sm-row"],
                   ok=True)
    vk_bad = dict(test="vulkan", case="v", arch="llama", backends=["Vulkan"], features=["vulkan"],
                  ok=dict(model=True, context=True, compute=False))
    text = cov.render(["llama"], [tensor, refused, vk_bad])
    assert "| -sm tensor | exact | 1 fit-print (CPU, RPC): one Meta() device" in text
    assert "| -sm row | refused, as llama.cpp | 1 refusal (CPU, RPC):" in text
    assert "| Vulkan backend (lavapipe) | ✗ (1 of 1 off) |" in text
    assert "| -sm none | not yet |" in text


@needs_src
def test_failures_and_unconfirmed_claims_show(cov):
    text = cov.render(["llama", "gemma3", "qwen4exp"], [_fit("llama", ok=False), _fit("gemma3", compute=False)])
    assert "| llama | `llama` | — | ✗ (1 of 1 cases off) |" in text
    assert "marked exact, 1 of 1 comparisons off" in text  # gemma3 is marked exact; the result says otherwise
    assert "marks for complete reimplementation" in text  # coverage.NOT_YET
    assert "marked exact but not confirmed" in text


@needs_src
def test_docs_coverage_lists_the_pinned_table(cov):
    doc = (ROOT / "docs" / "coverage.md").read_text()
    for a in cov.arch_table(SRC):
        assert f"| {a} |" in doc, a
