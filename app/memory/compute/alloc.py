"""``ggml_gallocr_alloc_graph_impl`` (``ggml/src/ggml-alloc.c``): each backend's compute buffer peak."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from .ggml import INPLACE, INPUT, NONE, OUTPUT, T


class _Alloc:
    """``ggml_dyn_tallocr`` with one chunk: best-fit over free blocks, the last block grows the buffer."""

    __slots__ = ("align", "blocks", "max_size")

    def __init__(self, align):
        self.align = align
        self.blocks = [[0, 1 << 62]]
        self.max_size = 0

    def alloc(self, size):
        a = self.align
        size = (size + a - 1) // a * a
        blocks = self.blocks
        best = -1
        best_size = 1 << 63
        for i in range(len(blocks) - 1):
            bs = blocks[i][1]
            if bs >= size and bs <= best_size:
                best = i
                best_size = bs
        if best == -1:
            best = len(blocks) - 1
        blk = blocks[best]
        addr = blk[0]
        blk[0] += size
        blk[1] -= size
        if blk[1] == 0:
            del blocks[best]
        if addr + size > self.max_size:
            self.max_size = addr + size
        return addr

    def free(self, addr, size):
        a = self.align
        _free_block(self.blocks, addr, (size + a - 1) // a * a)


#: An address is ``chunk << _CHUNK_SHIFT | offset``, so offsets within a chunk add up as plain integers.
_CHUNK_SHIFT = 56
#: ``GGML_VBUFFER_MAX_CHUNKS``: the last chunk is unbounded.
_MAX_CHUNKS = 16


class _ChunkedAlloc:
    """``ggml_dyn_tallocr`` for a buffer type with a largest buffer (``get_max_size``: Vulkan 1 GiB): chunks of at
    most that size, a new one when no chunk has room; the buffer is the sum of the chunks' high-water marks
    (``ggml_gallocr_reserve_n_size``), which can exceed the single-buffer peak."""

    __slots__ = ("align", "max_chunk", "chunks")

    def __init__(self, align, max_chunk):
        self.align = align
        self.max_chunk = max_chunk
        self.chunks: list[list] = []  # [free blocks [[offset, size], ...], max_size]

    @property
    def max_size(self):
        return sum(c[1] for c in self.chunks)

    def alloc(self, size):
        a = self.align
        size = (size + a - 1) // a * a
        best_c = best_b = -1
        for c, (blocks, _) in enumerate(self.chunks):  # best fit among all but each chunk's last block
            best_size = 1 << 63  # reset per chunk, as in ggml_dyn_tallocr_alloc: a later chunk's fit wins
            for i in range(len(blocks) - 1):
                bs = blocks[i][1]
                if bs >= size and bs <= best_size:
                    best_c, best_b, best_size = c, i, bs
        if best_b == -1:  # a chunk's last block, by how much of the reached size it reuses
            best_reuse = -(1 << 63)  # INT64_MIN
            for c, (blocks, high) in enumerate(self.chunks):
                if not blocks:
                    continue
                blk = blocks[-1]
                reuse = high - blk[0] - size
                better_reuse = best_reuse < 0 and reuse > best_reuse
                better_fit = reuse >= 0 and reuse < best_reuse
                if blk[1] >= size and (better_reuse or better_fit):
                    best_c, best_b, best_reuse = c, len(blocks) - 1, reuse
        if best_b == -1:  # ggml_dyn_tallocr_new_chunk
            cap = max(size, self.max_chunk) if len(self.chunks) < _MAX_CHUNKS - 1 else 1 << 62
            self.chunks.append([[[0, cap]], 0])
            best_c, best_b = len(self.chunks) - 1, 0
        chunk = self.chunks[best_c]
        blk = chunk[0][best_b]
        addr = blk[0]
        blk[0] += size
        blk[1] -= size
        if blk[1] == 0:
            del chunk[0][best_b]
        if addr + size > chunk[1]:
            chunk[1] = addr + size
        return best_c << _CHUNK_SHIFT | addr

    def free(self, addr, size):
        a = self.align
        size = (size + a - 1) // a * a
        c, addr = addr >> _CHUNK_SHIFT, addr & ((1 << _CHUNK_SHIFT) - 1)
        _free_block(self.chunks[c][0], addr, size)


def _free_block(blocks, addr, size):
    """``ggml_dyn_tallocr_free_bytes``: merge with a neighbouring free block or insert a new one, by address."""
    n = len(blocks)
    for i in range(n):
        blk = blocks[i]
        if blk[0] + blk[1] == addr:
            blk[1] += size
            if i < n - 1 and blk[0] + blk[1] == blocks[i + 1][0]:
                blk[1] += blocks[i + 1][1]
                del blocks[i + 1]
            return
        if addr + size == blk[0]:
            blk[0] = addr
            blk[1] += size
            if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == blk[0]:
                blocks[i - 1][1] += blk[1]
                del blocks[i]
            return
    i = 0
    while i < n and blocks[i][0] < addr:
        i += 1
    blocks.insert(i, [addr, size])


def allocate_graph(nodes, leafs, splits, n_copies, n_be, aligns, alloc_size, max_sizes=None, deps=None):
    """Run ``ggml_gallocr_alloc_graph_impl`` over the scheduler's graph copy; returns peak bytes per backend.

    ``max_sizes``: per backend, the largest buffer its buffer type allows (0: unlimited, one chunk).
    ``deps``: the backends' allocation dependencies (``alloc_deps`` of ``ggml_backend_sched_split_graph``, see
    :mod:`app.memory.compute.vk_optimize`): per node, the tensors to keep allocated until it is computed."""
    allocs = [
        _ChunkedAlloc(aligns[b], max_sizes[b]) if max_sizes and max_sizes[b] else _Alloc(aligns[b]) for b in range(n_be)
    ]
    # graph_copy (end of ggml_backend_sched_split_graph): per split, [input_dep, input_copy] per input, then its nodes
    gnodes = []
    for sbe, i0, i1, inputs in splits:
        for s, cp in inputs:
            dep = T(s.ty, s.ne, s.nb, NONE, [s], s.vs if s.vs is not None else s)
            dep.be = s.be
            gnodes.append(dep)
            gnodes.append(cp)
        if not deps:
            gnodes.extend(nodes[i0:i1])
            continue
        for t in nodes[i0:i1]:
            gnodes.append(t)
            keep = deps.get(t)
            # ggml_backend_sched_split_graph: after the node, GGML_OP_NONE views of the first kept tensor with up
            # to GGML_MAX_SRC kept tensors as sources, on the split's backend
            for k in range(0, len(keep) if keep else 0, 10):
                k0 = keep[k]
                dep = T(k0.ty, k0.ne, k0.nb, NONE, keep[k : k + 10], k0.vs if k0.vs is not None else k0)
                dep.be = sbe
                gnodes.append(dep)
    gleafs = []
    if n_copies > 1:
        # every graph input and every split input gets n_copies buffers, flagged input+output: never freed
        for t in leafs:
            if t.flags & INPUT:
                t.flags |= OUTPUT
                gleafs.append(t)
                for _ in range(1, n_copies):
                    cp = T(t.ty, t.ne, t.nb, NONE, [])
                    cp.size, cp.be, cp.flags = t.size, t.be, INPUT | OUTPUT
                    gleafs.append(cp)
        for _be, _i0, _i1, inputs in splits:
            for _s, cp in inputs:
                cp.flags |= INPUT | OUTPUT
                gleafs.append(cp)
                for _ in range(1, n_copies):
                    extra = T(cp.ty, cp.ne, cp.nb, NONE, [])
                    extra.size, extra.be, extra.flags = cp.size, cp.be, INPUT | OUTPUT
                    gleafs.append(extra)
    gleafs.extend(leafs)

    live: dict = {}  # what _place and _walk keep; nothing here reads it

    def allocate(t, be):
        # ggml_gallocr_allocate_node
        if t.wbe != -1 or t.vs is not None or t.addr != -1:
            return
        _place(t, be, allocs, alloc_size, aligns, live)

    for t in gleafs:
        if t.wbe == -1 and t.vs is None and t.addr == -1:  # weights and views take no compute memory
            allocate(t, t.be)
    for t in gnodes:
        if t.vs is not None and t.op != NONE:
            t.vs.nvw += 1
        if t.flags & INPUT:
            allocate(t, t.be)
        for s in t.cs:
            s.nch += 1
            if s.flags & INPUT:
                allocate(s, t.be)
    _walk(gnodes, 0, len(gnodes), allocs, alloc_size, aligns, live)
    return [a.max_size for a in allocs]


class Trace:
    """What earlier allocations of one built graph (with one set of buffer alignments) left behind, so that a run
    for a new placement replays only the layers that differ (:func:`allocate_traced`).

    A run is cut at checkpoints, one where each kept layer's nodes begin. At each, a record keeps the allocator's
    state (every backend's free blocks, and each tensor still allocated: offset, backend, bytes, views not done
    with, whether a later node reads it) and each segment's high-water mark per backend. A new run then

    - starts at the last checkpoint up to which it is the same run as a recorded one (same nodes and copies, same
      backends, same layers bound, same tensors read after it), from that run's state there;
    - jumps, where it reaches a recorded run's state at a checkpoint, over the layers it shares with that run from
      there, to that run's state where they end (when the tensors alive in between are read after them in both
      runs or in neither);
    - stops at the first checkpoint from which it is the same run as a recorded one and reaches the same state:
      the rest would repeat that run's allocations, so its high-water marks are the rest's.

    All three are exact: the allocator (``ggml_gallocr_alloc_graph_impl``) is a function of the node sequence, its
    sources and sizes and its state, and nothing else. During a drag the moved block changes one or two layers,
    so a replay runs those and the layer or two the state takes to come back to the recorded one.

    Runs are compared stretch by stretch (:func:`_units`): each stretch of a run (before the first checkpoint,
    then from each to the next) is numbered by what decides its allocations, so that "the same run up to, from,
    between" are comparisons of short lists of numbers."""

    __slots__ = ("records", "deps", "units", "next_unit", "states")

    def __init__(self):
        self.records: list[_Record] = []  # newest first
        self.deps: dict = {}  # copy -> its input_dep node, kept so that runs compare by identity
        self.units: dict[tuple, int] = {}  # what decides a stretch's allocations -> its number
        self.next_unit = 0
        self.states: dict[tuple, tuple] = {}  # an allocator state -> its one object (_snapshot)

    #: runs kept per built graph: a drag compares with the placements just before it. 12, not 6: the README
    #: bench's drag previews walk a median 17% of their nodes (p90 47%) where 6 records left 30% (p90 59%); a
    #: record is its node list and a snapshot per kept layer (about 0.1 MB for a 26-layer cut)
    KEEP = 12


