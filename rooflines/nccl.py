"""NCCL as it runs by default: the algorithm and protocol it picks for a collective, a world size and a size, and
what the call then costs, captured in a CUDA graph (as pkroof times it) and as one eager call the program waits on.

NCCL picks with its own cost model (NVIDIA/nccl src/graph/tuning.cc; NCCL_ALGO and NCCL_PROTO restrict it): every
(algorithm, protocol) gets a latency, a base plus a hardware latency per step (per hop over NVLink, PCIe or the
network), and a bus bandwidth, its model of the links (a per-link constant × links, src/graph/topo.h) cut per
protocol (LL to half, capped per GPU generation; LL128 to 92%, capped per channel; NVLS by an efficiency per
generation); it runs the cheapest. `choose` rebuilds that model from NCCL's documented constants and the machine's
figures in `NcclTuning` to pick the pair, then prices the pair from what published runs measured of it (its
`lines`, fitted by benchmarks/model/fit_nccl.py), NCCL's own model where nothing was measured. Where a cloud's
tuner plugin overrides NCCL (NVLS from more ranks, or only above a size), `nvls_min_ranks` / `nvls_min_bytes`
say so, from the published NCCL_DEBUG=TUNING logs and sweeps.

A measured pair is a few lines t = base + steps·step + bytes / bandwidth, each one regime of NCCL's channel count
(it runs more channels as a message grows, as topology/fit.py's regimes); a call costs the cheapest line. Bytes
follow nccl-tests (PERFORMANCE.md): a ring's are its bus bytes, busbw factor × size; in-network (NVLS) ones the
size itself; a direct (p2p) one's what the busiest rank sends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from .collectives import Collective, bus_bandwidth_factor


class NcclAlgorithm(StrEnum):
    RING = "ring"  # n−1 neighbour steps per phase (pipelined chains for broadcast and reduce)
    TREE = "tree"  # across nodes: double binary trees of nodes, chains inside each
    NVLS = "nvls"  # NVLink SHARP: the switches reduce and multicast (all-reduce inside one NVLink domain)
    NVLS_TREE = "nvls-tree"  # NVLS inside each node, trees of nodes across the network
    P2P = "p2p"  # direct sends to every peer: all-to-all, send/recv, gather, scatter
    SYMMETRIC = "symmetric"  # NCCL ≥ 2.27 kernels over buffers registered in a symmetric window


class NcclProtocol(StrEnum):
    LL = "ll"  # 4 data bytes beside a 4-byte flag per 8-byte store: half the bandwidth, no fence
    LL128 = "ll128"  # 120 data bytes per 128-byte line (NVLink only)
    SIMPLE = "simple"  # whole chunks, then a fenced flag


A, P = NcclAlgorithm, NcclProtocol
RING_COLLECTIVES = frozenset(
    {Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.BROADCAST, Collective.REDUCE}
)
P2P_COLLECTIVES = frozenset({Collective.ALL_TO_ALL, Collective.SEND_RECV, Collective.GATHER, Collective.SCATTER})

# NCCL's documented latencies, µs (src/graph/tuning.cc, 2.28 values): a base per (algorithm, protocol), and a
# hardware latency per step, by what the step crosses
BASE_S = {(A.RING, P.LL): 6.6e-6, (A.RING, P.LL128): 14.0e-6, (A.RING, P.SIMPLE): 8.4e-6}
BASE_S |= {(A.TREE, P.LL): 6.8e-6, (A.TREE, P.LL128): 14.0e-6, (A.TREE, P.SIMPLE): 8.4e-6}


def _per_protocol(algorithm: NcclAlgorithm, ll: float, ll128: float, simple: float) -> dict:
    return {(algorithm, P.LL): ll, (algorithm, P.LL128): ll128, (algorithm, P.SIMPLE): simple}


STEP_S = {
    "nvlink": _per_protocol(A.RING, 0.6e-6, 1.9e-6, 3.4e-6)
    | _per_protocol(A.TREE, 0.6e-6, 1.25e-6, 4.0e-6)
    | {(A.NVLS, P.SIMPLE): 25e-6},
    "pcie": _per_protocol(A.RING, 1.0e-6, 2.5e-6, 5.7e-6) | _per_protocol(A.TREE, 1.0e-6, 1.9e-6, 4.0e-6),
    "net": _per_protocol(A.RING, 2.7e-6, 4.0e-6, 14.0e-6)
    | _per_protocol(A.TREE, 5.0e-6, 8.5e-6, 14.0e-6)
    | {(A.NVLS, P.SIMPLE): 18e-6, (A.NVLS_TREE, P.SIMPLE): 20.9e-6},
}
LL128_SHARE = 0.92  # NCCL's LL128 bus bandwidth: 92% of Simple's (120 of 128 bytes, less its own overhead)
TREE_SHARE = 0.92  # and a tree's, of the ring's


@dataclass(frozen=True)
class NcclLine:
    """One measured regime of an (algorithm, protocol): t = base_s + steps·step_s + bytes / bandwidth_Bps."""

    base_s: float
    step_s: float
    bandwidth_Bps: float

    def __post_init__(self) -> None:
        if not self.bandwidth_Bps > 0:
            raise ValueError(f"bandwidth_Bps: must be positive, got {self.bandwidth_Bps}")
        for name in ("base_s", "step_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: must not be negative, got {getattr(self, name)}")

    def time_s(self, steps: int, num_bytes: float) -> tuple[float, float]:
        """(latency, bandwidth time) of moving `num_bytes` in `steps` dependent steps."""
        return self.base_s + steps * self.step_s, num_bytes / self.bandwidth_Bps


@dataclass(frozen=True)
class NcclTuning:
    """What NCCL does on one machine: the inputs of its own cost model (how it picks), the measured lines of the pairs
    it picks (what they cost), and the costs around a call."""

    version: str  # the NCCL release the figures describe, e.g. "2.27"
    channels: int  # CTAs its ring kernels take: the SMs an NCCL call overlapped with compute holds
    fabric: str  # "nvlink" or "pcie": which of NCCL's per-step latencies apply inside a node
    link_Bps: float  # NCCL's model of a ring's bus bandwidth here: its per-link constant × links
    ll_max_Bps: float  # NCCL's cap on LL's bus bandwidth for this GPU generation
    ll128_channel_Bps: float = 0.0  # its cap on LL128's per channel; 0: LL128 off (NCCL keeps it off PCIe)
    nvls_efficiency: float = 0.0  # its NVLS efficiency for this generation; 0: no NVLS (no multicast)
    nvls_channels: int = 0  # channels NVLS runs
    nvls_min_ranks: int = 0  # NVLS only from this many ranks on, as published runs saw NCCL (or its tuner) choose
    nvls_min_bytes: float = 0.0  # NVLS only above this size, where a tuner plugin holds it back
    lines: dict[str, tuple[NcclLine, ...]] = field(default_factory=dict)  # "ring/ll", "nvls/simple", ...: measured
    host_overhead_s: float = 0.0  # a PyTorch call the program waits on: the host's time before the kernel runs
    net_efficiency: float = 0.0  # across nodes: the share of the NIC rate NCCL's transfers reach

    def __post_init__(self) -> None:
        if not self.version.strip():
            raise ValueError("version: the NCCL release these figures describe")
        if self.channels < 1:
            raise ValueError(f"channels: must be at least 1, got {self.channels}")
        if self.fabric not in ("nvlink", "pcie"):
            raise ValueError(f"fabric: 'nvlink' or 'pcie', got {self.fabric!r}")
        for name in ("link_Bps", "ll_max_Bps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        if not 0 <= self.nvls_efficiency <= 1 or not 0 <= self.net_efficiency <= 1:
            raise ValueError("nvls_efficiency and net_efficiency: shares in [0, 1]")
        if (self.nvls_efficiency > 0) != (self.nvls_channels > 0):
            raise ValueError("nvls_channels: set exactly where NVLS is (nvls_efficiency > 0)")
        pairs = {f"{a.value}/{p.value}" for a in NcclAlgorithm for p in NcclProtocol}
        for key, lines in self.lines.items():
            if key not in pairs:
                raise ValueError(f"lines.{key}: not an algorithm/protocol pair (e.g. ring/ll, nvls/simple, p2p/simple)")
            if not lines:
                raise ValueError(f"lines.{key}: needs at least one line")


@dataclass(frozen=True)
class NcclRun:
    """How a program has NCCL run: NCCL_ALGO / NCCL_PROTO restrictions (None: its default), registered buffers."""

    algorithms: frozenset[str] | None = None
    protocols: frozenset[str] | None = None
    registered: bool = False  # buffers in a symmetric memory window (nccl-tests -R 2): the symmetric kernels apply


DEFAULT_RUN = NcclRun()


@dataclass(frozen=True)
class NcclChoice:
    """The (algorithm, protocol) NCCL runs for one call and what the call costs."""

    algorithm: NcclAlgorithm
    protocol: NcclProtocol
    latency_s: float
    bandwidth_s: float
    host_overhead_s: float  # what a call the program waits on adds (PyTorch's host time), beyond graph_s
    measured: bool  # priced from published runs of this pair (else from NCCL's own model)
    steps: int = 0  # the dependent steps and the bytes its lines are priced on (bus bytes, the size, or sent)
    num_bytes: float = 0.0

    @property
    def graph_s(self) -> float:
        """Captured in a CUDA graph or queued back to back: the host runs ahead, so it costs the kernel alone."""
        return self.latency_s + self.bandwidth_s

    @property
    def eager_s(self) -> float:
        """One eager call the program waits on: the host's time, then the kernel."""
        return self.graph_s + self.host_overhead_s

    @property
    def label(self) -> str:
        """ "nvls/simple": the key of its measured lines in NcclTuning.lines."""
        return f"{self.algorithm.value}/{self.protocol.value}"


