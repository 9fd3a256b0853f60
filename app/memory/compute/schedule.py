"""``ggml_backend_sched_split_graph`` (``ggml/src/ggml-backend.cpp``): a backend per op, splits, input copies."""

from __future__ import annotations

from ..backends import vulkan_supports
from .ggml import INPUT, NONE, VIEW_OPS, T, nbytes


def _offload_batch(t):
    """``get_op_batch_size`` of the CUDA backend (``ggml-cuda.cu``)."""
    op = t.op
    if op == "GET_ROWS":
        return 0
    if op == "MUL_MAT":
        return t.ne[1]
    if op in ("MUL_MAT_ID", "ROPE"):
        return t.ne[2]
    return t.ne[1] * t.ne[2] * t.ne[3]


def _tensor_bytes(t) -> int:
    """``ggml_nbytes``; a weight's view (a reshape of ``ssm_conv1d`` or ``ssm_a``) has its share of the weight's
    bytes (weights carry no strides here, so a view counts its elements' share of the whole)."""
    if t.ty != "w":
        return nbytes(t.ty, t.ne, t.nb)
    vs = t.vs
    if vs is None or t.op == NONE:
        return t.size
    n, nw = _n(t.ne), _n(vs.ne)
    return vs.size if n == nw or nw == 0 else vs.size * n // nw


def _n(ne) -> int:
    n = 1
    for x in ne:
        n *= x
    return n


def supports_op(t, be, limits) -> bool:
    """``ggml_backend_supports_op`` as far as memory depends on it. ``limits[be]`` is (largest tensor or None,
    backend name, ops the device refuses for its features: :attr:`app.lanes.Lane.refused_ops`): a backend with a
    tensor size limit (Vulkan: ``ggml_backend_vk_device_supports_op`` refuses any source or result above it)
    refuses the op, and Vulkan refuses some ops by shape (:func:`app.memory.backends.vulkan_supports`)."""
    lim, kind, refused = limits[be] if limits else (None, None, ())
    if kind == "vulkan" and (t.op in refused or not vulkan_supports(t.op, t, t.src)):
        return False
    if lim is None:
        return True
    if _tensor_bytes(t) > lim:
        return False
    return all(s is None or _tensor_bytes(s) <= lim for s in t.src)


def weight_users(nodes):
    """The nodes pass 1 can give a backend (:func:`_be_from_cur` returns -1 for every other): inputs, nodes that
    view a leaf (a weight, or a KV/recurrent cache whose backend is its layer's: CPY and SET_ROWS into a cache
    are such views) and ops with a weight source. A property of the graph alone, so a built graph keeps it."""
    return [
        t
        for t in nodes
        if t.fl0 & INPUT
        or t.ty == "w"
        or (t.vs is not None and t.vs.op == NONE)
        or any(s is not None and s.ty == "w" and s.op == NONE for s in t.src)
    ]


def refuses_nothing(limits) -> bool:
    """No backend of ``limits`` (see :func:`supports_op`) refuses an op: no tensor size limit, no Vulkan device."""
    return all(lim is None and kind != "vulkan" for lim, kind, _ in limits)