#: recorded states tried for a start (:func:`allocate_traced`), the latest checkpoint first
_STARTS = 6
#: entries a trace's stretch and state tables hold before :func:`_prune` keeps only what its records hold
_TABLE = 2048


class _Record:
    __slots__ = ("gn", "u", "lbe", "ck", "marks", "snaps", "seg")


def _units(trace, nodes, splits, marks, fp, subs) -> list[int]:
    """The numbers of a run's stretches: before checkpoint 0, then from each checkpoint to the next (the last to the
    end). Two runs of one built graph with the same checkpoints (``marks``) make the same allocations in a stretch,
    from the same state, exactly where its numbers are equal. A stretch's number stands for the layer bound there
    (``fp``: its signature and weight types; none before checkpoint 0), its nodes' backends, the sources the
    scheduler replaced by copies there (node, source, copy), and the splits that start among its nodes with their
    input copies (a split's copies go with its first node's stretch, as :func:`allocate_traced` places the
    checkpoints). Copies compare by identity: the scheduler's copy pool and the trace keep each one alive, and each
    copy's input_dep node is one per copy. Numbers are not reused, so a record keeps its meaning when the table
    is pruned (:func:`_prune`)."""
    table = trace.units
    n = len(marks)
    bounds = [0, *marks, len(nodes)]
    parts: list[list] = [[] for _ in range(n + 1)]
    for _sbe, i0, _i1, inputs in splits:
        if inputs:  # a split without inputs adds no node
            parts[bisect_right(marks, i0)].append((i0, *[cp for _, cp in inputs]))
    nbe = bytes([t.be + 1 for t in nodes])
    sub_is = [i for i, _, _ in subs]
    sub_at = [bisect_left(sub_is, o) for o in bounds]
    out = []
    for j in range(n + 1):
        o, o2 = bounds[j], bounds[j + 1]
        key = (fp[j - 1] if j else None, nbe[o:o2], tuple(subs[sub_at[j] : sub_at[j + 1]]), tuple(parts[j]))
        u = table.get(key)
        if u is None:
            u = table[key] = trace.next_unit
            trace.next_unit += 1
        out.append(u)
    return out


