"""Byte sizes, times and bandwidths: parsing what people type and printing what they read."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'64MiB' → 67108864, '1GB' → 10**9, '4096' → 4096; binary units are powers of 1024, decimal of 1000."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"cannot read size {text!r} (examples: 4096, 256KiB, 64MiB, 1GiB, 1e9)")
    value = float(match.group(1)) * _UNITS[unit]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_s(t: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.3g} {unit}"
    return f"{t * 1e9:.3g} ns"


def fmt_Bps(bw: float) -> str:
    return f"{bw / 1e12:.3g} TB/s" if bw >= 1e12 else f"{bw / 1e9:.3g} GB/s"


def fmt_flops(f: float) -> str:
    return f"{f / 1e15:.3g} PFLOP/s" if f >= 1e15 else f"{f / 1e12:.3g} TFLOP/s"


def fmt_clock(state: tuple[float, float | None] | None) -> str:
    """(SM clock MHz, power-capped share or None) as ' at 1485 MHz, power-capped 98%'; '' for None."""
    if state is None:
        return ""
    mhz, capped = state
    return f" at {mhz:.0f} MHz" + (f", power-capped {capped:.0%}" if capped is not None else "")
