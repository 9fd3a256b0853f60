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
