"""The window's garbage-collector settings (app.gcpolicy): fewer young collections, and a collection while the
board is still that freezes what survives, walks only what is new, and walks everything again (freeing frozen
garbage) once the frozen set has grown by a quarter."""

from __future__ import annotations

import gc
import weakref

from app import gcpolicy


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> tuple[_Node, weakref.ref]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # freed only by the cyclic collector
    return a, weakref.ref(b)


def test_tune_raises_the_young_threshold_only(collector_state):
    gc.set_threshold(700, 11, 12)
    gcpolicy.tune()
    assert gc.get_threshold() == (gcpolicy.YOUNG_THRESHOLD, 11, 12)
    assert gcpolicy.YOUNG_THRESHOLD > 700


def test_settle_freezes_survivors_walks_the_new_and_rewalks_all_after_growth(collector_state):
    a, alive = _cycle()
    ms = gcpolicy.settle()  # the first: a full walk
    frozen = gc.get_freeze_count()
    assert ms >= 0 and frozen > 0 and gcpolicy._after_full == frozen
    assert not any(o is a for o in gc.get_objects())  # frozen: out of the generations a collection walks
    del a
    gc.collect()
    assert alive() is not None  # garbage now, but frozen: a collection does not see it
    c, fresh = _cycle()
    del c
    gcpolicy.settle()  # little growth: only what is new is walked
    assert fresh() is None  # garbage made between two settles is freed by the second
    assert alive() is not None and gcpolicy._after_full == frozen  # the frozen garbage waits for a full walk
    grown = [[] for _ in range(int(frozen * gcpolicy.REWALK_GROWTH) + 1000)]  # tracked objects: the set grows
    gcpolicy.settle()  # frees nothing frozen yet: the growth is seen at the start of the next call
    assert alive() is not None and gc.get_freeze_count() > frozen * (1 + gcpolicy.REWALK_GROWTH)
    gcpolicy.settle()  # grown by more than a quarter: unfreeze, walk everything
    assert alive() is None and gcpolicy._after_full == gc.get_freeze_count()
    assert len(grown) > 1000


def test_reset_makes_the_next_settle_walk_everything(collector_state):
    """A replaced model's objects go all at once; the growth rule cannot see a set that shrinks, so the window
    resets and the next settle unfreezes and walks everything."""
    a, alive = _cycle()
    gcpolicy.settle()
    del a
    gcpolicy.settle()
    assert alive() is not None  # frozen garbage, no growth: still there
    gcpolicy.reset()
    gcpolicy.settle()
    assert alive() is None and gcpolicy._after_full == gc.get_freeze_count()
