"""The communication-aware roofline of a Workload on a System, and a prediction per (mechanism, schedule).

    t_roof = max(t_compute, t_hbm, t_link) + t_latency

t_compute: FLOPs at the dtype's dense peak on every SM; t_hbm: minimal HBM bytes at HBM bandwidth; t_link:
the fewest bytes any available algorithm must put on the busiest rank's link, at the fastest available
mechanism's peak; across nodes each tier (scale-up inside a node, scale-out through the GPU's share of its node's
NICs) carries its own bytes at its own rate, and t_link is the slower tier's; t_latency: the cheapest chain of
dependent steps.
Latency is counted outside the max because the first message of a pipeline cannot hide behind anything.

A prediction charges what its pair really costs: the mechanism's α and bandwidth at the CTAs it gets, the
SMs communication takes away from compute, HBM staging where comm and compute meet through memory
(inter-SM, copy engine), the pipeline's fill, and the fixed costs kernels were measured to pay beyond all that
(a staged collective's hand-off, a fused kernel's per schedule). Every prediction is ≥ t_roof by construction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from . import nccl
from .algorithms import algorithms
from .collectives import ZERO, Algorithm, Collective, TieredTraffic, Traffic, hierarchical_traffic, traffic
from .mechanisms import DEVICE_INITIATED, LL_PUSH, Mechanism, Protocol, Schedule, TransferModel, label
from .system import System
from .units import fmt_bytes
from .workload import CommOp, ComputeOp, Workload


def _local_reduce_bytes(kind: Collective, algorithm: Algorithm, size: float, n: int) -> float:
    """HBM bytes of the separate reduction kernel the copy engine needs (it moves bytes, it cannot add)."""
    match kind, algorithm:
        case Collective.ALL_REDUCE | Collective.REDUCE, Algorithm.ONE_SHOT:
            return (n + 1) * size  # read n whole buffers, write one
        case Collective.ALL_REDUCE | Collective.REDUCE_SCATTER | Collective.REDUCE, _:
            return size + size / n  # read n chunks of S/n, write one chunk
    return 0.0


# A copy-engine collective reduces each chunk as it lands, behind the DMA of the next, so only the last chunk's
# reduction is exposed. The last chunk is pkroof's (kernels/copy_engine.py: chunks per peer halve towards a last
# one of 4 MiB). Charging the whole reduction after the transfers put the model 11-19% above the pipelined kernels
# at 64 and 256 MiB on 2xH200 (benchmarks/kernels/2026-11-30-ceilings-h200x2.md).
CE_TAIL_BYTES, CE_MAX_CHUNK_BYTES = 4 << 20, 64 << 20


def _ce_exposed(bytes_per_peer: float) -> float:
    """The fraction of a copy-engine collective's local reduction left after its last DMA: its last chunk's."""
    return min(1.0, CE_TAIL_BYTES / bytes_per_peer) if bytes_per_peer > 0 else 1.0


def _ce_chunks(bytes_per_peer: float) -> int:
    """How many chunks the halving schedule cuts `bytes_per_peer` into (4, 8, ... 64, 64 MiB from the end): the
    fewest c whose chunks cover it. The first g = log2(max / tail) + 1 chunks double (4 ... 64 MiB) and cover
    tail · (2^c − 1), so up to tail · (2^g − 1) c is the bit length of ⌈bytes / tail⌉; beyond, each is 64 MiB."""
    doubling = (CE_MAX_CHUNK_BYTES // CE_TAIL_BYTES).bit_length()  # 4, 8, 16, 32, 64 MiB: 5 chunks
    doubled = CE_TAIL_BYTES * ((1 << doubling) - 1)  # 124 MiB
    if bytes_per_peer <= doubled:
        return max(1, math.ceil(bytes_per_peer / CE_TAIL_BYTES).bit_length())
    return doubling + math.ceil((bytes_per_peer - doubled) / CE_MAX_CHUNK_BYTES)


@dataclass(frozen=True)
class OpCost:
    """One comm op done by one mechanism: bandwidth time, latency time, and the algorithm chosen."""

    algorithm: Algorithm
    bandwidth_s: float
    latency_s: float
    traffic: Traffic  # scale-up traffic of the busiest rank (scale-out added for hierarchical)
    # the share of its staging through symmetric memory left after its transfers: all of it, but a pipelined
    # copy-engine collective's last chunk's (the rest lands and is copied out or reduced behind later DMAs)
    exposed: float = 1.0
    protocol: Protocol = Protocol.SIMPLE
    nccl: nccl.NcclChoice | None = None  # NCCL's own pair and costs, where its tuning is known
    regime: str = ""  # NCCL priced by a probe's fits: which of its regimes ("fit 2/3")

    @property
    def algorithm_name(self) -> str:
        return self.algorithm.value if self.nccl is None else self.nccl.algorithm.value

    @property
    def protocol_name(self) -> str:
        if self.nccl is not None:
            return self.nccl.protocol.value
        return self.regime or self.protocol.value

    @property
    def total_s(self) -> float:
        return self.bandwidth_s + self.latency_s

    @property
    def staged_bytes(self) -> float:
        """HBM bytes beyond the minimal traffic that moving a caller's tensors through symmetric memory costs: what
        a rank sends is written to a symmetric buffer and read back (simple); LL lines (8 bytes per 4 of data) land
        in the receiver's inbox and are read back from it, the sender reading its input where it lies."""
        if self.protocol is Protocol.LL:
            return 4 * self.traffic.recv_bytes * self.exposed
        return (self.traffic.send_bytes + self.traffic.recv_bytes) * self.exposed


