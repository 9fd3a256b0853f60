"""Cache types llama.cpp refuses for a model: with flash attention, a quantized type's block must divide every
layer's head size (``llama_init_from_model``); the estimate refuses the same, with llama.cpp's words."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.llamacpp.fit_print import FitPrintError, run_fit_print
from app.memory.estimator import estimate
from app.memory.kv import SettingsError
from app.model import open_model

QUOTE = "K cache type q8_0 with block size 32 does not divide n_embd_head_k=80"


@pytest.mark.llama
def test_a_block_that_does_not_divide_the_head_is_refused_as_llama_cpp_refuses_it(llama_bin, sparse_models):
    path = sparse_models["exaone-3.5-2.4b"]  # heads of 80
    args = ["-c", "8192", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0"]
    said = ""
    for _ in range(20):  # llama.cpp's log thread can lose the line when it aborts (tests/memory/test_split_mode.py)
        with pytest.raises(FitPrintError) as err:
            run_fit_print(path, [*args, "--no-repack"], llama_dir=llama_bin)
        said = str(err.value)
        if QUOTE in said:
            break
    assert QUOTE in said
    with pytest.raises(SettingsError, match=QUOTE):
        estimate(open_model(path), [], settings_from_args(args, tool="fit-params"))
    # -fa auto counts as not disabled; with flash attention off llama.cpp does not check, nor does the estimate
    with pytest.raises(SettingsError, match=QUOTE):
        estimate(open_model(path), [], settings_from_args(["-c", "8192", "-ctk", "q8_0"], tool="fit-params"))
    est = estimate(open_model(path), [], settings_from_args(["-c", "8192", "-fa", "off", "-ctk", "q8_0"],
                                                            tool="fit-params"))
    assert est.devices[-1].kv > 0
