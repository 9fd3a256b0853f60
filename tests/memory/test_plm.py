"""PLM in the pinned llama.cpp runs with ``-fa off`` only: plm.cpp hands the KV cache a 2-D V, and the
untransposed cache of flash attention asserts on it (``-fa auto`` probes flash attention and aborts too). The
estimate refuses the other settings with that reason instead of sizing a run that cannot start."""

from __future__ import annotations

import subprocess

import pytest

from app.command.parse import settings_from_args
from app.memory.estimator import estimate
from app.memory.kv import SettingsError
from app.model import open_model


@pytest.mark.llama
@pytest.mark.parametrize("fa", ["on", "auto"])
def test_flash_attention_is_refused_with_llama_cpp_s_reason(fa, tiny_models, llama_bin):
    args = ["-c", "4096", "-fa", fa]
    with pytest.raises(SettingsError) as exc:
        estimate(open_model(tiny_models["plm"]), [], settings_from_args(args, tool="fit-params"))
    assert str(exc.value).startswith(f"-fa {fa}: llama.cpp aborts on PLM models with flash attention")
    assert str(exc.value).endswith("Use -fa off.")
    out = subprocess.run([str(llama_bin / "llama-fit-params"), "-m", str(tiny_models["plm"]), "--fit-print", "on",
                          *args], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "GGML_ASSERT(a->ne[0] == b->ne[0])" in out.stderr  # the abort quoted
    off = estimate(open_model(tiny_models["plm"]), [], settings_from_args(["-c", "4096", "-fa", "off"],
                                                                          tool="fit-params"))
    assert off.device("CPU").kv > 0
