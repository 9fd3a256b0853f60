"""CUDA's numbering from CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, and the driver probe's output."""

from __future__ import annotations

import sys

import pytest

from app.devices.cuda import CudaProbeError, parse_probe_output, parse_visible_devices, probe_cuda, visible_order
from app.devices.gpu import PhysicalGpu

A = PhysicalGpu("nvidia", 0, "NVIDIA GeForce RTX 4090", "GPU-aaaa1111-0000-0000-0000-000000000000", "0000:01:00.0")
B = PhysicalGpu("nvidia", 1, "NVIDIA GeForce RTX 4090", "GPU-bbbb2222-0000-0000-0000-000000000000", "0000:41:00.0")
C = PhysicalGpu("nvidia", 2, "NVIDIA GeForce RTX 3090", "GPU-cccc3333-0000-0000-0000-000000000000", "0000:81:00.0")


def test_parse_visible_devices():
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("") == []
    assert parse_visible_devices(" 1, 0 ") == ["1", "0"]


def test_unset_means_all_in_pci_order():
    order = visible_order([B, A], {})
    assert order.visible == (A, B) and order.hidden == () and order.certain


def test_reordered_indices():
    order = visible_order([A, B], {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert order.visible == (B, A) and order.certain


def test_uuid_form_and_unique_prefix():
    order = visible_order([A, B, C], {"CUDA_VISIBLE_DEVICES": "GPU-cccc3333-0000-0000-0000-000000000000,GPU-aaaa"})
    assert order.visible == (C, A)
    assert order.hidden == (B,)
    assert order.certain  # UUIDs do not depend on CUDA's fastest-first guess


def test_hidden_gpu():
    order = visible_order([A, B, C], {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert order.visible == (C,) and order.hidden == (A, B) and order.certain


def test_empty_hides_everything():
    order = visible_order([A, B], {"CUDA_VISIBLE_DEVICES": ""})
    assert order.visible == () and order.hidden == (A, B)


def test_invalid_entry_stops_the_list():
    order = visible_order([A, B, C], {"CUDA_VISIBLE_DEVICES": "0,7,1"})
    assert order.visible == (A,)
    assert any("'7'" in n for n in order.notes)


def test_mixed_models_with_indices_and_fastest_first_is_uncertain():
    order = visible_order([A, C], {"CUDA_VISIBLE_DEVICES": "1"})
    assert not order.certain
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in n for n in order.notes)
    assert visible_order([A, C], {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).certain


def test_mig_entry_names_its_parent_and_is_flagged():
    order = visible_order([A, B], {"CUDA_VISIBLE_DEVICES": "MIG-GPU-bbbb2222-0000-0000-0000-000000000000/1/0"})
    assert order.visible == (B,)
    assert not order.certain
    assert any("MIG" in n for n in order.notes)


def test_parse_probe_output():
    devices = parse_probe_output(
        '{"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "pci_bus_id": "0000:81:00.0", "uuid": null},'
        ' {"index": 1, "name": "X", "pci_bus_id": "0000:01:00.0", "uuid": "GPU-1"}]}'
    )
    assert [(d.index, d.pci_bus_id) for d in devices] == [(0, "0000:81:00.0"), (1, "0000:01:00.0")]
    with pytest.raises(CudaProbeError, match="libcuda"):
        parse_probe_output('{"error": "the CUDA driver library (libcuda) was not found"}')
    with pytest.raises(CudaProbeError, match="unexpected"):
        parse_probe_output("Segmentation fault")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libcuda probe behaviour checked on Linux")
def test_probe_runs_in_a_child_process_and_reports_cleanly():
    """Here without a CUDA driver the probe says so; with one it returns bus ids."""
    try:
        devices = probe_cuda({"PATH": "/usr/bin:/bin"}, timeout=30)
    except CudaProbeError as exc:
        assert "libcuda" in str(exc) or "cuInit" in str(exc)
    else:
        assert all(d.pci_bus_id for d in devices)
