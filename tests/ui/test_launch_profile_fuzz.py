"""Fuzz the two new input doors of the launch profile: the extra-arguments box and a plan's ``launch``
section. Every input ends in a result or a typed error (LaunchArgsError, PlanError) within the fuzz budget;
what is accepted round-trips through the plan and lands in the command after the placement."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import LayerdeckError
from app.placement.plan_file import LaunchProfile, PlanError, check_launch
from app.session import LaunchArgsError, parse_extra_args
from tests.fuzz.harness import within_budget

FUZZ = settings(max_examples=80, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = st.sampled_from(["--temp", "0.7", "--jinja", "-ngl", "99", "--port", "'", '"', "\\", "$(rm -rf /)", "`x`",
                         "--chat-template", "a b", "--alias=x", "-m", "--rpc", ";", "|", "&&", "\n", "\t", "--api-key",
                         "--bogus", "-c", "4096", "--host", "=", "${HOME}", "é", "\x00", "#", "--top-k", "20"])


@FUZZ
@given(st.one_of(st.lists(WORDS, max_size=12).map(" ".join), st.text(max_size=300)))
def test_extra_arguments_box(text):
    with within_budget("extra arguments"):
        try:
            argv = parse_extra_args(text)
        except LaunchArgsError as exc:
            assert str(exc)
            return
    assert all(isinstance(a, str) and "\x00" not in a for a in argv)
    prof = LaunchProfile(extra=argv)
    assert check_launch(json.loads(json.dumps(prof.to_dict()))) == prof  # what is accepted saves and loads


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=30),
                       lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                                    max_size=5), max_leaves=20)
SECTIONS = st.one_of(
    JSONISH,
    st.fixed_dictionaries({}, optional={"port": JSONISH | st.integers(-5, 70000), "host": JSONISH | st.sampled_from(
        ["127.0.0.1", "0.0.0.0", "::1", "a b", "", "x" * 300]), "api_key": JSONISH | st.sampled_from(
        ["k", "with space", "é", ""]), "extra": st.lists(JSONISH | st.text(max_size=20), max_size=6)}))


@FUZZ
@given(SECTIONS)
def test_plan_launch_section(section):
    with within_budget("launch section"):
        try:
            prof = check_launch(section)
        except PlanError as exc:
            assert isinstance(exc, LayerdeckError) and (exc.where or "").startswith("launch")
            return
    assert prof.port is None or 1 <= prof.port <= 65535
    assert all(isinstance(a, str) for a in prof.extra)
    assert check_launch(prof.to_dict()) == prof