def _common(a, b, i) -> int:
    """How many items ``a`` and ``b`` have equal from index ``i`` on, in a row."""
    n = min(len(a), len(b))
    j = i
    while j < n and a[j] == b[j]:
        j += 1
    return j - i


def _common_tail(a, b) -> int:
    """How many items ``a`` and ``b`` (of one length) have equal at their ends, in a row."""
    j = len(a)
    while j > 0 and a[j - 1] == b[j - 1]:
        j -= 1
    return len(a) - j


def allocate_traced(nodes, leafs, shared, splits, n_be, aligns, alloc_size, trace, marks, fp, subs):
    """:func:`allocate_graph` (one input copy, unchunked buffers, no allocation dependencies) that reuses the
    recorded runs of ``trace``: see :class:`Trace`. ``marks``: per kept layer, the index in ``nodes`` of its first
    node; ``shared``: the leafs no kept layer owns (inputs, global weights; the layers' weights are in ``fp``); ``fp``:
    per kept layer, what its binding depends on (signature, weight types); ``subs``: the scheduler's
    copies (:func:`app.memory.compute.schedule.schedule`'s ``subs``). Returns the same peaks as
    :func:`allocate_graph` (tests/memory/test_alloc_trace.py holds it to that on random placements)."""
    allocs = [_Alloc(aligns[b]) for b in range(n_be)]
    K = len(marks)
    _prune(trace)
    gn: list = []
    ck: list[int] = []
    deps = trace.deps
    mi = 0
    for _sbe, i0, i1, inputs in splits:
        while mi < K and marks[mi] < i1:
            o = marks[mi]
            ck.append(len(gn) if o == i0 else len(gn) + 2 * len(inputs) + o - i0)
            mi += 1
        for s, cp in inputs:
            dep = deps.get(cp)
            if dep is None:
                dep = deps[cp] = T(s.ty, s.ne, s.nb, NONE, [s], s.vs if s.vs is not None else s)
            else:
                dep.src = dep.cs = [s]
                dep.vs = s.vs if s.vs is not None else s
                dep.nch = dep.nvw = 0
                dep.addr = -1
            dep.be = s.be
            gn.append(dep)
            gn.append(cp)
        gn.extend(nodes[i0:i1])
    x = _Record()
    x.gn, x.ck, x.marks = gn, ck, marks
    x.u = _units(trace, nodes, splits, marks, fp, subs)
    x.lbe = bytes([t.be + 1 for t in shared])
    records = [r for r in trace.records if r.lbe == x.lbe and r.marks == marks]

    # where to start: the latest checkpoint up to which a recorded run is this one and whose state there suits this
    # run's later reads (_restore). The longest common prefix can fail that: where this run's kept layers leave a
    # device sooner (or later) than the recorded one's, the input copies made for that device are read after the
    # checkpoint in one run and not in the other. Then an earlier checkpoint, each recorded state tried once (runs
    # share their common prefix's snapshots) and at most _STARTS: before, a failed start walked the whole cut.
    prefix = []
    for r in records:
        k = min(_common(r.u, x.u, 0) - 1, K - 1)  # stretches 0..k alike: the same run up to checkpoint k
        if k >= 0:
            prefix.append((k, r))
    live: dict = {}
    seg: list = [None] * (K + 1)  # seg[0]: before checkpoint 0; seg[k]: between checkpoints k - 1 and k
    snaps: list = [None] * K
    start, src = -1, None
    counted = len(gn)  # the reads of gn[counted:] are counted
    tried: set[int] = set()
    for k in range(max((k for k, _ in prefix), default=-1), -1, -1):
        for kr, r in prefix:
            if kr < k or id(r.snaps[k]) in tried:
                continue
            tried.add(id(r.snaps[k]))
            if ck[k] < counted:
                _count(gn, ck[k], counted)
                counted = ck[k]
            if _restore(r, x, k, leafs, allocs, live):
                start, src = k, r
                break
        if src is not None or len(tried) >= _STARTS:
            break
    if src is None and counted < len(gn):
        for t in gn:  # undo the counts the tries made
            t.nch = t.nvw = 0
        for t in leafs:
            t.nch = t.nvw = 0
    if src is not None:
        seg[: start + 1] = src.seg[: start + 1]
        snaps[: start + 1] = src.snaps[: start + 1]
        k = start
    else:
        for t in leafs:
            if t.wbe == -1 and t.vs is None and t.addr == -1:
                _place(t, t.be, allocs, alloc_size, aligns, live)
        _count(gn, 0, len(gn))
        _walk(gn, 0, ck[0], allocs, alloc_size, aligns, live)
        k = 0
    # where to stop: per recorded run, the first checkpoint from which the two are one run
    tails = []
    for r in records:
        n = _common_tail(r.u, x.u)  # stretches K + 1 - n..K alike: the same run from checkpoint K - n on
        if n:
            tails.append((max(K - n, 0), r))
    end = None
    have = k if src is not None else -1  # the checkpoint whose snapshot came with the state
    while k < K:
        if k != have:
            seg[k] = [a.max_size for a in allocs]
            for a in allocs:
                a.max_size = 0
            snaps[k] = _snapshot(trace, allocs, live)
        for first, r in tails:
            if k >= first and r.snaps[k] is snaps[k]:
                end = r
                break
        if end is not None:
            break
        # a recorded run in this state here, whose next layers are these: take its state where they end (the run
        # this state came from differs from here on, or the start or the jump would have gone further)
        k2 = k
        for r in records:
            if r.snaps[k] is not snaps[k]:
                continue
            m = min(k + _common(r.u, x.u, k + 1), K - 1)  # stretches k + 1..m alike: the same run from k to m
            if m > k + 1 and _jump(r, x, k, m, allocs, live):
                seg[k + 1 : m + 1] = r.seg[k + 1 : m + 1]
                snaps[k + 1 : m + 1] = r.snaps[k + 1 : m + 1]
                k2 = m
                break
        if k2 != k:
            k = have = k2
            continue
        _walk(gn, ck[k], ck[k + 1] if k + 1 < K else len(gn), allocs, alloc_size, aligns, live)
        k += 1
    if end is not None:
        seg[k + 1 :] = end.seg[k + 1 :]
        snaps[k + 1 :] = end.snaps[k + 1 :]
    else:
        seg[K] = [a.max_size for a in allocs]
    x.snaps, x.seg = snaps, seg
    trace.records.insert(0, x)
    del trace.records[Trace.KEEP :]
    return [max(sg[b] for sg in seg) for b in range(n_be)]


