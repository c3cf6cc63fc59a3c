"""pkroof's kernels' launch settings: one table of every `PKROOF_*` knob, read from the environment when a kernel
runs (never at import), so a setting changed between runs takes effect and listing the kernels needs no torch.

Defaults come from the 2×H200 sweeps (benchmarks/kernels/); a record lists the settings it ran with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    default: int | str | None
    what: str
    choices: tuple[str, ...] = ()  # a word setting's values; empty: a positive integer (or a list of them)
    count: int = 1  # integers in a comma-separated list ("128,256,64,4,8")


SETTINGS = {
    s.name: s
    for s in (
        Setting("PKROOF_CTAS_LOAD", 128, "CTAs of the SM-load (pull) collectives"),
        Setting("PKROOF_CTAS_STORE", 128, "CTAs of the SM-store (push) collectives"),
        Setting("PKROOF_CTAS_TMA", 128, "CTAs of the TMA collectives"),
        Setting("PKROOF_CTAS_SPLIT", 256, "CTAs of the split-role collectives, stagers and consumers together"),
        Setting("PKROOF_CTAS_LL", 128, "CTAs of the LL-protocol collectives"),
        Setting("PKROOF_MAX_BLOCK", 16384, "largest block of the SM collectives, elements"),
        Setting("PKROOF_TMA_MAX_BLOCK", 32768, "largest block of the TMA collectives, elements"),
        Setting("PKROOF_CE_CHUNK", 16 << 20, "bytes per peer and chunk of the copy engine's equal schedule"),
        Setting(
            "PKROOF_CE_SCHEDULE",
            "halving",
            "copy-engine chunks: halving towards the end, or equal",
            ("halving", "equal"),
        ),
        Setting("PKROOF_CE_LOCAL_COPY", "sm", "how copy-engine gathers copy out of the inbox", ("sm", "dma")),
        Setting("PKROOF_CE_STREAMS", 1, "copy streams the copy engine's chunks alternate over"),
        Setting("PKROOF_CE_PEER_STREAMS", "1", "a lane of copy streams per peer (0: one lane)", ("0", "1")),
        Setting("PKROOF_INTER_SM_CTAS", None, "communication CTAs of the inter-SM GEMM + all-reduce (unset: by K)"),
        Setting("PKROOF_INTER_SM_WARPS", 32, "warps of an inter-SM communication CTA"),
        Setting("PKROOF_INTER_SM_BLOCK", 32768, "elements per step of an inter-SM communication CTA"),
        Setting("PKROOF_INTER_SM_PIECES", 4, "units per band of the inter-SM GEMM's output"),
        Setting("PKROOF_INTER_SM_TILE", "128,256,64,4,8", "the persistent GEMM's BM,BN,BK,stages,warps", count=5),
        Setting("PKROOF_INTER_SM_GROUP", 1, "bands per group of the persistent GEMM's tile order (1: row-major)"),
    )
}


def setting(name: str) -> int | str | tuple[int, ...] | None:
    """The setting's value now: the environment's, else its default. A value that is not one of its choices, or
    not a positive integer (list), is a ValueError of one line naming the variable."""
    s = SETTINGS[name]
    raw = os.environ.get(name)
    if raw is None or raw == "":
        value: int | str | None = s.default
        if s.count > 1 and isinstance(value, str):
            return tuple(int(v) for v in value.split(","))
        return value
    if s.choices:
        if raw not in s.choices:
            raise ValueError(f"{name}={raw!r}: must be one of {', '.join(s.choices)}")
        return raw
    parts = raw.split(",")
    if len(parts) != s.count or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        want = "a positive integer" if s.count == 1 else f"{s.count} positive integers separated by commas"
        raise ValueError(f"{name}={raw!r}: must be {want}")
    values = tuple(int(p) for p in parts)
    return values[0] if s.count == 1 else values