def ring_steps(kind: Collective, n: int) -> int:
    """Dependent steps of a ring over n ranks: reduce-scatter then all-gather for all-reduce (NCCL's nsteps)."""
    return 2 * (n - 1) if kind is Collective.ALL_REDUCE else n - 1


@dataclass(frozen=True)
class _Pair:
    """One (algorithm, protocol) here: its steps and bytes, NCCL's model line, and the costs across nodes."""

    algorithm: NcclAlgorithm
    protocol: NcclProtocol
    steps: int  # inside a node
    num_bytes: float  # on its lines' convention (bus bytes, the size, or what a rank sends)
    model: NcclLine  # NCCL's own estimate of it inside a node
    model_latency_s: float = 0.0  # NCCL's latency of it beyond its line (NVLS's, a measured line holds its own)
    net_latency_s: float = 0.0  # steps across the network: beyond any line, measured inside one node
    floor_s: float = 0.0  # the network's bandwidth time: the call takes at least this
    lines_key: str = ""  # the measured lines that price its part inside a node ("" for its own)

    @property
    def key(self) -> str:
        return self.lines_key or f"{self.algorithm.value}/{self.protocol.value}"


def _bus_Bps(t: NcclTuning, protocol: NcclProtocol) -> float:
    """NCCL's bus bandwidth of a ring per protocol: Simple the links, LL128 92% of them capped per channel, LL half
    of them capped per generation."""
    if protocol is P.SIMPLE:
        return t.link_Bps
    if protocol is P.LL128:
        return min(LL128_SHARE * t.link_Bps, t.channels * t.ll128_channel_Bps)
    return min(0.5 * t.link_Bps, t.ll_max_Bps)


