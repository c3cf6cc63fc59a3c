"""Implementations say which (mechanism, schedule) they are, so the profiler can set the model's prediction for that
same pair beside the measurement:

    from pkroof.kernels.declare import declare

    @declare(mechanism="tma", schedule="intra-sm", comm_sms=16)
    def gemm_rs_tma(a, b): ...

comm_sms is the number of CTAs the communication runs on (one per SM for an inter-SM kernel; a serial
collective may launch more CTAs than the GPU has SMs). The model predicts the pair at that count
(`pkroof.rooflines.predict`); None lets it pick the best.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pkroof.rooflines import Mechanism, Schedule

ATTRIBUTE = "pkroof_pair"


def declare(*, mechanism: str, schedule: str, comm_sms: int | None = None) -> Callable[[Callable], Callable]:
    """Mark a function as one (mechanism, schedule) pair; unknown names are a ValueError at import time."""
    pair = {"mechanism": Mechanism(mechanism).value, "schedule": Schedule(schedule).value, "comm_sms": comm_sms}

    def mark(fn: Callable) -> Callable:
        setattr(fn, ATTRIBUTE, pair)
        return fn

    return mark


def declared(fn: Any) -> dict[str, Any] | None:
    return getattr(fn, ATTRIBUTE, None)
