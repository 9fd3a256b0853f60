"""Which layers of a long model to simulate: repeated runs and neighbourhoods give the same peaks."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

_KEEP = 2  # periods of a repeating run simulated before jumping to its last period
_KEEP_HOOD = 1  # copies of a repeated neighbourhood (``hood`` layers either side and its own) simulated
_MAX_PERIOD = 8


def compress(sigs: Sequence[Hashable], hood: int = 1) -> list[int]:
    """Indices of the layers to build.

    Periodic runs are cut to ``_KEEP`` periods plus their last one. Then any layer whose neighbourhood (the
    signatures of the ``hood`` kept layers either side and its own) has already been kept ``_KEEP_HOOD`` times
    is dropped too, so scattered overrides (every other layer's experts elsewhere, 40 -ot patterns) do not make
    the graph 94 layers long: each backend's peak depends on a layer's own tensors and the copies at its
    boundaries, not on how many times the same neighbourhood repeats. One layer either side (``hood`` 1) is
    enough for every model but the hybrids with an attention layer every 4th, which get 2 (core.py; 2 for all
    would cost 60% more estimate time): for qwen3next at -ncmoe 40 of 48, dropping one of the three recurrent
    layers between the last two attention layers lost a 28 MiB peak. Checked against the uncut graph on random
    placements of full-size models and on every -ncmoe split of the qwen35/qwen3next hybrids
    (tests/memory/test_compute.py allows 4 KiB; seen: 32 bytes).
    """
    n = len(sigs)
    keep = []
    s = 0
    while s < n:
        best_p, best_e = 0, s + 1
        for p in range(1, _MAX_PERIOD + 1):
            e = s + p
            while e < n and sigs[e] == sigs[e - p]:
                e += 1
            if e - s >= (_KEEP + 2) * p and e > best_e:
                best_p, best_e = p, e
        if best_p == 0:
            keep.append(s)
            s += 1
            continue
        p = best_p
        keep.extend(range(s, s + _KEEP * p))
        m = (best_e - s) // p - 1
        t0 = s + m * p
        keep.extend(range(t0, best_e))
        s = best_e
    seen: dict[tuple, int] = {}
    out = []
    kept = [sigs[il] for il in keep]
    edge = max(2, hood)
    last = len(keep) - edge
    for k, il in enumerate(keep):
        if k < edge or k >= last:
            out.append(il)
            continue
        key = tuple(kept[k - hood : k + hood + 1])
        c = seen.get(key, 0)
        if c >= _KEEP_HOOD:
            continue
        seen[key] = c + 1
        out.append(il)
    return out


#: steps of 2 up to 32 layers: a drag's kept counts (20-26 for the README bench's 94-layer model with 40 -ot
#: patterns) then cost at most one extra layer each, and a replay that misses the cache is what the p95 pays;
#: each count's graph is built once (16-30 ms) and kept (core.py ``_GRAPHS``)
_BUCKETS = (8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 36, 40, 44, 48, 56, 64, 80, 96, 128, 160, 192, 256)


def pad_layers(keep: list[int], n: int, at_least: int = 0) -> list[int]:
    """Add skipped layers until the count reaches a bucket size (the first of at least ``at_least`` layers).

    Simulating a layer that compression skipped changes nothing (its neighbourhood already appears), but
    keeping the count to a few sizes lets one built graph serve many placements: during a drag the kept set
    changes with every move, and rebuilding the graph costs far more than simulating a few more layers.
    """
    target = next((b for b in _BUCKETS if b >= max(len(keep), at_least)), n)
    if target >= n:
        return list(range(n))
    kept = set(keep)
    extra = [il for il in range(n) if il not in kept][: target - len(keep)]
    return sorted(kept.union(extra))