def _jump(r, x, k, m, allocs, live) -> bool:
    """Run ``x`` is in ``r``'s state at checkpoint ``k`` and has its nodes up to checkpoint ``m``: take ``r``'s state
    at ``m`` where the nodes between read what ``r``'s did after them (each tensor alive there is read after ``m``
    in both or in neither, with the same views not done with), and count the nodes between as walked. False
    (nothing changed) otherwise."""
    c, c2 = x.ck[k], x.ck[m]
    dec: dict = {}
    for t in x.gn[c:c2]:
        for p in t.cs:
            dec[p] = dec.get(p, 0) + 1
    rel: dict = {}  # views done with between: their sources' counts
    for p, d in dec.items():
        vs = p.vs
        if vs is not None and p.nch == d and p.nvw == 0:
            rel[vs] = rel.get(vs, 0) + 1
    blocks, state = r.snaps[m]
    for t in (*live, *x.gn[c:c2]):
        if t.wbe != -1 or (t.vs is not None and t.vs.wbe != -1):
            continue
        nch, nvw = t.nch - dec.get(t, 0), t.nvw - rel.get(t, 0)
        v = state.get(t)
        if v is None:
            if nch > 0 or nvw > 0:
                return False
        elif v[4] != (nch > 0) or v[3] != nvw:
            return False
    for t in state:
        if t not in live and t not in dec and t.addr == -1 and not _made_in(t, x.gn, c, c2):
            return False
    for p, d in dec.items():
        p.nch -= d
    for vs, d in rel.items():
        vs.nvw -= d
    for t in live:
        t.addr = -1
    live.clear()
    _load(blocks, state, allocs, live)
    return True


