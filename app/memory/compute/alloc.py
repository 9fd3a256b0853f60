"""``ggml_gallocr_alloc_graph_impl`` (``ggml/src/ggml-alloc.c``): each backend's compute buffer peak."""

from __future__ import annotations

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

    def allocate(t, be):
        # ggml_gallocr_allocate_node
        if t.wbe != -1 or t.vs is not None or t.addr != -1:
            return
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
                    return
        size = alloc_size(t, be)
        t.addr = allocs[be].alloc(size)
        t.abe = be
        t.asz = size

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
    # the checks ``allocate`` starts with, inlined for the sources and nodes it would return on at once
    # (weights, views, what is already placed): most sources of a node are one of those
    for t in gnodes:
        src = t.cs
        for p in src:
            if p.addr == -1 and p.wbe == -1 and p.vs is None:
                allocate(p, t.be)
        if t.vs is None and t.addr == -1 and t.wbe == -1:  # views first out: 4 of 10 nodes
            allocate(t, t.be)
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
            elif not p.flags & OUTPUT and p.addr != -1:
                allocs[p.abe].free(p.addr, p.asz)
                p.addr = -1
    return [a.max_size for a in allocs]
