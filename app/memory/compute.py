"""Compute buffers: llama.cpp's worst-case graph, scheduled and allocated the way ggml does it.

llama.cpp sizes each backend's compute buffer by building the prompt-processing
graph for a full ubatch against a full KV cache (``llama_context::sched_reserve``
-> ``graph_reserve``), letting the backend scheduler assign every op to a
backend and cut the graph into splits (``ggml_backend_sched_split_graph`` in
``ggml/src/ggml-backend.cpp``), and running the graph allocator over the result
(``ggml_gallocr_*`` in ``ggml/src/ggml-alloc.c``): each backend's buffer is the
high-water mark of its dynamic allocator. There is no closed formula for that
peak (in-place reuse, views that keep their source alive, best-fit holes), so
this module re-does the three steps on a small model of the graph:

1. **Graph** (``_Builder`` and the ``_build_*`` functions): the ops of the
   architecture's ``src/models/<arch>.cpp`` graph and of ``src/llama-graph.cpp``
   (``build_inp_embd``, ``build_attn``/``build_attn_mha``, ``build_ffn``,
   ``build_moe_ffn``, ``build_rs``), in the order ``ggml_build_forward_expand``
   visits them, with ggml's output shapes and types. Only tensor shapes,
   sources, views and flags are modelled; no data.
2. **Scheduler** (``_schedule``): the five passes of
   ``ggml_backend_sched_split_graph`` (ops on the backend of their weights,
   graph inputs on the CPU, op offload of host weights to a GPU for batches
   >= 32, expansion up and down, splits, one copy per (tensor, backend) of
   every split input, four copies of inputs when pipeline parallelism is on),
   plus the ``norm``/``l_last`` pinning of ``llama_context::graph_get_cb``.
3. **Allocator** (``_allocate``): ``ggml_gallocr_alloc_graph_impl`` with its
   best-fit ``ggml_dyn_tallocr``: leafs first, in-place reuse of a parent's
   memory for element-wise ops, frees when the last child (and view) is done.

Two details decide whether the numbers match a given tool. The graph callback
pins each layer's ``norm`` op to the layer's device (and ``-nkvo`` pins the
attention output to the CPU); ``llama-fit-params`` measures with
``ggml_backend_sched_reserve_size``, which resets the scheduler after the graph
is built and so drops those pins, while a real load (server, cli, bench) keeps
them. And the server reserves logits for its slots, the other tools for a full
batch (``ContextShape.n_outputs_max``).

CUDA-only effects are modelled for devices of kind ``gpu`` but could not be
checked against a GPU (the RPC backend has no ``offload_op``): op offload
(ops on host-resident weights run on the first GPU for batches >= 32, with a
copy of the weight in its compute buffer), 128-byte alignment, and the f16
copies of a quantized K/V that the flash-attention kernels keep after their
result (``ggml_cuda_flash_attn_ext_get_alloc_size``).

To stay fast (it runs on every drag), identical consecutive layers are not all
simulated: a run of layers with the same structure and placement is cut to its
first ``_KEEP`` periods and its last one, which leaves every buffer's peak
unchanged because the allocator reaches a steady state after a layer or two.
Built graphs are reused across placements (only weight backends, pins and
sizes are re-bound) and results are memoised per model.

See ``docs/memory-model.md`` ("Compute buffers") for the derivation and the
measured errors.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from operator import itemgetter

from ..lanes import CPU
from ..model import Model
from .kv import CACHE_TYPE_BLOCKS, ContextShape
from .layout import WeightPlacement
from .settings import NGL_ALL, NGL_AUTO, LlamaSettings

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- mini ggml

#: (elements per block, bytes per block) of the types compute tensors can have.
_BLOCKS = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "i32": (1, 4), "i64": (1, 8), "i16": (1, 2), "i8": (1, 1)}
_BLOCKS.update(CACHE_TYPE_BLOCKS)

INPUT, OUTPUT = 1, 2

NONE = "NONE"
#: ops that only re-describe memory (``ggml_is_view_op``): skipped by the scheduler's passes.
_VIEW_OPS = frozenset(("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"))
#: ``ggml_op_can_inplace``: the allocator may give the result its parent's memory.
_INPLACE = frozenset(
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
    blk, ts = _BLOCKS[ty]
    nb1 = ts * (ne[0] // blk)
    nb2 = nb1 * ne[1]
    return (ts, nb1, nb2, nb2 * ne[2])


def _nbytes(ty, ne, nb):
    if ne[0] <= 0 or ne[1] <= 0 or ne[2] <= 0 or ne[3] <= 0:
        return 0
    blk, ts = _BLOCKS.get(ty, (1, 1))
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


def _ne4(ne):
    ne = tuple(ne)
    return ne + _ONES[len(ne)] if len(ne) < 4 else ne


def new(ty, ne, op, src=()):
    if len(ne) < 4:
        ne = tuple(ne) + _ONES[len(ne)]
    nb = _contig(ty, ne)
    t = T(ty, ne, nb, op, list(src))
    t.size = _nbytes(ty, ne, nb)
    return t


def dup(a, op, src):
    """``ggml_dup_tensor``: a new contiguous tensor with ``a``'s type and shape."""
    return new(a.ty, a.ne, op, src)


def view(a, ne, nb123, op="VIEW"):
    ne = _ne4(ne)
    nb = (a.nb[0],) + tuple(nb123) + (0,) * (3 - len(nb123))
    if len(nb123) < 3:  # fill the missing strides like ggml_view_2d/3d
        nb = list(nb)
        for i in range(1 + len(nb123), 4):
            nb[i] = nb[i - 1] * ne[i - 1]
        nb = tuple(nb)
    return T(a.ty, ne, nb, op, [a], a.vs if a.vs is not None else a)


def reshape(a, *ne):
    ne = _ne4(ne)
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
    blk, ts = _BLOCKS[ty]
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
    return view_tensor(a, "SET_ROWS", [a, b, c])


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


class _Graph:
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


# --------------------------------------------------------------------------- graph builder


