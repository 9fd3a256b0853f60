"""What a device's backend refuses, as llama.cpp decides it (the pinned source is the reference).

llama.cpp's loader tests every weight before it puts it on a device: ``weight_buft_supported``
(``src/llama-model-loader.cpp``) builds the op the weight is used in (:data:`app.model.tensor_ops.TENSOR_OPS`)
with a 512-token input and asks the device's ``supports_op``; a device that refuses leaves the weight to the
next buffer type of the list, in the end host memory (``select_weight_buft``; the log says "cannot be used
with preferred buffer type ..., using ... instead" at ``-lv 5``). The scheduler asks the same question for
every op of the graph (:mod:`app.memory.compute.schedule`).

The rules that change memory, per backend:

- **Vulkan** (``ggml-vulkan.cpp`` ``ggml_backend_vk_device_supports_op``, "reject any tensors larger than the
  max buffer size"): an op is refused when any source or its result is larger than the device's
  ``max_buffer_size`` or, unless the driver has ``VK_EXT_shader_64bit_indexing``, its
  ``maxStorageBufferRange``. That is 128 MiB on Mesa's lavapipe and about 4 GiB on desktop drivers: the
  lane's :attr:`~app.lanes.Lane.max_tensor_bytes`.
- **CUDA/ROCm, SYCL**: no size gate; the weight types that matter for common models are all supported
  (``ggml-cuda.cu`` ``ggml_backend_cuda_device_supports_op``: TQ1_0/TQ2_0 matmuls are refused).
- **Metal**: no size gate on weights (``ggml-metal-device.m``); NVFP4 and TQ1_0 matmuls are refused.
- **RPC**: ``supports_op`` always answers yes and is not forwarded to the server (``ggml-rpc.cpp``), so
  nothing is refused on an RPC device, whatever backend serves it.
- **CPU**: supports everything it is asked.
"""

from __future__ import annotations

import weakref

from ..errors import EstimateError
from ..lanes import Lane
from ..model.gguf_reader import TensorInfo
from ..model.hparams import ModelParams
from ..model.tensor_ops import TENSOR_OPS
from .kv import CACHE_TYPE_BLOCKS

F32 = 4

#: llama.cpp's device name prefixes (``ggml_backend_dev_name``) and the backend each means.
_PREFIXES = (
    ("CUDA", "cuda"),
    ("ROCm", "rocm"),
    ("MUSA", "cuda"),
    ("Vulkan", "vulkan"),
    ("MTL", "metal"),
    ("Metal", "metal"),
    ("SYCL", "sycl"),
    ("RPC", "rpc"),
    ("CANN", "cann"),
)

#: Buffer alignment per backend where the device does not say (``get_alignment`` of its buffer type):
#: CUDA/ROCm 128 (``ggml-cuda.cu``), SYCL 128 (``ggml-sycl/common.hpp``), Metal 32, an RPC server's CPU 32
#: (``TENSOR_ALIGNMENT``), Vulkan the driver's minStorageBufferOffsetAlignment (16 is lavapipe's and NVIDIA's).
_ALIGNMENT = {"cuda": 128, "rocm": 128, "sycl": 128, "metal": 32, "rpc": 32, "vulkan": 16, "cann": 32}
#: The CPU's own buffers (``TENSOR_ALIGNMENT``).
CPU_ALIGNMENT = 32


class BackendAbort(EstimateError, ValueError):
    """llama.cpp stops on this placement: a pre-allocated tensor (a KV or recurrent cache) lives in a device's
    buffer whose backend cannot run an op on it (``ggml_backend_sched_backend_id_from_cur``: "pre-allocated tensor
    (...) in a buffer (...) that cannot run the operation"), e.g. a layer's cache above a Vulkan driver's
    storage-buffer range."""


def backend_of(lane: Lane) -> str:
    """The llama.cpp backend behind a lane, from the name llama.cpp gives its devices (``other`` if unknown)."""
    for prefix, backend in _PREFIXES:
        if lane.name.startswith(prefix):
            return backend
    return "other"


def alignment_of(lane: Lane) -> int:
    return lane.alignment or _ALIGNMENT.get(backend_of(lane), 128)


def host_buffer_of(devices: list[Lane]) -> tuple[int, int]:
    """(alignment, max buffer; 0 = unlimited) of the CPU backend's compute buffer: the host buffer type of the
    first model device that has one (``llama-context.cpp``): Vulkan_Host (the driver's minMemoryMapAlignment,
    1 GiB buffers), CUDA_Host (32, unlimited); RPC and Metal bring none, so plain CPU memory."""
    if not devices:
        return CPU_ALIGNMENT, 0
    first = devices[0]
    backend = backend_of(first)
    if backend == "vulkan":
        return first.host_alignment or 64, first.host_max_buffer or (1 << 30)
    return first.host_alignment or CPU_ALIGNMENT, first.host_max_buffer


