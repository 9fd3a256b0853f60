"""Built-in catalogue of common GPUs and Apple chips: memory size and bandwidth.

Figures are the vendors' published specifications (NVIDIA, AMD and Apple
product pages and data sheets): memory in GiB as marketed ("24 GB" cards
carry 24 GiB) and peak memory bandwidth in decimal GB/s.  The catalogue
serves two purposes: planned devices the user does not own yet, and a
fallback bandwidth for detected cards NVML cannot measure (AMD, Vulkan,
Metal).  Apple entries give the whole unified memory; Metal lets a process
use only part of it by default (``recommendedMaxWorkingSetSize``, about two
thirds to three quarters).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from app.devices.records import GiB

log = logging.getLogger(__name__)

GB_S = 1e9


@dataclass(frozen=True)
class CatalogueEntry:
    """One card or chip configuration.

    ``key`` is the model name in the normalised form :func:`model_key`
    produces (``rtx 4090``, ``rx 7900 xtx``, ``m2 max``); ``form`` separates
    variants with the same name (``pcie``/``sxm``/``nvl``).
    """

    id: str  # stable identifier, e.g. "rtx-3080-12gb"
    name: str  # display name
    vendor: str  # nvidia, amd, apple
    memory_gib: float
    bandwidth_gb_s: float
    key: str
    form: str | None = None
    unified: bool = False  # Apple unified memory (shared with the CPU)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GiB)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_s * GB_S


def _nv(id_, name, gib, gbs, key=None, form=None):
    return CatalogueEntry(id_, name, "nvidia", gib, gbs, key or name.lower(), form)


def _amd(id_, name, gib, gbs, key=None):
    return CatalogueEntry(id_, name, "amd", gib, gbs, key or name.lower().replace("radeon ", ""))


def _apple(chip, gib, gbs):
    id_ = f"apple-{chip.lower().replace(' ', '-')}-{gib}gb"
    return CatalogueEntry(id_, f"Apple {chip} {gib} GB", "apple", gib, gbs, chip.lower(), None, True)


ENTRIES: tuple[CatalogueEntry, ...] = (
    # NVIDIA GeForce RTX 20 (Turing)
    _nv("rtx-2060", "RTX 2060", 6, 336),
    _nv("rtx-2060-12gb", "RTX 2060 12GB", 12, 336, "rtx 2060"),
    _nv("rtx-2060-super", "RTX 2060 Super", 8, 448),
    _nv("rtx-2070", "RTX 2070", 8, 448),
    _nv("rtx-2070-super", "RTX 2070 Super", 8, 448),
    _nv("rtx-2080", "RTX 2080", 8, 448),
    _nv("rtx-2080-super", "RTX 2080 Super", 8, 496),
    _nv("rtx-2080-ti", "RTX 2080 Ti", 11, 616),
    _nv("titan-rtx", "TITAN RTX", 24, 672),
    # NVIDIA GeForce RTX 30 (Ampere)
    _nv("rtx-3050", "RTX 3050", 8, 224),
    _nv("rtx-3060-8gb", "RTX 3060 8GB", 8, 240, "rtx 3060"),
    _nv("rtx-3060-12gb", "RTX 3060 12GB", 12, 360, "rtx 3060"),
    _nv("rtx-3060-ti", "RTX 3060 Ti", 8, 448),
    _nv("rtx-3070", "RTX 3070", 8, 448),
    _nv("rtx-3070-ti", "RTX 3070 Ti", 8, 608),
    _nv("rtx-3080-10gb", "RTX 3080 10GB", 10, 760, "rtx 3080"),
    _nv("rtx-3080-12gb", "RTX 3080 12GB", 12, 912, "rtx 3080"),
    _nv("rtx-3080-ti", "RTX 3080 Ti", 12, 912),
    _nv("rtx-3090", "RTX 3090", 24, 936),
    _nv("rtx-3090-ti", "RTX 3090 Ti", 24, 1008),
    # NVIDIA GeForce RTX 40 (Ada)
    _nv("rtx-4060", "RTX 4060", 8, 272),
    _nv("rtx-4060-ti-8gb", "RTX 4060 Ti 8GB", 8, 288, "rtx 4060 ti"),
    _nv("rtx-4060-ti-16gb", "RTX 4060 Ti 16GB", 16, 288, "rtx 4060 ti"),
    _nv("rtx-4070", "RTX 4070", 12, 504),
    _nv("rtx-4070-super", "RTX 4070 Super", 12, 504),
    _nv("rtx-4070-ti", "RTX 4070 Ti", 12, 504),
    _nv("rtx-4070-ti-super", "RTX 4070 Ti Super", 16, 672),
    _nv("rtx-4080", "RTX 4080", 16, 716.8),
    _nv("rtx-4080-super", "RTX 4080 Super", 16, 736),
    _nv("rtx-4090", "RTX 4090", 24, 1008),
    # NVIDIA GeForce RTX 50 (Blackwell)
    _nv("rtx-5060", "RTX 5060", 8, 448),
    _nv("rtx-5060-ti-8gb", "RTX 5060 Ti 8GB", 8, 448, "rtx 5060 ti"),
    _nv("rtx-5060-ti-16gb", "RTX 5060 Ti 16GB", 16, 448, "rtx 5060 ti"),
    _nv("rtx-5070", "RTX 5070", 12, 672),
    _nv("rtx-5070-ti", "RTX 5070 Ti", 16, 896),
    _nv("rtx-5080", "RTX 5080", 16, 960),
    _nv("rtx-5090", "RTX 5090", 32, 1792),
    # NVIDIA workstation
    _nv("rtx-a4000", "RTX A4000", 16, 448),
    _nv("rtx-a4500", "RTX A4500", 20, 640),
    _nv("rtx-a5000", "RTX A5000", 24, 768),
    _nv("rtx-a6000", "RTX A6000", 48, 768),
    _nv("rtx-4000-ada", "RTX 4000 Ada", 20, 360),
    _nv("rtx-5000-ada", "RTX 5000 Ada", 32, 576),
    _nv("rtx-6000-ada", "RTX 6000 Ada", 48, 960),
    _nv("rtx-pro-6000-blackwell", "RTX PRO 6000 Blackwell", 96, 1792),
    # NVIDIA data centre
    _nv("tesla-p40", "Tesla P40", 24, 346, "p40"),
    _nv("tesla-p100-16gb", "Tesla P100 16GB", 16, 732, "p100"),
    _nv("tesla-t4", "Tesla T4", 16, 320, "t4"),
    _nv("v100-16gb", "V100 16GB", 16, 900, "v100"),
    _nv("v100-32gb", "V100 32GB", 32, 900, "v100"),
    _nv("v100s-32gb", "V100S 32GB", 32, 1134, "v100s"),
    _nv("a10", "A10", 24, 600, "a10"),
    _nv("a40", "A40", 48, 696, "a40"),
    _nv("a100-40gb-pcie", "A100 40GB PCIe", 40, 1555, "a100", "pcie"),
    _nv("a100-40gb-sxm", "A100 40GB SXM", 40, 1555, "a100", "sxm"),
    _nv("a100-80gb-pcie", "A100 80GB PCIe", 80, 1935, "a100", "pcie"),
    _nv("a100-80gb-sxm", "A100 80GB SXM", 80, 2039, "a100", "sxm"),
    _nv("l4", "L4", 24, 300, "l4"),
    _nv("l40", "L40", 48, 864, "l40"),
    _nv("l40s", "L40S", 48, 864, "l40s"),
    _nv("h100-pcie", "H100 PCIe", 80, 2000, "h100", "pcie"),
    _nv("h100-sxm", "H100 SXM", 80, 3350, "h100", "sxm"),
    _nv("h100-nvl", "H100 NVL", 94, 3900, "h100", "nvl"),
    _nv("h200-sxm", "H200 SXM", 141, 4800, "h200", "sxm"),
    _nv("h200-nvl", "H200 NVL", 141, 4800, "h200", "nvl"),
    # AMD Radeon RX 6000 (RDNA 2)
    _amd("rx-6600", "Radeon RX 6600", 8, 224),
    _amd("rx-6600-xt", "Radeon RX 6600 XT", 8, 256),
    _amd("rx-6650-xt", "Radeon RX 6650 XT", 8, 280),
    _amd("rx-6700", "Radeon RX 6700", 10, 320),
    _amd("rx-6700-xt", "Radeon RX 6700 XT", 12, 384),
    _amd("rx-6750-xt", "Radeon RX 6750 XT", 12, 432),
    _amd("rx-6800", "Radeon RX 6800", 16, 512),
    _amd("rx-6800-xt", "Radeon RX 6800 XT", 16, 512),
    _amd("rx-6900-xt", "Radeon RX 6900 XT", 16, 512),
    _amd("rx-6950-xt", "Radeon RX 6950 XT", 16, 576),
    # AMD Radeon RX 7000 (RDNA 3)
    _amd("rx-7600", "Radeon RX 7600", 8, 288),
    _amd("rx-7600-xt", "Radeon RX 7600 XT", 16, 288),
    _amd("rx-7700-xt", "Radeon RX 7700 XT", 12, 432),
    _amd("rx-7800-xt", "Radeon RX 7800 XT", 16, 624),
    _amd("rx-7900-gre", "Radeon RX 7900 GRE", 16, 576),
    _amd("rx-7900-xt", "Radeon RX 7900 XT", 20, 800),
    _amd("rx-7900-xtx", "Radeon RX 7900 XTX", 24, 960),
    # AMD Radeon RX 9000 (RDNA 4)
    _amd("rx-9060-xt-8gb", "Radeon RX 9060 XT 8GB", 8, 320, "rx 9060 xt"),
    _amd("rx-9060-xt-16gb", "Radeon RX 9060 XT 16GB", 16, 320, "rx 9060 xt"),
    _amd("rx-9070", "Radeon RX 9070", 16, 640),
    _amd("rx-9070-xt", "Radeon RX 9070 XT", 16, 640),
    # AMD workstation / data centre
    _amd("pro-w7900", "Radeon PRO W7900", 48, 864, "pro w7900"),
    _amd("mi100", "Instinct MI100", 32, 1228.8, "instinct mi100"),
    _amd("mi210", "Instinct MI210", 64, 1638.4, "instinct mi210"),
    _amd("mi300x", "Instinct MI300X", 192, 5300, "instinct mi300x"),
    # Apple silicon: every unified-memory configuration sold, with its bandwidth.
    *(_apple("M1", g, 68.25) for g in (8, 16)),
    *(_apple("M1 Pro", g, 200) for g in (16, 32)),
    *(_apple("M1 Max", g, 400) for g in (32, 64)),
    *(_apple("M1 Ultra", g, 800) for g in (64, 128)),
    *(_apple("M2", g, 100) for g in (8, 16, 24)),
    *(_apple("M2 Pro", g, 200) for g in (16, 32)),
    *(_apple("M2 Max", g, 400) for g in (32, 64, 96)),
    *(_apple("M2 Ultra", g, 800) for g in (64, 128, 192)),
    *(_apple("M3", g, 100) for g in (8, 16, 24)),
    *(_apple("M3 Pro", g, 150) for g in (18, 36)),
    *(_apple("M3 Max", g, 300) for g in (36, 96)),  # 30-core GPU
    *(_apple("M3 Max", g, 400) for g in (48, 64, 128)),  # 40-core GPU
    *(_apple("M3 Ultra", g, 819) for g in (96, 256, 512)),
    *(_apple("M4", g, 120) for g in (16, 24, 32)),
    *(_apple("M4 Pro", g, 273) for g in (24, 48, 64)),
    _apple("M4 Max", 36, 410),  # 32-core GPU
    *(_apple("M4 Max", g, 546) for g in (48, 64, 128)),  # 40-core GPU
)

_BY_ID = {e.id: e for e in ENTRIES}
assert len(_BY_ID) == len(ENTRIES), "duplicate catalogue ids"

# Words that do not tell models apart; form-factor words are kept aside.
_FILLER = {"nvidia", "geforce", "amd", "radeon", "tesla", "apple", "tm", "r", "generation", "workstation", "edition"}
_FORMS = {"pcie": "pcie", "sxm": "sxm", "sxm2": "sxm", "sxm4": "sxm", "sxm5": "sxm", "nvl": "nvl", "hbm3": "sxm"}
_MOBILE = {"laptop", "mobile", "max-q", "maxq"}


def model_key(description: str) -> tuple[str, str | None, float | None]:
    """Normalise a device description to (model key, form factor, memory GiB hint).

    ``"NVIDIA A100-SXM4-80GB"`` -> ``("a100", "sxm", 80)``;
    ``"AMD Radeon RX 7900 XTX (RADV NAVI31)"`` -> ``("rx 7900 xtx", None, None)``.
    """
    text = re.sub(r"\([^)]*\)", " ", description.lower())
    text = text.replace("(r)", " ").replace("(tm)", " ")
    tokens = re.split(r"[\s\-_/]+", text)
    words: list[str] = []
    form = None
    memory = None
    for tok in tokens:
        if not tok:
            continue
        m = re.fullmatch(r"(\d+)gb", tok)
        if m:
            memory = float(m.group(1))
        elif tok in _FORMS:
            form = _FORMS[tok]
        elif tok in _FILLER:
            continue
        else:
            words.append(tok)
    return " ".join(words), form, memory


def get(entry_id: str) -> CatalogueEntry:
    """The entry with this id; KeyError names close matches."""
    try:
        return _BY_ID[entry_id]
    except KeyError:
        close = [e.id for e in ENTRIES if entry_id.lower().split("-")[0] in e.id][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise KeyError(f"no catalogue entry {entry_id!r}{hint}") from None


def search(text: str) -> list[CatalogueEntry]:
    """Entries whose display name contains every word of ``text`` (case-insensitive)."""
    words = text.lower().split()
    return [e for e in ENTRIES if all(w in e.name.lower() for w in words)]


def lookup(description: str, total_bytes: int | None = None) -> CatalogueEntry | None:
    """The entry for a detected device's description, or None.

    Laptop GPUs are never matched (their clocks and memory differ from the
    desktop card of the same name).  Among variants of one model the memory
    size (from the name, or the reported total) and form factor decide.
    """
    lowered = description.lower()
    if any(word in lowered for word in _MOBILE):
        return None
    key, form, memory = model_key(description)
    candidates = [e for e in ENTRIES if e.key == key]
    if not candidates:
        return None
    if form:
        same_form = [e for e in candidates if e.form == form]
        candidates = same_form or candidates
    target = memory * GiB if memory else total_bytes
    if target:
        if candidates[0].unified:
            # Metal reports a working set below the installed memory: take the smallest config that holds it.
            bigger = [e for e in candidates if e.memory_bytes >= target * 0.99]
            return (
                min(bigger, key=lambda e: e.memory_bytes) if bigger else max(candidates, key=lambda e: e.memory_bytes)
            )
        return min(candidates, key=lambda e: abs(e.memory_bytes - target))
    # No size to tell variants apart: answer only when they share the bandwidth (what detection needs).
    return candidates[0] if len({e.bandwidth_gb_s for e in candidates}) == 1 else None
