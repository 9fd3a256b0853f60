"""``ggml_backend_vk_device_supports_op`` rules that move ops between Vulkan and the CPU (app/memory/backends.py
``vulkan_supports``), checked op by op; the figures they give are in the Vulkan matrix (tests/backends)."""

from __future__ import annotations

from app.memory.backends import vulkan_supports
from app.memory.compute.ggml import cont, new, transpose


def test_a_quantized_copy_to_its_own_type_needs_both_sides_contiguous():
    """T5's bias-carrying attention transposes a q8_0 V cache and copies it: not Vulkan's; f16 is."""
    v = new("q8_0", (64, 4096, 1, 1), "NONE")
    t = cont(transpose(v))
    assert not vulkan_supports("CONT", t, t.src)
    plain = cont(v)
    assert vulkan_supports("CONT", plain, plain.src)
    f16 = cont(transpose(new("f16", (64, 4096, 1, 1), "NONE")))
    assert vulkan_supports("CONT", f16, f16.src)