def _load(blocks, state, allocs, live) -> None:
    """Give the allocators a snapshot's free blocks (high-water marks from zero) and its tensors their places."""
    for a, b in zip(allocs, blocks):
        a.blocks = [list(x) for x in b]
        a.max_size = 0
    for t, v in state.items():
        t.addr, t.abe, t.asz = v[0], v[1], v[2]
        live[t] = None


def _made_in(t, gn, c, c2) -> bool:
    """``t`` is one of ``gn[c:c2]`` (rare: a tensor alive after a segment that no node of it reads)."""
    return any(u is t for u in gn[c:c2])


def _snapshot(trace, allocs, live):
    """The allocator's state: every backend's free blocks, and each allocated tensor's allocation, views not done
    with and whether a later node reads it. One object per state in the trace (:attr:`Trace.states`), so that
    runs compare states by identity: a drag's replay compares each state it reaches with a dozen records'."""
    state = {t: (t.addr, t.abe, t.asz, t.nvw, t.nch > 0) for t in live}
    blocks = tuple(tuple(tuple(b) for b in a.blocks) for a in allocs)
    table = trace.states
    key = (blocks, frozenset(state.items()))
    got = table.get(key)
    if got is None:
        got = table[key] = (blocks, state)
    return got


def _prune(trace) -> None:
    """Keep the trace's tables to what its records hold, once they outgrow :data:`_TABLE` entries: every new
    stretch and state of a run adds one, and a long drag session would hold them all. Numbers are not reused, so
    a stretch met again after this gets a new one (a missed match, never a false one)."""
    if len(trace.units) > _TABLE:
        held = {u for r in trace.records for u in r.u}
        trace.units = {key: u for key, u in trace.units.items() if u in held}
    if len(trace.states) > _TABLE:
        held_ids = {id(s) for r in trace.records for s in r.snaps}
        trace.states = {key: s for key, s in trace.states.items() if id(s) in held_ids}


