"""``ggml_vk_graph_optimize`` (``ggml/src/ggml-vulkan/ggml-vulkan.cpp``): the Vulkan backend's reordering of one
graph split before the scheduler copies the graph for the allocator, and the allocation dependencies it adds.

``ggml_backend_sched_split_graph`` (``ggml/src/ggml-backend.cpp``, "optimize the split graphs and collect the
allocation dependencies") hands each split's node range (a ``ggml_graph_view``, so the reordering is in place in
the graph's node array) to its backend's ``graph_optimize``; the Vulkan backend moves independent nodes earlier
so that fusable sequences end up adjacent, and asks (``add_alloc_dep``) that a fused pattern's external inputs
stay allocated until the pattern's last node. graph_copy then gets, after each such last node, GGML_OP_NONE
views whose sources are the kept tensors (at most ``GGML_MAX_SRC`` each); the allocator counts them as children
(``ggml_gallocr_alloc_graph_impl``: a NONE node's view source is not counted as a view), so the kept tensors are
freed only there (:func:`app.memory.compute.alloc.allocate_graph`, ``deps``).

The nodes here are :class:`app.memory.compute.ggml.T` with ``cs`` the sources the scheduler left (inputs from
another backend replaced by their copies, which are GGML_OP_NONE tensors without a view source, as in ggml),
read in ggml's source slots (the mini graph keeps them so, :func:`app.memory.compute.ggml.set_rows` included).
"""

from __future__ import annotations

from .ggml import BLOCKS, NONE, OUTPUT, VIEW_OPS

#: ``GGML_MAX_SRC``
MAX_SRC = 10
#: the nodes the first pass looks at from the first unused one (``NUM_TO_CHECK``)
_NUM_TO_CHECK = 20

# the fusion patterns (ggml/src/ggml-vulkan/ggml-vulkan-types.h, lines 506-556)
_TOPK_MOE_EARLY_SOFTMAX_NORM = (
    "SOFT_MAX", "RESHAPE", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV", "RESHAPE",
)  # fmt: skip
_TOPK_MOE_SIGMOID_NORM_BIAS = (
    "UNARY", "RESHAPE", "ADD", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV", "RESHAPE",
)  # fmt: skip
_TOPK_MOE_SQRT_SOFTPLUS_NORM_BIAS = (
    "UNARY", "SQRT", "RESHAPE", "ADD", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV",
    "RESHAPE",
)  # fmt: skip
_TOPK_MOE_EARLY_SOFTMAX = ("SOFT_MAX", "RESHAPE", "ARGSORT", "VIEW", "GET_ROWS")
_TOPK_MOE_LATE_SOFTMAX = ("ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SOFT_MAX", "RESHAPE")
_SNAKE = ("MUL", "SIN", "SQR", "MUL", "ADD")
_TOPK_QSA = ("GET_ROWS", "PERMUTE", "CONT", "CPY", "RESHAPE", "ADD", "TOP_K")
_RMS_NORM_MUL_ADD_MUL = ("RMS_NORM", "MUL", "ADD", "MUL")
_RMS_NORM_MUL_ADD = ("RMS_NORM", "MUL", "ADD")
_RMS_NORM_MUL_ROPE_VIEW_SET_ROWS = ("RMS_NORM", "MUL", "ROPE", "VIEW", "SET_ROWS")
_RMS_NORM_VIEW_SET_ROWS = ("RMS_NORM", "VIEW", "SET_ROWS")
_ROPE_VIEW_SET_ROWS = ("ROPE", "VIEW", "SET_ROWS")
_HC_POST_GATE = ("SCALE", "UNARY", "SCALE", "DSV4_HC_POST")

#: the patterns the first pass does not pull a node out of (in its order; the QSA one by any interior node)
_PROTECTED = (
    _TOPK_MOE_EARLY_SOFTMAX_NORM,
    _TOPK_MOE_SIGMOID_NORM_BIAS,
    _TOPK_MOE_SQRT_SOFTPLUS_NORM_BIAS,
    _TOPK_MOE_EARLY_SOFTMAX,
    _TOPK_MOE_LATE_SOFTMAX,
    _SNAKE,
    _RMS_NORM_MUL_ADD_MUL,
    _RMS_NORM_MUL_ADD,
    _RMS_NORM_MUL_ROPE_VIEW_SET_ROWS,
    _RMS_NORM_VIEW_SET_ROWS,
    _ROPE_VIEW_SET_ROWS,
    _HC_POST_GATE,
)

