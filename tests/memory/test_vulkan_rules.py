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


def test_an_i64_row_map_stays_in_host_memory(tmp_path):
    """A draft head's d2t (i64, used with GET_ROWS as llama-arch.cpp lists it) is no row type Vulkan's GET_ROWS
    reads, so llama.cpp keeps it in host memory; its lm_head (f16) goes to Vulkan0; an RPC device takes both."""
    from app.lanes import DeviceKind, Lane
    from app.memory.backends import refuses
    from app.model import open_model
    from tests.factory_models.dflash import write_dflash_draft

    m = open_model(write_dflash_draft(tmp_path / "d.gguf", own_output=True, d2t=200))
    vk = Lane("Vulkan0", "Vulkan0", 1 << 30, 1 << 30, kind=DeviceKind.GPU)
    rpc = Lane("RPC0", "RPC0[127.0.0.1:1]", 1 << 30, 1 << 30, kind=DeviceKind.RPC)
    by_name = {t.name: t for t in m.tensors}
    assert refuses(vk, by_name["d2t"], m.params)
    assert not refuses(vk, by_name["output.weight"], m.params)
    assert not refuses(rpc, by_name["d2t"], m.params)
