"""The replay of the Vulkan backend's graph reordering (app/memory/compute/vk_optimize.py) on small graphs whose
reordered form follows from ggml_vk_graph_optimize's rules by hand, and its wiring into the compute replay.
(The figures against llama.cpp are tests/backends/test_vulkan.py's, on lavapipe.)"""

from __future__ import annotations

from app.lanes import Lane
from app.memory.compute import core
from app.memory.compute.alloc import allocate_graph
from app.memory.compute.ggml import (
    INPUT,
    NONE,
    OUTPUT,
    T,
    argsort_top_k,
    get_rows,
    mul_mat,
    new,
    reshape,
    set_rows,
    unary,
)
from app.memory.compute.ggml import view as gview
from app.memory.compute.vk_optimize import optimize, reorder, use_counts
from app.memory.estimator import Estimator
from app.memory.settings import LlamaSettings
from app.model import open_model
from tests.gguf_factory import write_sparse_model

MiB = 1 << 20
GiB = 1 << 30


def _weight(ne):
    return T("w", ne, (0, 0, 0, 0), NONE, [])


def _input(ne):
    t = new("f32", ne, NONE)
    t.flags = t.fl0 = INPUT
    return t


def _wtype(_t):
    return "f32"


def test_an_independent_node_moves_before_a_dependent_one():
    x = _input((64, 8))
    a = mul_mat(_weight((64, 64, 1, 1)), x)
    s = unary("SCALE", a)  # reads a: not pulled past it (SCALE after MUL_MAT is no fusable pair)
    b = mul_mat(_weight((64, 32, 1, 1)), x)  # depends on nothing unused: grabbed into a's set
    nodes = [a, s, b]
    out = optimize(nodes, use_counts(nodes), {}, _wtype)
    assert out == [a, b, s]
    assert nodes == [a, s, b]  # a new list: the built graph is cached and replayed for other placements


def _rope_view_set_rows():
    """MUL_MAT a, ROPE k (independent of a), VIEW of k, MUL_MAT reading a, SET_ROWS of the view into a cache."""
    x = _input((64, 8))
    pos = new("i32", (8,), NONE)
    idx = new("i64", (8,), NONE)
    cache = new("f16", (64, 256), NONE)
    cache.wbe = 0
    a = mul_mat(_weight((64, 64, 1, 1)), x)
    k = unary("ROPE", x, pos)
    kv = gview(k, (64, 8), (k.nb[1],))
    b = mul_mat(_weight((64, 64, 1, 1)), a)
    sr = set_rows(cache, kv, idx)  # the mini graph keeps [cache, rows, indices]; ggml has [rows, indices, cache]
    return [a, k, kv, b, sr]


def test_rope_view_set_rows_are_pulled_together_reading_ggml_s_source_slots():
    nodes = _rope_view_set_rows()
    a, k, kv, b, sr = nodes
    # ROPE joins a's set; its VIEW and the SET_ROWS of that view come along (ggml_can_fuse_subgraph_ext: the rope
    # and the view each used once, inside the three); b waits for a. Read with the mini graph's slot order, the
    # SET_ROWS' src[0] would be the cache and nothing would be pulled: [a, k, kv] then [b, sr].
    assert optimize(nodes, use_counts(nodes), {}, _wtype) == [a, k, kv, sr, b]


def test_a_second_use_of_the_rope_keeps_the_set_rows_in_place():
    nodes = _rope_view_set_rows()
    a, k, kv, b, sr = nodes
    other = unary("SCALE", k)  # a second reader of the ROPE: the three cannot be fused, so SET_ROWS stays
    nodes = [a, k, kv, b, sr, other]
    out = optimize(nodes, use_counts(nodes), {}, _wtype)
    assert out.index(sr) > out.index(b)


def _topk_moe(scale_after):
    """Router logits, then topk_moe_early_softmax (SOFT_MAX, RESHAPE, ARGSORT, VIEW, GET_ROWS), then maybe a
    SCALE of the weights. The input is never freed (input and output), so no hole is left before the logits."""
    x = _input((1024, 64))
    x.flags |= OUTPUT
    logits = mul_mat(_weight((1024, 64, 1, 1)), x)  # [64 experts, 64 tokens]
    probs = unary("SOFT_MAX", logits)  # in place over the logits when nothing else reads them
    p3 = reshape(probs, 1, 64, 64)
    top = argsort_top_k(probs, 8)  # ARGSORT + VIEW
    w = get_rows(p3, top)
    nodes = [logits, probs, p3, top.src[0], top, w]
    last = w
    if scale_after:
        last = unary("SCALE", w)
        nodes.append(last)
    return nodes, x, logits, last


def test_topk_moe_keeps_its_external_inputs_until_the_fused_end():
    nodes, x, logits, last = _topk_moe(scale_after=True)
    deps: dict = {}
    optimize(nodes, use_counts(nodes), deps, _wtype)
    # add_pattern_alloc_deps: the sources from outside the pattern, until the trailing SCALE TOPK_MOE fuses
    assert list(deps) == [last] and deps[last] == [logits]


def test_the_dep_nodes_extend_the_lifetimes_in_the_allocator():
    def peak(with_deps):
        nodes, x, logits, last = _topk_moe(scale_after=False)
        splits = [(0, 0, len(nodes), [])]
        ordered, deps = reorder(nodes, splits, [True], use_counts(nodes), _wtype)
        return allocate_graph(ordered, [x], splits, 1, 1, [16], lambda t, be: t.size, [0], deps if with_deps else None)

    kept, freed = peak(True)[0], peak(False)[0]
    # without the dep, SOFT_MAX takes the logits' memory in place; kept until GET_ROWS, the logits need their own
    # 16 KiB next to the probabilities
    assert kept - freed == 64 * 64 * 4, (kept, freed)


def test_only_vulkan_devices_are_reordered(tmp_path, monkeypatch):
    model = open_model(write_sparse_model("qwen3-30b-a3b", tmp_path / "q.gguf"))
    s = LlamaSettings(n_ctx=4096)
    calls = []
    orig = core._vk_reorder

    def spy(b, m, splits, vulkan):
        before = list(b.g.nodes)
        got = orig(b, m, splits, vulkan)
        assert b.g.nodes == before  # the cached graph keeps its order
        calls.append((vulkan, got[0] != before))
        return got

    monkeypatch.setattr(core, "_vk_reorder", spy)
    rpc = [Lane("RPC0", "RPC0[127.0.0.1:5000]", 96 * GiB, 96 * GiB, "rpc")]
    Estimator(model).estimate(rpc, s)  # a remote Vulkan behind RPC is an RPC backend to the client
    assert calls == []
    vk = [Lane("Vulkan0", "Vulkan0", 96 * GiB, 96 * GiB, "gpu")]
    Estimator(model).estimate(vk, s)
    assert calls and all(v[:1] == [True] and moved for v, moved in calls)
