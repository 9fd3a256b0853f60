"""The Qt adapter: session events become the right signals, and nothing else happens in it."""

from __future__ import annotations

import pytest

from app.lanes import CPU
from app.memory.device_adapter import parse_device_spec
from app.model.demo import load_demo
from app.session import Change
from app.units import GiB

pytestmark = pytest.mark.gui


@pytest.fixture
def doc(qapp):
    from ui.document import Document

    d = Document(load_demo(), parse_device_spec("CUDA0=24576,CUDA1=12288"), host_capacity=64 * GiB, margin=GiB)
    yield d
    d.deleteLater()


def _record(doc):
    got: dict[str, list] = {"changed": [], "preview": [], "opinion": [], "message": [], "events": []}
    doc.changed.connect(lambda: got["changed"].append(1))
    doc.preview_changed.connect(lambda est: got["preview"].append(est))
    doc.opinion_changed.connect(lambda: got["opinion"].append(1))
    doc.message.connect(lambda text: got["message"].append(text))
    doc.session_changed.connect(lambda ev: got["events"].append(ev.changes))
    return got


def test_an_edit_emits_changed_and_a_message(doc):
    got = _record(doc)
    assert doc.move(["10:experts"], CPU)
    assert got["changed"] == [1] and got["message"] == ["Move 10:experts to CPU"]
    assert got["events"][0] & Change.PLACEMENT and not got["preview"] and not got["opinion"]


def test_preview_signals_carry_the_estimate_then_none(doc):
    got = _record(doc)
    assert doc.preview(["11:experts"], CPU) is None
    assert got["preview"][-1] is not None and doc.preview_decode is not None
    assert doc.preview(["11:attn"], CPU)  # refused: the reason comes back, the gauges get no preview
    assert got["preview"][-1] is None
    doc.preview([], None)
    assert got["preview"][-1] is None and doc.preview_decode is None and not got["changed"]


def test_saving_changes_only_the_history(doc, tmp_path):
    doc.set_settings(n_ctx=4096)
    got = _record(doc)
    doc.save_plan(tmp_path / "p.layerdeck.json")
    assert got["events"] == [Change.HISTORY] and got["changed"] == [1] and not doc.dirty


def test_an_opinion_is_cleared_by_the_next_edit(doc):
    got = _record(doc)
    doc.set_opinion(object())
    assert got["opinion"] == [1]
    doc.move(["12:experts"], CPU)
    assert got["opinion"] == [1, 1] and doc.opinion is None


def test_reads_and_edits_go_to_the_session(doc):
    assert doc.placement is doc.session.placement and doc.estimate is doc.session.estimate
    with pytest.raises(AttributeError):
        doc.no_such_thing  # noqa: B018 - the adapter must not invent attributes


def test_the_comparison_tab_shows_percent_once(qapp):
    """Regression: 9.6 logged vs 9.6 predicted showed -3.4 %, 32.2 vs 41.1 showed +2751.5 % (x100 twice)."""
    from types import SimpleNamespace

    from ui.launch_panel import ComparisonTab

    est = SimpleNamespace(devices=[SimpleNamespace(name="RPC0")],
                          device=lambda name: SimpleNamespace(model=int(32.2 * (1 << 20)), context=0, compute=0,
                                                              output=0, total=int(32.2 * (1 << 20))))
    logged = {"RPC0": SimpleNamespace(model=41.1, context=0.0, compute=0.0, output=0.0, total=41.1)}
    tab = ComparisonTab()
    tab.fill(est, logged, {})
    cells = {tab.item(r, 1).text(): tab.item(r, 5).text() for r in range(tab.rowCount())}
    assert cells["model"] == "+27.6%" and cells["total"] == "+27.6%"


def test_refused_settings_say_why_and_the_views_show_what_stands(doc):
    got = _record(doc)
    before = doc.placement.settings
    assert not doc.set_settings(type_v="q8_0", flash_attn="off")
    assert doc.placement.settings == before
    assert len(got["message"]) == 1 and "needs flash attention" in got["message"][0]
    assert got["changed"] == [1]  # the panel redraws the settings that stand