def _protocols(t: NcclTuning) -> tuple[NcclProtocol, ...]:
    return (P.LL, P.LL128, P.SIMPLE) if t.ll128_channel_Bps > 0 else (P.LL, P.SIMPLE)


def _pairs(kind: Collective, size: float, g: int, nodes: int, t: NcclTuning, node_Bps: float, run: NcclRun):
    """Every pair NCCL could run for this call, with the figures of NCCL's model for it."""
    n = g * nodes
    step = STEP_S[t.fabric]
    out: list[_Pair] = []
    if kind in RING_COLLECTIVES:
        bus = bus_bandwidth_factor(kind, n) * size
        for p in _protocols(t):
            if nodes == 1:
                model = NcclLine(BASE_S[A.RING, p], step[A.RING, p], _bus_Bps(t, p))
                out.append(_Pair(A.RING, p, ring_steps(kind, n), bus, model))
                continue
            # one ring through every node: its boundary carries the bus bytes of all channels through the node's NICs,
            # and 2·nodes (all-reduce) or nodes of its steps cross the network
            inter = 2 * nodes if kind is Collective.ALL_REDUCE else nodes
            model = NcclLine(BASE_S[A.RING, p], step[A.RING, p], min(_bus_Bps(t, p), node_Bps))
            net_s = inter * STEP_S["net"][A.RING, p]
            out.append(_Pair(A.RING, p, ring_steps(kind, n) - inter, bus, model, 0.0, net_s, bus / node_Bps))
    nvls = t.nvls_efficiency > 0 and g >= max(t.nvls_min_ranks, 2) and size > t.nvls_min_bytes
    if kind is Collective.ALL_REDUCE and nvls:
        # NCCL: the links × its NVLS efficiency × (channels − 1)/channels, both phases at once, per 2(n−1)/n of bus
        busbw = t.link_Bps * t.nvls_efficiency * (t.nvls_channels - 1) / t.nvls_channels * 2
        model = NcclLine(0.0, 0.0, busbw / bus_bandwidth_factor(kind, g))
        nvls_s = step[A.NVLS, P.SIMPLE]
        if nodes == 1:
            out.append(_Pair(A.NVLS, P.SIMPLE, 0, size, model, nvls_s))
        else:  # NVLS in each node (priced as NVLS is there), then each GPU's 1/g across the nodes by trees, through
            # its own NIC
            net_s = 2 * math.ceil(math.log2(nodes)) * STEP_S["net"][A.NVLS_TREE, P.SIMPLE]
            across = 2 * (nodes - 1) / nodes * size / node_Bps
            out.append(_Pair(A.NVLS_TREE, P.SIMPLE, 0, size, model, nvls_s, net_s, across, "nvls/simple"))
    if kind is Collective.ALL_REDUCE and nodes > 1:
        # two binary trees of nodes, each carrying half the buffer (chains inside): a node's NICs carry 2·S each way
        # as a ring's do, at 92% of its bus bandwidth (NCCL), and the latency grows with log2(nodes), not the ranks
        hops = 2 * math.ceil(math.log2(nodes))
        for p in _protocols(t):
            model = NcclLine(BASE_S[A.TREE, p], step[A.TREE, p], TREE_SHARE * min(_bus_Bps(t, p), node_Bps))
            net_s = hops * STEP_S["net"][A.TREE, p]
            chains = bus_bandwidth_factor(kind, g) * size  # a chain inside the node: a ring's bus bytes, priced so
            out.append(_Pair(A.TREE, p, 2 * (g - 1), chains, model, 0.0, net_s, 2 * size / node_Bps, f"ring/{p.value}"))
    if kind in P2P_COLLECTIVES:
        peers = 1 if kind is Collective.SEND_RECV else n - 1
        sent = size if kind is Collective.SEND_RECV else (n - 1) / n * size
        floor = 0.0
        if nodes > 1:
            off_node = size if kind is Collective.SEND_RECV else (nodes - 1) / nodes * size
            floor = off_node / node_Bps * g
        model = NcclLine(BASE_S[A.RING, P.SIMPLE], 0.0, t.link_Bps)
        out.append(_Pair(A.P2P, P.SIMPLE, peers, sent, model, 0.0, 0.0, floor))
    symmetric = kind in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    if run.registered and nodes == 1 and symmetric and "symmetric/ll" in t.lines:
        # NCCL ≥ 2.27's symmetric kernels: their own measured line is all that is known of them
        bus = bus_bandwidth_factor(kind, n) * size
        out.append(_Pair(A.SYMMETRIC, P.LL, 1, bus, t.lines["symmetric/ll"][0]))
    return out


