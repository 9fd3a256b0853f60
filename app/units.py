"""Human-readable sizes and counts, shared by the CLI and the UI."""

from __future__ import annotations

MiB = 1 << 20
GiB = 1 << 30


_BINARY = True


def set_binary(binary: bool) -> None:
    """Choose GiB (binary, as llama.cpp prints) or GB (decimal, as cards are sold) for :func:`fmt_bytes`."""
    global _BINARY
    _BINARY = bool(binary)


def fmt_bytes(n: float, binary: bool | None = None) -> str:
    """1536 -> '1.50 KiB'; about three significant figures."""
    binary = _BINARY if binary is None else binary
    base = 1024.0 if binary else 1000.0
    units = ("B", "KiB", "MiB", "GiB", "TiB") if binary else ("B", "KB", "MB", "GB", "TB")
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit in units:
        if n < base or unit == units[-1]:
            if unit == "B":
                return f"{sign}{int(n)} B"
            return (
                f"{sign}{n:.2f} {unit}" if n < 10 else f"{sign}{n:.1f} {unit}" if n < 100 else f"{sign}{n:.0f} {unit}"
            )
        n /= base
    raise AssertionError("unreachable")


def fmt_count(n: float) -> str:
    """235_094_000_000 -> '235.1B' (parameter counts)."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return str(int(n))


def mib(n: int) -> float:
    return n / MiB
