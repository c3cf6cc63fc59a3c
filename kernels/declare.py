"""Implementations say which (mechanism, schedule) they are, so the profiler can set the model's prediction for that
same pair beside the measurement:

    from pkroof.kernels.declare import declare

    @declare(mechanism="tma", schedule="intra-sm", comm_sms=16)
    def gemm_rs_tma(a, b): ...

comm_sms is the number of CTAs the communication runs on (one per SM for an inter-SM kernel; a serial
collective may launch more CTAs than the GPU has SMs). The model predicts the pair at that count
(`pkroof.rooflines.predict`); None lets it pick the best. An implementation whose count depends on the shape
says, when called, how many it took (`report_comm_sms`); the profiler then predicts at that count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pkroof.rooflines import Mechanism, Schedule

ATTRIBUTE = "pkroof_pair"
USED = "pkroof_comm_sms_used"


def declare(*, mechanism: str, schedule: str, comm_sms: int | None = None) -> Callable[[Callable], Callable]:
    """Mark a function as one (mechanism, schedule) pair; unknown names are a ValueError at import time."""
    pair = {"mechanism": Mechanism(mechanism).value, "schedule": Schedule(schedule).value, "comm_sms": comm_sms}

    def mark(fn: Callable) -> Callable:
        setattr(fn, ATTRIBUTE, pair)
        return fn

    return mark


def declared(fn: Any) -> dict[str, Any] | None:
    return getattr(fn, ATTRIBUTE, None)


def report_comm_sms(fn: Callable, comm_sms: int) -> None:
    """Called by implementation `fn` itself: the communication SMs its last call took (they may vary with the
    shape). The profiler reads it after timing and predicts the pair at this count instead of the declared one."""
    setattr(fn, USED, comm_sms)


def reported_comm_sms(fn: Any) -> int | None:
    return getattr(fn, USED, None)
