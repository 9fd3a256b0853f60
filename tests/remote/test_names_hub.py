"""Remote names, the token policy, llama.cpp's quant choice, and parsing a header from a prefix of its bytes."""

from __future__ import annotations

import email.utils
import time

import pytest

from app.model.gguf_reader import HeaderIncompleteError, LazyArray, parse_header, read_header
from app.remote import RemoteNameError, model_arguments, parse_name
from app.remote.http import Fetcher, retry_after
from app.remote.hub import RepoFile, find_best_model, group_quants, list_files, split_files
from app.remote.names import hub_token, token_allowed


def test_names():
    n = parse_name("hf://Org/Repo-GGUF/sub/dir/model-Q4_K_M.gguf")
    assert (n.kind, n.repo, n.file, n.revision) == ("file", "Org/Repo-GGUF", "sub/dir/model-Q4_K_M.gguf", "main")
    assert n.llama_args() == ["-hf", "Org/Repo-GGUF", "-hff", "sub/dir/model-Q4_K_M.gguf"]
    assert parse_name("hf://Org/Repo@v1.0/m.gguf").revision == "v1.0"
    q = parse_name("Org/Repo-GGUF:Q4_K_M")
    assert (q.kind, q.repo, q.quant, q.display) == ("quant", "Org/Repo-GGUF", "Q4_K_M", "hf://Org/Repo-GGUF:Q4_K_M")
    assert parse_name("hf://Org/Repo-GGUF:Q8_0").llama_args() == ["-hf", "Org/Repo-GGUF:Q8_0"]
    assert parse_name("Org/Repo").quant == ""
    u = parse_name("https://example.com/m.gguf")
    assert u.kind == "url" and u.llama_args() == ["-mu", "https://example.com/m.gguf"]
    # the Hub's own page and download URLs are repo files
    b = parse_name("https://huggingface.co/Org/Repo/blob/main/m-Q4_0.gguf")
    assert (b.kind, b.repo, b.file) == ("file", "Org/Repo", "m-Q4_0.gguf")
    # local paths stay local
    for local in ("model.gguf", "models/x.gguf", "/abs/path/m.gguf", "C:/models/m.gguf", "a/b/c"):
        assert parse_name(local) is None, local
    for bad in ("hf://", "hf://org", "hf://org/repo/../x.gguf", "hf://org/repo:Q4 K", "http://", "https://h:x/m"):
        with pytest.raises(RemoteNameError):
            parse_name(bad)


def test_an_existing_local_folder_named_like_a_repo_stays_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "repo").mkdir()
    assert parse_name("org/repo") is None
    assert parse_name("org/other") is not None


def test_model_arguments():
    assert model_arguments("/m/x.gguf") == ["-m", "/m/x.gguf"]
    assert model_arguments("hf://o/r/f.gguf") == ["-hf", "o/r", "-hff", "f.gguf"]
    assert model_arguments("o/r:Q4_K_M") == ["-hf", "o/r:Q4_K_M"]


def test_the_token_goes_only_to_the_hub(monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.delenv("MODEL_ENDPOINT", raising=False)
    assert token_allowed("https://huggingface.co/o/r/resolve/main/f.gguf")
    assert token_allowed("https://cdn-lfs.hf.co/x") and token_allowed("https://cas-bridge.xethub.hf.co/x")
    assert not token_allowed("http://huggingface.co/o/r")  # never in the clear
    assert not token_allowed("https://huggingface.co.evil.com/x")
    assert not token_allowed("https://example.com/x")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8080/")
    assert token_allowed("http://127.0.0.1:8080/o/r")
    assert not token_allowed("http://127.0.0.1:8081/o/r") and not token_allowed("https://huggingface.co/o")


def test_where_the_token_comes_from(monkeypatch, tmp_path):
    for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    token, why = hub_token()
    assert token is None and str(tmp_path / "token") in why
    (tmp_path / "token").write_text("hf_file\n")
    assert hub_token() == ("hf_file", str(tmp_path / "token"))
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert hub_token() == ("hf_env", "HF_TOKEN")


def test_retry_after_reads_seconds_and_dates():
    assert retry_after("120") == 120
    later = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 < retry_after(later) <= 61
    assert retry_after("soon") is None and retry_after(None) is None


FILES = [RepoFile(p, 1) for p in (
    "README.md",
    "mmproj-Model-F16.gguf",
    "Model-Q2_K.gguf",
    "Model-Q8_0.gguf",
    "Model-Q4_K_M.gguf",
    "Model-UD-Q4_K_XL.gguf",
    "BF16/Model-BF16-00002-of-00002.gguf",
    "BF16/Model-BF16-00001-of-00002.gguf",
    "Model-Q4_K_M-imatrix.gguf",
)]


def test_the_quant_choice_follows_llama_cpp():
    pick = lambda tag: (find_best_model(FILES, tag) or RepoFile("", 0)).path  # noqa: E731
    assert pick("") == "Model-Q4_K_M.gguf"  # the default tag
    assert pick("q8_0") == "Model-Q8_0.gguf"
    assert pick("Q4_K") == ""  # "Q4_K" must be followed by '.' or '-'
    assert pick("BF16") == "BF16/Model-BF16-00001-of-00002.gguf"  # the first shard, wherever it is listed
    assert pick("Q4_K_XL") == "Model-UD-Q4_K_XL.gguf"
    # llama.cpp searches "F16[.-]" anywhere in the path: the projector is skipped, and BF16- matches too
    assert pick("F16") == "BF16/Model-BF16-00001-of-00002.gguf"
    assert [f.path for f in split_files(FILES, find_best_model(FILES, "BF16"))] == [
        "BF16/Model-BF16-00001-of-00002.gguf", "BF16/Model-BF16-00002-of-00002.gguf"]
    assert find_best_model([RepoFile("x-Q2_K.gguf", 1)], "") == RepoFile("x-Q2_K.gguf", 1)  # the first file
    groups = group_quants(FILES)
    assert [(g.tag, len(g.files)) for g in groups] == [("Q2_K", 1), ("Q8_0", 1), ("Q4_K_M", 1), ("Q4_K_XL", 1),
                                                       ("BF16", 2)]


def test_the_listing_follows_its_pages(hub):
    hub.state.page_size = 2
    files = list_files("acme/Split-GGUF", Fetcher())
    assert [f.path for f in files] == ["README.md"] + [f"Q4_0/Split-Q4_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert sum(1 for e in hub.log if "/api/models/" in e.path) == 3


def test_a_header_parses_from_a_prefix_of_its_bytes(models):
    path = models["sparse"]
    full = read_header(path)
    data = path.open("rb").read(full.header_size + 200)
    size = path.stat().st_size
    n = 1000
    steps = 0
    while True:
        try:
            h = parse_header(data[:n], size, "remote/model.gguf")
            break
        except HeaderIncompleteError as exc:
            assert n < exc.needed <= full.header_size + 200
            n = min(len(data), max(exc.needed, 2 * n))  # exactly the byte needed each time is quadratic
            steps += 1
    assert steps > 5
    assert h.tensors == full.tensors and h.metadata.keys() == full.metadata.keys()
    lazy = [v for v in h.metadata.values() if isinstance(v, LazyArray)]
    assert lazy and all(v.source is not None for v in lazy)
    tokens = h.metadata["tokenizer.ggml.tokens"]
    assert tokens.load() == full.metadata["tokenizer.ggml.tokens"].load()
