"""-sm row and -sm tensor: refused where the real llama.cpp refuses them, with its reason; -sm tensor's Meta()
device estimated (its figures against --fit-print are cases of tests/memory/accuracy.py); never estimated as
-sm layer."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.llamacpp.fit_print import FitPrintError, run_fit_print
from app.memory.estimator import estimate
from app.memory.kv import SettingsError
from app.memory.split_mode import META, NO_TENSOR_SPLIT
from app.model import open_model
from tests.llama_fixtures import free_port

from .accuracy import list_rpc_devices, record

PINNED = sorted(Path.home().glob(".cache/layerdeck/llama.cpp-0.3.36-*/src/src/llama-arch.cpp"))
GiB = 1 << 30


@pytest.mark.skipif(not PINNED, reason="the pinned llama.cpp source is not unpacked here")
def test_the_tensor_split_exclusions_are_the_pinned_source_s():
    text = PINNED[0].read_text()
    names = dict(re.findall(r"\{\s*(LLM_ARCH_[A-Z0-9_]+)\s*,\s*\"([^\"]+)\"\s*\}", text))
    body = text[text.index("bool llm_arch_supports_sm_tensor") :]
    body = body[: body.index("return false;")]
    assert NO_TENSOR_SPLIT == {names[a] for a in re.findall(r"case (LLM_ARCH_[A-Z0-9_]+):", body)}


def _ours(model, devices, args):
    return estimate(open_model(model), devices, settings_from_args(args, tool="fit-params"))


def _theirs_refuses(bin_dir, model, endpoints, args, quote) -> str:
    """llama-fit-params' refusal. Its log lines go through a logging thread that an abort can cut short (seen: the
    "error loading model" line missing in 2 of 3 runs), so up to 20 runs (0.1 s each) are asked for the reason."""
    said = ""
    for _ in range(20):
        with pytest.raises(FitPrintError) as err:
            run_fit_print(model, ["--rpc", ",".join(endpoints), *args, "--no-repack"], llama_dir=bin_dir)
        said = str(err.value)
        if quote in said:
            break
    return said


@pytest.mark.llama
@pytest.mark.parametrize(
    "arch,args,quote",
    [
        ("llama", ["-sm", "row"], "device RPC0 does not support split buffers"),
        ("llama", ["-sm", "tensor", "-fa", "off"], "SPLIT_MODE_TENSOR requires flash_attn to be enabled"),
        ("olmoe", ["-sm", "tensor"], "LLAMA_SPLIT_MODE_TENSOR not implemented for architecture 'olmoe'"),
        ("mamba2", ["-sm", "tensor", "-fa", "on"], "LLAMA_SPLIT_MODE_TENSOR not implemented for architecture 'mamba2'"),
    ],
    ids=["row-on-rpc", "tensor-fa-off", "tensor-olmoe", "tensor-mamba2"],
)
def test_refused_with_llama_cpp_s_reason(arch, args, quote, llama_bin, rpc_servers, tiny_models):
    servers = rpc_servers(2)
    endpoints = [s.endpoint for s in servers]
    full = ["-c", "4096", "-ngl", "all", *args]
    theirs = _theirs_refuses(llama_bin, tiny_models[arch], endpoints, full, quote)
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    with pytest.raises(SettingsError) as err:
        _ours(tiny_models[arch], devices, full)
    record("refusal", case=" ".join(args), arch=open_model(tiny_models[arch]).params.arch, backends=["CPU", "RPC"],
           features=[f"sm-{args[1]}"], ok=quote in theirs and quote in str(err.value))
    assert quote in theirs
    assert quote in str(err.value)


@pytest.mark.llama
def test_sm_none_with_a_main_gpu_past_the_devices_is_refused(llama_bin, rpc_servers, tiny_models):
    """llama_model_load_from_file_impl: -sm none keeps only device -mg, and fails the load when there is none
    such; a negative -mg drops every device (the CPU alone)."""
    from app.memory.layout import PlacementError

    endpoints = [s.endpoint for s in rpc_servers(2)]
    quote = "invalid value for main_gpu: 2 (available devices: 2)"
    full = ["-c", "4096", "-ngl", "all", "-sm", "none", "-mg", "2"]
    # llama-server, not llama-fit-params: the dry run aborts (an uncaught "failed to load model") before its logging
    # thread writes this line (lost in 29 of 40 runs here, in all 20 retries once in the full suite); the server
    # fails the same loader check, exits with status 1 and its log flushed (40 of 40)
    argv = [str(llama_bin / "llama-server"), "-m", str(tiny_models["llama"]), "--rpc", ",".join(endpoints), *full,
            "--no-repack", "--fit", "off", "--host", "127.0.0.1", "--port", str(free_port())]
    theirs = subprocess.run(argv, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL,
                            timeout=60)
    assert theirs.returncode == 1, theirs.stderr[-2000:]
    assert quote in theirs.stderr
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    with pytest.raises(PlacementError, match=r"-sm none -mg 2 names device 2, but llama.cpp uses 2 \(RPC0, RPC1\)"):
        _ours(tiny_models["llama"], devices, full)
    assert [d.name for d in _ours(tiny_models["llama"], devices, full[:-1] + ["1"]).devices] == ["RPC1", "CPU"]
    assert [d.name for d in _ours(tiny_models["llama"], devices, full[:-1] + ["-1"]).devices] == ["CPU"]
    record("refusal", case="-sm none -mg 2 on 2 devices", arch="llama", backends=["CPU", "RPC"], features=["abort"],
           ok=True)


def test_row_split_is_refused_for_every_backend_but_sycl_and_not_guessed_for_sycl(tiny_models):
    for name, kind in (("CUDA0", "gpu"), ("ROCm0", "gpu"), ("Vulkan0", "gpu"), ("MTL0", "gpu")):
        with pytest.raises(SettingsError, match=f'"device {name} does not support split buffers"'):
            _ours(tiny_models["llama"], [Lane(name, name, 8 * GiB, 8 * GiB, kind)], ["-sm", "row"])
    with pytest.raises(SettingsError, match="not modelled"):
        _ours(tiny_models["llama"], [Lane("SYCL0", "SYCL0", 8 * GiB, 8 * GiB, "gpu")], ["-sm", "row"])
    # without devices llama.cpp builds no split buffer list: the CPU-only estimate stands
    assert [d.name for d in _ours(tiny_models["llama"], [], ["-sm", "row"]).devices] == ["CPU"]


def test_tensor_split_is_one_meta_device_with_the_members_memory(tiny_models):
    devs = [Lane("CUDA0", "CUDA0", 20 * GiB, 24 * GiB, "gpu"), Lane("CUDA1", "CUDA1", 10 * GiB, 12 * GiB, "gpu")]
    est = _ours(tiny_models["qwen3"], devs, ["-sm", "tensor", "-c", "4096"])
    assert [d.name for d in est.devices] == [META, "CPU"]
    assert est.devices[0].capacity == 36 * GiB
    assert est.devices[0].model > 0 and est.devices[0].kv > 0
    assert any(n.startswith("-sm tensor: llama.cpp splits every weight") and "CUDA0, CUDA1" in n for n in est.notes)
    with pytest.raises(SettingsError, match="needs at least one GPU or RPC device"):
        _ours(tiny_models["qwen3"], [], ["-sm", "tensor"])
    with pytest.raises(SettingsError, match="needs at least one GPU or RPC device"):
        _ours(tiny_models["qwen3"], devs, ["-sm", "tensor", "-dev", "none"])