def _explicit_traffic(op: CommOp, system: System, algorithm: Algorithm, scale: float) -> TieredTraffic | None:
    """An op whose rank's bytes are given (uneven splits, unequal lists, a point-to-point batch): direct, one step,
    whatever the algorithm (the switch cannot reduce or multicast bytes that differ per peer). Across nodes the
    peers are spread over them: (N − 1)/N of the bytes cross the NICs."""
    if algorithm is Algorithm.IN_NETWORK:
        return None
    send, recv = (op.send_bytes or 0.0) * scale, (op.recv_bytes or 0.0) * scale
    if op.group_size <= system.ranks_per_node:
        return TieredTraffic(Traffic(send, recv, 1), ZERO)
    off = (op.group_size // system.ranks_per_node - 1) / (op.group_size // system.ranks_per_node)
    return TieredTraffic(Traffic(send * (1 - off), recv * (1 - off), 1), Traffic(send * off, recv * off, 1))


def _op_traffic(op: CommOp, system: System, algorithm: Algorithm, size: float) -> TieredTraffic | None:
    """Busiest rank's traffic per tier; a group within one node has no scale-out traffic."""
    if op.explicit:
        return _explicit_traffic(op, system, algorithm, size / op.size_bytes if op.size_bytes else 1.0)
    g = min(op.group_size, system.ranks_per_node)
    if op.group_size > system.ranks_per_node:
        return hierarchical_traffic(op.kind, size, g, op.group_size // g, intra=algorithm)
    t = traffic(op.kind, algorithm, size, g)
    return None if t is None else TieredTraffic(t, ZERO)


def _network_s(tiers: TieredTraffic, system: System) -> tuple[float, float]:
    """(bandwidth seconds, latency seconds) of the scale-out part, zero on one node."""
    if not tiers.scaleout.num_steps:
        return 0.0, 0.0
    net = system.network
    assert net is not None
    return tiers.scaleout.bytes / net.peak_bandwidth_Bps, net.latency_for(tiers.scaleout.num_steps)


# the traffic model of each of NCCL's algorithms (collectives.py), for what an overlapped NCCL call stages in HBM
_NCCL_TRAFFIC = {
    nccl.NcclAlgorithm.RING: Algorithm.RING,
    nccl.NcclAlgorithm.TREE: Algorithm.RING,
    nccl.NcclAlgorithm.NVLS: Algorithm.IN_NETWORK,
    nccl.NcclAlgorithm.NVLS_TREE: Algorithm.IN_NETWORK,
    nccl.NcclAlgorithm.P2P: Algorithm.ONE_SHOT,
    nccl.NcclAlgorithm.SYMMETRIC: Algorithm.ONE_SHOT,
}


def _nccl_cost(op: CommOp, system: System, m: TransferModel, run: nccl.NcclRun | None = None) -> OpCost:
    """One NCCL call as NCCL runs it by default on this system (rooflines/nccl.py): its algorithm and protocol, its
    latency and bandwidth time, captured in a graph."""
    assert m.nccl is not None
    g = min(op.group_size, system.ranks_per_node)
    nodes = max(1, op.group_size // g)
    share = system.network.peak_bandwidth_Bps if nodes > 1 and system.network is not None else 0.0
    choice = nccl.choose(op.kind, op.size_bytes, g, m.nccl, nodes=nodes, network_share_Bps=share, run=run or m.nccl_run)
    tiers = _op_traffic(op, system, _NCCL_TRAFFIC[choice.algorithm], op.size_bytes)
    if tiers is None:  # NCCL's p2p and rings do what its traffic model's one-shot and ring do
        tiers = _op_traffic(op, system, Algorithm.ONE_SHOT, op.size_bytes)
    assert tiers is not None, op.kind
    alg = _NCCL_TRAFFIC[choice.algorithm]
    return OpCost(alg, choice.bandwidth_s, choice.latency_s, tiers.scaleup + tiers.scaleout, nccl=choice)


def _fit_regime(m: TransferModel, kind: str, num_bytes: float) -> str:
    """Which of a probe's NCCL regimes for `kind` prices `num_bytes` ("fit 2/3"); "" where it fitted none."""
    regimes = [(lat, peak) for name, lat, peak in m.collective_fits if name == kind]
    if not regimes:
        return ""
    best = min(range(len(regimes)), key=lambda i: regimes[i][0] + num_bytes / regimes[i][1])
    return f"fit {best + 1}/{len(regimes)}"


def _cost(
    op: CommOp,
    system: System,
    m: TransferModel,
    num_ctas: int | None,
    read_multiplier: int = 1,
    *,
    staged: bool,
    chunked: bool = True,
    protocol: Protocol = Protocol.SIMPLE,
    algorithm: Algorithm | None = None,
) -> OpCost | None:
    """Cheapest algorithm of mechanism `m` for `op` with `num_ctas` CTAs; None if `m` cannot do it. `staged`: the
    caller also pays HBM for every byte sent and received (_staging_s), so the choice counts it too; otherwise a
    faster link could switch to an algorithm cheaper on the link but dearer in staging, and the whole get slower.
    `chunked`: a copy-engine collective pipelines each peer's bytes in chunks (kernels/copy_engine.py); a fused
    copy-engine overlap sends whole shards instead, and reduces after its last one (_overlapped counts its DMAs).
    `protocol`: LL (pushes within a node only) puts each 4-byte word beside its flag in an 8-byte line, so twice
    the bytes cross the link, and the receiver polls the lines themselves: no flag step, and LL's own hand-off.
    `algorithm`: the one a kernel declares it runs (None: the cheapest of the mechanism's)."""
    ll = protocol is Protocol.LL
    if ll and m.mechanism not in LL_PUSH:
        return None
    if m.mechanism is Mechanism.NCCL and m.nccl is not None:
        return _nccl_cost(op, system, m)
    best: OpCost | None = None
    size = op.size_bytes * read_multiplier
    for alg in algorithms(m.mechanism, op.kind):
        if algorithm is not None and alg is not algorithm:
            continue
        tiers = _op_traffic(op, system, alg, size)
        if tiers is None or (ll and tiers.scaleout.num_steps):
            continue
        model = m.for_collective(op.kind.value, tiers.scaleup.bytes)
        if tiers.scaleup.send_bytes and tiers.scaleup.recv_bytes:
            # both directions busy: pull all-reduce on 2xH200 ran 16-18% over a model at the one-way rate (SM
            # loads: 375 GB/s one way, 336 both ways; benchmarks/kernels/2026-11-30-ceilings-h200x2.md). NCCL's own
            # fits are of whole collectives and already hold it. The roof keeps the one-way rate: a bound.
            model = model.both_ways()
        net_bw_s, net_lat_s = _network_s(tiers, system)
        line_bytes = tiers.scaleup.bytes * (2 if ll else 1)
        if m.mechanism is Mechanism.MULTIMEM and op.kind is Collective.ALL_REDUCE:
            # a rank's own chunk crosses its link to the switch too (multimem reads and multicasts go through the
            # switch for every member): (n+1)/n·S each way, as NCCL's maintainers count NVLS (NVIDIA/nccl-tests#212,
            # NVIDIA/nccl#2140). The roof keeps S: a bound
            g = min(op.group_size, system.ranks_per_node)
            line_bytes *= (g + 1) / g
        bw_s = max(line_bytes / model.bandwidth_Bps(num_ctas), net_bw_s)
        exposed, chunk_latency_s = 1.0, 0.0
        if m.mechanism is Mechanism.COPY_ENGINE and chunked:
            g = min(op.group_size, system.ranks_per_node)
            per_peer = tiers.scaleup.bytes / max(1, g - 1)
            exposed = _ce_exposed(per_peer)
            bw_s += _local_reduce_bytes(op.kind, alg, size, g) * exposed / system.hbm_bandwidth_Bps
            # every chunk after the first is DMAs of its own, each paying the copy engine's start-up α: with no
            # local work at all, 256 MiB collectives on 2xH200 took 2.75-2.88 µs more per extra chunk (a line
            # through 2-16 chunks; the probe's α: 2.77 µs;
            # benchmarks/kernels/data/2026-11-30-gemm-rates/gemm-rates-ce-pipeline/ce-sweep.log)
            chunk_latency_s = (_ce_chunks(per_peer) - 1) * model.latency_s
        elif m.mechanism is Mechanism.COPY_ENGINE:  # whole shards: the local reduction follows the last one
            g = min(op.group_size, system.ranks_per_node)
            bw_s += _local_reduce_bytes(op.kind, alg, size, g) / system.hbm_bandwidth_Bps
        # over symmetric memory the receiver learns that data has landed through a flag: one more dependent
        # step, and the hand-off around it costs what the node's kernels measured (handoff_s, from `pkroof
        # topology calibrate`; h200x2: 2.2-2.8 µs for SM loads or stores, 13.0 µs for the copy engine's stream
        # hops). NCCL's measured α already holds its own synchronisation.
        if m.mechanism is Mechanism.NCCL:
            latency_s = model.latency_for(tiers.scaleup.num_steps) + net_lat_s
        elif ll:
            latency_s = model.latency_for(tiers.scaleup.num_steps) + model.handoff_for(protocol)
        else:
            latency_s = model.latency_for(tiers.scaleup.num_steps + 1) + net_lat_s + model.handoff_s + chunk_latency_s
        regime = _fit_regime(m, op.kind.value, tiers.scaleup.bytes) if m.mechanism is Mechanism.NCCL else ""
        cost = OpCost(alg, bw_s, latency_s, tiers.scaleup + tiers.scaleout, exposed, protocol, regime=regime)
        if best is None or _choice_s(cost, system, staged) < _choice_s(best, system, staged):
            best = cost
    return best


def _choice_s(cost: OpCost, system: System, staged: bool) -> float:
    return cost.total_s + (_staging_s([cost], system) if staged else 0.0)


@dataclass(frozen=True)
class Prediction:
    mechanism: Mechanism
    schedule: Schedule
    comm_sms: int  # SMs (or SM-equivalents, intra-SM) taken by communication
    t_s: float
    compute_s: float  # compute after the SMs that communication takes
    comm_s: float  # communication's bandwidth time
    latency_s: float
    fill_s: float  # pipeline prologue/epilogue that cannot overlap
    algorithms: tuple[str, ...]  # per comm op (NCCL: the algorithm it picks, "ring", "nvls", "p2p", ...)
    protocol: Protocol = Protocol.SIMPLE
    protocols: tuple[str, ...] = ()  # per comm op: NCCL's ("ll", "ll128", "simple"), or a probe fit's regime
    # NCCL only, where its tuning is known: the same calls as eager PyTorch calls the program waits on (t_s is their
    # time captured in a CUDA graph, as pkroof times), and with buffers registered for NCCL's symmetric kernels
    t_eager_s: float | None = None
    t_symmetric_s: float | None = None

    @property
    def key(self) -> str:
        """ "mechanism/schedule", "/ll" appended for the LL protocol: how result files and reports name the pair."""
        return f"{self.mechanism.value}/{self.schedule.value}" + ("/ll" if self.protocol is Protocol.LL else "")

    @property
    def label(self) -> str:
        """The mechanism as tables show it: "sm-store", or "sm-store LL"."""
        return label(self.mechanism.value, self.protocol)


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
class Bound:
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
    # the busiest rank's FLOPs, HBM bytes and communication; alike on every rank, busiest is empty
    busiest: dict[str, int] = dataclasses.field(default_factory=dict)
    flops: float = 0.0
    hbm_bytes: float = 0.0
    comm: tuple[CommOp, ...] = ()

    @property
    def t_roof_s(self) -> float:
        return max(self.t_compute_s, self.t_hbm_s, self.t_link_s) + self.t_latency_s

    @property
    def limiter(self) -> str:
        terms = {"compute": self.t_compute_s, "hbm": self.t_hbm_s, "link": self.t_link_s}
        name = max(terms, key=terms.__getitem__)
        return "latency" if self.t_latency_s > terms[name] else name

    def prediction(
        self, mechanism: Mechanism, schedule: Schedule, protocol: Protocol = Protocol.SIMPLE
    ) -> Prediction | None:
        pair = (mechanism, schedule, protocol)
        return next((p for p in self.predictions if (p.mechanism, p.schedule, p.protocol) == pair), None)


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
            tiers = _op_traffic(op, system, alg, op.size_bytes)
            if tiers is None:
                continue
            m = mechanism.for_collective(op.kind.value, tiers.scaleup.bytes)
            floors = {SCALE_UP: _tier_floor(tiers.scaleup, m.peak_bandwidth_Bps)}
            if system.network is not None:
                floors[SCALE_OUT] = _tier_floor(tiers.scaleout, system.network.peak_bandwidth_Bps)
            cand = _LinkFloor(floors, 0.0)
            latency = min(latency, m.latency_for(tiers.scaleup.num_steps) + _network_s(tiers, system)[1])
            if best is None or (cand.seconds, floors[SCALE_UP].seconds) < (best.seconds, best.tiers[SCALE_UP].seconds):
                best = cand
    if best is None:
        raise ValueError(f"no available mechanism on {system.name} can do {op.kind}")
    return dataclasses.replace(best, latency_s=latency)


# A compute op whose time at the peak is at least this long is charged the sustained rate (the GPU at its power
# limit), a shorter one the peak. pkroof times at least 3 back-to-back calls per sample; on 2xH200 the limiter
# held the GPU at 700 W through samples of 8.4 ms of continuous matmuls (3 calls of 2.8 ms: 688 TFLOP/s) but not
# through samples of 4.3 ms (3 calls of 1.43 ms: 768, as one call after idle), so the line sits between a
# 1.43 ms and a 2.8 ms call (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md).
SUSTAINED_AFTER_S = 2e-3


def _rate(op: ComputeOp, system: System) -> float:
    """FLOP/s a prediction charges `op`: the sustained rate for a long op (SUSTAINED_AFTER_S), else the burst rate
    (a matmul alone after idle: the peak where none is known, a probed node's peak being its measured burst)."""
    peak = system.peak_flops_for(op.dtype)
    long = op.flops / peak >= SUSTAINED_AFTER_S
    return system.sustained_flops_for(op.dtype) if long else system.burst_flops_for(op.dtype)


# cuBLAS splits a GEMM along K only where each piece keeps a long K loop: this many FLOPs of a 128×256 tile, K =
# 2048. The 1024³ fp8 GEMMs of Azure's tables ran at one unsplit wave (H100 7.83 µs, H200 7.38, GB200 4.39: one
# 128×256 tile of K = 1024 at one SM's share of the rate, 6.3 µs on H100, plus a little), not at the 1.6 µs a
# 4-way split would give; a GEMM of small M and long K (decode) is split, as its weights' HBM time says it must be
SPLIT_K_MIN_FLOPS = 2 * 128 * 256 * 2048


def _alone_s(op: ComputeOp, system: System) -> float:
    """A compute op as a library kernel runs it alone on every SM: its FLOPs at its rate, and a tiled op (a GEMM) at
    least its waves of whole tiles, split along K where its tiles leave SMs idle and K is long (split-K,
    SPLIT_K_MIN_FLOPS): the last wave of 132 SMs holding 4 tiles costs a whole tile's time, and a GEMM of small M
    pays for its tiles' padded rows. Azure's cuBLASLt fp8 GEMMs on one H100 ran at 0.88-0.99 of their best rate
    from 4096³ up, and at 0.2-0.7 below (Azure/AI-benchmarking-guide, ND_H100_v5_results.md)."""
    rate = _rate(op, system)
    t = op.flops / rate
    if op.tile_flops:
        sms = system.sm_count
        split = max(1, min(sms // op.num_tiles, int(op.tile_flops // SPLIT_K_MIN_FLOPS)))
        waves = -(-op.num_tiles * split // sms)
        t = max(t, waves * op.tile_flops / split * sms / rate)
    return t


def _serial_compute_s(w: Workload, system: System) -> float:
    return sum(max(_alone_s(op, system), op.hbm_bytes / system.hbm_bandwidth_Bps) for op in w.compute)


def _flops_s(w: Workload, system: System, *, roof: bool = False) -> float:
    """The compute ops' FLOPs at their dtype's peak for the roof (a bound nothing beats: the fastest matmul
    measured, one call on an idle GPU), at _rate for predictions. On 2xH200 the 8192³ matmul ran at 772
    TFLOP/s one call after idle and at 667 back to back, the GPU at its 700 W limit with its SM clock near
    1450 MHz against 1980; fused GEMMs of 2.4-4.8 ms measured 8-16% over predictions made at the peak."""
    return sum(op.flops / (system.peak_flops_for(op.dtype) if roof else _rate(op, system)) for op in w.compute)


def _tile_waves_s(w: Workload, system: System, sms: int) -> float:
    """Compute time of tiled ops on `sms` SMs that each own whole tiles: ⌈tiles / sms⌉ waves of one tile at one
    SM's share of the peak. Below a wave of tiles this, not FLOPs / peak, is the GEMM's time: on 2xH200 the
    inter-SM kernel's excess over a FLOPs-only model was 5.0-6.5 µs for one 128×256 tile with K = 128 and
    10.8 µs for 2 and 8 tiles with K = 512, the difference (4.4 µs) one such tile's 4.2 µs
    (benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md)."""
    return sum(
        -(-op.num_tiles // sms) * op.tile_flops * system.sm_count / _rate(op, system)
        for op in w.compute
        if op.tile_flops
    )


def _waves(w: Workload, sms: int) -> int:
    """Waves of whole tiles on `sms` SMs (the tiled ops' most); a large number when nothing is tiled. Tiles of one
    wave finish together, so communication that follows them has nothing left to overlap with: a pipeline is
    at most this deep (inter-SM GEMM + all-reduce, 2xH200: 64 tiles on 100 SMs ran 17.6% over a two-deep fill,
    benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md)."""
    tiled = [op.num_tiles for op in w.compute if op.tile_flops]
    return max(1, -(-max(tiled) // sms)) if tiled else 1 << 30


def _staging_s(costs: list[OpCost], system: System) -> float:
    """HBM time of moving a caller's ordinary tensors through symmetric memory: every byte a rank sends is
    written to a symmetric buffer and read back once more than the minimal traffic (pull: the sender stages it
    and the peer reads it there; push: it lands in the receiver's inbox and is copied out). A pipelined
    copy-engine collective pays its last chunk's share only: charged whole, its staging put the model 14-16%
    above the kernels at 256 MiB-1 GiB on 2xH200, 2 GiB of staging (509 µs) on a 2.90 ms all-reduce whose link
    time alone is 2.88 ms (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, §5)."""
    return sum(c.staged_bytes for c in costs) / system.hbm_bandwidth_Bps


def _serial(
    w: Workload,
    system: System,
    m: TransferModel,
    comm_sms: int | None = None,
    protocol: Protocol = Protocol.SIMPLE,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """Compute, then communication with as many CTAs as help (NCCL: its own channel count; a kernel that
    declares its CTA count: that many). Anything but NCCL, whose measured rates already include its copies,
    also pays the staging of ordinary tensors through symmetric memory, after the transfers: pkroof's kernels
    on h200x2 measured 5-18% above the sum and 19-55% above the max of the two
    (benchmarks/kernels/2026-11-30-variants-h200x2.md)."""
    if m.mechanism is Mechanism.NCCL and m.nccl is not None:
        ctas, used = m.nccl.channels, m.nccl.channels
    elif m.mechanism is Mechanism.NCCL and m.num_ctas_default:
        ctas, used = m.num_ctas_default, m.num_ctas_default
    elif m.uses_sms:
        ctas, used = (comm_sms, comm_sms) if comm_sms else (system.sm_count, min(m.ctas_for(1.0), system.sm_count))
    else:
        ctas, used = None, 0
    staged = m.mechanism is not Mechanism.NCCL
    costs = [_cost(op, system, m, ctas, staged=staged, protocol=protocol, algorithm=algorithm) for op in w.comm]
    if not costs and protocol is not Protocol.SIMPLE:
        return None  # nothing to communicate: no protocol to choose
    if any(c is None for c in costs):
        return None
    comm_s = sum(c.bandwidth_s for c in costs)
    if m.mechanism is not Mechanism.NCCL:
        comm_s += _staging_s(costs, system)
    lat_s = sum(c.latency_s for c in costs)
    compute_s = _serial_compute_s(w, system)
    hbm_s = w.hbm_bytes / system.hbm_bandwidth_Bps
    busy_s = max(compute_s + comm_s, hbm_s)
    eager_s = symmetric_s = None
    if m.mechanism is Mechanism.NCCL and m.nccl is not None:
        eager_s = busy_s + lat_s + sum(c.nccl.host_overhead_s for c in costs if c.nccl)
        if "symmetric/ll" in m.nccl.lines:
            run = dataclasses.replace(m.nccl_run, registered=True)
            sym = [_nccl_cost(op, system, m, run) for op in w.comm]
            symmetric_s = max(compute_s + sum(c.bandwidth_s for c in sym), hbm_s) + sum(c.latency_s for c in sym)
    return Prediction(
        m.mechanism,
        Schedule.SERIAL,
        used,
        busy_s + lat_s,
        compute_s,
        comm_s,
        lat_s,
        0.0,
        tuple(c.algorithm_name for c in costs),
        protocol,
        tuple(c.protocol_name for c in costs),
        eager_s,
        symmetric_s,
    )


def _chunks(w: Workload, system: System, *, tiles: bool) -> int:
    """Pipeline depth: shards (one per rank) for inter-SM; waves of tiles for intra-SM (tiles finish a wave at a
    time and each wave's epilogue sends while the next computes: one wave, no overlap). The copy engine's:
    _ce_overlap_pipeline."""
    if tiles:
        return max(1, -(-max(op.num_tiles for op in w.compute) // system.sm_count))
    return max(op.group_size for op in w.comm)


def _ce_overlap_pipeline(op: CommOp, algorithm: Algorithm, system: System) -> tuple[int, int]:
    """(pipeline depth, DMAs sent to each peer, one after another) of a copy-engine overlap for `op`, as pkroof's
    kernels do it (kernels/fused.py). Gathers and scatters go shard by shard, one per rank, each peer's sent once.
    A one-shot all-reduce goes by row blocks of its partial product, each pushed to every peer as soon as it is
    computed: two blocks at 2 ranks, one beyond, where a block costs P − 1 more DMAs (fused.one_shot_blocks)."""
    if op.kind is Collective.ALL_REDUCE and algorithm is Algorithm.ONE_SHOT:
        blocks = 2 if min(op.group_size, system.ranks_per_node) == 2 else 1
        return blocks, blocks
    return op.group_size, 1


def _overlapped(
    w: Workload,
    system: System,
    m: TransferModel,
    schedule: Schedule,
    comm_sms: int | None = None,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """Communication overlapped with compute: search the comm SMs k that minimise the total (or take the k a
    kernel declares). Inter-SM's GEMM runs in whole tiles on the SMs left to it, so its compute is at least
    its waves of tiles (_tile_waves_s); intra-SM's and the copy engine's is cuBLAS's, which picks smaller
    tiles for small problems, and stays FLOPs at the peak."""
    sm = system.sm_count
    match schedule:
        case Schedule.INTRA_SM:
            candidates, staged, tiles = range(1, sm), False, True
        case Schedule.INTER_SM:
            nccl_ctas = m.nccl.channels if m.nccl is not None else m.num_ctas_default
            candidates = [nccl_ctas] if m.mechanism is Mechanism.NCCL else range(1, sm)
            candidates = [k for k in candidates if 0 < k < sm]
            staged, tiles = True, False
        case Schedule.CE_OVERLAP:
            candidates, staged, tiles = [0], True, False
    if comm_sms is not None and schedule is Schedule.INTER_SM:  # intra-SM's k is the model's SM-equivalents
        candidates = [comm_sms] if 0 < comm_sms < sm else []
    flops_s = _flops_s(w, system)
    fill_depth = _chunks(w, system, tiles=tiles)
    ce = schedule is Schedule.CE_OVERLAP
    best: Prediction | None = None
    for k in candidates:
        costs, later_dmas, ce_depth = [], 0, 1
        for op in w.comm:
            reads = op.consumer_reads if (schedule is Schedule.INTRA_SM and op.consumer) else 1
            ctas = k if m.uses_sms else None
            c = _cost(op, system, m, ctas, reads, staged=staged, chunked=not ce, algorithm=algorithm)
            if c is None:
                return None
            costs.append(c)
            if ce:  # a DMA to a peer starts once the one before it has ended: each after the first pays α, as
                # the copy-engine collectives' chunks do (_cost); peers are served side by side, as there
                depth, dmas = _ce_overlap_pipeline(op, c.algorithm, system)
                ce_depth, later_dmas = max(ce_depth, depth), later_dmas + dmas - 1
        comm_s = sum(c.bandwidth_s for c in costs) + later_dmas * m.latency_s
        lat_s = sum(c.latency_s for c in costs) + m.overlap_for(schedule.value)  # a fused kernel's fixed costs
        staging = sum(c.traffic.send_bytes + c.traffic.recv_bytes for c in costs) if staged else 0.0
        hbm_s = (w.hbm_bytes + staging) / system.hbm_bandwidth_Bps
        compute_s = flops_s * sm / (sm - k)
        depth = ce_depth if ce else fill_depth
        if schedule is Schedule.INTER_SM:  # a persistent GEMM on sm − k SMs, each owning whole tiles
            compute_s = max(compute_s, _tile_waves_s(w, system, sm - k))
            depth = min(depth, _waves(w, sm - k))
        fill_s = min(compute_s, comm_s) / depth
        t = max(compute_s, hbm_s, comm_s) + lat_s + fill_s
        if best is None or t < best.t_s:
            algorithms = tuple(c.algorithm_name for c in costs)
            protocols = tuple(c.protocol_name for c in costs)
            best = Prediction(
                m.mechanism, schedule, k, t, compute_s, comm_s, lat_s, fill_s, algorithms, protocols=protocols
            )
    return best


def _schedules(w: Workload, m: TransferModel, *, declared: bool = False) -> list[Schedule]:
    """The schedules worth predicting for `w` with `m`; `declared`: an implementation runs this pair, so predict
    intra-SM even for a single tile (it is then serial: the one wave's epilogue sends after the compute)."""
    out = [Schedule.SERIAL]
    if not w.overlappable:
        return out
    if m.mechanism in DEVICE_INITIATED:
        tiled = declared or all(op.num_tiles > 1 for op in w.compute)
        out += [Schedule.INTRA_SM, Schedule.INTER_SM] if tiled else [Schedule.INTER_SM]
    elif m.mechanism is Mechanism.NCCL:
        out.append(Schedule.INTER_SM)  # NCCL on a side stream, its channels taking SMs from the compute
    elif m.mechanism is Mechanism.COPY_ENGINE:
        out.append(Schedule.CE_OVERLAP)
    return out


def predict(
    w: Workload,
    system: System,
    mechanism: Mechanism,
    schedule: Schedule,
    comm_sms: int | None = None,
    protocol: Protocol = Protocol.SIMPLE,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """The prediction for one (mechanism, schedule) pair as an implementation declares it, with its protocol and
    algorithm; None where the system lacks the mechanism or the schedule, protocol or algorithm does not apply.
    comm_sms None: the best count, as in bound(); algorithm None: the cheapest. The LL protocol is modelled for
    serial collectives only."""
    m = next((m for m in system.available if m.mechanism is mechanism), None)
    if m is None or schedule not in _schedules(w, m, declared=True):
        return None
    if schedule is Schedule.SERIAL:
        return _serial(w, system, m, comm_sms, protocol, algorithm)
    return None if protocol is not Protocol.SIMPLE else _overlapped(w, system, m, schedule, comm_sms, algorithm)


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
class _Terms:
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


def _terms(w: Workload, system: System) -> _Terms:
    """The roof's terms for one rank's view."""
    flops_s = _flops_s(w, system, roof=True)
    total_flops = sum(op.flops for op in w.compute)
    floors = [_link_floor(op, system) for op in w.comm]
    peaks = {SCALE_UP: max((m.peak_bandwidth_Bps for m in system.available), default=0.0)}
    if system.network is not None:
        peaks[SCALE_OUT] = system.network.peak_bandwidth_Bps
    nothing = _TierFloor(0.0, 0.0, 1.0)
    link = {t: _link_term(w.comm, [f.tiers.get(t, nothing) for f in floors], peak) for t, peak in peaks.items()}
    return _Terms(
        compute_s=flops_s,
        hbm_s=w.hbm_bytes / system.hbm_bandwidth_Bps,
        link=link,
        latency_s=_chain_s(w.comm, [f.latency_s for f in floors]),
        flops=total_flops,
        peak_flops=total_flops / flops_s if flops_s else system.peak_flops.get(w.dtype, 0.0),
    )


def _predictions(w: Workload, system: System) -> list[Prediction]:
    predictions = []
    for m in system.available:
        for schedule in _schedules(w, m):
            p = _serial(w, system, m) if schedule is Schedule.SERIAL else _overlapped(w, system, m, schedule)
            if p is not None:
                predictions.append(p)
        if m.mechanism in LL_PUSH and (ll := _serial(w, system, m, protocol=Protocol.LL)) is not None:
            predictions.append(ll)
    return predictions


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

    def busiest(value: Callable[[_Terms], float]) -> int:
        return max(range(len(views)), key=lambda i: value(terms[i]))

    on_tier = {tier: busiest(lambda t, tier=tier: t.link[tier].t_s) for tier in terms[0].link}
    link_terms = {tier: terms[i].link[tier] for tier, i in on_tier.items()}
    tier = max(link_terms, key=lambda t: link_terms[t].t_s)  # a tie binds on scale-up, listed first
    at = {"compute": busiest(lambda t: t.compute_s), "hbm": busiest(lambda t: t.hbm_s), "link": on_tier[tier]}
    at["latency"] = busiest(lambda t: t.latency_s)
    c, h, la = (terms[at[k]] for k in ("compute", "hbm", "latency"))
    envelope = _envelope(views) if len(views) > ENVELOPE_AFTER else None
    predictions = _slowest([_predictions(view, system) for view in ((envelope,) if envelope else views)])
    predictions.sort(key=lambda p: p.t_s)
    return Bound(
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
        predictions=tuple(predictions),
        link_terms=link_terms,
        busiest={k: view_ranks[i][0] for k, i in at.items() if view_ranks[i]},
        flops=c.flops,
        hbm_bytes=views[at["hbm"]].hbm_bytes,
        comm=views[at["link"]].comm,
    )
