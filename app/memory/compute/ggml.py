"""A mini ggml: tensors as far as scheduling and allocation care (shapes, strides, types, sources, views),
and the ops the graphs use, with ggml's output shapes and types (``ggml/src/ggml.c``). No data."""

from __future__ import annotations

from ..kv import CACHE_TYPE_BLOCKS

#: (elements per block, bytes per block) of the types compute tensors can have.
BLOCKS = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "i32": (1, 4), "i64": (1, 8), "i16": (1, 2), "i8": (1, 1)}
BLOCKS.update(CACHE_TYPE_BLOCKS)

INPUT, OUTPUT = 1, 2

NONE = "NONE"
#: ops that only re-describe memory (``ggml_is_view_op``): skipped by the scheduler's passes.
VIEW_OPS = frozenset(("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"))
#: ``ggml_op_can_inplace``: the allocator may give the result its parent's memory.
INPLACE = frozenset(
    (
        "FILL",
        "SCALE",
        "DIAG_MASK_ZERO",
        "DIAG_MASK_INF",
        "ADD",
        "ADD_ID",
        "ADD1",
        "SUB",
        "MUL",
        "DIV",
        "SQR",
        "SQRT",
        "LOG",
        "UNARY",
        "ROPE",
        "RMS_NORM",
        "CLAMP",
        "SOFT_MAX",
    )
)


class T:
    """A ggml tensor as far as scheduling and allocation care."""

    __slots__ = (
        "ne",
        "nb",
        "ty",
        "op",
        "src",
        "vs",
        "flags",
        "wbe",
        "host",
        "size",
        "be",
        "force",
        "name",
        "nch",
        "nvw",
        "addr",
        "abe",
        "asz",
        "cs",
        "fl0",
    )

    def __init__(self, ty, ne, nb, op, src, vs=None):
        self.ty = ty
        self.ne = ne
        self.nb = nb
        self.op = op
        self.src = src
        self.cs = src  # sources as the scheduler leaves them (inputs from other backends -> their copies)
        self.vs = vs  # view source (always the base tensor, as in ggml_new_tensor_impl)
        self.flags = 0
        self.fl0 = 0  # flags as built (pipeline parallelism adds OUTPUT to inputs for one run)
        self.wbe = -1  # backend of the buffer holding a pre-allocated tensor (weights, KV, states)
        self.host = False  # that buffer is a host buffer (op offload candidates)
        self.size = 0  # ggml_nbytes for tensors the allocator places
        self.be = -1  # backend chosen by the scheduler
        self.force = -1  # backend pinned by the graph callback
        self.name = ""
        self.nch = 0  # allocator: children not yet computed
        self.nvw = 0  # allocator: views not yet done with
        self.addr = -1  # allocator: offset while allocated by the graph allocator, else -1
        self.abe = -1  # allocator: buffer it was allocated in
        self.asz = 0  # allocator: bytes it was allocated with


def _contig(ty, ne):
    blk, ts = BLOCKS[ty]
    nb1 = ts * (ne[0] // blk)
    nb2 = nb1 * ne[1]
    return (ts, nb1, nb2, nb2 * ne[2])


def nbytes(ty, ne, nb):
    if ne[0] <= 0 or ne[1] <= 0 or ne[2] <= 0 or ne[3] <= 0:
        return 0
    blk, ts = BLOCKS.get(ty, (1, 1))
    if blk == 1:
        n = ts
        for i in range(4):
            n += (ne[i] - 1) * nb[i]
        return n
    n = ne[0] * nb[0] // blk
    for i in range(1, 4):
        n += (ne[i] - 1) * nb[i]
    return n


_ONES = ((1, 1, 1, 1), (1, 1, 1), (1, 1), (1,), ())


def ne4(ne):
    ne = tuple(ne)
    return ne + _ONES[len(ne)] if len(ne) < 4 else ne


def new(ty, ne, op, src=()):
    if len(ne) < 4:
        ne = tuple(ne) + _ONES[len(ne)]
    nb = _contig(ty, ne)
    t = T(ty, ne, nb, op, list(src))
    t.size = nbytes(ty, ne, nb)
    return t


def dup(a, op, src):
    """``ggml_dup_tensor``: a new contiguous tensor with ``a``'s type and shape."""
    return new(a.ty, a.ne, op, src)


def view(a, ne, nb123, op="VIEW"):
    ne = ne4(ne)
    nb = (a.nb[0],) + tuple(nb123) + (0,) * (3 - len(nb123))
    if len(nb123) < 3:  # fill the missing strides like ggml_view_2d/3d
        nb = list(nb)
        for i in range(1 + len(nb123), 4):
            nb[i] = nb[i - 1] * ne[i - 1]
        nb = tuple(nb)
    return T(a.ty, ne, nb, op, [a], a.vs if a.vs is not None else a)


def reshape(a, *ne):
    ne = ne4(ne)
    return T(a.ty, ne, _contig(a.ty, ne), "RESHAPE", [a], a.vs if a.vs is not None else a)


def permute(a, ax0, ax1, ax2, ax3, op="PERMUTE"):
    ne = [0, 0, 0, 0]
    nb = [0, 0, 0, 0]
    for i, ax in enumerate((ax0, ax1, ax2, ax3)):
        ne[ax] = a.ne[i]
        nb[ax] = a.nb[i]
    return T(a.ty, tuple(ne), tuple(nb), op, [a], a.vs if a.vs is not None else a)


def transpose(a):
    return permute(a, 1, 0, 2, 3, op="TRANSPOSE")


def view_tensor(a, op, src):
    """``ggml_view_tensor`` used as an op result (SET_ROWS, CPY, in-place ops)."""
    return T(a.ty, a.ne, a.nb, op, src, a.vs if a.vs is not None else a)


def is_contiguous(t):
    nb = _contig(t.ty, t.ne)
    return all(t.ne[i] == 1 or t.nb[i] == nb[i] for i in range(4))


def row_size(ty, n):
    blk, ts = BLOCKS[ty]
    return n // blk * ts


def nelements(t):
    return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]