_BY_FIRST_OP: dict[str, list[tuple]] = {}
for _p in (_TOPK_QSA, *_PROTECTED):
    _BY_FIRST_OP.setdefault(_p[0], []).append(_p)

#: the lambda ``is_empty`` of ggml_vk_graph_optimize: NONE and the view ops
_EMPTY = VIEW_OPS | {NONE}

#: first-pass exceptions: (producer op, consumer op) a node may follow at once when it reads the set's last node
#: (MUL_MAT+ADD, MUL_MAT_ID+ADD_ID, MUL_MAT_ID+MUL, ADD+ADD, SSM_CONV+ADD, SSM_CONV+UNARY: only as the next node)
_NEXT_PAIRS = frozenset(
    (
        ("MUL_MAT", "ADD"),
        ("MUL_MAT_ID", "ADD_ID"),
        ("MUL_MAT_ID", "MUL"),
        ("ADD", "ADD"),
        ("SSM_CONV", "ADD"),
        ("SSM_CONV", "UNARY"),
    )
)


def use_counts(nodes) -> dict:
    """``cgraph->use_counts`` (``ggml_visit_parents_graph``): per tensor, how many source slots of the graph's nodes
    name it, counted on the graph as built (the split views share the whole graph's counts)."""
    uses: dict = {}
    for t in nodes:
        for s in t.src:
            if s is not None:
                uses[s] = uses.get(s, 0) + 1
    return uses


def _contiguous_1(t, ty) -> bool:
    """``ggml_is_contiguous_1`` (``ggml_is_contiguous_m_n(t, 1, 4)``, ``ggml/src/ggml.c``). A weight has no strides
    here: a model tensor is contiguous."""
    if t.ty == "w":
        return True
    blk, ts = BLOCKS[ty]
    ne, nb = t.ne, t.nb
    if ne[0] != blk and nb[0] != ts:
        return False
    next_nb = ne[1] * nb[1]  # dimension 1 need not be contiguous
    for i in (2, 3):
        if ne[i] != 1 and nb[i] != next_nb:
            return False
        next_nb *= ne[i]
    return True


def _can_repeat(t0, t1) -> bool:
    """``ggml_can_repeat`` (``ggml/src/ggml.c``)."""
    if any(x == 0 for x in t0.ne):
        return any(x == 0 for x in t1.ne)
    return all(t1.ne[i] % t0.ne[i] == 0 for i in range(4))


