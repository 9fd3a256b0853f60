"""Quantizations a repository does not have, predicted from its highest-precision header; and bounded fuzz of
the new doors (type lists, download names, listing paths, Content-Range)."""

from __future__ import annotations

import contextlib
import io
import json
import random
import string
from pathlib import Path

import pytest

from app.cli import main as cli_main
from app.errors import LayerdeckError
from app.model import open_model
from app.model.requant import RequantError, predict_model
from app.remote import RemoteOptions
from app.remote.predicted import COMMON_TYPES, made_with_imatrix, parse_targets, predicted_file_name

DEVICES = ["--devices", "CUDA0=16000,CUDA1=8000", "--host-bw", "40"]


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_missing_quants_are_predicted_from_the_highest_precision_file(pred_hub, pred_models):
    rc, out, err = _cli(["repo", "--json", "acme/Pred-GGUF", *DEVICES, "-c", "4096"])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["predicted_from"] == {"file": "Tiny-MoE-F16.gguf", "quant": "F16", "imatrix": False}
    real = [r for r in doc["rows"] if not r["predicted"]]
    pred = [r for r in doc["rows"] if r["predicted"]]
    assert [r["quant"] for r in real] == ["Q4_0", "F16"]
    assert [r["quant"] for r in pred] == list(COMMON_TYPES)
    local = open_model(pred_models["f16"])
    for r in pred:
        # the same prediction as from the file on disk, header included (proven against llama-quantize)
        assert r["size"] == predict_model(local, r["quant"]).file_size, r["quant"]
        assert r["fits"] and r["where"].startswith("CUDA0: ") and set(r["left"]) == {"CUDA0", "CUDA1"}
        assert r["tg"] > 0 and r["pp"] > 0 and r["command"] is None and r["files"] == []
    sizes = {r["quant"]: r["size"] for r in pred}
    assert sizes["Q2_K"] < sizes["Q4_K_M"] < sizes["Q6_K"] <= sizes["Q8_0"] < real[1]["size"]
    note = next(n for n in doc["notes"] if n.startswith("predicted rows"))
    assert "Tiny-MoE-F16.gguf's header" in note and "without an importance matrix" in note


