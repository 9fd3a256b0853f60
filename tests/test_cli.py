"""The headless command line: every subcommand, without a display, through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app import __version__
from tests.gguf_factory import write_sparse_model, write_tiny_model


def layerdeck(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("DISPLAY", None)
    e["QT_QPA_PLATFORM"] = "minimal-does-not-exist"  # a subcommand that touched Qt would fail loudly
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "ui.launcher", *args], capture_output=True, text=True, env=e,
                          timeout=120)


@pytest.fixture(scope="module")
def q30(tmp_path_factory):
    return write_sparse_model("qwen3-30b-a3b", tmp_path_factory.mktemp("cli") / "q30.gguf")


def test_version():
    r = layerdeck("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"layerdeck {__version__}"


def test_inspect_text_and_json(q30):
    r = layerdeck("inspect", str(q30))
    assert r.returncode == 0, r.stderr
    assert "qwen3moe" in r.stdout and "30.5B total" in r.stdout and "128 routed, 8 used" in r.stdout
    doc = json.loads(layerdeck("inspect", "--json", str(q30)).stdout)
    assert doc["schema"] == "layerdeck.inspect/1" and doc["architecture"] == "qwen3moe"
    assert sum(b["bytes"] for b in doc["blocks"]) == doc["tensor_bytes"]
    assert len(doc["layers"]) == 48 and doc["layers"][0]["experts"] > 0
    assert doc["parameters"]["total"] > 30e9 and doc["parameters"]["active"] < 4e9


def test_inspect_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"<html>404</html>")
    r = layerdeck("inspect", str(bad))
    assert r.returncode == 2 and "not a GGUF model" in r.stderr and "Traceback" not in r.stderr


def test_estimate_prints_fit_print_lines_first(q30):
    r = layerdeck("estimate", "--tool", "fit-params", "--devices", "CUDA0=24576,CUDA1=12288", "--",
                  "-m", str(q30), "-ngl", "all", "-ts", "3,1", "-c", "8192", "-fa", "off")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    names = [ln.split()[0] for ln in lines[:3]]
    assert names == ["CUDA0", "CUDA1", "Host"] and lines[3] == ""
    model, ctx = (int(x) for x in lines[0].split()[1:3])
    assert model == 13196 and ctx == 592  # llama-fit-params prints exactly these for this command
    doc = json.loads(layerdeck("estimate", "--json", "--devices", "CUDA0=24576", "--", "-m", str(q30), "-c",
                               "4096").stdout)
    assert doc["schema"] == "layerdeck.estimate/1" and doc["devices"][-1]["name"] == "Host"


def test_estimate_reports_bad_flags(q30):
    r = layerdeck("estimate", "--devices", "CUDA0=8000", "--", "-m", str(q30), "-ctv", "q8_0", "-fa", "off")
    assert r.returncode == 2 and "needs flash attention" in r.stderr


def test_fit_export_import_canonical(q30, tmp_path):
    plan = tmp_path / "p.json"
    r = layerdeck("fit", str(q30), "--devices", "CUDA0=8192", "-c", "16384", "--plan-out", str(plan))
    assert r.returncode == 0, r.stderr
    fitted = r.stdout.splitlines()[0]
    assert fitted.startswith("llama-server -m ") and "--fit off" in fitted
    r = layerdeck("export", str(q30), "--plan", str(plan), "--format", "bash")
    assert r.returncode == 0 and r.stdout.strip() == fitted
    r = layerdeck("canonical", "--devices", "CUDA0=8192", "--", *fitted.replace("'", "").split()[0:])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == fitted
    r = layerdeck("import", "--json", "--devices", "CUDA0=8192", "--", "-m", str(q30), "-ngl", "30", "-cmoe")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "layerdeck.placement/1"
    assert doc["layers"][:19] == ["CPU"] * 19 and doc["layers"][19:] == ["CUDA0"] * 30
    assert all(b["device"] == "CPU" for b in doc["blocks"] if b["id"].endswith(":experts"))


def test_export_against_another_model_is_explained(q30, tmp_path):
    plan = tmp_path / "p.json"
    assert layerdeck("fit", str(q30), "--devices", "CUDA0=24576", "--plan-out", str(plan)).returncode == 0
    other = write_tiny_model("qwen3moe", tmp_path / "tiny.gguf")
    r = layerdeck("export", str(other), "--plan", str(plan))
    assert r.returncode == 2 and "made for q30.gguf" in r.stderr


@pytest.mark.llama
def test_fit_fastest_and_side_by_side_with_llama_cpp(q30, llama_bin):
    r = layerdeck("fit", str(q30), "--devices", "CUDA0=12288@360,CUDA1=12288@1008", "-c", "32768", "--fastest",
                  "--host-bw", "60")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("layerdeck fastest")]
    assert rows and "tok/s" in r.stdout


@pytest.mark.llama
def test_fit_compare_with_llama_cpp_on_rpc(q30, llama_bin, rpc_servers):
    servers = rpc_servers(2, memory_mib=[6000, 3000])
    r = layerdeck("fit", str(q30), "--rpc", ",".join(s.endpoint for s in servers), "-c", "16384", "--margin", "512",
                  "--compare-llama", "--host-bw", "60", env={"LAYERDECK_LLAMA_CPP_DIR": str(llama_bin)})
    assert r.returncode == 0, r.stderr
    assert "llama.cpp --fit" in r.stdout and "layerdeck auto-fit" in r.stdout


def test_estimate_carries_its_speed_prediction_and_what_it_assumes(q30, tmp_path, monkeypatch):
    """Anyone can hold the prediction against llama-bench: the figures and the machine figures they assume."""
    env = {"XDG_DATA_HOME": str(tmp_path)}  # no saved calibration
    base = ["--devices", "CUDA0=24576@900", "--", "-m", str(q30), "-ngl", "all", "-c", "4096"]
    r = layerdeck("estimate", "--json", *base, env=env)
    assert r.returncode == 0, r.stderr
    speed = json.loads(r.stdout)["speed"]
    cmoe = json.loads(layerdeck("estimate", "--json", *base, "-cmoe", env=env).stdout)["speed"]
    assert speed["calibrated"] is False and speed["pp_ubatch"] == 512
    assert speed["devices"]["CUDA0"]["bandwidth_gb_s"] == 900 and speed["devices"]["Host"]["bandwidth_gb_s"] == 60
    assert 0 < cmoe["tg_tokens_per_s"] < speed["tg_tokens_per_s"]  # experts read from RAM instead of the card

    from app.command.parse import parse_llama_args
    from app.memory.device_adapter import parse_device_spec
    from app.model import open_model
    from app.placement import Placement
    from app.session import Session

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # the same (absent) calibration in this process
    parsed = parse_llama_args(base[3:])
    lanes = parse_device_spec("CUDA0=24576@900")
    model = open_model(q30)
    session = Session(model, lanes, placement=Placement.from_settings(model, lanes, parsed.settings))
    decode, prompt = session.speed_of(session.estimate_settings(parsed.settings).placement, parsed.settings)
    assert speed["tg_tokens_per_s"] == round(decode.tokens_per_s, 2)
    assert speed["pp_tokens_per_s"] == round(prompt.tokens_per_s, 2)
    text = layerdeck("estimate", *base, env=env).stdout
    assert f"speed: generation {decode.tokens_per_s:.1f} tok/s" in text and "not calibrated" in text


def test_a_draft_model_that_no_spec_type_uses_is_said(tmp_path):
    """-md alone loads the draft without drafting with it (said); with a --spec-type whose drafter is the -md model
    (Gemma 4's assistant with draft-mtp here) it is used, and nothing is said; the assistant reads the target's caches
    and has none of its own."""
    from tests.factory_models.gemma4_assistant import write_gemma4_assistant
    from tests.gguf_factory import _n_vocab, tiny_hparams

    main = write_tiny_model("gemma4", tmp_path / "g4.gguf")
    hp = tiny_hparams("gemma4")
    draft = write_gemma4_assistant(tmp_path / "assistant.gguf", n_embd_tgt=hp["n_embd"], n_vocab=_n_vocab(hp))
    base = ["--devices", "CUDA0=8192", "--", "-m", str(main), "-md", str(draft), "-ngl", "all", "-c", "4096"]
    alone = layerdeck("estimate", *base)
    assert alone.returncode == 0, alone.stderr
    assert "-md without --spec-type draft-mtp" in alone.stdout  # the type that drafts with this file
    used = layerdeck("estimate", *base, "--spec-type", "draft-mtp")
    assert used.returncode == 0, used.stderr
    assert "-md without --spec-type" not in used.stdout
    assert "no KV cache of its own: it reads the main model's last two layers' caches" in used.stdout


def test_estimate_counts_a_draft_model_and_a_projector(tmp_path):
    """-md and --mmproj on planned GPUs: the draft's and the projector's shares per device, in the text table and
    the JSON; the speed with the draft at the acceptance rate given; a file that is not a projector refused."""
    from tests.projector_factory import write_gemma3_projector

    main = write_tiny_model("gemma3", tmp_path / "g3.gguf")
    draft = write_tiny_model("gemma3", tmp_path / "g3-draft.gguf", n_layer=2)
    proj = write_gemma3_projector(tmp_path / "mmproj.gguf")
    args = ["--devices", "CUDA0=24576,CUDA1=12288", "--", "-m", str(main), "-md", str(draft), "--mmproj",
            str(proj), "-ngl", "all", "-c", "4096", "--spec-type", "draft-simple"]
    r = layerdeck("estimate", "--acceptance", "0.6", *args)
    assert r.returncode == 0, r.stderr
    assert "draft" in r.stdout.splitlines()[3 + 1] and "projector" in r.stdout.splitlines()[4]
    assert "draft model g3-draft.gguf (-md)" in r.stdout and "projector mmproj.gguf (gemma3, --mmproj) on CUDA0" in r.stdout
    assert "at an acceptance rate of 60%" in r.stdout
    doc = json.loads(layerdeck("estimate", "--json", "--acceptance", "0.6", *args).stdout)
    cuda0 = next(d for d in doc["devices"] if d["name"] == "CUDA0")
    assert doc["projector"]["device"] == "CUDA0" and cuda0["projector"] == doc["projector"]["weights"] + doc[
        "projector"]["compute"].get("CUDA0", 0)
    assert cuda0["draft"] == next(d["total"] for d in doc["draft"]["devices"] if d["name"] == "CUDA0") > 0
    assert cuda0["total"] == sum(cuda0[k] for k in ("model", "context", "compute", "output", "draft", "projector"))
    assert doc["speed"]["speculative"]["acceptance"] == 0.6 and not doc["speed"]["speculative"]["acceptance_assumed"]
    bad = layerdeck("estimate", "--", "-m", str(main), "--mmproj", str(draft), "-c", "4096")
    assert bad.returncode == 2 and "not a projector file" in bad.stderr and "Traceback" not in bad.stderr
    worse = layerdeck("estimate", "--acceptance", "1.5", *args)
    assert worse.returncode == 2 and "--acceptance 1.5" in worse.stderr


def test_estimate_counts_both_encoders_of_a_projector_and_says_what_it_leaves_out(tmp_path):
    """A projector with vision and audio encoders: both types in the text, each encoder's compute in the JSON;
    an audio encoder Layerdeck does not replay is named as not counted in the text and the JSON notes."""
    from tests.model.gguf_edit import apply
    from tests.projector_factory import write_qwen2vl_projector, write_whisper_projector

    main = write_tiny_model("qwen2vl", tmp_path / "q.gguf")
    both = write_whisper_projector(tmp_path / "omni.gguf", proj_type="qwen2a",
                                   vision_from=write_qwen2vl_projector(tmp_path / "v.gguf"))
    args = ["--devices", "CUDA0=24576", "--", "-m", str(main), "--mmproj", str(both), "-c", "4096"]
    r = layerdeck("estimate", *args)
    assert r.returncode == 0, r.stderr
    assert "projector omni.gguf (qwen2.5vl_merger + qwen2a, --mmproj) on CUDA0" in r.stdout
    doc = json.loads(layerdeck("estimate", "--json", *args).stdout)
    enc = doc["projector"]["encoders"]
    assert [(e["kind"], e["type"]) for e in enc] == [("vision", "qwen2.5vl_merger"), ("audio", "qwen2a")]
    assert doc["projector"]["exact"] and all(e["compute"]["CUDA0"] > 0 for e in enc)
    assert doc["projector"]["compute"]["CUDA0"] == sum(e["compute"]["CUDA0"] for e in enc)
    other = tmp_path / "other.gguf"
    other.write_bytes(apply(both.read_bytes(), [["meta", "clip.audio.projector_type", 8, "qwen3tts_spkenc"]]))
    args[args.index(str(both))] = str(other)
    r = layerdeck("estimate", *args)
    assert r.returncode == 0 and "'qwen3tts_spkenc' audio encoder's compute buffer is not counted" in r.stdout
    doc = json.loads(layerdeck("estimate", "--json", *args).stdout)
    assert not doc["projector"]["exact"] and doc["projector"]["encoders"][1]["compute"] == {}
    assert any("qwen3tts_spkenc" in n and "not counted" in n for n in doc["notes"])
