"""Byte sizes, times and bandwidths: parsing what people type and printing what they read."""

from __future__ import annotations

import math
import re

_PREFIXES = "kmgtp"  # kilo ... peta
_UNITS = (
    {"": 1, "b": 1}
    | {p: 1024**i for i, p in enumerate(_PREFIXES, 1)}  # bare K, M, ...: binary, as nccl-tests reads `-b 64M`
    | {f"{p}ib": 1024**i for i, p in enumerate(_PREFIXES, 1)}  # KiB, MiB, ...: binary (IEC)
    | {f"{p}b": 1000**i for i, p in enumerate(_PREFIXES, 1)}  # KB, MB, ...: decimal (SI)
)
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_EXAMPLES = "examples: 4096, 256KiB, 64M (= 64MiB), 1GiB, 1GB (= 10**9), 1e9"


def parse_size(text: str) -> int:
    """A positive whole number of bytes: '64MiB' and '64M' → 67108864, '1GB' → 10**9, '4096' and '4e3' → bytes.
    K, M, G, T, P alone and KiB ... PiB are powers of 1024 (nccl-tests' `-b 64M` is 64 MiB); KB ... PB with the B
    are powers of 1000 (SI). Case does not matter. ValueError for anything else, zero, or a fraction of a byte."""
    if text.strip().startswith("-"):
        raise ValueError(f"size {text!r} must be positive")
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"cannot read size {text!r} ({_EXAMPLES})")
    number = match.group(1)
    if number.isdigit():  # exact, however many digits
        value: int | float = int(number) * _UNITS[unit]
    else:
        value = float(number) * _UNITS[unit]
        if not math.isfinite(value):
            raise ValueError(f"size {text!r} is too large")
        if value != int(value):
            raise ValueError(f"size {text!r} is not a whole number of bytes")
        value = int(value)
    if value < 1:
        raise ValueError(f"size {text!r} must be at least 1 byte")
    return value


MAX_SWEEP_SIZES = 4096  # more sizes than this in one sweep is a typo (nccl-tests' default step is 1 MiB)


def size_sweep(minbytes: int, maxbytes: int, *, stepfactor: int = 1, stepbytes: int = 1 << 20) -> list[int]:
    """The sizes nccl-tests' `-b minbytes -e maxbytes -f stepfactor -i stepbytes` runs: from minbytes, each
    the one before times stepfactor where stepfactor > 1, else plus stepbytes, while at most maxbytes
    (`-b 8 -e 128M -f 2`: 8, 16, ... 128 MiB). ValueError for an empty or endless sweep."""
    if minbytes < 1 or maxbytes < 1:
        raise ValueError("-b/--minbytes and -e/--maxbytes must be at least 1 byte")
    if minbytes > maxbytes:
        raise ValueError(f"-b/--minbytes {minbytes} is larger than -e/--maxbytes {maxbytes}")
    if stepfactor < 1:
        raise ValueError(f"-f/--stepfactor must be a whole number of at least 1, got {stepfactor}")
    if stepfactor == 1 and stepbytes < 1:
        raise ValueError(f"-i/--stepbytes must be at least 1 byte, got {stepbytes}")
    sizes, size = [], minbytes
    while size <= maxbytes:
        sizes.append(size)
        if len(sizes) > MAX_SWEEP_SIZES:
            raise ValueError(
                f"-b {minbytes} -e {maxbytes} makes more than {MAX_SWEEP_SIZES} sizes: give -f 2 (double each time) "
                "or a larger -i/--stepbytes"
            )
        size = size * stepfactor if stepfactor > 1 else size + stepbytes
    return sizes


def fmt_bytes(n: float) -> str:
    for unit, scale in (("PiB", 1024**5), ("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
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
