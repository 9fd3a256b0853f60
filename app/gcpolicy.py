"""When the interpreter's cyclic garbage collector runs, for a window that answers a drag within milliseconds.

A session holds 100,000-250,000 long-lived objects: the model's tensor table, and the built compute graphs with
their schedules and allocator traces. With CPython's default settings, a full collection walks all of them at a
moment of the counts' choosing, which can be in the middle of a drag. That took 20-22 ms in the benchmark's
process, and 40-115 ms in the window on the same model (the full walks below). Young
collections came every 700 allocations and walked the per-preview containers again (~0.3 ms each, 30 of them in
200 previews).

Two calls move that work to moments when nobody waits. The GUI makes them; the CLI and the library keep Python's
defaults.

- :func:`tune` raises the young generation's threshold, once, at start-up.
- :func:`settle` runs a collection once the board is still and freezes what survives, so later collections skip
  it. Its cost is that of the objects made since the last call. Once the frozen set has grown by a quarter since
  the last full walk, it unfreezes everything first and walks it all (CPython's own rule for its oldest
  generation), so garbage made frozen (an evicted graph) stays under a quarter of the set the last full walk
  left.
- :func:`reset` makes the next settle a full walk: the window calls it when it replaces the model, whose objects
  go all at once (a growth rule cannot see a set that shrinks: a small model opened after a large one would
  keep the large one's frozen cycles).

Measured by ``benchmarks/bench_estimator.py`` (200 drag previews of the 94-layer model, 4 runs each way):
under the defaults, one full collection in the loop at 20-22 ms, and the worst preview at 20-22 ms. With both
calls, no collection over 3 ms, and the worst preview at 5.0-5.6 ms. The window on that model, 12 edits: the first
settle took 38-49 ms (120,000 objects), each one after an edit 14-27 ms, and a full walk 87-114 ms (200,000 and
256,000 objects), each at a moment the board was still.
"""

from __future__ import annotations

import gc
import time

#: young-generation threshold (CPython's default: 700). 10,000: 2 young collections in the benchmark's 200 previews
#: instead of 30, with the time in collections 10.5 -> 3.5 ms
YOUNG_THRESHOLD = 10_000


def tune() -> None:
    """Collect the young generation every :data:`YOUNG_THRESHOLD` allocations (the older two keep their
    settings)."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


#: a full walk, unfreezing first, once the frozen set has grown by this share since the last one
REWALK_GROWTH = 0.25
_after_full = 0  # objects frozen by the last full walk


def reset() -> None:
    """The next :func:`settle` walks everything, what was frozen included."""
    global _after_full
    _after_full = 0


def settle() -> float:
    """A collection now, with everything that survives it frozen out of later ones; a full walk of everything
    (what was frozen included, so frozen garbage is freed) on the first call and whenever the frozen set has
    grown by :data:`REWALK_GROWTH` since the last full walk. Returns the milliseconds it took."""
    global _after_full
    t0 = time.perf_counter()
    if not _after_full or gc.get_freeze_count() > _after_full * (1 + REWALK_GROWTH):
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _after_full = gc.get_freeze_count()
    else:
        gc.collect()  # the frozen are skipped: this walks what was made since the last call
        gc.freeze()
    return (time.perf_counter() - t0) * 1000
