"""``-sm row`` and ``-sm tensor``: refused as the pinned llama.cpp refuses them, never estimated as ``layer``.

What the pinned llama.cpp does with them (checked on its CPU + RPC build with ``llama-fit-params``):

- **row** (``make_gpu_buft_list`` in ``src/llama-model.cpp``): every device of the model must export
  ``ggml_backend_split_buffer_type``, else loading stops with "device X does not support split buffers". In
  this llama.cpp only SYCL (and Hexagon) export it: the CUDA/ROCm backend no longer does (its row split gave
  way to ``-sm tensor``), nor do Vulkan, Metal or RPC. Row split on SYCL is not modelled (no SYCL device to
  compare against), so it is refused as well, saying so.
- **tensor** (``llama_prepare_model_devices`` in ``src/llama.cpp``): all non-CPU devices become one ``Meta``
  device that splits every weight and the KV cache across them; it needs flash attention (the context refuses
  ``-fa off``), at least one non-CPU device, and an architecture that ``llm_arch_supports_sm_tensor``
  (``src/llama-arch.cpp``) allows. ``--fit-print`` then prints one ``Meta()`` row for all devices together,
  whose compute buffer comes from a different graph; Layerdeck does not model it yet and says so, pointing
  at Verify (``llama-fit-params`` runs it for real).
- **none** keeps the whole model on ``--main-gpu`` (:func:`app.memory.layout.model_devices`), and **layer** is
  the default that everything else models.
"""

from __future__ import annotations

from ..lanes import Lane
from .backends import alignment_of, backend_of, host_buffer_of
from .kv import SettingsError
from .settings import LlamaSettings

#: Backends whose devices export ``ggml_backend_split_buffer_type`` in the pinned llama.cpp (Hexagon does too;
#: :func:`~app.memory.backends.backend_of` does not name it).
ROW_SPLIT_BACKENDS = frozenset({"sycl"})

#: ``llm_arch_supports_sm_tensor`` (``src/llama-arch.cpp``): the architectures it answers false for
#: (tests/memory/test_split_mode.py compares this with the pinned source).
NO_TENSOR_SPLIT = frozenset(
    {
        "bailingmoe3",
        "bitnet",
        "deepseek2",
        "deepseek32",
        "dots3note",
        "falcon-h1",
        "gemma3n",
        "glm-dsa",
        "glm5-next",
        "granitehybrid",
        "grok",
        "hy_v4",
        "jamba",
        "kimi-k3",
        "kimi-linear",
        "mamba",
        "mamba2",
        "minicpm3",
        "minimax-01",
        "minimax-m2",
        "minimax-m3",
        "mistral4",
        "mpt",
        "nemotron_h",
        "nemotron_h_moe",
        "olmo2",
        "olmoe",
        "plamo2",
        "qwen3tts",
        "qwen4exp",
        "t5",
    }
)


#: The name llama.cpp gives the device of ``-sm tensor`` (``ggml_backend_meta_device``: "Meta()").
META = "Meta()"


def meta_device(devices: list[Lane]) -> Lane:
    """The one device llama.cpp makes of ``devices`` for ``-sm tensor``: its free and total memory are the sums
    (llama-server: "using device Meta() ... 48210 MiB free" for two RPC hosts of 24105), its buffers those of the
    first member (checked on RPC members only)."""
    first = devices[0]
    host_alignment, host_max = host_buffer_of([first])
    return Lane(
        META,
        META,
        free=sum(d.free for d in devices),
        total=sum(d.total for d in devices),
        kind=first.kind,
        bandwidth=min((d.bandwidth for d in devices), default=0.0),
        max_tensor_bytes=first.max_tensor_bytes,
        alignment=alignment_of(first),
        max_buffer=first.max_buffer,
        host_alignment=host_alignment,
        host_max_buffer=host_max,
    )


def check_split_mode(arch: str, devices: list[Lane], settings: LlamaSettings) -> Lane | None:
    """Raise :class:`~app.memory.kv.SettingsError` for a split mode this estimate cannot answer for (with
    llama.cpp's own reason where llama.cpp refuses it, else saying that Layerdeck does not model it); for
    ``-sm tensor`` that llama.cpp accepts, return the Meta device to estimate on. ``devices``: the non-CPU
    devices the model uses (after ``-dev``)."""
    mode = settings.split_mode
    if mode == "row":
        refused = [d.name for d in devices if backend_of(d) not in ROW_SPLIT_BACKENDS]
        if refused:
            raise SettingsError(
                f'-sm row: llama.cpp stops loading with "device {refused[0]} does not support split buffers": in '
                "this llama.cpp only SYCL devices can split rows (CUDA, ROCm, Vulkan, Metal and RPC cannot). "
                "Use -sm layer (the default)."
            )
        if devices:
            raise SettingsError(
                "-sm row on SYCL devices is not modelled by Layerdeck (no SYCL device was measured): plan with "
                "-sm layer, or check the row split with Verify (llama-fit-params)."
            )
    elif mode == "tensor":
        # in llama.cpp's order: the devices (llama_prepare_model_devices), the architecture (hparams), the
        # context (flash attention)
        if not devices:
            raise SettingsError(
                '-sm tensor needs at least one GPU or RPC device (llama.cpp: "LLAMA_SPLIT_MODE_TENSOR needs >= 1 '
                'devices"): add a device, or use -sm layer.'
            )
        if arch in NO_TENSOR_SPLIT:
            raise SettingsError(
                f'-sm tensor: llama.cpp refuses it for this model ("LLAMA_SPLIT_MODE_TENSOR not implemented for '
                f"architecture '{arch}'\"). Use -sm layer (the default)."
            )
        if settings.flash_attn == "off":
            raise SettingsError(
                '-sm tensor needs flash attention (llama.cpp: "SPLIT_MODE_TENSOR requires flash_attn to be '
                'enabled"): use -fa on or -fa auto.'
            )
        return meta_device(devices)
    return None