def optimize(nodes, uses, deps, wtype):
    """The split's nodes in ``ggml_vk_graph_optimize``'s order (a new list; ``nodes`` is left as it is).

    ``uses``: :func:`use_counts` of the whole graph. ``deps``: ``add_alloc_dep``'s map (the scheduler's
    ``alloc_deps``, shared by all splits): per "until" node, the tensors to keep allocated until it, in the order
    they were added. ``wtype``: a weight's ggml type name in lower case (the type checks of
    ``ggml_vk_can_fuse_unary_mul`` read the weight's type)."""
    n = len(nodes)
    ops = [t.op for t in nodes]
    S = {t: t.cs for t in nodes}  # each node's sources as the scheduler left them, in ggml's slots (set_rows' too)
    empty = [o in _EMPTY for o in ops]
    used = [False] * n
    used_set: set = set()
    new_order: list = []
    first_unused = 0

    def base(t):
        return t.vs if t.vs is not None else t

    # per node, its sources and their bases as sets: is_src_of's loop over the slots, as one OR
    direct = {t: {x for x in S[t] if x is not None} for t in nodes}
    bases = {t: {base(x) for x in direct[t]} for t in nodes}

    def is_src_of(dst, src) -> bool:
        # the lambda is_src_of (ggml-vulkan.cpp 14676-14703): a direct source; unless one of them is empty (a view or NONE), a source of dst
        # sharing src's storage (a view of dst may read what src wrote through another view) or a source of src
        # sharing dst's (moving dst forward may overwrite what src still reads); or both view one tensor
        if src in direct[dst]:
            return True
        bd, bs = base(dst), base(src)
        if dst.op not in _EMPTY and src.op not in _EMPTY and (bs in bases[dst] or bd in bases[src]):
            return True
        return bd is bs

    # the patterns whose ops start at each position (fixed; match_pattern adds that no node is used yet)
    at: list[tuple] = [()] * n
    for j, op in enumerate(ops):
        cands = _BY_FIRST_OP.get(op)
        if cands:
            at[j] = tuple(p for p in cands if tuple(ops[j : j + len(p)]) == p)

    def match(pattern, start) -> bool:
        # the lambda match_pattern (14722-14733): the ops at start.. and none of those nodes used yet
        if start < 0 or start >= n or pattern not in at[start]:
            return False
        return not any(used[start : start + len(pattern)])

    def keep(pattern) -> bool:
        # the lambda keep_pattern (14735-14748): a pattern at the first unused node goes out as it is
        nonlocal first_unused
        if not match(pattern, first_unused):
            return False
        for j in range(len(pattern)):
            t = nodes[first_unused + j]
            new_order.append(t)
            used_set.add(t)
            used[first_unused + j] = True
        while first_unused < n and used[first_unused]:
            first_unused += 1
        return True

    def add_dep(tensor, until):
        # ggml_backend_sched_split_graph's add_alloc_dep (ggml-backend.cpp 1464-1470): once per (until, tensor), in the order added
        keep_ = deps.setdefault(until, [])
        if not any(k is tensor for k in keep_):
            keep_.append(tensor)

    def add_pattern_alloc_deps(pattern, last_node):
        # the lambda add_pattern_alloc_deps (14750-14763): the pattern's external inputs live through its last node
        seen: set = set()
        until = nodes[last_node]
        for j in range(len(pattern)):
            node = nodes[first_unused + j]
            for src in S[node][:MAX_SRC]:
                if src is not None and src not in seen:
                    seen.add(src)
                    add_dep(src, until)
            seen.add(node)

    def keep_topk_moe(pattern) -> bool:
        # the lambda keep_topk_moe_pattern (14765-14779): a trailing SCALE the TOPK_MOE variants fuse ends the kept lifetimes
        if not match(pattern, first_unused):
            return False
        last_node = first_unused + len(pattern) - 1
        if last_node + 1 < n and ops[last_node + 1] == "SCALE":
            last_node += 1
        add_pattern_alloc_deps(pattern, last_node)
        return keep(pattern)

    def empty_or_scheduled_between(lo, hi) -> bool:
        for v in range(lo, hi):
            if not used[v] and not empty[v]:
                return False
        return True

    def in_qsa(j) -> bool:
        # the lambda in_qsa_pattern: any interior node of a QSA pattern
        return any(j - o >= 0 and match(_TOPK_QSA, j - o) for o in range(len(_TOPK_QSA)))

    def can_fuse_subgraph_ext(idxs, outputs) -> bool:
        # ggml_can_fuse_subgraph_ext (ggml/src/ggml.c); the ops are the nodes' own and every node is a compute node
        members = [nodes[i] for i in idxs]
        for i, idx in enumerate(idxs):
            node = nodes[idx]
            if idx in outputs:
                continue
            if node.flags & OUTPUT:
                return False
            sub = 0
            for other in members[i + 1 :]:
                sub += sum(1 for s in S[other][:MAX_SRC] if s is node)
            if sub != uses.get(node, 0):
                return False
            vs = node.vs  # the root view source (views of views point at the root in ggml too)
            # an external view source is allowed only for weights (ggml_is_constant: a weights buffer)
            if vs is not None and not any(vs is m for m in members) and vs.ty != "w":
                return False
        return True

    def can_fuse_unary_mul(j, k) -> bool:
        # ggml_vk_can_fuse_unary_mul. Its first check (ggml_vk_unary_mul_op_index: GELU, SIGMOID, SILU or SOFTPLUS)
        # reads the unary op, which the mini graph does not record: every UNARY passes it (the unary ops that
        # feed a MUL in the replayed graphs are sigmoid gates, SiLU and softplus)
        unary, mul = nodes[j], nodes[k]
        uty = unary.ty
        if uty not in ("f32", "f16") or uty != mul.ty:
            return False
        m0, m1 = S[mul][0], S[mul][1]
        if m0 is not unary and m1 is not unary:
            return False
        other = m1 if m0 is unary else m0
        if other is None:
            return False
        oty = wtype(other) if other.ty == "w" else other.ty
        if oty != uty:
            return False
        u0 = S[unary][0]
        if not _contiguous_1(other, oty) or not _contiguous_1(u0, wtype(u0) if u0.ty == "w" else u0.ty):
            return False
        if m0 is unary:
            return _can_repeat(other, unary)
        return _can_repeat(unary, m0)

    while first_unused < n:
        # keep the fusion patterns at the first unused node as they are (14781-14822)
        if (
            keep_topk_moe(_TOPK_MOE_EARLY_SOFTMAX_NORM)
            or keep_topk_moe(_TOPK_MOE_SIGMOID_NORM_BIAS)
            or keep_topk_moe(_TOPK_MOE_SQRT_SOFTPLUS_NORM_BIAS)
            or keep_topk_moe(_TOPK_MOE_EARLY_SOFTMAX)
            or keep_topk_moe(_TOPK_MOE_LATE_SOFTMAX)
            or keep(_SNAKE)
            or keep(_TOPK_QSA)
            or keep(_RMS_NORM_MUL_ADD_MUL)
            or keep(_RMS_NORM_MUL_ADD)
            or keep(_RMS_NORM_MUL_ROPE_VIEW_SET_ROWS)
            or keep(_RMS_NORM_VIEW_SET_ROWS)
            or keep(_ROPE_VIEW_SET_ROWS)
        ):
            continue
        if match(_HC_POST_GATE, first_unused):
            add_pattern_alloc_deps(_HC_POST_GATE, first_unused + len(_HC_POST_GATE) - 1)
            keep(_HC_POST_GATE)
            continue

        # the next unused node, then (first pass) the real nodes among the next NUM_TO_CHECK that depend on no
        # unused node before them, except a fusable producer that is the set's last node (14824-14880)
        current = [first_unused]
        hi = min(first_unused + _NUM_TO_CHECK, n)
        for j in range(first_unused + 1, hi):
            if used[j] or empty[j]:
                continue
            if in_qsa(j) or any(match(p, j) for p in at[j] if p is not _TOPK_QSA):
                continue
            nj = nodes[j]
            oj = ops[j]
            ok = True
            for c in range(first_unused, j):
                if used[c] or not is_src_of(nj, nodes[c]):
                    continue
                oc = ops[c]
                if c == current[-1]:
                    if (oc == "RMS_NORM" or oc == "UNARY") and oj == "MUL" and empty_or_scheduled_between(c + 1, j):
                        continue
                    if j == c + 1 and (oc, oj) in _NEXT_PAIRS:
                        continue
                ok = False
                break
            if not ok:
                continue
            current.append(j)
            rope_idx = j
            # RMS_NORM + MUL: a ROPE of the MUL whose other sources are ready comes along (14887-14902)
            if j > 0 and oj == "MUL" and ops[j - 1] == "RMS_NORM":
                for k in range(j + 1, min(j + 15, n)):
                    t = nodes[k]
                    ts = S[t]
                    if ops[k] == "ROPE" and ts[0] is nj and ts[1].op == NONE:
                        s2 = ts[2] if len(ts) > 2 else None
                        if s2 is None or s2.op == NONE:
                            rope_idx = k
                            current.append(k)
                            used[k] = True
                            break
            # ROPE/RMS_NORM + VIEW + SET_ROWS made consecutive (14904-14939)
            if ops[rope_idx] in ("ROPE", "RMS_NORM"):
                rope = nodes[rope_idx]
                view_idx = set_rows_idx = -1
                for k in range(rope_idx + 1, min(rope_idx + 15, n)):
                    if used[k]:
                        continue
                    if view_idx == -1 and ops[k] == "VIEW" and S[nodes[k]][0] is rope:
                        view_idx = k
                        continue
                    if view_idx != -1 and ops[k] == "SET_ROWS" and S[nodes[k]][0] is nodes[view_idx]:
                        set_rows_idx = k
                        break
                if set_rows_idx != -1:
                    can_pull = can_fuse_subgraph_ext((rope_idx, view_idx, set_rows_idx), (set_rows_idx,))
                    sr = nodes[set_rows_idx]
                    for c in range(rope_idx + 1, set_rows_idx):
                        if not can_pull:
                            break
                        if not used[c] and c != view_idx and not empty[c] and is_src_of(sr, nodes[c]):
                            can_pull = False
                    if can_pull:
                        current.append(view_idx)
                        current.append(set_rows_idx)
                        used[view_idx] = used[set_rows_idx] = True
            # MUL_MAT_ID + ADD_ID + MUL, MUL_MAT + ADD + ADD (14941-14969): the consumer whose other source is ready
            if j > 0 and ((oj == "ADD_ID" and ops[j - 1] == "MUL_MAT_ID") or (oj == "ADD" and ops[j - 1] == "MUL_MAT")):
                want = "MUL" if oj == "ADD_ID" else "ADD"
                for k in range(j + 1, min(j + 15, n)):
                    t = nodes[k]
                    ts = S[t]
                    if ops[k] == want and ts[0] is nj and (ts[1].op == NONE or ts[1] in used_set):
                        current.append(k)
                        used[k] = True
                        break
            # SSM_CONV + ADD + UNARY: the consuming UNARY comes along (14971-14982)
            if j > 0 and oj == "ADD" and ops[j - 1] == "SSM_CONV":
                for k in range(j + 1, min(j + 15, n)):
                    if ops[k] == "UNARY" and S[nodes[k]][0] is nj:
                        current.append(k)
                        used[k] = True
                        break
            # UNARY + MUL: the consuming MUL comes along (14984-15005)
            if j > 0 and oj == "UNARY":
                for k in range(j + 1, min(j + 15, n)):
                    mul = nodes[k]
                    ms = S[mul]
                    if ops[k] != "MUL" or (ms[0] is not nj and ms[1] is not nj):
                        continue
                    other = ms[1] if ms[0] is nj else ms[0]
                    if not (other.op == NONE or other in used_set):
                        continue
                    if not can_fuse_unary_mul(j, k):
                        continue
                    current.append(k)
                    used[k] = True
                    break
        # second pass (15007-15032): the views whose sources are done or in the set, unless the set ends with ADD
        if ops[current[-1]] != "ADD":
            for j in range(first_unused + 1, hi):
                if used[j] or not empty[j]:
                    continue
                nj = nodes[j]
                ok = True
                for c in range(first_unused, j):
                    if not used[c] and c not in current and is_src_of(nj, nodes[c]):
                        ok = False
                        break
                if ok:
                    current.append(j)
        for c in current:
            t = nodes[c]
            new_order.append(t)
            used_set.add(t)
            used[c] = True
        while first_unused < n and used[first_unused]:
            first_unused += 1
    # "Replace the graph with the new order" (15044-15047): the first n_nodes entries
    return new_order[:n]


def reorder(nodes, splits, vulkan, uses, wtype):
    """``ggml_backend_sched_split_graph``'s "optimize the split graphs" step: the graph's nodes with each split
    whose backend is Vulkan (``vulkan[backend]``) in :func:`optimize`'s order, and the allocation dependencies
    collected on the way (for :func:`app.memory.compute.alloc.allocate_graph`). A new list: ``nodes`` stays as
    it is (a built graph is cached and replayed for other placements)."""
    out = list(nodes)
    deps: dict = {}
    for be, i0, i1, _inputs in splits:
        if vulkan[be]:
            out[i0:i1] = optimize(out[i0:i1], uses, deps, wtype)
    return out, deps