def schedule(
    nodes,
    leafs,
    cpu,
    offload_to,
    limits=None,
    users=None,
    forced=(),
    backends_only=False,
    wanted=None,
    pool=None,
    subs=None,
    real=None,
    shape=None,
):
    """Backend per node and the splits with their inputs (``ggml_backend_sched_split_graph`` passes 1-5).

    ``offload_to``: backends whose ``offload_op`` accepts ops on host weights (CUDA-like GPUs), in priority order.
    ``limits``: per backend, (the largest tensor its ops may touch or None, its backend name), see
    :func:`supports_op`. ``users``: :func:`weight_users` of ``nodes`` when the caller keeps it, with ``forced``
    the nodes whose backend is forced (``force``); pass 1 then visits only those.
    Returns ``splits`` as a list of (backend, first node index, end index, [(input, its copy)]); nodes get
    ``be`` and, where a source lives on another backend, ``cs`` with the copy in its place. ``backends_only``:
    stop after pass 4 (every node's backend, no splits: resolve_fused_ops' probe reads no more). ``wanted``:
    with ``backends_only``, (the nodes whose backend is read, each node's index in ``nodes``): where no backend
    refuses an op, the passes are not run, only their result for these nodes (:func:`_probed`: it reads the nodes'
    pins and bound weights, not what an earlier run left in them).
    ``pool``: the input copies of earlier calls on the same graph, by key: a copy is taken from it (its per-run
    state reset) rather than made anew, so two runs that copy the same tensor to the same backend hold the same
    object (:class:`app.memory.compute.alloc.Trace` compares runs by identity). ``subs``: a list that gets
    (node index, source index, copy) for each source the scheduler replaced by a copy, in node order. ``real``:
    the nodes that are not views (:data:`VIEW_OPS`), when the caller keeps them; ``shape``: the graph's
    :func:`shape`, when the caller keeps it (passes 4 and 5 then visit only the nodes they can change).
    """
    if limits is not None and refuses_nothing(limits):
        limits = None
    if backends_only and wanted is not None and limits is None:
        _probed(nodes, cpu, offload_to, users, *wanted)
        return []
    # pass 1: pre-allocated tensors, graph inputs, ops on weights
    for t in leafs:
        if t.be == -1:
            t.be = t.wbe if t.wbe != -1 else _be_from_cur(t, cpu, offload_to, limits)
    if shape is not None and users is not None and limits is None:
        # an op on a weight (most users): _be_from_cur's answer from the weight the graph alone names (shape[3])
        for t, w in shape[3]:
            if t.force != -1:
                t.be = t.force
            elif t.be == -1:
                b = w.wbe if w is not None and t.wbe == -1 else -1
                if b == -1 or (b == cpu and w.host and offload_to):
                    b = _be_from_cur(t, cpu, offload_to)
                t.be = b
    else:
        for t in nodes if users is None else users:
            if t.force != -1:
                t.be = t.force
            elif t.be == -1:
                t.be = _be_from_cur(t, cpu, offload_to, limits)
    for t in forced:
        t.be = t.force
    # pass 2: expand gpu down, gpu up, rest down, rest up; an op the backend does not support stays unassigned
    # (ggml_backend_sched_set_if_supported)
    if real is None:
        real = [t for t in nodes if t.op not in VIEW_OPS]
    if limits is None:
        _expand_all(real, cpu)
    else:
        cur = -1
        for t in real:
            if t.be != -1:
                cur = -1 if t.be == cpu else t.be
            elif cur != -1 and supports_op(t, cur, limits):
                t.be = cur
        cur = -1
        for t in reversed(real):
            if t.be != -1:
                cur = -1 if t.be == cpu else t.be
            elif cur != -1 and supports_op(t, cur, limits):
                t.be = cur
        cur = -1
        for t in real:
            if t.be != -1:
                cur = t.be
            elif cur != -1 and supports_op(t, cur, limits):
                t.be = cur
        cur = -1
        for t in reversed(real):
            if t.be != -1:
                cur = t.be
            elif cur != -1 and supports_op(t, cur, limits):
                t.be = cur
        # pass 3: nothing to upgrade (every backend has its own buffer type); a node left unassigned because a
        # backend refused it goes to the backend that supports it with the most inputs already in its buffers
        for t in real:
            if t.be == -1:
                best = -1
                for b in range(cpu + 1):
                    if not supports_op(t, b, limits):
                        continue
                    n = sum(1 for s in t.src if s is not None and _in_buffer_of(s, b, cpu))
                    if n > best:
                        best, t.be = n, b
    # pass 4 (views follow their source, sources without a backend follow their user) and, node by node after it,
    # pass 5 (splits and the copies of inputs that live on another backend): pass 4 gives a node and its sources
    # their last backends at the node (sources come before their users), and pass 5 reads no later node
    splits = []
    copies = {}  # (src, backend) -> copy tensor (tensor_id_copy: one per backend for the whole graph)
    cur_be = None
    inputs = None
    start = 0
    if shape is not None and real and real[0].be != -1 and all(t.be != -1 for t in shape[2]):
        # every non-view node has a backend (pass 2 leaves none where any has one) and so does every source that
        # is not a node: pass 4 gives views their source's, and changes nothing else (a node's sources come
        # before it, so each already has its backend); pass 5 then reads the non-view nodes only (a view adds
        # nothing to a split): what the loop below does, without visiting each view's sources twice
        for t in shape[1]:
            if t.be == -1:
                vs = t.vs
                if vs is not None and vs.be != -1:
                    t.be = vs.be
                else:
                    t.be = cpu if limits is None else _first_supporting(t, cpu, limits)
        if backends_only:
            return splits
        walk = shape[0]
    else:
        walk = None
    for i, t in enumerate(nodes) if walk is None else walk:
        be = t.be
        src = t.src
        if walk is None:
            if be == -1 and t.vs is not None:
                be = t.be = t.vs.be
            for s in src:
                if s.be == -1:
                    s.be = s.vs.be if s.vs is not None else be
            if be == -1:
                be = t.be = cpu if limits is None else _first_supporting(t, cpu, limits)
            if backends_only:
                continue
        if be == cur_be:  # most nodes: the split's backend, every source already on it (nothing below applies)
            for s in src:
                if s.be != be:
                    break
            else:
                continue
        if t.op in VIEW_OPS:
            continue
        if cur_be is None:
            cur_be, inputs, start = be, [], 0
        need_new = False
        if be == cur_be and inputs:
            for s in t.src:
                if s.wbe != -1 and s.op == NONE and s.ty == "w" and s.be != cur_be:
                    need_new = True
                    break
        if be != cur_be or need_new:
            splits.append((cur_be, start, i, inputs))
            cur_be, inputs, start = be, [], i
        for j, s in enumerate(src):
            if s.be != cur_be:
                key = (s, cur_be)
                if s.op == NONE and s.ty == "w" and s.wbe != -1:
                    # a weight is one tensor per name and buffer: the per-layer references of a TENSOR_DUPLICATED
                    # one (builder.layer_copy) on one device share its copy, so a later split does not list it again
                    key = (getattr(s, "name", s), s.wbe, cur_be)
                cp = copies.get(key)
                if cp is None:
                    cp = pool.get(key) if pool is not None else None
                    if cp is None:
                        # ggml_dup_tensor_layout: same shape and strides, so a strided view costs its whole span
                        cp = T(s.ty, s.ne, s.nb, NONE, [])
                        cp.name = "copy:" + s.name
                        if pool is not None:
                            pool[key] = cp
                        cp.size = _tensor_bytes(s)
                    else:
                        cp.nch = cp.nvw = 0
                        cp.addr = -1
                        cp.flags = 0
                        if s.ty == "w":  # a weight's bytes come with its binding; a node's are its own
                            cp.size = _tensor_bytes(s)
                    cp.be = cur_be
                    copies[key] = cp
                    inputs.append((s, cp))
                if t.cs is src:
                    t.cs = list(src)
                t.cs[j] = cp
                if subs is not None:
                    subs.append((i, j, cp))
    if cur_be is not None and not backends_only:
        splits.append((cur_be, start, len(nodes), inputs))
    return splits


