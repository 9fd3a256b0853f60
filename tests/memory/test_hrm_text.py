"""HRM-Text (``src/models/hrm-text.cpp``): ``block_count`` counts cache slots (layers_per_stack x h_cycles x
(l_cycles + 1)), the file holds the two stacks' physical blocks, and each slot's KV cache sits on the slot's own
device while its ops read its block's weights (placed by the block's number). The figures against llama.cpp are in
the accuracy matrix (tests/memory/accuracy.py ``mimir-*``/``hrmtied-*``, the server-log cases and Vulkan0); here
the parts that need no llama.cpp: the metadata llama.cpp asserts on, the slot-to-block map and where weights and
caches land."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute.approx import APPROXIMATE
from app.memory.compute.models.hrm_text import slot_blocks
from app.memory.estimator import Estimator
from app.model import open_model
from app.model.errors import LayerCountError, MetadataError
from tests.gguf_factory import write_sparse_model
from tests.model.gguf_edit import T_U32, apply

GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture(scope="module")
def tiny(tiny_models) -> bytes:
    return Path(tiny_models["hrm_text"]).read_bytes()


def _edited(tmp_path, base, mutations):
    p = tmp_path / "m.gguf"
    p.write_bytes(apply(base, mutations))
    return p


def test_slots_over_physical_blocks(tiny_models):
    m = open_model(tiny_models["hrm_text"])
    assert (m.params.n_layer, m.params.hrm_stack) == (12, (2, 2, 2))
    assert sorted({b.layer for b in m.blocks if b.layer is not None}) == [0, 1, 2, 3]
    # hrm.z_l_init is created with layer 0 (tn(LLM_TENSOR_HRM_Z_L_INIT, 0)): in layer 0's block, on its device
    assert any(t.name == "hrm.z_l_init" for b in m.blocks if b.layer == 0 for t in b.tensors)
    # per high cycle: two low passes over blocks 0-1, one high pass over blocks 2-3
    assert slot_blocks(m.params) == [0, 1, 0, 1, 2, 3, 0, 1, 0, 1, 2, 3]


@pytest.mark.parametrize(
    "mutations,error,message",
    [
        (
            [["meta", "{arch}.block_count", T_U32, 10]],
            MetadataError,
            r"hrm_text\.block_count is 10, but an HRM-Text model's block count is its cache-slot count, "
            r"layers_per_stack x h_cycles x \(l_cycles \+ 1\) = 2 x 2 x 3 = 12 "
            r'\(llama\.cpp: "GGML_ASSERT\(hparams\.n_layer\(\) == n_slot\) failed"\)',
        ),
        (
            [["meta", "{arch}.hrm.l_cycles", T_U32, 0]],
            MetadataError,
            r'hrm_text\.hrm\.l_cycles is 0 \(llama\.cpp: "GGML_ASSERT\(hparams\.n_hrm_l_cycles > 0\) failed"\)',
        ),
        (
            [["del", "{arch}.hrm.h_cycles"]],
            MetadataError,
            r"hrm_text\.hrm\.h_cycles is missing, and llama\.cpp requires it",
        ),
        (
            # 3 layers per stack (18 slots) need 6 blocks; the file holds 4, two stacks of 2
            [["meta", "{arch}.hrm.layers_per_stack", T_U32, 3], ["meta", "{arch}.block_count", T_U32, 18]],
            LayerCountError,
            r"2 x hrm_text\.hrm\.layers_per_stack is 6, but the tensor table holds layers 0 to 3",
        ),
        (
            # uint32 n_slot wraps: 2^31 x 2 x 3 = 12 mod 2^32, so llama.cpp's assert passes and it misses blocks
            [["meta", "{arch}.hrm.layers_per_stack", T_U32, (1 << 31) + 2]],
            LayerCountError,
            r"but the tensor table holds layers 0 to 3",
        ),
    ],
    ids=["block-count-not-slots", "zero-low-cycles", "missing-high-cycles", "fewer-blocks-than-stacks", "wrap"],
)
def test_hostile_stack_metadata_is_refused_as_llama_cpp_refuses_it(tmp_path, tiny, mutations, error, message):
    with pytest.raises(error, match=message):
        open_model(_edited(tmp_path, tiny, mutations))


def test_a_slot_s_cache_follows_ngl_and_its_ops_follow_its_block(tmp_path):
    """-ngl 30 offloads the output and slots 43-71 (llama.cpp's i_gpu_start = n_layer + 1 - ngl): their caches are on
    RPC0, but every block (0-23) is below 43, so the layers' weights stay on the CPU and the slots' ops, which read
    them, run there too; the graph is replayed (no approximation), every slot built."""
    model = open_model(write_sparse_model("dfm-mimir-1b", tmp_path / "mimir.gguf"))
    devices = [Lane("RPC0", "RPC0[127.0.0.1:50052]", 24 * GiB, 24 * GiB, "rpc")]
    est = Estimator(model)
    got = est.estimate(devices, settings_from_args("-c 8192 -ngl 30".split(), tool="fit-params"))
    rpc, cpu = got.device("RPC0"), got.host
    per_slot = 2 * 8192 * 4 * 128 * 2  # K and V, 8192 cells, 4 KV heads of 128, f16
    assert (rpc.kv, cpu.kv) == (29 * per_slot, 43 * per_slot)
    output = next(t.nbytes for t in model.tensors if t.name == "output.weight")
    assert rpc.model == output
    assert not [n for n in got.notes if n.startswith(APPROXIMATE)]
    (graph,) = est.compute_facts["graphs"].values()
    assert graph.layers == list(range(72))
    # llama-fit-params prints 104 MiB for RPC0 and 114 MiB for the host here (the accuracy matrix checks it)
    assert rpc.compute // MiB == 104