def test_the_text_table_marks_predicted_rows(pred_hub):
    rc, out, err = _cli(["repo", "acme/Pred-GGUF", *DEVICES, "--predict", "Q4_K,q6_k,Q4_0"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "acme/Pred-GGUF: 2 quantizations, 2 predicted, context 8,192"
    rows = [ln.split() for ln in lines[3:] if ln and ln[0] != " " and not ln.startswith(("note", "download"))]
    assert [(r[0], r[1]) for r in rows] == [("Q4_0", "file"), ("F16", "file"), ("Q4_K_M", "predicted"),
                                            ("Q6_K", "predicted")]  # Q4_0 is in the repository: not predicted
    assert "note: predicted rows: no such file in the repository" in out


def test_types_the_repo_has_are_not_predicted_and_a_split_source_is_exact(hub, models):
    rc, out, err = _cli(["repo", "--json", "acme/Split-GGUF", *DEVICES, "--predict", "Q4_0,Q8_0"])
    assert rc == 0, err
    doc = json.loads(out)
    pred = [r for r in doc["rows"] if r["predicted"]]
    assert [r["quant"] for r in pred] == ["Q8_0"]
    assert doc["predicted_from"]["file"] == f"Q4_0/{models['split0'].name}"
    assert pred[0]["size"] == predict_model(open_model(models["split0"]), "Q8_0").file_size


def test_imatrix_dependent_choices_are_said(pred_hub):
    rc, out, err = _cli(["repo", "--json", "acme/Llama8-GGUF", *DEVICES, "--predict", "IQ4_XS,IQ2_XXS,Q4_K_M"])
    assert rc == 0, err
    by = {r["quant"]: r for r in json.loads(out)["rows"]}
    assert "assumed made without an importance matrix; with one, 1 tensor would get other types" == (
        by["IQ4_XS"]["imatrix_note"]
    )
    assert "only with an importance matrix: predicted with one" in by["IQ2_XXS"]["imatrix_note"]
    assert by["Q4_K_M"]["imatrix_note"] is None
    rc, out2, _ = _cli(["repo", "--json", "acme/Llama8-GGUF", *DEVICES, "--predict", "IQ4_XS", "--imatrix"])
    doc = json.loads(out2)
    assert doc["predicted_from"]["imatrix"] is True
    row = next(r for r in doc["rows"] if r["quant"] == "IQ4_XS")
    assert row["imatrix_note"].startswith("assumed made with an importance matrix")
    assert row["size"] != by["IQ4_XS"]["size"]


def test_the_imatrix_assumption_follows_the_repositorys_files(pred_models):
    m = open_model(pred_models["f16"])
    assert not made_with_imatrix([m])
    m.metadata["quantize.imatrix.file"] = "imatrix.dat"
    assert made_with_imatrix([m])


def test_a_bad_type_list_is_refused_before_any_request(hub):
    rc, out, err = _cli(["repo", "acme/Tiny-GGUF", *DEVICES, "--predict", "Q4_K_M,Q9_X"])
    assert rc == 2 and out == "" and "no type 'Q9_X'" in err and err.count("\n") == 1
    assert not hub.log
    assert parse_targets("none") == [] and parse_targets(" Q4_K , q8_0,Q4_K_M") == ["Q4_K_M", "Q8_0"]
    assert "COPY" not in parse_targets("all") and "F32" not in parse_targets("all") and len(parse_targets("all")) > 30
    with pytest.raises(RequantError, match="COPY is not a quantization"):
        parse_targets("COPY")


def test_predicted_file_names():
    assert predicted_file_name("Qwen3-8B-BF16.gguf", "Q4_K_M") == "Qwen3-8B-Q4_K_M.gguf"
    assert predicted_file_name("Q4_0/Split-Q4_0-00001-of-00003.gguf", "Q6_K") == "Split-Q6_K.gguf"
    assert predicted_file_name("model.gguf", "Q8_0") == "model-Q8_0.gguf"


# --------------------------------------------------------------------------- bounded fuzz of the new doors

_ALPHABET = string.ascii_letters + string.digits + "_-.,:/ \\%@\x00\t~é"


def _junk(rng: random.Random, n: int = 24) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, n)))


def test_fuzz_type_lists_give_a_list_or_a_clear_error():
    rng = random.Random(19)
    words = ["Q4_K_M", "q6_k", "all", "none", "common", "IQ4_XS", "7", "Q4_K", "", " "]
    for _ in range(400):
        text = ",".join(rng.choice(words) if rng.random() < 0.7 else _junk(rng) for _ in range(rng.randint(0, 5)))
        try:
            out = parse_targets(text)
        except RequantError as exc:
            assert exc.message and len(exc.message) < 2000
            continue
        assert len(out) == len(set(out)) and all(isinstance(t, str) and t.upper() == t for t in out)


def test_fuzz_download_names_and_listing_paths(hub, tmp_path):
    from app.remote.download import _content_range, _safe_target, download_quant

    rng = random.Random(1919)
    dest = tmp_path / "d"
    for _ in range(300):
        path = "/".join(_junk(rng, 8) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            path = rng.choice(["..", ".", "", "/etc", "C:"]) + "/" + path
        try:
            t = _safe_target(dest, path)
        except LayerdeckError:
            continue
        assert dest in t.parents  # never outside the folder
    for _ in range(200):
        v = rng.choice(["bytes ", "", "bytes=", "items "]) + _junk(rng, 16)
        r = _content_range(v)
        assert r is None or all(isinstance(x, int) or x is None for x in r)
    opts = RemoteOptions(timeout=5)
    for _ in range(40):  # junk names: a clear error, never a traceback (nothing reaches the disk)
        name = rng.choice(["acme/Nope-GGUF:", "acme/", "hf://", "", "https://x/", "hf://acme/Tiny-GGUF/x"]) + _junk(
            rng, 12
        )
        with pytest.raises(LayerdeckError) as exc:
            download_quant(name, dest, options=opts)
        assert exc.value.message
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*"))