def shape(nodes, real, users):
    """What passes 1, 4 and 5 read of a graph alone: its non-view nodes with their indices, its views, the sources
    that are not nodes (leafs: weights, caches, inputs), and each of ``users`` (:func:`weight_users`) with the
    weight whose buffer gives it its backend in pass 1 where that is all that does (not an input, no view, not a
    ROPE or FLASH_ATTN_EXT, a weight source: :func:`_be_from_cur`), else None."""
    made = set(nodes)
    outside = {id(s): s for t in nodes for s in t.src if s not in made}
    of = {id(t) for t in real}

    def weight_of(t):
        if t.fl0 & INPUT or t.vs is not None or t.op in ("ROPE", "FLASH_ATTN_EXT"):
            return None
        return next((s for s in t.src if s is not None and s.ty == "w" and s.op == NONE), None)

    return (
        [(i, t) for i, t in enumerate(nodes) if id(t) in of],
        [t for t in nodes if id(t) not in of],
        list(outside.values()),
        [(t, weight_of(t)) for t in users],
    )


def _first_supporting(t, cpu, limits):
    """Pass 4's backend for an op no pass gave one: the first that supports it (the CPU where none refuses)."""
    return next(b for b in range(cpu + 1) if supports_op(t, b, limits))


def _expand_all(real, cpu):
    """Pass 2's four expansions in one sweep where every backend supports every op: each run of unassigned
    nodes between two assigned ones (``before``, ``after``) takes what the sweeps would give it, as
    :func:`_between` gives it; a run with no assigned node at all stays unassigned (pass 4: the CPU). ``real``: the
    graph's nodes that are not views (the sweeps pass over views)."""
    before = -1
    run = []
    for t in real:
        be = t.be
        if be == -1:
            run.append(t)
            continue
        if run:
            v = _between(before, be, cpu)
            for u in run:
                u.be = v
            run = []
        before = be
    if run and before != -1:
        v = _between(before, -1, cpu)
        for u in run:
            u.be = v


