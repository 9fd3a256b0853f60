"""Compute buffers: llama.cpp's worst-case graph, scheduled and allocated the way ggml does it.

llama.cpp sizes each backend's compute buffer by building the prompt-processing
graph for a full ubatch against a full KV cache (``llama_context::sched_reserve``
-> ``graph_reserve``), letting the backend scheduler assign every op to a
backend and cut the graph into splits (``ggml_backend_sched_split_graph`` in
``ggml/src/ggml-backend.cpp``), and running the graph allocator over the result
(``ggml_gallocr_*`` in ``ggml/src/ggml-alloc.c``): each backend's buffer is the
high-water mark of its dynamic allocator. There is no closed formula for that
peak (in-place reuse, views that keep their source alive, best-fit holes), so
this package re-does the three steps on a small model of the graph:

1. **Graph**: :mod:`.ggml` (tensors and ops with ggml's output shapes and
   types), :mod:`.builder` (``src/llama-graph.cpp``: ``build_inp_embd``,
   ``build_attn``/``build_attn_mha``, ``build_ffn``, ``build_moe_ffn``),
   :mod:`.context` (what a graph's structure depends on) and one module per
   architecture family in :mod:`.models` (``src/models/<arch>.cpp``; a registry
   maps ``general.architecture`` names to families), in the order
   ``ggml_build_forward_expand`` visits the ops. Only tensor shapes, sources,
   views and flags are modelled; no data.
2. **Scheduler** (:mod:`.schedule`): the five passes of
   ``ggml_backend_sched_split_graph`` (ops on the backend of their weights,
   graph inputs on the CPU, op offload of host weights to a GPU for batches
   >= 32, expansion up and down, splits, one copy per (tensor, backend) of
   every split input, four copies of inputs when pipeline parallelism is on),
   plus the ``norm``/``l_last`` pinning of ``llama_context::graph_get_cb``.
3. **Allocator** (:mod:`.alloc`): ``ggml_gallocr_alloc_graph_impl`` with its
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
simulated (:mod:`.compress`): a run of layers with the same structure and
placement is cut to its first few periods and its last one, which leaves every
buffer's peak unchanged because the allocator reaches a steady state after a
layer or two. Built graphs are reused across placements (only weight backends,
pins and sizes are re-bound) and results are memoised per model (:mod:`.core`).

Where a graph cannot be built at all, :mod:`.approx` gives a rough per-layer
formula and the estimate says so (:data:`APPROXIMATE`).

Adding an architecture is adding a file to :mod:`.models` (see its docstring).
See ``docs/memory-model.md`` ("Compute buffers") for the derivation and the
measured errors.
"""

from __future__ import annotations

from .approx import APPROXIMATE, approximate_note
from .core import compute_buffers, model_facts
from .models import CHECKED_ARCHS, FAMILIES, REGISTRY, UNCHECKED, Family, family_of, unchecked_note

__all__ = [
    "APPROXIMATE",
    "CHECKED_ARCHS",
    "FAMILIES",
    "REGISTRY",
    "UNCHECKED",
    "Family",
    "approximate_note",
    "compute_buffers",
    "family_of",
    "model_facts",
    "unchecked_note",
]
