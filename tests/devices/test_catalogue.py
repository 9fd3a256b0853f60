"""The built-in card catalogue, lookups from driver names, and planned devices."""

from __future__ import annotations

import pytest

from app.devices import catalogue
from app.devices.catalogue import lookup, model_key
from app.devices.planned import PlannedDeviceError, parse_bandwidth, parse_capacity, planned_device, planned_from_catalogue

GiB = 1024**3

REQUIRED = [
    "rtx-2060", "rtx-2060-super", "rtx-2070", "rtx-2070-super", "rtx-2080", "rtx-2080-super", "rtx-2080-ti",
    "rtx-3060-12gb", "rtx-3060-ti", "rtx-3070", "rtx-3080-10gb", "rtx-3080-12gb", "rtx-3090", "rtx-3090-ti",
    "rtx-4060", "rtx-4060-ti-8gb", "rtx-4060-ti-16gb", "rtx-4070", "rtx-4070-super", "rtx-4070-ti",
    "rtx-4070-ti-super", "rtx-4080", "rtx-4080-super", "rtx-4090",
    "rtx-5060-ti-8gb", "rtx-5060-ti-16gb", "rtx-5070", "rtx-5070-ti", "rtx-5080", "rtx-5090",
    "rtx-a4000", "rtx-a5000", "rtx-a6000", "rtx-6000-ada", "rtx-pro-6000-blackwell",
    "a100-40gb-pcie", "a100-80gb-sxm", "h100-pcie", "h100-sxm", "l40s", "tesla-p40", "v100-16gb", "v100-32gb",
    "rx-6700-xt", "rx-6750-xt", "rx-6800", "rx-6800-xt", "rx-6900-xt", "rx-6950-xt",
    "rx-7600", "rx-7600-xt", "rx-7700-xt", "rx-7800-xt", "rx-7900-gre", "rx-7900-xt", "rx-7900-xtx",
    "rx-9060-xt-8gb", "rx-9060-xt-16gb", "rx-9070", "rx-9070-xt",
]


@pytest.mark.parametrize("entry_id", REQUIRED)
def test_required_cards_are_present_and_sane(entry_id):
    e = catalogue.get(entry_id)
    assert 4 <= e.memory_gib <= 192 and 100 <= e.bandwidth_gb_s <= 6000


def test_apple_chips_cover_every_tier():
    chips = {e.key for e in catalogue.ENTRIES if e.vendor == "apple"}
    for gen in ("m1", "m2", "m3", "m4"):
        assert {gen, f"{gen} pro", f"{gen} max"} <= chips
    assert {"m1 ultra", "m2 ultra", "m3 ultra"} <= chips
    assert catalogue.get("apple-m2-ultra-192gb").bandwidth_gb_s == 800


@pytest.mark.parametrize(
    ("description", "total_gib", "expected"),
    [
        ("NVIDIA GeForce RTX 4090", 24, "rtx-4090"),
        ("NVIDIA GeForce RTX 3060", 12, "rtx-3060-12gb"),
        ("NVIDIA GeForce RTX 3080", 10, "rtx-3080-10gb"),
        ("NVIDIA GeForce RTX 4060 Ti", 16, "rtx-4060-ti-16gb"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", 16, "rtx-4070-ti-super"),
        ("NVIDIA RTX A6000", 48, "rtx-a6000"),
        ("NVIDIA RTX 6000 Ada Generation", 48, "rtx-6000-ada"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 96, "rtx-pro-6000-blackwell"),
        ("NVIDIA A100-SXM4-80GB", 80, "a100-80gb-sxm"),
        ("NVIDIA A100-PCIE-40GB", 40, "a100-40gb-pcie"),
        ("NVIDIA H100 80GB HBM3", 80, "h100-sxm"),
        ("NVIDIA H100 PCIe", 80, "h100-pcie"),
        ("Tesla P40", 24, "tesla-p40"),
        ("Tesla V100-PCIE-32GB", 32, "v100-32gb"),
        ("AMD Radeon RX 7900 XTX", 24, "rx-7900-xtx"),
        ("AMD Radeon RX 7900 XTX (RADV NAVI31)", 24, "rx-7900-xtx"),
        ("AMD Radeon RX 9060 XT", 16, "rx-9060-xt-16gb"),
        ("Apple M3 Max", 36 * 0.75, "apple-m3-max-36gb"),
        ("Apple M4 Max", 128 * 0.75, "apple-m4-max-128gb"),
    ],
)
def test_lookup_from_driver_names(description, total_gib, expected):
    assert lookup(description, int(total_gib * GiB)).id == expected


def test_lookup_refuses_laptops_unknowns_and_ambiguity():
    assert lookup("NVIDIA GeForce RTX 4090 Laptop GPU", 16 * GiB) is None
    assert lookup("Some Future GPU 9999") is None
    assert lookup("NVIDIA GeForce RTX 3060") is None  # 8 and 12 GB differ and no size was given
    assert lookup("NVIDIA GeForce RTX 4060 Ti").bandwidth_gb_s == 288  # both sizes share the figure


def test_model_key():
    assert model_key("NVIDIA A100-SXM4-80GB") == ("a100", "sxm", 80.0)


def test_planned_from_catalogue():
    d = planned_from_catalogue("rtx-3090", index=2)
    assert (d.name, d.kind, d.description, d.total_bytes, d.bandwidth_bytes_per_s) == (
        "Planned2", "planned", "RTX 3090", 24 * GiB, 936e9,
    )
    assert d.name_guessed and "catalogue" in d.sources["total"]
    assert planned_from_catalogue(catalogue.get("apple-m2-max-96gb"), name="Studio").warnings
    with pytest.raises(PlannedDeviceError, match="no catalogue entry"):
        planned_from_catalogue("rtx-9999")


def test_planned_from_typed_values():
    d = planned_device("24 GB", "1008 GB/s", description="My 4090")
    assert d.total_bytes == 24 * GiB and d.bandwidth_bytes_per_s == 1008e9
    assert d.sources["bandwidth"] == "typed by the user"
    assert planned_device(48, 3.35e3).bandwidth_bytes_per_s == 3350e9
    assert parse_capacity("24576 MiB") == 24 * GiB
    assert parse_bandwidth("3.35 TB/s") == pytest.approx(3.35e12)


@pytest.mark.parametrize(
    ("capacity", "bandwidth", "message"),
    [
        (0, 100, "more than zero"),
        ("-5", 100, "not a capacity"),
        ("24 parsecs", 100, "unknown capacity unit"),
        ("lots", 100, "not a capacity"),
        (1e9, 100, "16 TiB"),
        (24, 0, "more than zero"),
        (24, "1 PB/s", "unknown bandwidth unit"),
        (24, 1e7, "100 TB/s"),
        (24, float("nan"), "finite"),
        (True, 100, "must be a number"),
        (None, 100, "must be a number"),
    ],
)
def test_planned_validation(capacity, bandwidth, message):
    with pytest.raises(PlannedDeviceError, match=message):
        planned_device(capacity, bandwidth)
