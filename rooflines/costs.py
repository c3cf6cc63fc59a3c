"""What one communication op costs with one mechanism: the algorithm it picks, its bandwidth and latency time, the
traffic on the busiest rank's link per tier, and the HBM staging of moving ordinary tensors through symmetric memory.

A copy-engine collective pipelines each peer's bytes in chunks; NCCL is priced as it runs by default on the system
(rooflines/nccl.py); everything else by its mechanism's α-β-CTA model (rooflines/mechanisms.py).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from . import nccl
from .algorithms import algorithms
from .collectives import ZERO, Algorithm, Collective, TieredTraffic, Traffic, hierarchical_traffic, traffic
from .mechanisms import LL_PUSH, Mechanism, Protocol, TransferModel
from .system import System
from .workload import CommOp


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


def op_traffic(op: CommOp, system: System, algorithm: Algorithm, size: float) -> TieredTraffic | None:
    """Busiest rank's traffic per tier; a group within one node has no scale-out traffic."""
    if op.explicit:
        return _explicit_traffic(op, system, algorithm, size / op.size_bytes if op.size_bytes else 1.0)
    g = min(op.group_size, system.ranks_per_node)
    if op.group_size > system.ranks_per_node:
        return hierarchical_traffic(op.kind, size, g, op.group_size // g, intra=algorithm)
    t = traffic(op.kind, algorithm, size, g)
    return None if t is None else TieredTraffic(t, ZERO)


def network_s(tiers: TieredTraffic, system: System) -> tuple[float, float]:
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


def nccl_cost(op: CommOp, system: System, m: TransferModel, run: nccl.NcclRun | None = None) -> OpCost:
    """One NCCL call as NCCL runs it by default on this system (rooflines/nccl.py): its algorithm and protocol, its
    latency and bandwidth time, captured in a graph."""
    assert m.nccl is not None
    g = min(op.group_size, system.ranks_per_node)
    nodes = max(1, op.group_size // g)
    share = system.network.peak_bandwidth_Bps if nodes > 1 and system.network is not None else 0.0
    choice = nccl.choose(op.kind, op.size_bytes, g, m.nccl, nodes=nodes, network_share_Bps=share, run=run or m.nccl_run)
    if op.explicit and 0 < choice.num_bytes < max(op.send_bytes or 0.0, op.recv_bytes or 0.0):
        # unequal lists or splits: this rank moves more than the even split of the size NCCL's lines price
        moved = max(op.send_bytes or 0.0, op.recv_bytes or 0.0)
        choice = dataclasses.replace(choice, bandwidth_s=choice.bandwidth_s * moved / choice.num_bytes, num_bytes=moved)
    tiers = op_traffic(op, system, _NCCL_TRAFFIC[choice.algorithm], op.size_bytes)
    if tiers is None:  # NCCL's p2p and rings do what its traffic model's one-shot and ring do
        tiers = op_traffic(op, system, Algorithm.ONE_SHOT, op.size_bytes)
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


def op_cost(
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
    caller also pays HBM for every byte sent and received (staging_s), so the choice counts it too; otherwise a
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
        return nccl_cost(op, system, m)
    best: OpCost | None = None
    size = op.size_bytes * read_multiplier
    for alg in algorithms(m.mechanism, op.kind):
        if algorithm is not None and alg is not algorithm:
            continue
        tiers = op_traffic(op, system, alg, size)
        if tiers is None or (ll and tiers.scaleout.num_steps):
            continue
        model = m.for_collective(op.kind.value, tiers.scaleup.bytes)
        if tiers.scaleup.send_bytes and tiers.scaleup.recv_bytes:
            # both directions busy: pull all-reduce on 2xH200 ran 16-18% over a model at the one-way rate (SM
            # loads: 375 GB/s one way, 336 both ways; benchmarks/kernels/2026-11-30-ceilings-h200x2.md). NCCL's own
            # fits are of whole collectives and already hold it. The roof keeps the one-way rate: a bound.
            model = model.both_ways()
        net_bw_s, net_lat_s = network_s(tiers, system)
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
        # Its flags go to and come from every peer, so the hand-off grows with them (per_peer_s).
        peers = min(op.group_size, system.ranks_per_node) - 1
        if m.mechanism is Mechanism.NCCL:
            latency_s = model.latency_for(tiers.scaleup.num_steps) + net_lat_s
        elif ll:
            latency_s = model.latency_for(tiers.scaleup.num_steps) + model.handoff_for(protocol, peers)
        else:
            handoff_s = model.handoff_for(Protocol.SIMPLE, peers)
            latency_s = model.latency_for(tiers.scaleup.num_steps + 1) + net_lat_s + handoff_s + chunk_latency_s
        regime = _fit_regime(m, op.kind.value, tiers.scaleup.bytes) if m.mechanism is Mechanism.NCCL else ""
        cost = OpCost(alg, bw_s, latency_s, tiers.scaleup + tiers.scaleout, exposed, protocol, regime=regime)
        if best is None or _choice_s(cost, system, staged) < _choice_s(best, system, staged):
            best = cost
    return best


def _choice_s(cost: OpCost, system: System, staged: bool) -> float:
    return cost.total_s + (staging_s([cost], system) if staged else 0.0)


def staging_s(costs: list[OpCost], system: System) -> float:
    """HBM time of moving a caller's ordinary tensors through symmetric memory: every byte a rank sends is
    written to a symmetric buffer and read back once more than the minimal traffic (pull: the sender stages it
    and the peer reads it there; push: it lands in the receiver's inbox and is copied out). A pipelined
    copy-engine collective pays its last chunk's share only: charged whole, its staging put the model 14-16%
    above the kernels at 256 MiB-1 GiB on 2xH200, 2 GiB of staging (509 µs) on a 2.90 ms all-reduce whose link
    time alone is 2.88 ms (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, §5)."""
    return sum(c.staged_bytes for c in costs) / system.hbm_bandwidth_Bps
