"""The model summary's rows for models whose layer count means something else."""

from __future__ import annotations

import pytest

from app.model import open_model

pytestmark = pytest.mark.gui


def test_hrm_text_s_layers_are_cache_slots_over_two_stacks(tiny_models):
    """HRM-Text's block_count is its cache-slot count: the summary says so, and that -ngl counts slots (12 slots of
    the tiny model over 2 stacks of 2 blocks), not the 4 blocks the board shows."""
    from ui.summary_panel import summary_html

    html = summary_html(open_model(tiny_models["hrm_text"]))
    assert "12 cache slots: 2 cycles of 2 low passes and 1 high pass over 2 stacks of 2 blocks (-ngl counts slots)" \
        in html
    plain = summary_html(open_model(tiny_models["qwen3moe"]))
    assert "cache slots" not in plain and "<td>4</td>" in plain


def test_the_kv_panel_names_a_hybrid_s_recurrent_state(window, tiny_models):
    """MiniMax-01's lightning-attention state is context memory the KV figure leaves out: the panel says how much,
    for how many sequences, and that it does not grow with the context; a model without one says nothing of it."""
    from app.units import fmt_bytes

    assert window.open_path_sync(str(tiny_models["minimax-01"]))
    window.doc.set_settings(n_ctx=4096, n_parallel=2)
    est = window.doc.estimate
    rs = sum(d.recurrent for d in est.devices)
    assert rs == 3 * 32 * 32 * 4 * 4 * 2  # 3 lightning layers: 4 heads of 32 x 32 floats, 2 sequences
    text = window.kv_panel.info.text()
    assert f"recurrent state {fmt_bytes(rs)} (2 sequences, any context length)" in text, text
    assert window.open_path_sync(str(tiny_models["llama"]))
    assert "recurrent state" not in window.kv_panel.info.text()
