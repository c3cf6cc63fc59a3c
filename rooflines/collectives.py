"""Per-rank link traffic of each collective, per algorithm family, in nccl-tests' size convention.

Size S follows nccl-tests (PERFORMANCE.md): all-reduce, broadcast, reduce: the buffer; all-gather and
gather: the gathered output; reduce-scatter and scatter: the full input; all-to-all: one rank's send
buffer; send/recv: the message. Traffic is counted for the busiest rank, per direction, on a fabric where
a GPU reaches every peer at once (NVSwitch, or a full mesh counted as one injection bandwidth).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Collective(StrEnum):
    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_TO_ALL = "all-to-all"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    GATHER = "gather"
    SCATTER = "scatter"
    SEND_RECV = "send-recv"


REDUCTIONS = frozenset({Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE})


class Algorithm(StrEnum):
    RING = "ring"  # n−1 neighbour steps per phase (NCCL's ring; chain for rooted ops, pairwise for all-to-all)
    ONE_SHOT = "one-shot"  # direct: every rank reads/writes every peer in one step
    TWO_SHOT = "two-shot"  # reduce-scatter then all-gather (scatter then all-gather for broadcast)
    IN_NETWORK = "in-network"  # NVSwitch multimem: the switch reduces or multicasts
    HIERARCHICAL = "hierarchical"  # scale-up inside a node, rail-aligned ring across nodes


@dataclass(frozen=True)
class Traffic:
    """What the busiest rank moves: bytes sent and received, and dependent latency steps."""

    send_bytes: float
    recv_bytes: float
    num_steps: int

    @property
    def bytes(self) -> float:
        """Bytes on the busier direction of the busiest rank's link: what bandwidth must carry."""
        return max(self.send_bytes, self.recv_bytes)

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.send_bytes + other.send_bytes, self.recv_bytes + other.recv_bytes, self.num_steps + other.num_steps
        )


ZERO = Traffic(0.0, 0.0, 0)


def _one_shot(kind: Collective, S: float, n: int) -> Traffic:
    f = (n - 1) / n
    match kind:
        case Collective.ALL_REDUCE:  # each rank pulls every peer's whole buffer (or pushes its own to all)
            return Traffic((n - 1) * S, (n - 1) * S, 1)
        case Collective.ALL_GATHER | Collective.REDUCE_SCATTER | Collective.ALL_TO_ALL:
            return Traffic(f * S, f * S, 1)
        case Collective.BROADCAST:  # the root writes the whole buffer to each peer
            return Traffic((n - 1) * S, S, 1)
        case Collective.REDUCE:  # the root reads every peer's whole buffer
            return Traffic(S, (n - 1) * S, 1)
        case Collective.GATHER:  # the root receives n−1 chunks of S/n
            return Traffic(S / n, f * S, 1)
        case Collective.SCATTER:
            return Traffic(f * S, S / n, 1)
        case Collective.SEND_RECV:
            return Traffic(S, S, 1)


def _ring(kind: Collective, S: float, n: int) -> Traffic | None:
    f = (n - 1) / n
    match kind:
        case Collective.ALL_REDUCE:  # reduce-scatter ring then all-gather ring
            return Traffic(2 * f * S, 2 * f * S, 2 * (n - 1))
        case Collective.ALL_GATHER | Collective.REDUCE_SCATTER | Collective.ALL_TO_ALL:
            return Traffic(f * S, f * S, n - 1)
        case Collective.BROADCAST | Collective.REDUCE:  # pipelined chain: every link carries S once
            return Traffic(S, S, n - 1)
    return None


def _two_shot(kind: Collective, S: float, n: int) -> Traffic | None:
    f = (n - 1) / n
    match kind:
        case Collective.ALL_REDUCE:  # direct reduce-scatter, then direct all-gather
            return Traffic(2 * f * S, 2 * f * S, 2)
        case Collective.BROADCAST:  # root scatters (f·S out), then all ranks all-gather (f·S out each)
            return Traffic(2 * f * S, S, 2)
        case Collective.REDUCE:  # reduce-scatter, then the root gathers the reduced chunks
            return Traffic(f * S, 2 * f * S, 2)
    return None