class _Builder:
    """What the architecture builders need: weights with their backends, inputs, KV views, helpers."""

    all: list[T]  # nodes then leafs, set by compute_buffers once the graph is built

    def __init__(self, ctx, layers):
        self.c = ctx
        self.p = ctx.p
        self.g = _Graph()
        self.layers = layers  # the layer indices to build (a compressed run keeps a few)
        self.pos = {il: k for k, il in enumerate(layers)}
        self.last = ctx.p.n_layer - 1 - ctx.n_nextn
        self.nt = ctx.n_tokens
        self.inputs = {}
        self.wcache = {}
        # placement-dependent parts, filled in per call by _run
        self.wrefs = []  # (tensor, kept-layer position or -1, name suffix or full name)
        self.crefs = []  # (cache tensor, kept-layer position)
        self.pins = []  # (norm tensor, kept-layer position): graph_get_cb pins
        self.cpu_pins = []  # attention outputs run on the CPU with -nkvo

    # leafs -------------------------------------------------------------

    def w(self, name):
        """The weight tensor ``name`` (one tensor per name, as in the model), or None if the model lacks it."""
        t = self.wcache.get(name, 0)
        if t != 0:
            return t
        c = self.c
        i = c.names.get(name)
        if i is None:
            if name != "token_embd.weight@output" or "output.weight" in c.names:
                self.wcache[name] = None
                return None
            i = c.names.get("token_embd.weight")
            if i is None:
                return None
        t = T("w", c.shapes[i], (0, 0, 0, 0), NONE, [])
        t.name = name
        if name.startswith("blk."):
            _, il, sfx = name.split(".", 2)
            self.wrefs.append((t, self.pos[int(il)], sfx))
        else:
            self.wrefs.append((t, -1, name))
        self.wcache[name] = t
        return t

    def inp(self, key, ty, ne):
        t = self.inputs.get(key)
        if t is None:
            t = new(ty, ne, NONE)
            t.flags = t.fl0 = INPUT
            t.name = key
            self.inputs[key] = t
        return t

    def cache(self, il, which, ty, ne):
        t = new(ty, ne, NONE)
        t.size = 0
        t.name = f"cache_{which}_l{il}"
        self.crefs.append((t, self.pos[il]))
        return t

    # helpers -------------------------------------------------------------

    def force_norm(self, t, il):
        if il >= 0:
            self.pins.append((t, self.pos[il]))
        return t

    def norm(self, x, wname, il, mb=None):
        w = self.w(wname) if isinstance(wname, str) else wname
        cur = unary("RMS_NORM", x)
        if w is not None or mb is not None:
            self.force_norm(cur, il)
        if w is not None:
            cur = binary("MUL", cur, w)
        if mb is not None:
            cur = binary("ADD", cur, mb)
        return cur

    def mm(self, wname, x):
        w = self.w(wname) if isinstance(wname, str) else wname
        return mul_mat(w, x)

    def add_b(self, x, bname):
        b = self.w(bname)
        return binary("ADD", x, b) if b is not None else x

    # inputs (llm_graph_context::build_inp_*) -----------------------------

    def inp_embd(self):
        p, nt = self.p, self.nt
        tokens = self.inp("inp_tokens", "i32", (nt,))
        embd = self.inp("inp_embd", "f32", (p.n_embd, nt))
        cur = get_rows(self.w("token_embd.weight"), tokens)
        self.g.expand(cur)
        self.g.expand(embd)  # the vector-embeddings path: a leaf that is never used
        if self.c.embedding_scale:
            cur = unary("SCALE", cur)
        self.g.expand(cur)
        return cur

    def inp_pos(self):
        return self.inp("inp_pos", "i32", (self.nt,))

    def inp_out_ids(self):
        return self.inp("out_ids", "i32", (self.c.n_outputs,))

    # attention (build_attn / build_attn_mha) -----------------------------

    def kv_dims(self, il):
        c, p = self.c, self.p
        swa = c.is_swa(il)
        hk = p.head_dim_k_swa if swa else p.head_dim_k
        hv = p.head_dim_v_swa if swa else p.head_dim_v
        return hk, hv, p.n_head_kv[il], swa

    def attn_inputs(self, swa):
        """k_idxs, v_idxs, mask, k_rot, v_rot of the (SWA or base) cache."""
        c, nt = self.c, self.nt
        sfx = "_swa" if swa else ""
        n_kv = c.size_swa if swa else c.n_kv
        k_idxs = self.inp("k_idxs" + sfx, "i64", (nt,))
        v_idxs = None
        if not c.mla:
            v_idxs = self.inp("v_idxs" + sfx, "i64", (nt,) if c.fa else (nt * c.n_embd_v_gqa_max,))
        ns = c.n_stream
        mask = self.inp("kq_mask" + sfx, "f16" if c.fa else "f32", (n_kv, nt // ns, 1, ns))
        k_rot = v_rot = None
        if c.rot_k and not c.mla:  # build_attn_inp_k (MLA) makes no rotation inputs
            k_rot = self.inp("k_rot" + sfx, "f32", (c.rot_k, c.rot_k))
        if c.rot_v and not c.mla:
            v_rot = self.inp("v_rot" + sfx, "f32", (64, 64))
        return k_idxs, v_idxs, mask, k_rot, v_rot, n_kv

    def hadamard(self, cur, rot):
        n = rot.ne[0]
        if not is_contiguous(cur):
            res = cont(cur, n, nelements(cur) // n)
        else:
            res = reshape(cur, n, nelements(cur) // n)
        res = mul_mat(rot, res)
        return reshape(res, *cur.ne)

    def attn(self, il, q, k, v, wo, wo_b, sinks=None, v_mla=None, iswa_order=False):
        """``build_attn`` for a KV cache (``llm_graph_input_attn_kv[_iswa]`` / ``_k`` for MLA)."""
        c, g = self.c, self.g
        hk, hv, n_head_kv, swa = self.kv_dims(il)
        k_idxs, v_idxs, mask, k_rot, v_rot, n_kv = self.attn_inputs(swa)
        if k_rot is not None:
            q = self.hadamard(q, k_rot)
            k = self.hadamard(k, k_rot)
        if v_rot is not None:
            v = self.hadamard(v, v_rot)
        g.expand(q)
        if iswa_order:
            g.expand(k)
            g.expand(v)
        else:
            g.expand(v)
            g.expand(k)
        ns = c.n_stream
        kv_size = c.size_swa if swa else c.n_kv
        n_embd_k = hk * n_head_kv
        kc = self.cache(il, "k", c.type_k, (n_embd_k, kv_size, ns))
        # cpy_k
        k2 = view(k, (n_embd_k, k.ne[2]), (k.nb[2],))
        dst = reshape(kc, n_embd_k, kv_size * ns) if ns > 1 else kc
        g.expand(set_rows(dst, k2, k_idxs))
        if c.mla:
            kview = view(
                kc,
                (hk, n_head_kv, n_kv, ns),
                (row_size(c.type_k, hk), row_size(c.type_k, n_embd_k), row_size(c.type_k, n_embd_k * kv_size)),
            )
            vview = view(kview, (v.ne[0], kview.ne[1], kview.ne[2], kview.ne[3]), kview.nb[1:])
        else:
            n_embd_v = c.n_embd_v_gqa_max if not c.fa else hv * n_head_kv
            vc = self.cache(il, "v", c.type_v, (n_embd_v, kv_size, ns))
            n_embd_gqa = v.ne[0] * v.ne[1]
            if c.fa:
                v2 = view(v, (n_embd_gqa, v.ne[2]), (v.nb[2],))
                vdst = reshape(vc, n_embd_gqa, kv_size * ns) if ns > 1 else vc
                g.expand(set_rows(vdst, v2, v_idxs))
            else:
                if row_size(v.ty, n_embd_gqa) == v.nb[2] and is_contiguous(v):
                    v2 = reshape(v, n_embd_gqa, v.ne[2])
                else:
                    v2 = cont(v, n_embd_gqa, v.ne[2])
                if n_embd_gqa < vc.ne[0]:
                    v2 = pad(v2, vc.ne[0] - n_embd_gqa)
                vdst = reshape(vc, 1, nelements(vc))
                v2 = reshape(v2, 1, nelements(v2))
                g.expand(set_rows(vdst, v2, v_idxs))
            kview = view(
                kc,
                (hk, n_head_kv, n_kv, ns),
                (row_size(c.type_k, hk), row_size(c.type_k, n_embd_k), row_size(c.type_k, n_embd_k * kv_size)),
            )
            if c.fa:
                vview = view(
                    vc,
                    (hv, n_head_kv, n_kv, ns),
                    (row_size(c.type_v, hv), row_size(c.type_v, n_embd_v), row_size(c.type_v, n_embd_v * kv_size)),
                )
            else:
                vview = view(
                    vc,
                    (n_kv, n_head_kv, hv, ns),
                    (
                        row_size(c.type_v, kv_size * hv),
                        row_size(c.type_v, kv_size),
                        row_size(c.type_v, kv_size * n_embd_v),
                    ),
                )
        cur = self.mha(q, kview, vview, mask, sinks, v_mla, il)
        if v_rot is not None:
            cur = self.hadamard(cur, v_rot)
        if wo is not None:
            cur = mul_mat(wo, cur)
        if wo_b is not None:
            cur = binary("ADD", cur, wo_b)
        return cur

    def mha(self, q, k, v, mask, sinks, v_mla, il):
        c, g = self.c, self.g
        v_trans = v.nb[1] > v.nb[2]
        ns = k.ne[3]
        q = view(q, (q.ne[0], q.ne[1], q.ne[2] // ns, ns), (q.nb[1], q.nb[2], q.nb[2] * (q.ne[2] // ns)))
        q = permute(q, 0, 2, 1, 3)
        k = permute(k, 0, 2, 1, 3)
        v = permute(v, 0, 2, 1, 3)
        if c.fa:
            if v_trans:
                v = transpose(v)
            cur = flash_attn_ext(q, k, v, mask, sinks)
            if v_mla is not None:
                cur = permute(cur, 0, 2, 1, 3)
                cur = mul_mat(v_mla, cur)
                cur = permute(cur, 0, 2, 1, 3)
                cur = cont(cur)
            cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = mul_mat(k, q)
            if c.softcap:
                kq = unary("SCALE", kq)
                kq = unary("UNARY", kq)
                kq = unary("SCALE", kq)
            src = (kq, mask) if sinks is None else (kq, mask, sinks)
            kq = dup(kq, "SOFT_MAX", src)
            if not v_trans:
                v = cont(transpose(v))
            kqv = mul_mat(v, kq)
            if v_mla is not None:
                kqv = mul_mat(v_mla, kqv)
            cur = permute(kqv, 0, 2, 1, 3)
            cur = cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
            self.cpu_pins.append(cur)
        g.expand(cur)
        return cur

    # feed-forward ---------------------------------------------------------

    def ffn(self, cur, pfx, il, act="silu", par=True):
        """``build_ffn`` with optional biases (``<pfx>_up``, ``<pfx>_gate``, ``<pfx>_down``)."""
        up = self.w(f"blk.{il}.{pfx}_up.weight")
        gate = self.w(f"blk.{il}.{pfx}_gate.weight")
        down = self.w(f"blk.{il}.{pfx}_down.weight")
        tmp = mul_mat(up, cur) if up is not None else cur
        tmp = self.add_b(tmp, f"blk.{il}.{pfx}_up.bias")
        if gate is not None:
            x = tmp if not par else cur
            cur = mul_mat(gate, x)
            cur = self.add_b(cur, f"blk.{il}.{pfx}_gate.bias")
            if par:
                cur = glu_split(cur, tmp)
            else:
                cur = unary("UNARY", cur)
        else:
            cur = unary("UNARY", tmp)
        if down is not None:
            cur = mul_mat(down, cur)
        cur = self.add_b(cur, f"blk.{il}.{pfx}_down.bias")
        return cur

    def moe(self, cur, il, gating="softmax", norm_w=False, w_scale=False, probs_b=None, before=False):
        """``build_moe_ffn``: router, top-k, expert matmuls, weighting and the sum over the selected experts."""
        c, g = self.c, self.g
        n_embd, nt = cur.ne[0], cur.ne[1]
        n_exp, k = c.n_expert, c.n_expert_used
        logits = self.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
        logits = self.add_b(logits, f"blk.{il}.ffn_gate_inp.bias")
        if gating == "softmax":
            probs = unary("SOFT_MAX", logits)
        elif gating == "sigmoid":
            probs = unary("UNARY", logits)
        else:  # softmax_weight
            probs = logits
        sel = probs
        if probs_b is not None:
            sel = binary("ADD", probs, probs_b)
        if before:
            sel = logits
        if c.n_expert_groups > 1 and nt > 0:
            npg = n_exp // c.n_expert_groups
            groups = reshape(sel, npg, c.n_expert_groups, nt)
            gs = argsort_top_k(groups, 2)
            gs = get_rows(reshape(groups, 1, groups.ne[0], groups.ne[1], groups.ne[2]), gs)
            gs = sum_rows(reshape(gs, gs.ne[1], gs.ne[2], gs.ne[3]))
            gs = reshape(gs, gs.ne[1], gs.ne[2])
            eg = argsort_top_k(gs, c.n_group_used)
            sp = get_rows(groups, eg)
            filled = unary("FILL", groups)
            sel = set_rows(filled, sp, eg)
            sel = reshape(sel, n_exp, nt)
        selected = argsort_top_k(sel, k)
        probs3 = reshape(probs, 1, n_exp, nt)
        weights = get_rows(probs3, selected)
        if gating == "softmax_weight":
            weights = reshape(weights, k, nt)
            weights = unary("SOFT_MAX", weights)
            weights = reshape(weights, 1, k, nt)
        if norm_w:
            weights = reshape(weights, k, nt)
            wsum = sum_rows(weights)
            wsum = unary("CLAMP", wsum)
            weights = binary("DIV", weights, wsum)
            weights = reshape(weights, 1, k, nt)
        if w_scale:
            weights = unary("SCALE", weights)
        g.expand(weights)
        cur = reshape(cur, n_embd, 1, nt)
        if before:  # llama4 weighs the inputs: repeat to [n_embd, n_used, n_tokens] and scale
            cur = new(cur.ty, (n_embd, k, nt), "REPEAT", (cur,))
            cur = binary("MUL", cur, weights)
        gate_up = self.w(f"blk.{il}.ffn_gate_up_exps.weight")
        if gate_up is not None:
            gu = mul_mat_id(gate_up, cur, selected)
            nff = gu.ne[0] // 2
            gate = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
            up = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
        else:
            up = mul_mat_id(self.w(f"blk.{il}.ffn_up_exps.weight"), cur, selected)
            b = self.w(f"blk.{il}.ffn_up_exps.bias")
            if b is not None:
                up = dup(up, "ADD_ID", (up, b, selected))
            gw = self.w(f"blk.{il}.ffn_gate_exps.weight")
            if gw is not None:
                gate = mul_mat_id(gw, cur, selected)
                b = self.w(f"blk.{il}.ffn_gate_exps.bias")
                if b is not None:
                    gate = dup(gate, "ADD_ID", (gate, b, selected))
            else:
                gate = None
        if gate is not None:
            act = glu_split(gate, up)
        else:
            act = unary("UNARY", up)
        experts = mul_mat_id(self.w(f"blk.{il}.ffn_down_exps.weight"), act, selected)
        b = self.w(f"blk.{il}.ffn_down_exps.bias")
        if b is not None:
            experts = dup(experts, "ADD_ID", (experts, b, selected))
        if not before:
            experts = binary("MUL", experts, weights)
        g.expand(experts)
        views = []
        for _ in range(k):
            v = view(experts, (n_embd, nt), (experts.nb[2],))
            g.expand(v)
            views.append(v)
        out = views[0]
        for i in range(1, k):
            out = binary("ADD", out, views[i])
            g.expand(out)
        if k == 1:
            out = cont(out)
        return out

    def shexp(self, cur, moe_out, il):
        if f"blk.{il}.ffn_up_shexp.weight" not in self.c.names:
            return moe_out
        sh = self._ffn_named(cur, il, "shexp")
        gi = self.w(f"blk.{il}.ffn_gate_inp_shexp.weight")
        if gi is not None:
            gate = unary("UNARY", mul_mat(gi, cur))
            sh = binary("MUL", sh, gate)
        return binary("ADD", moe_out, sh)

    def _ffn_named(self, cur, il, sfx):
        up = self.w(f"blk.{il}.ffn_up_{sfx}.weight")
        gate = self.w(f"blk.{il}.ffn_gate_{sfx}.weight")
        down = self.w(f"blk.{il}.ffn_down_{sfx}.weight")
        tmp = mul_mat(up, cur)
        x = mul_mat(gate, cur) if gate is not None else None
        x = glu_split(x, tmp) if x is not None else unary("UNARY", tmp)
        return mul_mat(down, x)

    # output ----------------------------------------------------------------

    def output(self, cur, out_ids=None, norm_first=True):
        g = self.g
        if not norm_first and out_ids is not None:
            cur = get_rows(cur, out_ids)
        cur = self.norm(cur, "output_norm.weight", -1, mb=self.w("output_norm.bias"))
        cur.flags = cur.fl0 = OUTPUT  # t_embd
        out = self.w("output.weight") or self.w("token_embd.weight@output")
        logits = mul_mat(out, cur)
        if self.c.logit_scale:
            logits = unary("SCALE", logits)
        logits.flags = logits.fl0 = OUTPUT
        g.expand(logits)
        return logits


# --------------------------------------------------------------------------- architectures


def _qkv(b, il, cur, hd_q, hd_k, hd_v):
    """``build_qkv``: fused or separate projections with optional biases, reshaped to heads."""
    p, nt = b.p, b.nt
    n_head, n_head_kv = p.n_head[il], p.n_head_kv[il]
    wqkv = b.w(f"blk.{il}.attn_qkv.weight")
    if wqkv is not None:
        qkv = mul_mat(wqkv, cur)
        qkv = b.add_b(qkv, f"blk.{il}.attn_qkv.bias")
        es = 4
        q = view(qkv, (hd_q, n_head, nt), (es * hd_q, qkv.nb[1]))
        k = view(qkv, (hd_k, n_head_kv, nt), (es * hd_k, qkv.nb[1]))
        v = view(qkv, (hd_v, n_head_kv, nt), (es * hd_v, qkv.nb[1]))
        return q, k, v
    q = b.add_b(b.mm(f"blk.{il}.attn_q.weight", cur), f"blk.{il}.attn_q.bias")
    k = b.add_b(b.mm(f"blk.{il}.attn_k.weight", cur), f"blk.{il}.attn_k.bias")
    v = b.add_b(b.mm(f"blk.{il}.attn_v.weight", cur), f"blk.{il}.attn_v.bias")
    return reshape(q, hd_q, n_head, nt), reshape(k, hd_k, n_head_kv, nt), reshape(v, hd_v, n_head_kv, nt)


def _rope(x, pos, freqs=None):
    return dup(x, "ROPE", (x, pos) if freqs is None else (x, pos, freqs))


def _build_standard(b):
    """Llama-style decoder: llama/mixtral, qwen2/3(+moe), glm4moe, granitehybrid, and the fallback for others.

    ``src/models/llama.cpp`` / ``qwen3moe.cpp`` / ``granite-hybrid.cpp``: norm, Q/K/V (+ q/k norm), rope,
    attention (or a Mamba2 block on recurrent layers), residual, norm, dense FFN or MoE (+ shared expert),
    residual. Tensors a model lacks (biases, norms) are skipped.
    """
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    iswa = c.has_swa
    for il in b.layers:
        inpSA = inpL
        if c.recurrent[il]:
            cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
            cur = _mamba2(b, cur, il)
        else:
            cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il, mb=b.w(f"blk.{il}.attn_norm.bias"))
            hd_k = p.head_dim_k_swa if c.is_swa(il) else p.head_dim_k
            hd_v = p.head_dim_v_swa if c.is_swa(il) else p.head_dim_v
            q, k, v = _qkv(b, il, cur, hd_k, hd_k, hd_v)
            qn = b.w(f"blk.{il}.attn_q_norm.weight")
            kn = b.w(f"blk.{il}.attn_k_norm.weight")
            freqs = b.w("rope_freqs.weight")
            if qn is not None:
                q = b.norm(q, qn, il)
            q = _rope(q, pos, freqs)
            if kn is not None:
                k = b.norm(k, kn, il)
            k = _rope(k, pos, freqs)
            cur = b.attn(
                il,
                q,
                k,
                v,
                b.w(f"blk.{il}.attn_output.weight"),
                b.w(f"blk.{il}.attn_output.bias"),
                sinks=b.w(f"blk.{il}.attn_sinks.weight"),
                iswa_order=iswa,
            )
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il, mb=b.w(f"blk.{il}.ffn_norm.bias"))
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            moe_out = b.moe(
                cur,
                il,
                gating=c.gating,
                norm_w=c.expert_weights_norm,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
            cur = b.shexp(cur, moe_out, il)
        else:
            cur = b.ffn(cur, "ffn", il)
        if c.residual_scale:
            cur = unary("SCALE", cur)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


def _build_deepseek2(b):
    """``src/models/deepseek2.cpp``: MLA attention (absorbed when ``key_length_mla`` is set)."""
    c, p = b.c, b.p
    nt = b.nt
    n_head = p.n_head[0]
    hk_mla, hv_mla = c.hk_mla, c.hv_mla
    n_rope = p.n_rot
    n_nope = hk_mla - n_rope
    kv_lora = p.kv_lora_rank
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        if b.w(f"blk.{il}.attn_q.weight") is None:
            q = b.mm(f"blk.{il}.attn_q_a.weight", cur)
            q = b.norm(q, f"blk.{il}.attn_q_a_norm.weight", il)
            q = b.mm(f"blk.{il}.attn_q_b.weight", q)
        else:
            q = b.mm(f"blk.{il}.attn_q.weight", cur)
        q = reshape(q, hk_mla, n_head, nt)
        kvpe = b.mm(f"blk.{il}.attn_kv_a_mqa.weight", cur)
        kv_cmpr = view(kvpe, (kv_lora, nt), (kvpe.nb[1],))
        k_pe = view(kvpe, (n_rope, 1, nt), (kvpe.nb[1], kvpe.nb[1]))
        k_pe = _rope(k_pe, pos)
        kv_cmpr = b.norm(kv_cmpr, f"blk.{il}.attn_kv_a_norm.weight", il)
        if c.mla:
            q_nope = view(q, (n_nope, n_head, nt), (q.nb[1], q.nb[2]))
            q_pe = view(q, (n_rope, n_head, nt), (q.nb[1], q.nb[2]))
            q_pe = _rope(q_pe, pos)
            q_nope = permute(q_nope, 0, 2, 1, 3)
            qa = mul_mat(b.w(f"blk.{il}.attn_k_b.weight"), q_nope)
            qa = permute(qa, 0, 2, 1, 3)
            Q = concat(qa, q_pe, 0)
            kv_cmpr = reshape(kv_cmpr, kv_lora, 1, nt)
            K = concat(kv_cmpr, k_pe, 0)
            V = kv_cmpr
            cur = b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None, v_mla=b.w(f"blk.{il}.attn_v_b.weight"))
        else:
            kv = b.mm(f"blk.{il}.attn_kv_b.weight", kv_cmpr)
            rs = kv.nb[0] * (n_nope + hv_mla)
            k_nope = view(kv, (n_nope, n_head, nt), (rs, rs * n_head))
            V = cont(view(kv, (hv_mla, n_head, nt), (rs, rs * n_head)))
            Q = _rope(q, pos)
            rep = new("f32", (n_rope, n_head, nt, 1), "REPEAT", (k_pe,))
            K = concat(k_nope, rep, 0)
            cur = b.attn(il, Q, K, V, b.w(f"blk.{il}.attn_output.weight"), None)
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if il < p.n_layer_dense_lead:
            cur = b.ffn(cur, "ffn", il)
        else:
            moe_out = b.moe(
                cur,
                il,
                gating=c.gating,
                norm_w=c.expert_weights_norm,
                w_scale=c.expert_weights_scale,
                probs_b=b.w(f"blk.{il}.exp_probs_b.bias"),
            )
            sh = b._ffn_named(cur, il, "shexp")
            cur = binary("ADD", moe_out, sh)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


def _build_gpt_oss(b):
    """``src/models/openai-moe.cpp``: SWA every other layer, sinks, biases, out_ids after the last layer."""
    c, p = b.c, b.p
    inpL = b.inp_embd()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        hd = p.n_rot or p.head_dim_k
        q, k, v = _qkv(b, il, cur, hd, hd, hd)
        q = _rope(q, pos)
        k = _rope(k, pos)
        cur = b.attn(
            il,
            q,
            k,
            v,
            b.w(f"blk.{il}.attn_output.weight"),
            b.w(f"blk.{il}.attn_output.bias"),
            sinks=b.w(f"blk.{il}.attn_sinks.weight"),
            iswa_order=True,
        )
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.post_attention_norm.weight", il)
        cur = b.moe(cur, il, gating="softmax_weight", norm_w=False, w_scale=c.expert_weights_scale)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    inpL.flags = inpL.fl0 = OUTPUT  # t_h_nextn
    return b.output(inpL, out_ids, norm_first=False)


def _build_llama4(b):
    """``src/models/llama4.cpp``: temperature-scaled NoPE layers, L2-normed Q/K, MoE every n-th layer + shared."""
    c, p = b.c, b.p
    # hparams.n_no_rope_layer_step: 4, or n_layer when the GGUF says sliding_window = 0 (then only the last
    # layer skips rope, a quirk kept as is)
    no_rope_step = p.n_layer if c.meta.get("llama4.attention.sliding_window") == 0 else 4
    use_kq_norm = c.n_expert != 128  # LLM_TYPE_17B_128E has no Q/K L2 norm
    inpL = b.inp_embd()
    pos = b.inp_pos()
    attn_scale = b.inp("inp_attn_scale", "f32", (1, 1, b.nt))
    out_ids = b.inp_out_ids()
    for il in b.layers:
        inpSA = inpL
        use_rope = (il + 1) % no_rope_step != 0
        cur = b.norm(inpL, f"blk.{il}.attn_norm.weight", il)
        q, k, v = _qkv(b, il, cur, p.head_dim_k, p.head_dim_k, p.head_dim_v)
        if use_rope:
            freqs = b.w("rope_freqs.weight")
            q = _rope(q, pos, freqs)
            k = _rope(k, pos, freqs)
        else:
            q = binary("MUL", q, attn_scale)
        if use_rope and use_kq_norm:
            q = unary("RMS_NORM", q)
            k = unary("RMS_NORM", k)
        cur = b.attn(
            il, q, k, v, b.w(f"blk.{il}.attn_output.weight"), b.w(f"blk.{il}.attn_output.bias"), iswa_order=c.has_swa
        )
        if il == b.last:
            cur = get_rows(cur, out_ids)
            inpSA = get_rows(inpSA, out_ids)
        ffn_inp = binary("ADD", cur, inpSA)
        cur = b.norm(ffn_inp, f"blk.{il}.ffn_norm.weight", il)
        if f"blk.{il}.ffn_gate_inp.weight" in c.names:
            moe_out = b.moe(cur, il, gating="sigmoid", norm_w=False, w_scale=c.expert_weights_scale, before=True)
            sh = b._ffn_named(cur, il, "shexp")
            cur = binary("ADD", moe_out, sh)
        else:
            cur = b.ffn(cur, "ffn", il)
        cur = binary("ADD", cur, ffn_inp)
        inpL = cur
    return b.output(inpL, out_ids)


def _mamba2(b, cur, il):
    """``build_mamba2_layer`` (``src/models/mamba-base.cpp``) with the recurrent-state input of ``build_rs``."""
    c, p, g = b.c, b.p, b.g
    nt, ns = b.nt, c.n_seqs
    d_conv, d_inner, d_state = p.ssm_d_conv, p.ssm_d_inner, p.ssm_d_state
    n_head = p.ssm_dt_rank or 1
    head_dim = d_inner // n_head
    n_group = p.ssm_n_group or 1
    n_seq_tokens = nt // ns
    n_rs = c.n_rs
    s_copy = b.inp("rs_s_copy", "i32", (n_rs,))
    if "rs_views" not in b.inputs:  # build_rs_inp: one pair of views shared by every recurrent layer
        b.inputs["rs_views"] = (view(s_copy, (ns,), ()), view(s_copy, (n_rs - ns,), ()))
    s_main, s_extra = b.inputs["rs_views"]
    conv_dim = d_inner + 2 * n_group * d_state
    n_embd_r = (d_conv - 1) * conv_dim
    n_embd_s = d_state * d_inner
    r_all = b.cache(il, "r", "f32", (n_embd_r, n_rs))
    s_all = b.cache(il, "s", "f32", (n_embd_s, n_rs))

    def rs(state, size, fn):
        states = reshape(state, size, state.ne[1])
        zero = view(states, (size,), ())
        g.expand(view_tensor(zero, "SCALE", [zero]))
        out = fn(states, s_main)
        g.expand(out)
        extra = get_rows(states, s_extra)
        g.expand(cpy(extra, view(state, (size, n_rs - ns), (state.nb[1],))))
        return out

    conv = rs(r_all, n_embd_r, get_rows)
    conv = reshape(conv, d_conv - 1, conv_dim, ns)
    zx = b.mm(f"blk.{il}.ssm_in.weight", cur)
    zx = reshape(zx, zx.ne[0], n_seq_tokens, ns)
    z = view(zx, (head_dim, n_head, n_seq_tokens, ns), (head_dim * 4, zx.nb[1], zx.nb[2]))
    xBC = view(zx, (conv_dim, n_seq_tokens, ns), (zx.nb[1], zx.nb[2]))
    dt = view(zx, (n_head, n_seq_tokens, ns), (zx.nb[1], zx.nb[2]))
    conv_x = concat(conv, transpose(xBC), 0)
    last = view(conv_x, (d_conv - 1, conv_dim, ns), (conv_x.nb[1], conv_x.nb[2]))
    g.expand(cpy(last, view(r_all, (n_embd_r, ns), (r_all.nb[1],))))
    xBC = new("f32", (conv_dim, n_seq_tokens, ns), "SSM_CONV", (conv_x, b.w(f"blk.{il}.ssm_conv1d.weight")))
    xBC = b.add_b(xBC, f"blk.{il}.ssm_conv1d.bias")
    xBC = unary("UNARY", xBC)
    x = view(xBC, (head_dim, n_head, n_seq_tokens, ns), (head_dim * 4, xBC.nb[1], xBC.nb[2]))
    B = view(xBC, (d_state, n_group, n_seq_tokens, ns), (d_state * 4, xBC.nb[1], xBC.nb[2]))
    C = view(xBC, (d_state, n_group, n_seq_tokens, ns), (d_state * 4, xBC.nb[1], xBC.nb[2]))
    dt = binary("ADD", cont(dt), b.w(f"blk.{il}.ssm_dt.bias"))
    A = b.w(f"blk.{il}.ssm_a")

    def scan(states, ids):
        ssm = reshape(states, d_state, head_dim, n_head, states.ne[1])
        return new("f32", (nelements(x) + n_embd_s * ids.ne[0],), "SSM_SCAN", (ssm, x, dt, A, B, C, ids))

    y_ssm = rs(s_all, n_embd_s, scan)
    g.expand(
        cpy(
            view(y_ssm, (n_embd_s, ns, 1), (n_embd_s * 4, n_embd_s * 4 * ns)),
            view(s_all, (n_embd_s, ns, 1), (s_all.nb[1], s_all.nb[1] * n_rs)),
        )
    )
    y = view(y_ssm, (head_dim, n_head, n_seq_tokens, ns), (x.nb[1], n_head * x.nb[1], n_seq_tokens * n_head * x.nb[1]))
    y = binary("ADD", y, binary("MUL", x, b.w(f"blk.{il}.ssm_d")))
    y = glu_split(cont(z), y)
    if b.w(f"blk.{il}.ssm_norm.weight") is not None:
        y = reshape(y, d_inner // n_group, n_group, n_seq_tokens, ns)
        y = b.norm(y, f"blk.{il}.ssm_norm.weight", il)
    y = reshape(y, d_inner, n_seq_tokens * ns)
    return b.mm(f"blk.{il}.ssm_out.weight", y)


_ARCH_BUILDERS = {"deepseek2": _build_deepseek2, "gpt-oss": _build_gpt_oss, "llama4": _build_llama4}

#: Architectures whose compute buffers were checked against llama.cpp's own numbers (tests/memory, the
#: calibration runs in docs/memory-model.md); others use the llama-style graph and may be approximate.
CHECKED_ARCHS = frozenset(
    {"llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "glm4moe", "granitehybrid", "deepseek2", "gpt-oss", "llama4"}
)


# --------------------------------------------------------------------------- per-model facts


class _Ctx:
    """What the graph's structure depends on: hyper-parameters, the context shape and cache types.

    Nothing here depends on where weights are placed, so graphs built from it can be reused across placements.
    """

    def __init__(self, model, settings, shape, facts):
        p = model.params
        meta = model.metadata
        a = p.arch
        self.p = p
        self.arch = a
        self.meta = meta
        self.names = facts["names"]
        self.shapes = facts["shapes"]
        self.n_nextn = p.nextn_layers
        n_seqs = max(1, shape.n_seq)
        nt = min(shape.n_ctx, shape.n_ubatch)  # sched_reserve: n_tokens = min(n_ctx, n_ubatch)
        if nt % n_seqs:
            nt = (nt + n_seqs - 1) // n_seqs * n_seqs  # graph_reserve rounds to a multiple of n_seqs
        self.n_tokens = nt
        self.n_seqs = n_seqs
        self.n_outputs = max(1, min(nt, shape.n_outputs_max))
        self.n_stream = 1 if shape.unified else max(1, shape.n_stream)
        self.n_kv = shape.n_ctx_seq  # the reserve uses the full cache: n_kv = kv_size
        self.fa = shape.flash_attn
        self.type_k = settings.type_k
        self.type_v = settings.type_v
        self.size_swa = shape.size_swa or shape.n_ctx_seq
        self.has_swa = p.has_swa
        self.swa = p.swa_layers
        if a == "llama4" and not p.has_swa and meta.get(f"{a}.attention.sliding_window") is None:
            # llama_model_llama4::load_arch_hparams: without a window key, chunked attention over 8192 tokens on
            # 3 of every 4 layers (ModelParams does not know this default)
            period = int(meta.get(f"{a}.attention.sliding_window_pattern", 4) or 4)
            self.has_swa = True
            self.swa = [il % period < period - 1 for il in range(p.n_layer)]
            window = 8192 * (max(1, shape.n_seq) if shape.unified else 1) + shape.n_ubatch
            self.size_swa = min(shape.n_ctx_seq, (window + 255) // 256 * 256)
        self.recurrent = p.recurrent_layers
        self.n_rs = n_seqs
        self.mla = p.is_mla and bool(meta.get(f"{a}.attention.key_length_mla"))
        self.hk_mla = int(meta.get(f"{a}.attention.key_length_mla", 0) or p.head_dim_k)
        self.hv_mla = int(meta.get(f"{a}.attention.value_length_mla", 0) or p.head_dim_v)
        kv_layers = [
            il for il in range(p.n_layer - p.nextn_layers) if not p.recurrent_layers[il] and p.n_head_kv[il] > 0
        ]
        dims_v = [(p.head_dim_v_swa if self.is_swa(il) else p.head_dim_v) * p.n_head_kv[il] for il in kv_layers]
        self.n_embd_v_gqa_max = max(dims_v, default=0)
        heads_k = {(p.head_dim_k_swa if self.is_swa(il) else p.head_dim_k) for il in kv_layers}
        heads_v = {(p.head_dim_v_swa if self.is_swa(il) else p.head_dim_v) for il in kv_layers}
        hk_all = heads_k.pop() if len(heads_k) == 1 else -1
        hv_all = heads_v.pop() if len(heads_v) == 1 else -1
        # Hadamard rotations of quantized caches (llama_kv_cache constructor: attn_rot_k / attn_rot_v)
        self.rot_k = 0
        if CACHE_TYPE_BLOCKS.get(settings.type_k, (1, 2))[0] > 1 and hk_all > 0 and p.head_dim_k % 64 == 0:
            n = 64
            while True:
                n *= 2
                if hk_all % n:
                    break
            self.rot_k = n // 2
        self.rot_v = (
            CACHE_TYPE_BLOCKS.get(settings.type_v, (1, 2))[0] > 1
            and hv_all > 0
            and p.head_dim_v % 64 == 0
            and not p.is_mla
        )
        self.softcap = bool(meta.get(f"{a}.attn_logit_softcapping"))
        self.embedding_scale = bool(meta.get(f"{a}.embedding_scale"))
        self.residual_scale = bool(meta.get(f"{a}.residual_scale"))
        self.logit_scale = bool(meta.get(f"{a}.logit_scale"))
        self.n_expert = p.n_expert
        self.n_expert_used = p.n_expert_used
        self.n_expert_groups = int(meta.get(f"{a}.expert_group_count", 0) or 0)
        self.n_group_used = int(meta.get(f"{a}.expert_group_used_count", 0) or 0)
        norm_w = meta.get(f"{a}.expert_weights_norm")
        self.expert_weights_norm = bool(norm_w) if norm_w is not None else a in _NORM_W_ARCHS
        ws = meta.get(f"{a}.expert_weights_scale")
        self.expert_weights_scale = bool(ws) and float(ws) != 1.0
        gf = int(meta.get(f"{a}.expert_gating_func", 0) or 0)
        self.gating = {2: "sigmoid", 3: "softmax_weight"}.get(gf, "sigmoid" if a == "llama4" else "softmax")

    def is_swa(self, il):
        return self.has_swa and self.swa[il]


#: architectures whose graph normalises the selected experts' weights without saying so in the GGUF
_NORM_W_ARCHS = frozenset(("llama", "qwen3moe", "qwen3vlmoe", "granitemoe", "granitehybrid", "olmoe", "minimax-m2"))


# --------------------------------------------------------------------------- scheduler


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


def _schedule(nodes, leafs, cpu, offload_to):
    """Backend per node and the splits with their inputs (``ggml_backend_sched_split_graph`` passes 1-5).

    ``offload_to``: backends whose ``offload_op`` accepts ops on host weights (CUDA-like GPUs), in priority order.
    Returns ``splits`` as a list of (backend, first node index, end index, [(input, its copy)]); nodes get
    ``be`` and, where a source lives on another backend, ``cs`` with the copy in its place.
    """
    # pass 1: pre-allocated tensors, graph inputs, ops on weights
    for t in leafs:
        if t.be == -1:
            t.be = _be_from_cur(t, cpu, offload_to)
    for t in nodes:
        if t.force != -1:
            t.be = t.force
        elif t.be == -1:
            t.be = _be_from_cur(t, cpu, offload_to)
    real = [t for t in nodes if t.op not in _VIEW_OPS]
    # pass 2: expand gpu down, gpu up, rest down, rest up
    cur = -1
    for t in real:
        if t.be != -1:
            cur = -1 if t.be == cpu else t.be
        elif cur != -1:
            t.be = cur
    cur = -1
    for t in reversed(real):
        if t.be != -1:
            cur = -1 if t.be == cpu else t.be
        elif cur != -1:
            t.be = cur
    cur = -1
    for t in real:
        if t.be != -1:
            cur = t.be
        elif cur != -1:
            t.be = cur
    cur = -1
    for t in reversed(real):
        if t.be != -1:
            cur = t.be
        elif cur != -1:
            t.be = cur
    # pass 3: nothing to upgrade (every backend has its own buffer type); leftovers go to the CPU
    # pass 4: views follow their source, sources without a backend follow their user
    for t in nodes:
        if t.vs is not None and t.be == -1:
            t.be = t.vs.be
        for s in t.src:
            if s.be == -1:
                s.be = s.vs.be if s.vs is not None else t.be
        if t.be == -1:
            t.be = cpu
    # pass 5: splits and the copies of inputs that live on another backend
    splits = []
    copies = {}  # (src, backend) -> copy tensor (tensor_id_copy: one per backend for the whole graph)
    cur_be = None
    inputs = None
    start = 0
    for i, t in enumerate(nodes):
        if t.op in _VIEW_OPS:
            continue
        be = t.be
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
        src = t.src
        for j, s in enumerate(src):
            if s.be != cur_be:
                key = (s, cur_be)
                cp = copies.get(key)
                if cp is None:
                    # ggml_dup_tensor_layout: same shape and strides, so a strided view costs its whole span
                    cp = T(s.ty, s.ne, s.nb, NONE, [])
                    cp.size = s.size if s.ty == "w" else _nbytes(s.ty, s.ne, s.nb)
                    cp.be = cur_be
                    cp.name = "copy:" + s.name
                    copies[key] = cp
                    inputs.append((s, cp))
                if t.cs is src:
                    t.cs = list(src)
                t.cs[j] = cp
    if cur_be is not None:
        splits.append((cur_be, start, len(nodes), inputs))
    return splits


def _be_from_cur(t, cpu, offload_to):
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
                    return offload_to[0]
                return b
    return -1


# --------------------------------------------------------------------------- allocator


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
        size = (size + a - 1) // a * a
        blocks = self.blocks
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


def _allocate(nodes, leafs, splits, n_copies, n_be, aligns, alloc_size):
    """Run ``ggml_gallocr_alloc_graph_impl`` over the scheduler's graph copy; returns peak bytes per backend."""
    allocs = [_Alloc(aligns[b]) for b in range(n_be)]
    # graph_copy (end of ggml_backend_sched_split_graph): per split, [input_dep, input_copy] per input, then its nodes
    gnodes = []
    for _be, i0, i1, inputs in splits:
        for s, cp in inputs:
            dep = T(s.ty, s.ne, s.nb, NONE, [s], s.vs if s.vs is not None else s)
            dep.be = s.be
            gnodes.append(dep)
            gnodes.append(cp)
        gnodes.extend(nodes[i0:i1])
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
        if t.op in _INPLACE:
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

    def free(t):
        if not t.flags & OUTPUT and t.addr != -1:
            allocs[t.abe].free(t.addr, t.asz)
            t.addr = -1

    for t in gleafs:
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
    for t in gnodes:
        be = t.be
        src = t.cs
        for p in src:
            if p.addr == -1:
                allocate(p, be)
        allocate(t, be)
        for p in src:
            n = p.nch - 1
            p.nch = n
            if n == 0 and p.nvw == 0:
                vs = p.vs
                if vs is not None:
                    vs.nvw -= 1
                    if vs.nvw == 0 and vs.nch == 0:
                        free(vs)
                else:
                    free(p)
    return [a.max_size for a in allocs]


# --------------------------------------------------------------------------- layer compression

_KEEP = 2  # periods of a repeating run simulated before jumping to its last period
_KEEP_HOOD = 1  # copies of a repeated neighbourhood (previous, own, next layer) simulated
_MAX_PERIOD = 8


def _compress(sigs: list[tuple]) -> list[int]:
    """Indices of the layers to build.

    Periodic runs are cut to ``_KEEP`` periods plus their last one. Then any layer whose neighbourhood
    (previous, own and next signature) has already been kept ``_KEEP`` times is dropped too, so scattered
    overrides (every other layer's experts elsewhere, 40 -ot patterns) do not make the graph 94 layers long:
    each backend's peak depends on a layer's own tensors and the copies at its boundaries, not on how many
    times the same neighbourhood repeats. Checked against the uncut graph on 120 random placements of four
    full-size models: one difference, 32 bytes (tests/memory/test_compute.py allows 4 KiB).
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
    for k, il in enumerate(keep):
        if k < 2 or k >= len(keep) - 2:
            out.append(il)
            continue
        hood = (sigs[keep[k - 1]], sigs[il], sigs[keep[k + 1]])
        if seen.get(hood, 0) >= _KEEP_HOOD:
            continue
        seen[hood] = seen.get(hood, 0) + 1
        out.append(il)
    return out


_BUCKETS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def _pad(keep: list[int], n: int) -> list[int]:
    """Add skipped layers until the count reaches a bucket size.

    Simulating a layer that compression skipped changes nothing (its neighbourhood already appears), but
    keeping the count to a few sizes lets one built graph serve many placements: during a drag the kept set
    changes with every move, and rebuilding the graph costs far more than simulating a few more layers.
    """
    target = next((b for b in _BUCKETS if b >= len(keep)), n)
    if target >= n:
        return list(range(n))
    kept = set(keep)
    extra = [il for il in range(n) if il not in kept][: target - len(keep)]
    return sorted(kept.union(extra))


# --------------------------------------------------------------------------- public entry


_CACHE_SIZE = 256  # results per model (a drag revisits the same placements)
_GRAPHS = 16  # built graphs per model (one per context shape and layer structure)


def _getter(idx):
    """A function returning the tuple ``(seq[i] for i in idx)`` (C speed for the common case)."""
    if not idx:
        return lambda seq: ()
    if len(idx) == 1:
        return lambda seq, i=idx[0]: (seq[i],)
    return itemgetter(*idx)


def model_facts(model: Model) -> dict:
    """Per-model constants (tensor index by name, shapes, tensors per layer, each layer's structure) and the
    caches of built graphs and results; :class:`app.memory.estimator.Estimator` keeps one per model."""
    p = model.params
    names = {}
    per_layer: list[list[int]] = [[] for _ in range(p.n_layer)]
    suffixes: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(p.n_layer)]
    for i, t in enumerate(model.tensors):
        names[t.name] = i
        b = model.block_of(t.name)
        if b.layer is not None and b.layer < p.n_layer:
            per_layer[b.layer].append(i)
            suffixes[b.layer].append((t.name.split(".", 2)[-1], t.shape))
    n_main = p.n_layer - p.nextn_layers
    kinds: list[int] = []
    kind_ids: dict[tuple, int] = {}
    for il in range(n_main):
        k = (
            p.swa_layers[il] if p.has_swa else False,
            p.recurrent_layers[il],
            p.n_head[il],
            p.n_head_kv[il],
            p.n_ff[il],
            il < p.n_layer_dense_lead,
            il == n_main - 1,
            tuple(suffixes[il]),
        )
        kinds.append(kind_ids.setdefault(k, len(kind_ids)))
    getters = [_getter(idx) for idx in per_layer[:n_main]]
    glob = [i for i, t in enumerate(model.tensors) if model.block_of(t.name).layer is None]
    f = {
        "names": names,
        "getters": getters,
        "kinds": kinds,
        "glob": _getter(glob),
        "shapes": [_ne4(t.shape) for t in model.tensors],
        "results": OrderedDict(),
        "graphs": OrderedDict(),
    }
    return f


def compute_buffers(
    model: Model,
    placement: WeightPlacement,
    settings: LlamaSettings,
    shape: ContextShape,
    pipeline: bool,
    facts: dict | None = None,
    notes: list[str] | None = None,
) -> dict[str, int]:
    """Compute buffer bytes per device name (``Host`` for the CPU backend's buffer).

    ``pipeline``: pipeline parallelism is on (the scheduler keeps 4 copies of every input).
    ``notes``: where the graph cannot be built and the sizes come from :func:`_approx` instead, the note
    saying so is appended here (also logged as a warning, once per model); never silent.
    """
    p = model.params
    if p.n_layer <= 0 or p.n_embd <= 0:
        return {}
    if facts is None:
        facts = model_facts(model)
    devs = placement.devices
    cpu = len(devs)
    be_of = {d.name: i for i, d in enumerate(devs)}
    be_of[CPU] = cpu
    td = placement.tensor_device
    tbe = [be_of.get(d, cpu) for d in td]
    layer_be = [be_of.get(d, cpu) for d in placement.layer_device]
    kv_be = [cpu if settings.no_kv_offload else layer_be[il] for il in range(p.n_layer)]
    # a layer's signature: its structure and where its tensors and its KV cache live
    getters = facts["getters"]
    sigs = [(kind, kv_be[il], layer_be[il], getters[il](tbe)) for il, kind in enumerate(facts["kinds"])]
    glob = facts["glob"](tbe)
    ngl = settings.n_gpu_layers
    if ngl is None or ngl in (NGL_AUTO, NGL_ALL):
        ngl = p.n_layer + 1
    # Backends set while the graph is built: graph_get_cb pins each layer's "norm" ops to the layer's device
    # when the batch is small or every layer is offloaded, and -nkvo pins the attention output to the CPU.
    # The dry run that llama-fit-params reports (ggml_backend_sched_reserve_size) resets the scheduler after
    # the graph is built, which drops both.
    real_run = settings.tool != "fit-params"
    pin = real_run and (min(shape.n_ctx, shape.n_ubatch) < 32 or ngl > p.n_layer)
    pin_cpu = real_run and settings.no_kv_offload
    offload = settings.op_offload and any(d.kind in ("gpu", "igpu") for d in devs)
    host_weights = not (settings.repack and not settings.use_host)
    key = (
        shape,
        settings.type_k,
        settings.type_v,
        settings.no_kv_offload,
        offload,
        host_weights,
        pin,
        pin_cpu,
        pipeline,
        tuple((d.name, d.kind) for d in devs),
        tuple(sigs),
        glob,
        placement.duplicated_output,
    )
    results = facts["results"]
    hit = results.get(key)
    if hit is not None:
        results.move_to_end(key)
        cached, cached_note = hit
        if cached_note and notes is not None:
            notes.append(cached_note)
        return dict(cached)
    layers = _pad(_compress(sigs), len(sigs))
    gkey = (shape, settings.type_k, settings.type_v, tuple(facts["kinds"][il] for il in layers))
    graphs = facts["graphs"]
    approximate: str | None = None
    try:
        b = graphs.get(gkey)
        if b is None:
            b = _Builder(_Ctx(model, settings, shape, facts), layers)
            _ARCH_BUILDERS.get(p.arch, _build_standard)(b)
            b.all = b.g.nodes + b.g.leafs
            graphs[gkey] = b
            if len(graphs) > _GRAPHS:
                graphs.popitem(last=False)
        else:
            graphs.move_to_end(gkey)
        peaks = _run(
            model, b, layers, placement, devs, tbe, layer_be, kv_be, cpu, pin, pin_cpu, offload, host_weights, pipeline
        )
    except Exception as exc:  # noqa: BLE001 - an architecture whose tensors the generic graph cannot follow
        approximate = approximate_note(p.arch, exc)
        if not facts.get("approximate_logged"):
            facts["approximate_logged"] = True
            log.warning("%s", approximate, exc_info=True)
        else:
            log.debug("%s", approximate)
        peaks = _approx(p, shape, layer_be, cpu, pipeline)
    if approximate and notes is not None:
        notes.append(approximate)
    out: dict[str, int] = {}
    for i, size in enumerate(peaks):
        name = CPU if i == cpu else devs[i].name
        out[name] = out.get(name, 0) + size
    results[key] = (out, approximate)
    if len(results) > _CACHE_SIZE:
        results.popitem(last=False)
    return dict(out)


def _run(model, b, layers, placement, devs, tbe, layer_be, kv_be, cpu, pin, pin_cpu, offload, host_weights, pipeline):
    """Bind a built graph to this placement, then schedule and allocate it."""
    names = b.c.names
    tensors = model.tensors
    for t in b.all:
        t.be = t.force = t.addr = -1
        t.nch = t.nvw = 0
        t.cs = t.src
        t.flags = t.fl0
    for t, k, sfx in b.wrefs:
        if k >= 0:
            i = names[f"blk.{layers[k]}.{sfx}"]
            be = tbe[i]
        elif sfx == "token_embd.weight@output":  # tied embeddings: the output's copy of token_embd
            i = names["token_embd.weight"]
            dup_dev = placement.duplicated_output
            be = next((j for j, d in enumerate(devs) if d.name == dup_dev), tbe[i]) if dup_dev else tbe[i]
        else:
            i = names[sfx]
            be = tbe[i]
        t.wbe = be
        t.size = tensors[i].nbytes
        t.host = be == cpu and host_weights
    for t, k in b.crefs:
        t.wbe = kv_be[layers[k]]
    if pin:
        for t, k in b.pins:
            t.force = layer_be[layers[k]]
    if pin_cpu:
        for t in b.cpu_pins:
            t.force = cpu
    n_be = cpu + 1
    offload_to = [i for i, d in enumerate(devs) if d.kind in ("gpu", "igpu")] if offload else []
    g = b.g
    splits = _schedule(g.nodes, g.leafs, cpu, offload_to)
    gpu = [d.kind in ("gpu", "igpu") for d in devs] + [False]
    aligns = [128 if x else 32 for x in gpu]

    def alloc_size(t, be):
        size = t.size
        if gpu[be] and t.op == "FLASH_ATTN_EXT":
            # ggml_cuda_flash_attn_ext_get_alloc_size: the tile/MMA kernels used for prompt batches convert
            # a quantized K (and V unless it is a view of K) to f16 in space after the result
            k, v = t.cs[1], t.cs[2]
            if k.ty != "f16":
                size = (size + 127) // 128 * 128 + nelements(k) * 2
            if v.ty != "f16" and not (v.vs is not None and v.vs is k.vs and v.nb == k.nb):
                size = (size + 127) // 128 * 128 + nelements(v) * 2
        return size

    return _allocate(g.nodes, g.leafs, splits, 4 if pipeline else 1, n_be, aligns, alloc_size)


#: How every note about the approximate compute path starts (tests look for it).
APPROXIMATE = "compute buffers are approximate"


def approximate_note(arch: str, exc: BaseException) -> str:
    """The note for an estimate whose compute buffers come from :func:`_approx`."""
    return (
        f"{APPROXIMATE}: Layerdeck could not build llama.cpp's compute graph for '{arch}' "
        f"({type(exc).__name__}: {exc}), so compute uses a rough per-layer formula; weights and KV are exact. "
        "Use Verify (llama-fit-params) for the real compute sizes"
    )


def _approx(p, shape, layer_be, cpu, pipeline):
    """Fallback when the graph cannot be built: the dominant terms of a llama-style layer, per backend.

    A layer needs its widest intermediate (the f32 KQ scores without flash attention, else the gated FFN or
    the selected experts' activations) plus a few hidden-state-sized tensors; the output device also needs
    the logits; inputs (mask, positions) live on the CPU and are copied to each device (x4 with pipeline
    parallelism).
    """
    nt = min(shape.n_ctx, shape.n_ubatch)
    n_out = max(1, min(nt, shape.n_outputs_max))
    x = p.n_embd * nt * 4
    mask = shape.n_ctx_seq * nt * (2 if shape.flash_attn else 4)
    copies = 4 if pipeline else 1
    peaks = [0] * (cpu + 1)
    used = set()
    for il in range(p.n_layer - p.nextn_layers):
        be = layer_be[il]
        used.add(be)
        if p.recurrent_layers[il]:
            widest = (2 * p.ssm_d_inner + 2 * p.ssm_n_group * p.ssm_d_state + p.ssm_dt_rank) * nt * 4 * 2
        else:
            n_kv = shape.size_swa if p.has_swa and p.swa_layers[il] and shape.size_swa else shape.n_ctx_seq
            hd = p.head_dim_v or (p.n_embd // max(1, p.n_head[il]))
            attn = p.n_head[il] * nt * 4 * (hd if shape.flash_attn else n_kv)
            ffn = 3 * nt * 4 * max(p.n_ff[il], p.n_expert_used * (p.n_ff_exp or p.n_ff[il]))
            widest = max(attn, ffn)
        peaks[be] = max(peaks[be], widest + 3 * x)
    for be in used:
        if be != cpu:
            peaks[be] += copies * (mask + x)
    out_be = layer_be[-1]
    peaks[out_be] = max(peaks[out_be], p.n_vocab * n_out * 4 + 2 * x)
    peaks[cpu] += copies * (mask + 2 * x)
    return peaks
