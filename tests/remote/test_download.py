"""Downloading a quantization from the local Hub stand-in: shards, resume, verification, errors, cancel."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import threading
from pathlib import Path

import pytest

from app.cli import main as cli_main
from app.remote import RateLimitError, RemoteAccessError, RemoteCancelled, RemoteNotFoundError, RemoteOptions
from app.remote.download import default_folder, download_quant
from app.remote.errors import DownloadError, DownloadVerifyError, RemoteProtocolError, RemoteTruncatedError


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_a_quant_downloads_into_the_data_folder_with_progress(hub, models, tmp_path):
    seen = []
    res = download_quant("acme/Tiny-GGUF:Q8_0", progress=seen.append)
    target = tmp_path / "data" / "models" / "acme" / "Tiny-GGUF" / "Tiny-Llama-Q8_0.gguf"
    assert default_folder("acme/Tiny-GGUF") == target.parent
    assert res.paths == [target] and target.read_bytes() == models["llama"].read_bytes()
    size = models["llama"].stat().st_size
    assert res.fetched == size and res.resumed == 0 and not res.already and not res.notes
    assert seen and seen[-1].done == size and seen[-1].total == size
    assert not list(target.parent.glob("*.part*"))  # the part and its meta file are gone
    assert "of" in seen[-1].text()
    # the second time nothing is fetched: the file is there, its size and SHA-256 match
    before = len(hub.storage_log())
    again = download_quant("acme/Tiny-GGUF:Q8_0")
    assert again.already == [target] and again.fetched == 0 and len(hub.storage_log()) == before


def test_a_split_set_downloads_every_shard_in_its_folder(hub, models, tmp_path):
    res = download_quant("hf://acme/Split-GGUF:Q4_0", tmp_path / "dest")
    assert [p.relative_to(tmp_path / "dest").as_posix() for p in res.paths] == [
        f"Q4_0/{models[f'split{i}'].name}" for i in range(3)
    ]
    for i, p in enumerate(res.paths):
        assert p.read_bytes() == models[f"split{i}"].read_bytes()
    from app.model import open_model

    assert open_model(res.paths[1]).file_size == sum(models[f"split{i}"].stat().st_size for i in range(3))


def test_a_cut_connection_resumes_with_range(hub, models, tmp_path):
    size = models["qwen3moe"].stat().st_size
    hub.state.cut_after, hub.state.cuts = 200_000, 1
    with pytest.raises(RemoteTruncatedError) as exc:
        download_quant("acme/Tiny-GGUF:F16", tmp_path)
    part = tmp_path / "Tiny-MoE-F16.gguf.part"
    assert "kept in" in exc.value.message and "resume" in exc.value.message
    assert part.stat().st_size == 200_000 and not (tmp_path / "Tiny-MoE-F16.gguf").exists()
    res = download_quant("acme/Tiny-GGUF:F16", tmp_path)
    assert hub.storage_log()[-1].range == "bytes=200000-" and hub.storage_log()[-1].status == 206
    assert res.resumed == 200_000 and res.fetched == size - 200_000
    assert (tmp_path / "Tiny-MoE-F16.gguf").read_bytes() == models["qwen3moe"].read_bytes()
    assert not part.exists()


def test_a_server_that_ignores_range_restarts_the_file(hub, models, tmp_path):
    hub.state.cut_after, hub.state.cuts = 100_000, 1
    with pytest.raises(RemoteTruncatedError):
        download_quant("acme/Tiny-GGUF:F16", tmp_path)
    hub.state.ignore_range = True
    res = download_quant("acme/Tiny-GGUF:F16", tmp_path)
    assert res.fetched == models["qwen3moe"].stat().st_size
    assert _sha(tmp_path / "Tiny-MoE-F16.gguf") == _sha(models["qwen3moe"])


def test_a_wrong_sha256_is_refused_and_the_file_removed(hub, tmp_path):
    hub.state.listed_sha["Tiny-Llama-Q8_0.gguf"] = "0" * 64
    with pytest.raises(DownloadVerifyError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert "SHA-256" in exc.value.message and "removed" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_a_size_that_disagrees_with_the_listing_is_refused(hub, models, tmp_path):
    hub.state.listed_size["Tiny-Llama-Q8_0.gguf"] = models["llama"].stat().st_size + 10
    with pytest.raises(DownloadVerifyError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert "the repository lists" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_a_part_of_another_version_is_not_resumed(hub, models, tmp_path):
    part = tmp_path / "Tiny-Llama-Q8_0.gguf.part"
    part.write_bytes(b"x" * 1000)  # no meta file: not known to be a part of this file
    res = download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert res.resumed == 0 and hub.storage_log()[-1].range is None
    assert (tmp_path / "Tiny-Llama-Q8_0.gguf").read_bytes() == models["llama"].read_bytes()


def test_a_different_file_in_the_way_is_left_alone(hub, tmp_path):
    target = tmp_path / "Tiny-Llama-Q8_0.gguf"
    target.write_bytes(b"mine")
    with pytest.raises(DownloadError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert "left alone" in exc.value.message and target.read_bytes() == b"mine"


def test_http_errors_are_named(hub, tmp_path):
    with pytest.raises(RemoteNotFoundError) as exc:
        download_quant("acme/Tiny-GGUF:Q4_K_M", tmp_path)
    assert "it has Q8_0, F16" in exc.value.message
    with pytest.raises(RemoteNotFoundError):
        download_quant("acme/Nope-GGUF:Q4_K_M", tmp_path)
    hub.state.gated["acme/Tiny-GGUF"] = "secret"
    with pytest.raises(RemoteAccessError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert "HF_TOKEN" in exc.value.message
    res = download_quant("acme/Tiny-GGUF:Q8_0", tmp_path, options=RemoteOptions(token="secret"))
    assert res.paths[0].exists()
    del hub.state.gated["acme/Tiny-GGUF"]
    hub.state.storage_status = 429
    with pytest.raises(RateLimitError) as exc:
        download_quant("acme/Tiny-GGUF:F16", tmp_path)
    assert exc.value.retry_after == 7 and "wait 7 s" in exc.value.message
    assert not list(tmp_path.glob("*.part"))


def test_cancel_keeps_the_part_and_the_next_download_resumes(hub, models, tmp_path):
    hub.state.slow_chunk_delay = 0.01
    stop = threading.Event()

    def progress(p):
        if p.done > 50_000:
            stop.set()

    with pytest.raises(RemoteCancelled) as exc:
        download_quant("acme/Tiny-GGUF:F16", tmp_path, options=RemoteOptions(cancel=stop), progress=progress)
    part = tmp_path / "Tiny-MoE-F16.gguf.part"
    have = part.stat().st_size
    assert 50_000 < have < models["qwen3moe"].stat().st_size and "kept in" in exc.value.message
    hub.state.slow_chunk_delay = 0
    res = download_quant("acme/Tiny-GGUF:F16", tmp_path)
    assert res.resumed == have
    assert _sha(tmp_path / "Tiny-MoE-F16.gguf") == _sha(models["qwen3moe"])


def test_no_room_on_the_disk_is_said_before_downloading(hub, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10, 10))
    with pytest.raises(DownloadError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert "not enough room" in exc.value.message and not list(tmp_path.iterdir())
    assert not hub.storage_log()


def test_a_listing_path_that_leaves_the_folder_is_refused(hub, models, tmp_path):
    hub.state.repos["acme/Evil-GGUF"] = {"../../evil-Q8_0.gguf": models["llama"]}
    with pytest.raises(RemoteProtocolError) as exc:
        download_quant("acme/Evil-GGUF:Q8_0", tmp_path / "dest")
    assert "not a path inside the repository" in exc.value.message
    assert not (tmp_path / "evil-Q8_0.gguf").exists() and not (tmp_path.parent / "evil-Q8_0.gguf").exists()


def test_the_cli_downloads_and_reports_in_one_line(hub, models, tmp_path):
    rc, out, err = _cli(["repo", "acme/Tiny-GGUF", "--download", "Q8_0", "--dest", str(tmp_path / "d")])
    assert rc == 0, err
    assert out.strip() == str(tmp_path / "d" / "Tiny-Llama-Q8_0.gguf")
    assert "size and SHA-256 checked" in err
    rc, out, err = _cli(["repo", "acme/Tiny-GGUF", "--download", "Q4_K_M"])
    assert rc == 2 and out == "" and err.startswith("layerdeck: ") and err.count("\n") == 1
    rc, out, err = _cli(["repo", "acme/Tiny-GGUF:Q8_0", "--download", "Q8_0"])
    assert rc == 2 and "ORG/REPO" in err
    rc, out, err = _cli(["repo", "acme/Tiny-GGUF", "--dest", str(tmp_path)])
    assert rc == 2 and "--download" in err


def test_the_repo_json_gives_each_file_its_hf_command(hub):
    rc, out, err = _cli(["repo", "--json", "acme/Tiny-GGUF", "--devices", "CUDA0=16000", "--host-bw", "40",
                         "--predict", "none"])
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert [r["quant"] for r in rows] == ["Q8_0", "F16"] and not any(r["predicted"] for r in rows)
    by = {r["quant"]: r["command"] for r in rows}
    assert by["Q8_0"][1:3] == ["-hf", "acme/Tiny-GGUF:Q8_0"] and "-ngl" in by["Q8_0"]
    assert by["F16"][1:3] == ["-hf", "acme/Tiny-GGUF:F16"]


def test_a_stalled_server_times_out_and_keeps_the_part(hub, models, tmp_path):
    from app.remote import RemoteTimeoutError

    hub.state.slow_chunk_delay = 1.5  # 16 KiB, then silence longer than the timeout
    with pytest.raises(RemoteTimeoutError) as exc:
        download_quant("acme/Tiny-GGUF:F16", tmp_path, options=RemoteOptions(timeout=0.5))
    assert "stopped sending" in exc.value.message and "kept in" in exc.value.message
    assert (tmp_path / "Tiny-MoE-F16.gguf.part").stat().st_size > 0


def test_a_part_longer_than_the_servers_file_is_removed_on_416(hub, models, tmp_path):
    from app.remote import RangeNotSatisfiableError

    size = models["llama"].stat().st_size
    hub.state.listed_size["Tiny-Llama-Q8_0.gguf"] = size + 10
    part = tmp_path / "Tiny-Llama-Q8_0.gguf.part"
    part.write_bytes(models["llama"].read_bytes() + b"12345")
    meta = {"size": size + 10, "sha256": _sha(models["llama"]), "etag": None}
    (tmp_path / "Tiny-Llama-Q8_0.gguf.part.json").write_text(json.dumps(meta))
    with pytest.raises(RangeNotSatisfiableError) as exc:
        download_quant("acme/Tiny-GGUF:Q8_0", tmp_path)
    assert hub.storage_log()[-1].range == f"bytes={size + 5}-" and hub.storage_log()[-1].status == 416
    assert "the part was removed" in exc.value.message and list(tmp_path.iterdir()) == []