def _restore(r, x, k, leafs, allocs, live) -> bool:
    """Put the allocator in the state run ``r`` had at checkpoint ``k``, for run ``x`` whose nodes before it are
    ``r``'s and whose reads from there on are counted (:func:`_count`): False (nothing changed that matters) where
    ``x`` reads after ``k`` another set of the tensors made before it than ``r`` did (a tensor ``r`` freed before
    ``k`` would be held in ``x``), or where a view of one was not done with (its count depends on what comes
    after)."""
    gn, c = x.gn, x.ck[k]
    blocks, state = r.snaps[k]
    if any(v[3] for v in state.values()):
        return False
    for t in gn[:c]:
        if t.nch and not _read_before(t, state):
            return False
    for t in leafs:
        if t.nch and not _read_before(t, state):
            return False
    for t, v in state.items():
        if v[4] and not t.nch:
            return False
    _load(blocks, state, allocs, live)
    return True


def _read_before(t, state) -> bool:
    """A tensor made before the checkpoint and read after it: fine where the recorded run read it after it too
    (weights and views of them take no compute memory either way; another view is not taken)."""
    if t.wbe != -1 or (t.vs is not None and t.vs.wbe != -1):
        return True
    v = state.get(t)
    return v is not None and v[4]


def _count(gn, c, c2):
    """The allocator's first pass over ``gn[c:c2]``: children and views of every tensor."""
    for t in gn[c:c2] if c or c2 < len(gn) else gn:
        if t.vs is not None and t.op != NONE:
            t.vs.nvw += 1
        for s in t.cs:
            s.nch += 1