# ops (output shapes and types as in ggml/src/ggml.c)


def mul_mat(a, b):
    return new("f32", (a.ne[1], b.ne[1], b.ne[2], b.ne[3]), "MUL_MAT", (a, b))


def mul_mat_id(a, b, ids):
    return new("f32", (a.ne[1], ids.ne[0], b.ne[2], 1), "MUL_MAT_ID", (a, b, ids))


def get_rows(a, b):
    ty = "i32" if a.ty == "i32" else "f32"
    return new(ty, (a.ne[0], b.ne[0], b.ne[1], b.ne[2]), "GET_ROWS", (a, b))


def binary(op, a, b):
    return dup(a, op, (a, b))


def unary(op, a, *extra):
    return dup(a, op, (a,) + extra)


def cont(a, *ne):
    return new(a.ty, ne if ne else a.ne, "CONT", (a,))


def cpy(a, b):
    return view_tensor(b, "CPY", [a, b])


def set_rows(a, b, c):
    """``ggml_set_rows``: rows ``b`` written into ``a`` at the indices ``c``. Its sources are ggml's ``[b, c, a]``
    ("order is weird due to legacy reasons", ggml.c): building the graph visits the rows and their indices before
    the destination's view, and the scheduler and allocator walk them in that order."""
    return view_tensor(a, "SET_ROWS", [b, c, a])


def concat(a, b, dim):
    ne = list(a.ne)
    ne[dim] += b.ne[dim]
    return new(a.ty, ne, "CONCAT", (a, b))


def glu_split(a, b):
    return new(a.ty, a.ne, "GLU", (a, b))


def sum_rows(a):
    return new(a.ty, (1, a.ne[1], a.ne[2], a.ne[3]), "SUM_ROWS", (a,))


def argsort_top_k(a, k):
    s = new("i32", a.ne, "ARGSORT", (a,))
    return view(s, (k, s.ne[1], s.ne[2], s.ne[3]), (s.nb[1], s.nb[2], s.nb[3]))


def flash_attn_ext(q, k, v, mask, sinks):
    src = [q, k, v, mask]
    if sinks is not None:
        src.append(sinks)
    return new("f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "FLASH_ATTN_EXT", src)


def pad(a, p0, p1=0):
    return new(a.ty, (a.ne[0] + p0, a.ne[1] + p1, a.ne[2], a.ne[3]), "PAD", (a,))


class Graph:
    """``ggml_cgraph`` nodes and leafs in ``ggml_build_forward_expand`` order."""

    __slots__ = ("nodes", "leafs", "seen")

    def __init__(self):
        self.nodes = []
        self.leafs = []
        self.seen = set()

    def expand(self, t):
        if t is None or t in self.seen:
            return
        self.seen.add(t)
        for s in t.src:
            if s is not None and s not in self.seen:
                self.expand(s)
        if t.op == NONE:
            self.leafs.append(t)
        else:
            self.nodes.append(t)
