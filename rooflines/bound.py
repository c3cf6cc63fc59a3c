"""The communication-aware roofline of a Workload on a System: its terms, a prediction per (mechanism, schedule)
(rooflines/predictions.py) and the advice they give (rooflines/advice.py), as one Bound.

    t_roof = max(t_compute, t_hbm, t_link) + t_latency

t_compute: FLOPs at the dtype's dense peak on every SM; t_hbm: minimal HBM bytes at HBM bandwidth; t_link:
the fewest bytes any available algorithm must put on the busiest rank's link, at the fastest available
mechanism's peak; across nodes each tier (scale-up inside a node, scale-out through the GPU's share of its node's
NICs) carries its own bytes at its own rate, and t_link is the slower tier's; t_latency: the cheapest chain of
dependent steps.
Latency is counted outside the max because the first message of a pipeline cannot hide behind anything.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .advice import Advice, advise
from .algorithms import algorithms
from .collectives import Collective, Traffic
from .compute import flops_time_s
from .costs import network_s, op_traffic
from .mechanisms import Mechanism, Protocol, Schedule
from .predictions import Prediction, every_prediction
from .serialize import SCHEMA, to_dict
from .system import System
from .units import fmt_bytes
from .workload import CommOp, Workload

SCALE_UP, SCALE_OUT = "scale-up", "scale-out"  # NVLink (or PCIe) inside a node; this GPU's share of its node's NICs


@dataclass(frozen=True)
class LinkTerm:
    """One tier's part of t_link, at the rank busiest on that tier: the bytes its link must carry at least (the busier
    direction, a chain of dependent ops in turn) and the rate they were charged at; t_s = bytes_per_rank /
    bandwidth_Bps (with nothing to carry, t_s and bytes are 0 and the rate is the tier's peak)."""

    t_s: float
    bytes_per_rank: float
    bandwidth_Bps: float


@dataclass(frozen=True)
class Terms:
    """The roof's four terms: t_roof = max(compute_s, hbm_s, link_s) + latency_s."""

    compute_s: float
    hbm_s: float
    link_s: float
    latency_s: float


@dataclass(frozen=True)
class Bound:
    """The roof of `workload` on `system`, its predictions and its advice: the one result every output is made of
    (rooflines/serialize.py writes it as `pkroof bound --json`'s object, in the order of `json_fields`)."""

    workload: Workload
    system: System
    t_compute_s: float
    t_hbm_s: float
    t_link_s: float  # the slower tier's: max of link_terms' t_s
    t_latency_s: float
    link_bytes_per_rank: float  # on the binding tier (link_tier)
    link_bandwidth_Bps: float
    link_tier: str  # "scale-up" or "scale-out": where t_link binds
    peak_flops: float  # FLOP/s of the workload's FLOPs (their dtype's peak; FLOP-weighted if mixed)
    predictions: tuple[Prediction, ...]  # fastest first
    # each tier's link term: "scale-up" always, "scale-out" where the system spans more than one node (0 where no op
    # leaves a node); the tiers are separate links, so each carries its own bytes and t_link is the slower of them
    link_terms: dict[str, LinkTerm]
    # where ranks differ (Workload.ranks): the rank that set each term ("compute", "hbm", "link", "latency"), and
    # the busiest rank's FLOPs, HBM bytes and communication; alike on every rank, busiest_rank is empty
    busiest_rank: dict[str, int] = dataclasses.field(default_factory=dict)
    flops: float = 0.0
    hbm_bytes: float = 0.0
    comm: tuple[CommOp, ...] = ()
    advice: Advice | None = None  # None: no prediction, nothing to choose between (compute alone on one GPU)

    schema: ClassVar[str] = SCHEMA
    json_fields: ClassVar[tuple[str, ...]] = (
        "schema",
        "problem",
        "topology",
        "world_size",
        "nodes",
        "dtype",
        "params",
        "t_roof_s",
        "algbw_Bps",
        "busbw_Bps",
        "limiter",
        "terms",
        "flops",
        "peak_flops",
        "hbm_bytes",
        "hbm_bandwidth_Bps",
        "link_bytes_per_rank",
        "link_bandwidth_Bps",
        "link_tier",
        "link_terms",
        "comm",
        "busiest_rank",
        "uncounted",
        "predictions",
        "recommendation",
    )

    @property
    def t_roof_s(self) -> float:
        return max(self.t_compute_s, self.t_hbm_s, self.t_link_s) + self.t_latency_s

    @property
    def terms(self) -> Terms:
        return Terms(self.t_compute_s, self.t_hbm_s, self.t_link_s, self.t_latency_s)

    @property
    def limiter(self) -> str:
        """ "compute", "hbm", "link" or "latency": the largest term."""
        terms = {"compute": self.t_compute_s, "hbm": self.t_hbm_s, "link": self.t_link_s}
        name = max(terms, key=terms.__getitem__)
        return "latency" if self.t_latency_s > terms[name] else name

    @property
    def algbw_Bps(self) -> float | None:
        """nccl-tests' algbw at the roof, for a workload that is one collective and nothing else (else None)."""
        return self.workload.bandwidths(self.t_roof_s)[0]

    @property
    def busbw_Bps(self) -> float | None:
        """nccl-tests' busbw at the roof, for a workload that is one collective and nothing else (else None)."""
        return self.workload.bandwidths(self.t_roof_s)[1]

    @property
    def problem(self) -> str:
        return self.workload.name

    @property
    def topology(self) -> str:
        return self.system.name

    @property
    def world_size(self) -> int:
        return self.system.world_size

    @property
    def nodes(self) -> int:
        return self.system.num_nodes

    @property
    def dtype(self) -> str:
        return self.workload.dtype

    @property
    def params(self) -> Mapping[str, float]:
        """The problem's parameters, the ones `--param` takes (read-only): the workload's own where it has none of
        the problem's (Workload.problem_params)."""
        w = self.workload
        return types.MappingProxyType(w.params if w.problem_params is None else w.problem_params)

    @property
    def hbm_bandwidth_Bps(self) -> float:
        return self.system.hbm_bandwidth_Bps

    @property
    def uncounted(self) -> tuple[str, ...]:
        """Ops that compute but that no FLOP formula prices."""
        return self.workload.uncounted

    @property
    def recommendation(self) -> Advice | None:
        """The advice, under the name `pkroof bound --json` and `pkroof advise` give it."""
        return self.advice

    def prediction(
        self, mechanism: Mechanism, schedule: Schedule, protocol: Protocol = Protocol.SIMPLE
    ) -> Prediction | None:
        pair = (mechanism, schedule, protocol)
        return next((p for p in self.predictions if (p.mechanism, p.schedule, p.protocol) == pair), None)

    def to_dict(self) -> dict[str, Any]:
        """`pkroof bound --json`'s object (rooflines/serialize.py)."""
        return to_dict(self)


@dataclass(frozen=True)
class _TierFloor:
    seconds: float  # the busier direction's bytes at the tier's rate
    num_bytes: float
    bandwidth_Bps: float
    send_bytes: float = 0.0  # each direction's bytes on the tier
    recv_bytes: float = 0.0


@dataclass(frozen=True)
class _LinkFloor:
    tiers: dict[str, _TierFloor]  # "scale-up"; "scale-out" where the system spans nodes
    latency_s: float

    @property
    def seconds(self) -> float:
        return max(t.seconds for t in self.tiers.values())


def _tier_floor(t: Traffic, bandwidth_Bps: float) -> _TierFloor:
    return _TierFloor(t.bytes / bandwidth_Bps, t.bytes, bandwidth_Bps, t.send_bytes, t.recv_bytes)


def _link_floor(op: CommOp, system: System) -> _LinkFloor:
    """The fewest bytes at the best peak of any available mechanism, per tier, and the cheapest chain of steps. The
    scale-out bytes are the same whatever the algorithm inside the node, so the candidate with the least time on the
    slower tier, then on scale-up, carries the fewest bytes on each tier at once."""
    best: _LinkFloor | None = None
    latency = float("inf")
    for mechanism in system.available:
        for alg in algorithms(mechanism.mechanism, op.kind):
            tiers = op_traffic(op, system, alg, op.size_bytes)
            if tiers is None:
                continue
            m = mechanism.for_collective(op.kind.value, tiers.scaleup.bytes)
            floors = {SCALE_UP: _tier_floor(tiers.scaleup, m.peak_bandwidth_Bps)}
            if system.network is not None:
                floors[SCALE_OUT] = _tier_floor(tiers.scaleout, system.network.peak_bandwidth_Bps)
            cand = _LinkFloor(floors, 0.0)
            latency = min(latency, m.latency_for(tiers.scaleup.num_steps) + network_s(tiers, system)[1])
            if best is None or (cand.seconds, floors[SCALE_UP].seconds) < (best.seconds, best.tiers[SCALE_UP].seconds):
                best = cand
    if best is None:
        raise ValueError(f"no available mechanism on {system.name} can do {op.kind}")
    return dataclasses.replace(best, latency_s=latency)


def _buffers_bytes(op: CommOp) -> float:
    """One rank's send and receive buffers for a collective, out of place as nccl-tests allocates them: the size
    convention's whole buffer each, but one rank's share where the size counts every rank's (an all-gather's or a
    gather's input, a reduce-scatter's or a scatter's output)."""
    share = op.size_bytes / op.group_size
    match op.kind:
        case Collective.ALL_GATHER | Collective.GATHER:
            return share + op.size_bytes
        case Collective.REDUCE_SCATTER | Collective.SCATTER:
            return op.size_bytes + share
    return 2 * op.size_bytes


def resident_bytes(w: Workload) -> tuple[float, str]:
    """The fewest bytes one rank must hold at once, and what holds them: the largest of one op's inputs + outputs (a
    collective's send and receive buffers; a compute op's operands, a GEMM's A, B and C)."""
    ops = [
        (_buffers_bytes(op), f"the {op.name} of {fmt_bytes(op.size_bytes)} (send and receive buffers)") for op in w.comm
    ]
    ops += [(op.hbm_bytes, f"the {op.name} (inputs and outputs)") for op in w.compute]
    return max(ops, default=(0.0, w.name))


def check_fits(w: Workload, capacity_bytes: float, gpu: str) -> None:
    """ValueError, in one line, where one op's inputs + outputs (resident_bytes) exceed a GPU's HBM capacity."""
    need, what = resident_bytes(w)
    if need > capacity_bytes:
        raise ValueError(
            f"{w.name}: {what} needs {fmt_bytes(need)} on each rank, more than one {gpu}'s "
            f"{fmt_bytes(capacity_bytes)} of HBM"
        )


def _chain_s(ops: tuple[CommOp, ...], latency_s: list[float]) -> float:
    """The longest chain of dependent steps: each op starts when every op it comes after has finished (an op with
    `after` None comes after the op before it, as a hand-written workload's ops run in order); ops that depend on
    none of each other overlap."""
    finish: dict[str, float] = {}
    longest, previous = 0.0, None
    for op, lat in zip(ops, latency_s, strict=True):
        before = op.after if op.after is not None else ((previous,) if previous else ())
        finish[op.name] = max((finish[b] for b in before), default=0.0) + lat
        longest, previous = max(longest, finish[op.name]), op.name
    return longest


@dataclass(frozen=True)
class _ViewTerms:
    compute_s: float
    hbm_s: float
    link: dict[str, LinkTerm]  # per tier
    latency_s: float
    flops: float
    peak_flops: float


def _link_term(ops: tuple[CommOp, ...], floors: list[_TierFloor], peak_Bps: float) -> LinkTerm:
    """What one tier of the busiest rank's link needs at least: each direction carries all its bytes (sends out,
    receives in), and ops that depend on one another cannot overlap, so a chain of them carries each op's busier
    direction in turn; the longer of the two. Ops of a hand-written workload run in order: the sum."""
    chain_s = _chain_s(ops, [f.seconds for f in floors])
    chain_bytes = _chain_s(ops, [f.num_bytes for f in floors])
    sent = sum(f.send_bytes / f.bandwidth_Bps for f in floors if f.seconds)
    received = sum(f.recv_bytes / f.bandwidth_Bps for f in floors if f.seconds)
    if chain_s >= max(sent, received):
        seconds, num_bytes = chain_s, chain_bytes
    else:
        seconds = max(sent, received)
        num_bytes = sum(f.send_bytes if sent >= received else f.recv_bytes for f in floors if f.seconds)
    return LinkTerm(seconds, num_bytes, num_bytes / seconds if seconds else peak_Bps)


def _terms(w: Workload, system: System) -> _ViewTerms:
    """The roof's terms for one rank's view."""
    flops_s = flops_time_s(w, system, roof=True)
    total_flops = sum(op.flops for op in w.compute)
    floors = [_link_floor(op, system) for op in w.comm]
    peaks = {SCALE_UP: max((m.peak_bandwidth_Bps for m in system.available), default=0.0)}
    if system.network is not None:
        peaks[SCALE_OUT] = system.network.peak_bandwidth_Bps
    nothing = _TierFloor(0.0, 0.0, 1.0)
    link = {t: _link_term(w.comm, [f.tiers.get(t, nothing) for f in floors], peak) for t, peak in peaks.items()}
    return _ViewTerms(
        compute_s=flops_s,
        hbm_s=w.hbm_bytes / system.hbm_bandwidth_Bps,
        link=link,
        latency_s=_chain_s(w.comm, [f.latency_s for f in floors]),
        flops=total_flops,
        peak_flops=total_flops / flops_s if flops_s else system.peak_flops.get(w.dtype, 0.0),
    )


ENVELOPE_AFTER = 4  # views beyond which predictions are made once, for their envelope, not for each view


def _envelope(views: tuple[Workload, ...]) -> Workload | None:
    """One workload at least as heavy as every view in every respect (each compute op's FLOPs, each comm op's bytes,
    HBM bytes: their maxima), so its prediction is at least any view's; None where the views' ops do not line up."""
    first = views[0]
    shapes = {(tuple((c.name, c.dtype) for c in v.compute), tuple((o.name, o.kind) for o in v.comm)) for v in views}
    if len(shapes) != 1:
        return None

    def most(values: list[float | None]) -> float | None:
        present = [x for x in values if x is not None]
        return max(present) if present else None

    compute = tuple(
        dataclasses.replace(
            c,
            flops=max(v.compute[i].flops for v in views),
            hbm_bytes=max(v.compute[i].hbm_bytes for v in views),
            num_tiles=max(v.compute[i].num_tiles for v in views),
        )
        for i, c in enumerate(first.compute)
    )
    comm = tuple(
        dataclasses.replace(
            o,
            size_bytes=max(v.comm[i].size_bytes for v in views),
            send_bytes=most([v.comm[i].send_bytes for v in views]),
            recv_bytes=most([v.comm[i].recv_bytes for v in views]),
            after=None if o.after is None else tuple(sorted({a for v in views for a in v.comm[i].after or ()})),
        )
        for i, o in enumerate(first.comm)
    )
    return dataclasses.replace(first, compute=compute, comm=comm, hbm_bytes=max(v.hbm_bytes for v in views))


def _slowest(per_view: list[list[Prediction]]) -> list[Prediction]:
    """Each pair every view can run, at its slowest view's prediction (a collective ends with its slowest rank)."""
    keyed = [{p.key: p for p in preds} for preds in per_view]
    common = [k for k in keyed[0] if all(k in other for other in keyed[1:])]
    return [max((view[k] for view in keyed), key=lambda p: p.t_s) for k in common]


def bound(w: Workload, system: System) -> Bound:
    """The roof of `w` on `system`, every prediction (fastest first) and the advice they give."""
    views, view_ranks = w.views(), w.view_ranks()
    for view in views:
        for op in view.comm:
            if op.group_size > system.world_size:
                raise ValueError(f"{op.name}: group of {op.group_size} ranks on a world of {system.world_size}")
            if op.group_size > system.ranks_per_node and op.group_size % system.ranks_per_node:
                raise ValueError(
                    f"{op.name}: a group of {op.group_size} does not fill whole nodes of {system.ranks_per_node}"
                )
    terms = [_terms(view, system) for view in views]

    def busiest(value: Callable[[_ViewTerms], float]) -> int:
        return max(range(len(views)), key=lambda i: value(terms[i]))

    on_tier = {tier: busiest(lambda t, tier=tier: t.link[tier].t_s) for tier in terms[0].link}
    link_terms = {tier: terms[i].link[tier] for tier, i in on_tier.items()}
    tier = max(link_terms, key=lambda t: link_terms[t].t_s)  # a tie binds on scale-up, listed first
    at = {"compute": busiest(lambda t: t.compute_s), "hbm": busiest(lambda t: t.hbm_s), "link": on_tier[tier]}
    at["latency"] = busiest(lambda t: t.latency_s)
    c, h, la = (terms[at[k]] for k in ("compute", "hbm", "latency"))
    envelope = _envelope(views) if len(views) > ENVELOPE_AFTER else None
    predictions = _slowest([every_prediction(view, system) for view in ((envelope,) if envelope else views)])
    predictions.sort(key=lambda p: p.t_s)
    b = Bound(
        workload=w,
        system=system,
        t_compute_s=c.compute_s,
        t_hbm_s=h.hbm_s,
        t_link_s=link_terms[tier].t_s,
        t_latency_s=la.latency_s,
        link_bytes_per_rank=link_terms[tier].bytes_per_rank,
        link_bandwidth_Bps=link_terms[tier].bandwidth_Bps,
        link_tier=tier,
        peak_flops=c.peak_flops,
        predictions=tuple(p.with_bandwidths(w) for p in predictions),
        link_terms=link_terms,
        busiest_rank={k: view_ranks[i][0] for k, i in at.items() if view_ranks[i]},
        flops=c.flops,
        hbm_bytes=views[at["hbm"]].hbm_bytes,
        comm=views[at["link"]].comm,
    )
    return dataclasses.replace(b, advice=advise(b)) if b.predictions else b
