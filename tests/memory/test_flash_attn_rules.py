"""Architectures whose flash attention the pinned llama.cpp does not run as asked.

- PLM runs with ``-fa off`` only: plm.cpp hands the KV cache a 2-D V, and the untransposed cache of flash
  attention asserts on it (``-fa auto`` probes flash attention and aborts too). The estimate refuses the other
  settings with that reason instead of sizing a run that cannot start.
- Grok: llama_init_from_model turns flash attention off whatever ``-fa`` says, before the cache checks, so a
  quantized V cache is refused and ``-fa on`` is sized (and said) as off.
"""

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


@pytest.mark.llama
def test_grok_runs_without_flash_attention_whatever_fa_says(tiny_models, llama_bin):
    from app.llamacpp.fit_print import FitPrintError, run_fit_print

    path = tiny_models["grok"]
    on = estimate(open_model(path), [], settings_from_args(["-c", "4096", "-fa", "on"], tool="fit-params"))
    off = estimate(open_model(path), [], settings_from_args(["-c", "4096", "-fa", "off"], tool="fit-params"))
    assert not on.shape.flash_attn and [d.compute for d in on.devices] == [d.compute for d in off.devices]
    assert [n for n in on.notes if "turns flash attention off for Grok" in n]
    assert not [n for n in off.notes if "turns flash attention off for Grok" in n]
    theirs_on = run_fit_print(path, ["-c", "4096", "-fa", "on"], llama_dir=llama_bin, timeout=120)
    theirs_off = run_fit_print(path, ["-c", "4096", "-fa", "off"], llama_dir=llama_bin, timeout=120)
    assert theirs_on == theirs_off  # llama.cpp's own figures: the same run
    args = ["-c", "4096", "-fa", "on", "-ctv", "q8_0"]
    with pytest.raises(SettingsError, match=r"needs flash attention \(llama.cpp turns it off for Grok\)"):
        estimate(open_model(path), [], settings_from_args(args, tool="fit-params"))
    # llama.cpp refuses it too ("quantized V cache requires flash_attn to be enabled" where its log level shows
    # errors; the context is never made)
    with pytest.raises(FitPrintError, match="failed to create llama_context"):
        run_fit_print(path, args, llama_dir=llama_bin, timeout=120)