def _in_network(kind: Collective, S: float, n: int) -> Traffic | None:
    f = (n - 1) / n
    match kind:
        case Collective.ALL_REDUCE:
            # rank i owns chunk i: multimem.ld_reduce pulls the switch-reduced chunk (in S/n, and every
            # rank sends f·S of contributions), multimem.st multicasts it (out S/n, in f·S): S each way.
            return Traffic(S, S, 2)
        case Collective.ALL_GATHER:  # each rank multicasts its S/n once; receives the other f·S
            return Traffic(S / n, f * S, 1)
        case Collective.REDUCE_SCATTER:  # each rank contributes f·S, receives its reduced S/n
            return Traffic(f * S, S / n, 1)
        case Collective.BROADCAST:
            return Traffic(S, S, 1)
        case Collective.REDUCE:
            return Traffic(S, S, 1)
    return None


_SINGLE_TIER = {
    Algorithm.ONE_SHOT: _one_shot,
    Algorithm.RING: _ring,
    Algorithm.TWO_SHOT: _two_shot,
    Algorithm.IN_NETWORK: _in_network,
}


def traffic(kind: Collective, algorithm: Algorithm, size_bytes: float, num_ranks: int) -> Traffic | None:
    """Busiest rank's traffic on one tier; None where the algorithm does not implement the collective."""
    assert num_ranks >= 1 and size_bytes >= 0, (num_ranks, size_bytes)
    assert algorithm is not Algorithm.HIERARCHICAL, "use hierarchical_traffic()"
    if num_ranks == 1:
        return ZERO
    if kind is Collective.SEND_RECV and algorithm is not Algorithm.ONE_SHOT:
        return None
    if kind in (Collective.GATHER, Collective.SCATTER) and algorithm is not Algorithm.ONE_SHOT:
        return None
    return _SINGLE_TIER[algorithm](kind, size_bytes, num_ranks)


@dataclass(frozen=True)
class TieredTraffic:
    """Busiest rank's traffic inside its node (scale-up) and through its NIC share (scale-out)."""

    scaleup: Traffic
    scaleout: Traffic


# collectives whose two-level form below moves its in-node part its own way, not by the `intra` algorithm: they
# exist for an `intra` algorithm only where that algorithm does the collective within one node
_OWN_INTRA = frozenset({Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER, Collective.SEND_RECV})


def _across_nodes(kind: Collective, size_bytes: float, num_nodes: int) -> Traffic | None:
    """One rail's part across `num_nodes` nodes: a ring's bytes, in the fewer dependent steps of a ring and of
    recursive halving and doubling (Rabenseifner; Thakur et al., IJHPCA 2005), which moves the same bytes per rank
    in ⌈log2 N⌉ rounds per phase: 2⌈log2 N⌉ for an all-reduce (reduce-scatter, then all-gather), ⌈log2 N⌉ for an
    all-gather or a reduce-scatter, and a binomial tree's ⌈log2 N⌉ for a broadcast or a reduce. At thousands of
    nodes the ring's 2(N−1) steps of network latency would dwarf any size; NCCL runs trees there."""
    ring = traffic(kind, Algorithm.RING, size_bytes, num_nodes)
    if ring is None or num_nodes < 2:
        return ring
    rounds = math.ceil(math.log2(num_nodes))
    phases = 2 if kind is Collective.ALL_REDUCE else 1
    return Traffic(ring.send_bytes, ring.recv_bytes, min(ring.num_steps, phases * rounds))