def offloads_ops(lane: Lane) -> bool:
    """Whether the scheduler moves ops on host weights to this device for a big batch (``ggml_backend_offload_op``
    asks the device's ``offload_op``): a GPU's does; RPC's and the ``-sm tensor`` Meta() device's are nullptr
    (``ggml-rpc.cpp``; ``ggml-backend-meta.cpp`` ``ggml_backend_meta_device_iface``), so no host weight is copied
    into their compute buffers (Qwen3-30B -ngl 20 -sm tensor on Vulkan0: Meta() compute 100 MiB, -sm layer 168)."""
    return lane.kind in ("gpu", "igpu") and lane.name != "Meta()"


def cuda_like(lane: Lane) -> bool:
    """Whether the lane's backend is CUDA's code (CUDA, ROCm/HIP, MUSA): its flash-attention alloc sizes apply."""
    return backend_of(lane) in ("cuda", "rocm")


#: The token count ``weight_buft_supported`` tests with.
TEST_TOKENS = 512


def weight_op(name: str) -> str:
    """The op llama.cpp tests ``name`` with (``NONE`` for tensors it does not know)."""
    base, _, suffix = name.rpartition(".")
    if not base or suffix not in ("weight", "bias", "scale"):
        base, suffix = name, ""  # a name without a suffix (Mamba's blk.N.ssm_a, blk.N.ssm_d)
    parts = base.split(".")
    template = ".".join("%d" if p.isdigit() else p for p in parts)
    _layer, op = TENSOR_OPS.get(template, ("", "NONE"))
    if suffix == "bias":  # "tensors with "bias" suffix are always used with GGML_OP_ADD or GGML_OP_ADD_ID"
        return "ADD_ID" if op == "MUL_MAT_ID" else "ADD"
    return op


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def loader_op_sizes(t: TensorInfo, op: str, p: ModelParams) -> list[int]:
    """Bytes of each source and of the result of the op ``weight_buft_supported`` builds for weight ``t``."""
    ne = list(t.shape) + [1] * (4 - len(t.shape))
    n_used = max(p.n_expert_used, 1)
    tok = TEST_TOKENS
    if op == "MUL_MAT":  # b = [ne0, 512, ne2, ne3] f32; dst = [ne1, 512, ne2, ne3] f32
        return [t.nbytes, ne[0] * tok * ne[2] * ne[3] * F32, ne[1] * tok * ne[2] * ne[3] * F32]
    if op == "MUL_MAT_ID":  # b = [ne0, n_used, 512]; ids = [n_used, 512] i32; dst = [ne1, n_used, 512]
        return [t.nbytes, ne[0] * n_used * tok * F32, n_used * tok * 4, ne[1] * n_used * tok * F32]
    if op == "GET_ROWS":  # 512 row ids; dst = [ne0, 512] f32
        return [t.nbytes, tok * 4, ne[0] * tok * F32]
    if op in ("ADD", "MUL"):  # a has the weight's shape in f32; so has the result
        a = _prod(ne) * F32
        return [t.nbytes, a, a]
    if op == "ADD_ID":  # a = [ne0, n_used, 512] f32; ids = [n_used, 512] i32
        a = ne[0] * n_used * tok * F32
        return [t.nbytes, a, n_used * tok * 4, a]
    if op == "DIV":
        return [t.nbytes, ne[0] * F32, ne[0] * F32]
    if op == "ROPE":  # a = [head_dim_v, n_head, 512] f32
        n_head = max(p.n_head) if p.n_head else 1
        a = max(p.head_dim_v, 1) * n_head * tok * F32
        return [t.nbytes, a, tok * 4, a]
    if op == "SSM_CONV":  # conv_x = [ne0 - 1 + 512, ne1, 3]; dst = [ne1, 512, 3]
        return [t.nbytes, (ne[0] - 1 + tok) * ne[1] * 3 * F32, ne[1] * tok * 3 * F32]
    if op == "RWKV_WKV6":  # S = H = n_tokens = n_seqs = 123 (llama-model-loader.cpp "FIXME"): k, v, r, td, state, dst
        n = 123
        kvr = n * n * n * F32
        return [t.nbytes, kvr, kvr, kvr, kvr, n * n * n * n * F32, n * n * (n + n * n) * F32]
    return [t.nbytes]


#: The row types Vulkan's GET_ROWS reads (``ggml_backend_vk_device_supports_op``, GGML_OP_GET_ROWS).
VK_GET_ROWS_TYPES = frozenset(
    "F32 F16 BF16 Q1_0 Q2_0 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S "
    "IQ3_XXS IQ3_S IQ4_XS IQ4_NL MXFP4 NVFP4 TQ1_0 TQ2_0 I32".split()
)