def _between(before, after, cpu):
    """What the four expansion sweeps give an unassigned node whose nearest assigned non-view neighbours have the
    backends ``before`` and ``after`` (-1: none): gpu down, gpu up, rest down, rest up; -1 if neither exists."""
    if before != -1 and before != cpu:
        return before
    if after != -1 and after != cpu:
        return after
    return before if before != -1 else after


def _probed(nodes, cpu, offload_to, users, wanted, index):
    """The backends passes 1-4 give the ``wanted`` nodes, where every backend supports every op.

    Pass 1 gives a node a backend from the node alone (its pin, its weights, the buffer it views: :func:`_be_from_cur`),
    so it is worked out only for the nodes read here. Each of the four expansions carries the backend of the last
    assigned non-view node it passed, so an unassigned node ends with what :func:`_between` gives its nearest
    pass-1-assigned neighbours (the CPU if it has none: pass 4); nodes between the two are unassigned too, so none
    of them carries anything else. A replay of resolve_fused_ops' probe reads only its fused nodes' backends: this is
    that result without sweeping the graph and without the per-run state the run before it left (it reads the
    nodes' pins, ``force``, and their bound weights), so the probe resets only the pins: 0.07 ms for a 26-layer cut
    of a 94-layer model, where the sweeps took 0.6 ms and a full pass 1 after a reset of every tensor 0.2 ms
    (tests/memory/test_compute.py holds it to the four sweeps)."""
    n = len(nodes)
    members = set(users) if users is not None else None
    first: dict = {}

    def p1(t):
        be = first.get(t)
        if be is None:
            if t.force != -1:
                be = t.force
            elif members is None or t in members:
                be = _be_from_cur(t, cpu, offload_to)
            else:
                be = -1
            first[t] = be
        return be

    got = []
    for t in wanted:
        be = p1(t)
        if be == -1:
            i = index[t]
            before = after = -1
            j = i - 1
            while j >= 0:
                s = nodes[j]
                if s.op not in VIEW_OPS and p1(s) != -1:
                    before = first[s]
                    break
                j -= 1
            j = i + 1
            while j < n:
                s = nodes[j]
                if s.op not in VIEW_OPS and p1(s) != -1:
                    after = first[s]
                    break
                j += 1
            be = _between(before, after, cpu)
            if be == -1:
                be = cpu  # pass 4: an op with no assigned neighbour runs on the CPU
        got.append((t, be))
    for t, be in got:
        t.be = be


def _in_buffer_of(s, b, cpu) -> bool:
    """``ggml_backend_sched_buffer_supported``: the source (or what it views) lives where backend ``b`` reads it
    (a GPU reads only its own buffers; the CPU reads every host buffer)."""
    be = s.be if s.be != -1 else (s.vs.be if s.vs is not None else -1)
    if be == -1:
        return False
    if b == cpu:
        return be == cpu or (s.ty == "w" and s.host)
    return be == b


def _be_from_cur(t, cpu, offload_to, limits=None):
    if t.wbe != -1:
        return t.wbe
    vs = t.vs
    if vs is not None and vs.wbe != -1:
        return vs.wbe
    if t.flags & INPUT:
        return cpu
    if t.op != "ROPE" and t.op != "FLASH_ATTN_EXT":
        for s in t.src:
            if s is not None and s.ty == "w" and s.op == NONE:
                b = s.wbe
                if b == cpu and s.host and offload_to and _offload_batch(t) >= 32:
                    # the first backend (in priority order) that supports the op and wants it
                    for o in offload_to:
                        if limits is None or supports_op(t, o, limits):
                            return o
                if limits is not None and b != cpu and not supports_op(t, b, limits):
                    # ggml_backend_sched_backend_from_buffer: the weight's device cannot run the op and no other
                    # backend reads its buffer: left unassigned, so pass 3 picks a backend (and copies the weight)
                    return -1
                return b
    return -1
