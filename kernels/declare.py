"""Implementations say which (mechanism, schedule) they are, so the profiler can set the model's prediction for that
same pair beside the measurement:

    from pkroof.kernels.declare import declare

    @declare(mechanism="tma", schedule="intra-sm", comm_sms=16)
    def gemm_rs_tma(a, b): ...

comm_sms is the number of CTAs the communication runs on (one per SM for an inter-SM kernel; a serial
collective may launch more CTAs than the GPU has SMs). The model predicts the pair at that count
(`pkroof.rooflines.predict`); None lets it pick the best. An implementation whose count depends on the shape
says, when called, how many it took (`report_comm_sms`); the profiler then predicts at that count.

protocol is how a receiver learns that its data landed: "simple" (the data, then a flag released behind it) or
"ll" (NCCL's LL: each 4-byte word beside its flag in one 8-byte line; twice the bytes, no release). The model
prices the two differently, and `pkroof topology calibrate` measures their hand-offs apart. algorithm is the one
the kernel runs (a one-shot kernel on 8 ranks is predicted as one-shot even where two-shot would be cheaper).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from pkroof.rooflines import Algorithm, Mechanism, Protocol, Schedule
from pkroof.rooflines.mechanisms import LL_PUSH

ATTRIBUTE = "pkroof_pair"
USED = "pkroof_comm_sms_used"


E = TypeVar("E", bound=StrEnum)


def _named(kind: type[E], what: str, value: str) -> E:
    """kind(value), or a ValueError that lists the names there are."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"@declare {what} {value!r} is not one of {', '.join(kind)}") from None


def pair(
    *,
    mechanism: str,
    schedule: str,
    comm_sms: int | None = None,
    protocol: str = "simple",
    algorithm: str | None = None,
) -> dict[str, Any]:
    """A declared (mechanism, schedule) pair as records carry it, with the protocol its receivers learn that data
    landed by (Protocol: "simple", a flag behind the data, or "ll", flags inside the data) and the algorithm it
    runs ("one-shot", "two-shot"...; None: the model takes the cheapest); unknown names are a ValueError, as is LL
    on anything but a serial SM-store collective (the only LL the model has)."""
    out = {
        "mechanism": _named(Mechanism, "mechanism", mechanism).value,
        "schedule": _named(Schedule, "schedule", schedule).value,
        "comm_sms": comm_sms,
    }
    if algorithm is not None:
        out["algorithm"] = _named(Algorithm, "algorithm", algorithm).value
    if _named(Protocol, "protocol", protocol) is Protocol.LL:
        if Mechanism(mechanism) not in LL_PUSH or Schedule(schedule) is not Schedule.SERIAL:
            raise ValueError(f"protocol ll: the model has it for serial {', '.join(sorted(LL_PUSH))} only")
        out["protocol"] = Protocol.LL.value
    return out


def declare(
    *,
    mechanism: str,
    schedule: str,
    comm_sms: int | None = None,
    protocol: str = "simple",
    algorithm: str | None = None,
) -> Callable[[Callable], Callable]:
    """Mark a user's implementation as one pair (see `pair`); unknown names are a ValueError when its file is
    imported. pkroof's built-ins declare theirs in kernels/registry.py instead, readable without torch."""
    declared_pair = pair(
        mechanism=mechanism, schedule=schedule, comm_sms=comm_sms, protocol=protocol, algorithm=algorithm
    )

    def mark(fn: Callable) -> Callable:
        setattr(fn, ATTRIBUTE, declared_pair)
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