def vulkan_supports(op: str, dst, srcs) -> bool:
    """``ggml_backend_vk_device_supports_op`` (``ggml-vulkan.cpp``) for the ops whose answer depends on their
    shapes and the graphs Layerdeck replays use: ``dst`` and ``srcs`` have ``ty`` (``"w"`` for a weight, taken
    as float: the recurrent weights these ops read are f32) and ``ne``. Every other op is taken as supported
    (the tensor size limit is checked apart)."""

    def f32(x) -> bool:
        return x is not None and x.ty in ("f32", "w")

    if op == "GATED_LINEAR_ATTN":  # "the shader block size is hardcoded to head_size 64"
        return f32(srcs[0]) and f32(dst) and srcs[0].ne[0] == 64
    if op == "GATED_DELTA_NET":  # S_v in 16/32/64/128, all six sources and the result f32
        if len(srcs) < 6 or srcs[2].ne[0] not in (16, 32, 64, 128):
            return False
        return all(f32(x) for x in srcs[:6]) and f32(dst)
    if op == "SSM_SCAN":  # Mamba-2 only (A with ne0 = 1), d_state 128 or 256, head_dim a multiple of 16
        if not (f32(srcs[0]) and f32(dst)) or len(srcs) < 4:
            return False
        d_state, head_dim = srcs[0].ne[0], srcs[0].ne[1]
        is_mamba2 = srcs[3] is not None and srcs[3].ne[0] == 1
        return is_mamba2 and d_state in (128, 256) and head_dim % 16 == 0
    if op == "SSM_CONV":
        return f32(srcs[0])
    if op == "MUL_MAT":  # "a->ne[3] != b->ne[3]": no broadcast over dim 3 (MLA's attn_v_b with -np > 1)
        return srcs[0].ne[3] == srcs[1].ne[3]
    if op == "LIGHTNING_INDEXER":  # "the shader block size is hardcoded to head size 128"; every cache type llama.cpp
        # accepts is a K type it reads (lightning_indexer_k_types), its fp16 need and offset alignment not checked
        return srcs[0].ne[0] == 128
    if op == "DSV4_HC_PRE":  # "hc is hardcoded to 4 in the shaders" (kimi-k3's residual stack grows past it)
        return f32(srcs[0]) and srcs[0].ne[1] == 4
    if op in ("CONT", "DUP") and srcs and srcs[0] is not None and CACHE_TYPE_BLOCKS.get(srcs[0].ty, (1,))[0] > 1:
        # a quantized copy to its own type only where both sides are contiguous ("we use f16 or f32 shaders to do
        # the copy"): T5's bias-carrying attention transposes a quantized V cache without flash attention
        from .compute.ggml import is_contiguous

        return is_contiguous(srcs[0]) and is_contiguous(dst)
    return True


#: Architectures whose ``blk.N.ssm_a`` is ``LLM_TENSOR_SSM_A_NOSCAN`` (used with MUL, not SSM_SCAN: the loader tests
#: it with MUL; ``llama-arch.cpp``, the models' ``create_tensor`` calls in ``src/models/*.cpp``).
SSM_A_NOSCAN_ARCHS = frozenset(
    {"bailingmoe3", "glm5-next", "kimi-k3", "kimi-linear", "qwen35", "qwen35moe", "qwen3next", "qwen4exp"}
)


class _Shape:
    __slots__ = ("ty", "ne")

    def __init__(self, ty: str, ne: tuple[int, ...]):
        self.ty, self.ne = ty, ne


def refuses(lane: Lane, t: TensorInfo, p: ModelParams, op: str | None = None) -> bool:
    """Whether ``lane``'s backend refuses the op that uses weight ``t`` (so llama.cpp keeps it in host memory):
    the tensor size limit, and on Vulkan the op's own rules (``weight_buft_supported`` builds SSM_SCAN with the
    weight as A: Mamba-1's A is refused, so its ``ssm_a`` stays in host memory)."""
    op = op or weight_op(t.name)
    if op == "SSM_SCAN" and p.arch in SSM_A_NOSCAN_ARCHS:
        op = "MUL"
    if op == "NONE":
        return False
    if backend_of(lane) == "vulkan" and op == "GET_ROWS" and t.type_name.upper() not in VK_GET_ROWS_TYPES:
        return True  # a draft head's i64 d2t map: ggml_backend_vk_device_supports_op has no I64 rows
    if backend_of(lane) == "vulkan" and op == "SSM_SCAN":
        ne = tuple(t.shape) + (1,) * (4 - len(t.shape))
        d_state = p.ssm_d_state if ne[0] == 1 else ne[0]  # llama-model-loader.cpp, GGML_OP_SSM_SCAN
        n_head = max(ne[1], 1)
        head_dim = p.ssm_d_inner // n_head if p.ssm_d_inner else 0
        s = _Shape("f32", (d_state, head_dim, n_head, 3))
        if not vulkan_supports(op, s, [s, None, None, _Shape("w", ne)]):
            return True
    limit = lane.max_tensor_bytes
    if limit is None:
        return False
    return any(size > limit for size in loader_op_sizes(t, op, p))


_REFUSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def refused_weights(model, lane: Lane) -> frozenset[int]:
    """Indices of ``model``'s tensors that ``lane``'s backend refuses (:func:`refuses`, each weight with its own
    op), kept per model and lane: a placement asks for every tensor on each estimate (7 ms for a 94-layer model
    on three Vulkan lanes, every time, before)."""
    per_model = _REFUSED.get(model)
    if per_model is None:
        per_model = _REFUSED[model] = {}
    got = per_model.get(lane)
    if got is None:
        p = model.params
        got = per_model[lane] = frozenset(i for i, t in enumerate(model.tensors) if refuses(lane, t, p))
    return got