def _allowed(run: NcclRun, pair: _Pair) -> bool:
    if pair.algorithm in (A.P2P, A.SYMMETRIC):  # NCCL_ALGO does not reach point-to-point or the symmetric kernels
        return True
    if run.algorithms is not None and pair.algorithm.value not in run.algorithms:
        return False
    return run.protocols is None or pair.protocol.value in run.protocols


def _time(line: NcclLine, pair: _Pair, *, model: bool = False) -> tuple[float, float]:
    lat, bw = line.time_s(pair.steps, pair.num_bytes)
    return lat + pair.net_latency_s + (pair.model_latency_s if model else 0.0), max(bw, pair.floor_s)


def choose(
    kind: Collective,
    size: float,
    ranks_per_node: int,
    tuning: NcclTuning,
    *,
    nodes: int = 1,
    network_share_Bps: float = 0.0,
    run: NcclRun = DEFAULT_RUN,
) -> NcclChoice:
    """The pair NCCL runs for one `kind` of `size` bytes (nccl-tests' convention) on `nodes` × `ranks_per_node`
    ranks, by NCCL's own cost model, and what it costs by the lines measured of that pair (NCCL's model where none
    was); `network_share_Bps` is one GPU's share of its node's NICs (several nodes only). ValueError where the run's
    NCCL_ALGO / NCCL_PROTO leave nothing NCCL can run."""
    assert ranks_per_node >= 1 and nodes >= 1 and size >= 0, (ranks_per_node, nodes, size)
    node_Bps = 0.0
    if nodes > 1:
        if not (network_share_Bps > 0 and tuning.net_efficiency > 0):
            raise ValueError("NCCL across nodes needs a network rate and NCCL's share of it (net_efficiency)")
        node_Bps = network_share_Bps * ranks_per_node * tuning.net_efficiency
    pairs = [p for p in _pairs(kind, size, ranks_per_node, nodes, tuning, node_Bps, run) if _allowed(run, p)]
    if not pairs:
        raise ValueError(f"NCCL has no algorithm and protocol for {kind.value} under {run}")
    pair = min(pairs, key=lambda p: sum(_time(p.model, p, model=True)))
    measured = tuning.lines.get(pair.key)
    if measured:
        latency, bandwidth = min((_time(line, pair) for line in measured), key=sum)
    else:
        latency, bandwidth = _time(pair.model, pair, model=True)
    return NcclChoice(
        pair.algorithm,
        pair.protocol,
        latency,
        bandwidth,
        tuning.host_overhead_s,
        bool(measured),
        pair.steps,
        pair.num_bytes,
    )
