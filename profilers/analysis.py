"""A problem's analysis for the report: its bound and advice at a shape, and bounds swept over sizes or shapes.

Computed by the profiler and stored with the reference's record, so a report renders recorded results without
torch, or by `pkroof report` itself for an analytic report.
"""

from __future__ import annotations

from typing import Any

from pkroof.rooflines import System, advise, bound
from pkroof.rooflines.export import bound_to_dict

from .problems import Problem

SWEEP_SIZES = [4096 * 4**i for i in range(10)]  # collectives: 4 KiB … 1 GiB, nccl-tests' convention


def _point(b: Any) -> dict[str, Any]:
    return {
        "size_bytes": sum(op.size_bytes for op in b.workload.comm),
        "t_roof_s": b.t_roof_s,
        "compute_s": b.t_compute_s,
        "hbm_s": b.t_hbm_s,
        "link_s": b.t_link_s,
        "latency_s": b.t_latency_s,
        "predictions": {p.key: p.t_s for p in b.predictions},
    }


WHOLE_BYTES = 16  # a collective's size is rounded to whole chunks of elements up to this wide (fp8 … 2×fp64)


def _whole(size_bytes: int, world: int) -> int:
    """`size_bytes` rounded down so that every rank gets whole chunks (72 ranks: a 2^k size does not split)."""
    return size_bytes - size_bytes % (WHOLE_BYTES * world)


def _workload(problem: Any, world: int, params: dict[str, Any]) -> Any:
    from .trace import NEEDS_DATA, trace_on_meta

    if problem.has_workload:  # raises ValueError itself if the shape does not divide
        return problem.module.workload(world, **params)
    try:
        return trace_on_meta(problem, world, params)
    except NEEDS_DATA:  # value-dependent code (MoE splits, top-k): not traceable without data
        return None


def cheap_workload(problem: Any, world: int, params: dict[str, Any]) -> Any:
    """The hand-written workload, else a trace on meta tensors; None where only a real run could trace it
    (a sweep never starts CPU ranks at a real model's shape: they would need its memory).

    A collective's `size_bytes` that does not split over `world` ranks is rounded down to one that does, as the
    built-in analytic pages do (64 MiB over 72 ranks: 67107840 B); the workload's params say the size used. A
    shape that still does not divide, or a file whose code raises, is a ValueError of one line saying why."""
    try:
        return _workload(problem, world, params)
    except ValueError:
        size = params.get("size_bytes")
        if not isinstance(size, int) or _whole(size, world) in (size, 0):
            raise
        return _workload(problem, world, params | {"size_bytes": _whole(size, world)})


def sweep(problem: Any, params: dict[str, Any], world: int, system: Any) -> list[dict[str, Any]]:
    """Bounds along the problem's size (collectives) or across its named shapes (everything else)."""
    if "size_bytes" in params:
        variants = [params | {"size_bytes": s} for s in SWEEP_SIZES]
    else:
        variants = [problem.params(name) for name in problem.shapes]
    points = []
    for p in variants:
        try:
            workload = cheap_workload(problem, world, p)
        except ValueError:  # a shape that does not divide by this world size: not on the chart
            continue
        if workload is not None:
            points.append(_point(bound(workload, system)))
    return sorted(points, key=lambda pt: pt["size_bytes"])


def analysis(problem: Problem, params: dict[str, Any], world: int, system: System, *, workload: Any = None) -> dict:
    """What a report page needs about a problem on a system: its bound (summary and sweep), advice, category."""
    from .profile import workload_of

    b = bound(workload if workload is not None else workload_of(problem, world, params), system)
    summary = bound_to_dict(b, advise(b))
    return {
        "bound": {"summary": summary, "sweep": sweep(problem, params, world, system)},
        "advice": summary["recommendation"],
        "category": problem.category,
        "meta": {"doc": problem.summary, "source": problem.source},
    }