def _place(t, be, allocs, alloc_size, aligns, live):
    """``ggml_gallocr_allocate_node`` (:func:`allocate_graph`'s ``allocate``), keeping ``live`` up to date."""
    if t.op in INPLACE:
        for p in t.cs:
            if (
                p.addr != -1
                and p.nch == 1
                and p.nvw == 0
                and not p.flags & OUTPUT
                and p.ty == t.ty
                and p.ne == t.ne
                and p.nb == t.nb
            ):
                pbe = p.abe
                al = aligns[pbe]
                ps = (p.asz + al - 1) // al * al
                tsize = alloc_size(t, pbe)
                ts_ = (tsize + al - 1) // al * al
                if ps > ts_:
                    allocs[pbe].free(p.addr + ts_, ps - ts_)
                t.addr, t.abe, t.asz = p.addr, pbe, tsize
                p.addr = -1
                del live[p]
                live[t] = None
                return
    size = alloc_size(t, be)
    t.addr = allocs[be].alloc(size)
    t.abe = be
    t.asz = size
    live[t] = None


def _walk(gn, i0, i1, allocs, alloc_size, aligns, live):
    """:func:`allocate_graph`'s second pass over ``gn[i0:i1]``, keeping ``live`` up to date."""
    for i in range(i0, i1):
        t = gn[i]
        src = t.cs
        be = t.be
        for p in src:
            if p.addr == -1 and p.wbe == -1 and p.vs is None:
                _place(p, be, allocs, alloc_size, aligns, live)
        if t.vs is None and t.addr == -1 and t.wbe == -1:
            if t.op in INPLACE:
                _place(t, be, allocs, alloc_size, aligns, live)
            else:  # _place's other way, inline: most nodes
                size = alloc_size(t, be)
                t.addr = allocs[be].alloc(size)
                t.abe = be
                t.asz = size
                live[t] = None
        for p in src:
            n = p.nch - 1
            p.nch = n
            if n or p.nvw:
                continue
            vs = p.vs
            if vs is not None:
                vs.nvw -= 1
                if vs.nvw == 0 and vs.nch == 0 and not vs.flags & OUTPUT and vs.addr != -1:
                    allocs[vs.abe].free(vs.addr, vs.asz)
                    vs.addr = -1
                    del live[vs]
            elif not p.flags & OUTPUT and p.addr != -1:
                allocs[p.abe].free(p.addr, p.asz)
                p.addr = -1
                del live[p]
