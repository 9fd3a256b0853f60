"""Per-backend rules: which weights a device refuses, stated with the llama.cpp source they mirror."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.lanes import CPU, DeviceKind, Lane
from app.memory.backends import refuses, loader_op_sizes, weight_op
from app.memory.layout import place_weights
from app.memory.settings import LlamaSettings
from app.model import open_model
from app.model.tensor_ops import TENSOR_OPS
from tests.gguf_factory import write_sparse_model

MiB = 1 << 20
LAVAPIPE = 128 * MiB  # maxStorageBufferRange of Mesa's lavapipe (vulkaninfo)


@pytest.fixture(scope="module")
def q30(tmp_path_factory):
    return open_model(write_sparse_model("qwen3-30b-a3b", tmp_path_factory.mktemp("rules") / "q30.gguf"))


def test_the_op_table_is_the_pinned_llama_cpp_one():
    """app/model/tensor_ops.py is generated from src/llama-arch.cpp; regenerating it changes nothing."""
    from app.llamacpp.build import build_key, cache_root

    src = cache_root() / build_key() / "src"
    if not (src / "src" / "llama-arch.cpp").is_file():
        pytest.skip("the pinned llama.cpp source is not unpacked here (the llama_bin fixture builds it)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from gen_tensor_ops import read_tables, table

    expected = table(*read_tables(src))
    assert len(TENSOR_OPS) == len(expected) >= 250
    assert {k: v for k, v in TENSOR_OPS.items() if expected[k] != v} == {}


@pytest.mark.parametrize(
    "name,op",
    [
        ("blk.3.attn_q.weight", "MUL_MAT"),
        ("blk.3.attn_q.bias", "ADD"),  # "tensors with "bias" suffix are always used with GGML_OP_ADD"
        ("blk.0.ffn_down_exps.weight", "MUL_MAT_ID"),
        ("blk.0.ffn_down_exps.bias", "ADD_ID"),  # ... "or GGML_OP_ADD_ID" for MUL_MAT_ID weights
        ("blk.12.attn_norm.weight", "MUL"),
        ("token_embd.weight", "GET_ROWS"),
        ("output.weight", "MUL_MAT"),
        ("rope_freqs.weight", "ROPE"),
        ("blk.1.ssm_conv1d.weight", "SSM_CONV"),
        ("something.else", "NONE"),
    ],
)
def test_each_weight_is_tested_with_its_op(name, op):
    assert weight_op(name) == op


def test_the_output_layer_is_refused_by_lavapipe_for_its_logits(q30):
    """weight_buft_supported builds mul_mat(output, [n_embd, 512]): the result, 151936 x 512 f32 = 296.75 MiB,
    is over lavapipe's 128 MiB maxStorageBufferRange, so ggml-vulkan's supports_op refuses it whatever the
    weight's type ("reject any tensors larger than the max buffer size", ggml-vulkan.cpp)."""
    t = next(t for t in q30.tensors if t.name == "output.weight")
    sizes = loader_op_sizes(t, "MUL_MAT", q30.params)
    assert sizes[-1] == 151936 * 512 * 4
    lane = Lane("Vulkan0", "Vulkan0", 2048 * MiB, 2048 * MiB, DeviceKind.GPU, max_tensor_bytes=LAVAPIPE)
    assert refuses(lane, t, q30.params)
    roomy = Lane("Vulkan0", "Vulkan0", 24 * 1024 * MiB, 24 * 1024 * MiB, DeviceKind.GPU, max_tensor_bytes=4 << 30)
    assert not refuses(roomy, t, q30.params)  # a desktop driver's ~4 GiB range takes it
    rpc = Lane("RPC0", "RPC0[127.0.0.1:1]", 2048 * MiB, 2048 * MiB, DeviceKind.RPC)
    assert not refuses(rpc, t, q30.params)  # RPC's supports_op answers yes to everything (ggml-rpc.cpp)


def test_refused_weights_stay_in_host_memory_and_the_rest_goes_to_the_device(q30):
    lane = Lane("Vulkan0", "Vulkan0", 2048 * MiB, 2048 * MiB, DeviceKind.GPU, max_tensor_bytes=LAVAPIPE)
    wp = place_weights(q30, [lane], LlamaSettings(n_gpu_layers=99, overrides=[("exps", "CPU")]))
    where = dict(zip((t.name for t in q30.tensors), wp.tensor_device))
    assert where["output.weight"] == CPU and wp.layer_device[-1] == "Vulkan0"
    assert where["blk.0.attn_q.weight"] == "Vulkan0" and where["blk.0.ffn_down_exps.weight"] == CPU
    # without the override, the experts whose op fits in 128 MiB go to the device, the others stay
    wp = place_weights(q30, [lane], LlamaSettings(n_gpu_layers=99))
    big = [t for t, d in zip(q30.tensors, wp.tensor_device) if "_exps" in t.name and d == CPU]
    small = [t for t, d in zip(q30.tensors, wp.tensor_device) if "_exps" in t.name and d == "Vulkan0"]
    assert big and small and all(t.nbytes > LAVAPIPE for t in big) and all(t.nbytes <= LAVAPIPE for t in small)
