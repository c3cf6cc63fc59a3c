"""The report's typed inputs made by hand, every number the test's own: a Bound, its Advice, a shape of a page.

The model's results are plain frozen dataclasses; a test of the pages builds them with the numbers it checks
rather than running the model (tests/test_bound.py checks the model's numbers).
"""

from conftest import make_system

from pkroof.records.report_data import Shape
from pkroof.rooflines import Bound, Mechanism, Prediction, Protocol, Schedule, Workload
from pkroof.rooflines.advice import Advice


def advice(
    mechanism: str, schedule: str, t_s: float, *, headroom: float | None = None, reason: str = "", protocol="simple"
) -> Advice:
    """Advice to build (mechanism, schedule) at `t_s`, `headroom` over NCCL's default (no baseline given)."""
    best = Prediction(Mechanism(mechanism), Schedule(schedule), 0, t_s, 0.0, t_s, 0.0, 0.0, (), Protocol(protocol))
    return Advice(best, None, headroom, reason, {})


def bound(
    *,
    t_compute_s: float = 0.0,
    t_link_s: float = 0.0,
    flops: float = 0.0,
    hbm_bytes: float = 0.0,
    link_bytes_per_rank: float = 0.0,
    link_bandwidth_Bps: float = 450e9,
    peak_flops: float = 1000e12,
    hbm_bandwidth_Bps: float = 3e12,
    params: dict[str, float] | None = None,
    advice: Advice | None = None,
) -> Bound:
    """A Bound of a workload on 2 ranks of the synthetic system (tests/conftest.py), with these terms and sizes."""
    return Bound(
        workload=Workload("w", hbm_bytes=hbm_bytes, params=params or {}),
        system=make_system(n=2, hbm=hbm_bandwidth_Bps),
        t_compute_s=t_compute_s,
        t_hbm_s=0.0,
        t_link_s=t_link_s,
        t_latency_s=0.0,
        link_bytes_per_rank=link_bytes_per_rank,
        link_bandwidth_Bps=link_bandwidth_Bps,
        link_tier="scale-up",
        peak_flops=peak_flops,
        predictions=(),
        link_terms={},
        flops=flops,
        hbm_bytes=hbm_bytes,
        advice=advice,
    )


def shape(label: str, b: Bound) -> Shape:
    return Shape(label, {}, b)
