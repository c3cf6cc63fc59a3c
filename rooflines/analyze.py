"""The one analysis: a Workload on a System → its Bound (every term, every prediction), its Advice, and the roof
swept over other sizes or shapes of the same problem. Everything that shows a bound calls this."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .advice import Advice
from .bound import SCALE_OUT, SCALE_UP, Bound, bound
from .system import System
from .workload import Workload

SWEEP_SIZES = tuple(4096 * 4**i for i in range(10))  # collectives: 4 KiB … 1 GiB, nccl-tests' convention
WHOLE_BYTES = 16  # a collective's size is rounded to whole chunks of elements up to this wide (fp8 … 2×fp64)


def whole_size(size_bytes: int, world_size: int) -> int:
    """`size_bytes` rounded down so that every rank gets whole chunks (72 ranks: a 2^k size does not split)."""
    return size_bytes - size_bytes % (WHOLE_BYTES * world_size)


@dataclass(frozen=True)
class SweepPoint:
    size_bytes: float  # the workload's communication, nccl-tests' convention (0 without any)
    t_roof_s: float
    compute_s: float
    hbm_s: float
    link_s: float
    latency_s: float
    predictions: dict[str, float]  # Prediction.key → t_s
    flops: float = 0.0  # the busiest rank's, all dtypes: what a chart of shapes without a size is drawn against
    hbm_bytes: float = 0.0
    link_bytes: float = 0.0  # on the binding tier, per rank

    @classmethod
    def of(cls, b: Bound) -> SweepPoint:
        return cls(
            b.workload.comm_bytes,
            b.t_roof_s,
            b.t_compute_s,
            b.t_hbm_s,
            b.t_link_s,
            b.t_latency_s,
            {p.key: p.t_s for p in b.predictions},
            sum(op.flops for op in b.workload.compute),
            b.workload.hbm_bytes,
            b.link_bytes_per_rank,
        )


NODE_COUNTS = tuple(2**i for i in range(11))  # 1, 2, 4 … 1024 nodes: tests/test_scale.py bounds 8192 GPUs


@dataclass(frozen=True)
class NodesPoint:
    """The bound at one number of nodes: the roof, its compute and HBM terms, its link term per tier (scale-up inside
    a node, scale-out through the GPU's share of its node's NICs: 0 on one node) and its latency term."""

    nodes: int
    world_size: int
    t_roof_s: float
    compute_s: float
    hbm_s: float
    scaleup_s: float
    scaleout_s: float
    latency_s: float

    @classmethod
    def of(cls, b: Bound) -> NodesPoint:
        out = b.link_terms.get(SCALE_OUT)
        return cls(
            b.system.num_nodes,
            b.system.world_size,
            b.t_roof_s,
            b.t_compute_s,
            b.t_hbm_s,
            b.link_terms[SCALE_UP].t_s,
            out.t_s if out is not None else 0.0,
            b.t_latency_s,
        )


def network_bound_from(points: Iterable[NodesPoint]) -> int | None:
    """The fewest nodes at which the scale-out term exceeds the scale-up term (the network, not the node's own
    fabric, sets the link term); None where it does at none of the points."""
    return min((p.nodes for p in points if p.scaleout_s > p.scaleup_s), default=None)


@dataclass(frozen=True)
class Analysis:
    """A workload's Bound (its predictions and advice) and the roof swept over other sizes or shapes of it."""

    bound: Bound
    sweep: tuple[SweepPoint, ...] = field(default=())  # ascending size

    @property
    def workload(self) -> Workload:
        return self.bound.workload

    @property
    def advice(self) -> Advice | None:
        """None: nothing to communicate and no peer to do it with (one GPU): no pair to advise."""
        return self.bound.advice

    def to_dict(self) -> dict[str, Any]:
        """`pkroof bound --json`'s object: its Bound's."""
        return self.bound.to_dict()


def analyze(workload: Workload, system: System, *, sweep: Iterable[Workload] = ()) -> Analysis:
    """The workload's bound and advice on `system`, and the bound of each workload in `sweep` (the same problem at
    other sizes or shapes), sorted by size."""
    if workload.comm and system.world_size == 1 and not system.available:
        kinds = ", ".join(dict.fromkeys(op.kind.value for op in workload.comm))
        raise ValueError(
            f"{system.name} has one GPU and no peer, but {workload.name} communicates ({kinds}): bound it on a "
            "topology with peers (pkroof presets lists them); one GPU bounds a problem of compute and memory alone"
        )
    b = bound(workload, system)
    if not b.predictions and workload.comm:
        raise ValueError(f"no mechanism on {system.name} can run {workload.name}")
    points = sorted((SweepPoint.of(bound(w, system)) for w in sweep), key=lambda p: p.size_bytes)
    return Analysis(b, tuple(points))
