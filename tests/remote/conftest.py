"""Fixtures of the remote tests: the local Hub stand-in and the factory's models it serves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from tests.gguf_factory import write_sparse_model, write_tiny_model
from tests.remote.hub_server import Hub


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No real token, no real cache, no real Hub: each test sets HF_ENDPOINT to its own stand-in."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "MODEL_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("LAYERDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LAYERDECK_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    """Tiny real models, a sparse full-size one (Qwen3-30B-A3B shaped, 18.5 GB apparent, a few MB on disk) and
    a three-part split set."""
    d = tmp_path_factory.mktemp("remote-models")
    out = {
        "llama": write_tiny_model("llama", d / "Tiny-Llama-Q8_0.gguf"),
        "qwen3moe": write_tiny_model("qwen3moe", d / "Tiny-MoE-F16.gguf"),
        "sparse": write_sparse_model("qwen3-30b-a3b", d / "Qwen3-30B-A3B-Q4_K_M.gguf"),
    }
    split_dir = d / "split"
    split_dir.mkdir()
    w = GGUFWriter(str(split_dir / "Split-Q4_0.gguf"), "llama", split_max_tensors=5)
    w.add_tokenizer_model("llama")  # llama.cpp requires a tokenizer (and so does open_model)
    w.add_token_list(["a", "b"])
    w.add_block_count(6)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_head_count(4)
    for i in range(6):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_up.weight", np.ones((32, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shards = sorted(split_dir.glob("Split-Q4_0-*-of-*.gguf"))
    for i, s in enumerate(shards):
        out[f"split{i}"] = s
    return out


@pytest.fixture
def hub(models, monkeypatch):
    h = Hub()
    h.add("acme/Tiny-GGUF", "Tiny-Llama-Q8_0.gguf", models["llama"])
    h.add("acme/Tiny-GGUF", "Tiny-MoE-F16.gguf", models["qwen3moe"])
    h.add("Qwen/Qwen3-30B-A3B-GGUF", "Qwen3-30B-A3B-Q4_K_M.gguf", models["sparse"])
    for i in range(3):
        s = models[f"split{i}"]
        h.add("acme/Split-GGUF", f"Q4_0/{s.name}", s)
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    yield h
    h.close()


@pytest.fixture(scope="session")
def pred_models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pred")
    return {
        "f16": write_tiny_model("qwen3moe", d / "Tiny-MoE-F16.gguf", quant="f16"),
        "mixed": write_tiny_model("qwen3moe", d / "Tiny-MoE-Q4_0.gguf"),
        "llama8": write_tiny_model("llama", d / "Llama8-F16.gguf", n_layer=8, quant="f16"),
    }


@pytest.fixture
def pred_hub(hub, pred_models):
    hub.add("acme/Pred-GGUF", "Tiny-MoE-Q4_0.gguf", pred_models["mixed"])  # listed first: not the source
    hub.add("acme/Pred-GGUF", "Tiny-MoE-F16.gguf", pred_models["f16"])
    hub.add("acme/Llama8-GGUF", "Llama8-F16.gguf", pred_models["llama8"])
    return hub