def hierarchical_traffic(
    kind: Collective, size_bytes: float, ranks_per_node: int, num_nodes: int, *, intra: Algorithm
) -> TieredTraffic | None:
    """Two-level algorithm on `num_nodes` nodes of `ranks_per_node` GPUs, rail-aligned across nodes.

    All-reduce: reduce-scatter in the node, all-reduce of S/g across nodes (one ring per rail), all-gather
    in the node. All-gather / reduce-scatter: the across-node step moves S/g per rail. Broadcast / reduce: the
    buffer split over the g rails, S/g across nodes on each. All-to-all: the (N−1)/N of each send buffer bound
    for other nodes leaves through the NIC.
    """
    S, g, N = size_bytes, ranks_per_node, num_nodes

    def up(k: Collective, s: float) -> Traffic | None:
        return traffic(k, intra, s, g)

    def out(k: Collective, s: float) -> Traffic | None:
        return _across_nodes(k, s, N)

    if kind in _OWN_INTRA and up(kind, S) is None:  # e.g. multimem: nothing to reduce or multicast in an all-to-all
        return None
    match kind:
        case Collective.ALL_REDUCE:
            rs, ag = up(Collective.REDUCE_SCATTER, S), up(Collective.ALL_GATHER, S)
            if rs is None or ag is None:
                return None
            return TieredTraffic(rs + ag, out(Collective.ALL_REDUCE, S / g))
        case Collective.ALL_GATHER | Collective.REDUCE_SCATTER:
            inner = up(kind, S)
            return None if inner is None else TieredTraffic(inner, out(kind, S / g))
        case Collective.ALL_TO_ALL:
            off_node = (N - 1) / N * S
            on_node = (g - 1) / (N * g) * S
            return TieredTraffic(Traffic(on_node, on_node, 1), Traffic(off_node, off_node, 1))
        case Collective.BROADCAST | Collective.REDUCE:  # the buffer split over the node's g rails: S/g on each
            inner = up(kind, S)
            return None if inner is None else TieredTraffic(inner, out(kind, S / g))
        case Collective.GATHER | Collective.SCATTER:  # through every NIC of the root's node, then inside it
            inner = traffic(kind, Algorithm.ONE_SHOT, S, N * g)
            f = (N - 1) / N * S / g
            return TieredTraffic(inner, Traffic(f, f, 1))
        case Collective.SEND_RECV:  # a pair on different nodes: all of it crosses the network
            return TieredTraffic(ZERO, Traffic(S, S, 1))


def all_to_allv_traffic(send_bytes: Sequence[Sequence[float]]) -> Traffic:
    """Busiest rank of an all-to-all-v, from the matrix send_bytes[src][dst] (the diagonal stays local)."""
    n = len(send_bytes)
    assert all(len(row) == n for row in send_bytes), "send_bytes must be square"
    sent = [sum(row[d] for d in range(n) if d != s) for s, row in enumerate(send_bytes)]
    received = [sum(send_bytes[s][d] for s in range(n) if s != d) for d in range(n)]
    return Traffic(max(sent), max(received), 1)


def bus_bandwidth_factor(kind: Collective, num_ranks: int) -> float:
    """nccl-tests' busbw = algbw × factor (PERFORMANCE.md): the per-link rate of a ring-optimal algorithm."""
    n = num_ranks
    match kind:
        case Collective.ALL_REDUCE:
            return 2 * (n - 1) / n
        case (
            Collective.ALL_GATHER
            | Collective.REDUCE_SCATTER
            | Collective.ALL_TO_ALL
            | Collective.GATHER
            | Collective.SCATTER
        ):
            return (n - 1) / n
        case Collective.BROADCAST | Collective.REDUCE | Collective.SEND_RECV:
            return 1.0


def algorithm_bandwidth_Bps(size_bytes: float, time_s: float) -> float:
    """nccl-tests' algbw: the size in its convention over the elapsed time."""
    return size_bytes / time_s


def bus_bandwidth_Bps(kind: Collective, size_bytes: float, time_s: float, num_ranks: int) -> float:
    return algorithm_bandwidth_Bps(size_bytes, time_s) * bus_bandwidth_factor(kind, num_ranks)


@dataclass(frozen=True)
class LowerBound:
    """Chan et al. 2007, 'Collective communication: theory, practice, and experience', table 2.

    Single-port model, cost α + nβ per message, γ per reduced byte: latency_steps·α + bandwidth_factor·S·β
    + reduction_factor·S·γ is a lower bound for any algorithm on p ranks.
    """

    latency_steps: int
    bandwidth_factor: float
    reduction_factor: float


def chan_lower_bound(kind: Collective, num_ranks: int) -> LowerBound:
    p = num_ranks
    log_p = math.ceil(math.log2(p)) if p > 1 else 0
    f = (p - 1) / p
    match kind:
        case Collective.BROADCAST:
            return LowerBound(log_p, 1.0, 0.0)
        case Collective.REDUCE:
            return LowerBound(log_p, 1.0, f)
        case Collective.SCATTER | Collective.GATHER | Collective.ALL_GATHER | Collective.ALL_TO_ALL:
            return LowerBound(log_p, f, 0.0)
        case Collective.REDUCE_SCATTER:
            return LowerBound(log_p, f, f)
        case Collective.ALL_REDUCE:
            return LowerBound(log_p, 2 * f, f)
        case Collective.SEND_RECV:
            return LowerBound(1, 1.0, 0.0)
