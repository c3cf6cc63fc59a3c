"""The model at thousands of GPUs, on paper: hierarchical collectives (NVLink inside a node, one rail per GPU across
nodes) at 1024 nodes of 8 GPUs, NVLink domains of 72 and 576 GPUs (gb200-nvl72, gb200-nvl576) and several of them
joined by the network, their bytes and steps derived by hand; the roof below every prediction at every scale; `bound`
and `advise` doing no more work at thousands of GPUs than at half as many (their speed: benchmarks/model/)."""

import dataclasses
import math
import sys

import pytest
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.rooflines import Algorithm, Collective, Mechanism, Schedule
from pkroof.rooflines.analyze import NodesPoint, analyze, network_bound_from
from pkroof.rooflines.builders import collective
from pkroof.rooflines.collectives import hierarchical_traffic, traffic
from pkroof.rooflines.nccl import NcclRun
from pkroof.topology import resolve

S = 2**30  # 1 GiB


def test_hierarchical_all_reduce_at_1024_nodes_of_8_by_hand():
    # g = 8 GPUs a node, N = 1024 nodes. Inside the node a reduce-scatter then an all-gather of S (one-shot):
    # 7/8·S out and 7/8·S in each, so 2·7/8·S = 1.75 S per rank, in 2 dependent steps (one per phase).
    # Across nodes each GPU's rail carries the all-reduce of its S/8 shard among 1024 peers: a ring's bytes,
    # 2·(N−1)/N·S/8 = 2·1023/1024/8·S = 0.24976 S, in recursive halving then doubling's 2·log2(1024) = 20 steps,
    # not the ring's 2·(N−1) = 2046.
    tiers = hierarchical_traffic(Collective.ALL_REDUCE, S, 8, 1024, intra=Algorithm.ONE_SHOT)
    assert tiers.scaleup.bytes == pytest.approx(2 * 7 / 8 * S) and tiers.scaleup.num_steps == 2
    assert tiers.scaleout.bytes == pytest.approx(2 * 1023 / 1024 * S / 8)
    assert tiers.scaleout.num_steps == 20


@pytest.mark.parametrize("nodes, steps", [(2, 1), (3, 2), (4, 2), (1000, 10), (1024, 10)])
def test_all_gather_across_nodes_takes_the_ceiling_of_log2_rounds(nodes, steps):
    # recursive doubling: the data a rank holds doubles each round, so ⌈log2 N⌉ rounds; bytes stay the ring's
    # (N−1)/N of the rail's S/g. At 2 nodes the ring's N−1 = 1 step is as few.
    tiers = hierarchical_traffic(Collective.ALL_GATHER, S, 8, nodes, intra=Algorithm.ONE_SHOT)
    assert tiers.scaleout.num_steps == steps == min(nodes - 1, math.ceil(math.log2(nodes)))
    assert tiers.scaleout.bytes == pytest.approx((nodes - 1) / nodes * S / 8)


def test_the_1024_node_all_reduce_bound_by_hand():
    # hgx-h100-8 at 1024 nodes: each GPU's NIC share is 50 GB/s (one 400 Gb/s ConnectX-7 a GPU). The busiest
    # tier is scale-out: 0.24976·S = 268.2 MB at 50 GB/s = 5.364 ms, above NVLink's S each way by NVLS at the
    # switch ports' 450 GB/s (2.39 ms; one-shot's 1.75·S at under 400 GB/s would be slower).
    # Latency: the network's 3 µs per step × 20 steps = 60 µs, plus NVLink's 2 steps of the SM store's
    # 1.3 µs α: ≈ 62.6 µs — where the ring's 2046 steps would have charged 6.1 ms.
    system = resolve("hgx-h100-8", nodes=1024).system(8192)
    b = analyze(collective(Collective.ALL_REDUCE, 8192, "bf16", size=S), system).bound
    net = system.network
    assert net.peak_bandwidth_Bps == 50e9 and net.latency_s == 3e-6
    assert b.t_link_s == pytest.approx(2 * 1023 / 1024 * S / 8 / 50e9) == b.link_terms["scale-out"].t_s
    assert b.link_terms["scale-up"].t_s == pytest.approx(S / 450e9)
    assert 20 * 3e-6 < b.t_latency_s < 20 * 3e-6 + 5e-6
    assert b.limiter == "link"


NVLINK5_Bps = 18 * 50e9  # per GPU per direction: 18 NVLink 5 links of 50 GB/s, the announced 1.8 TB/s both ways
NDR_Bps, NET_STEP_S = 400e9 / 8, 3e-6  # what --nodes joins GB200 domains by: one NDR 400 Gb/s port a GPU, 3 µs a step


def _store_latencies() -> tuple[float, float]:
    """(α, step latency) of the SM store on the 2×H200 node's probe, which every Blackwell preset carries."""
    store = resolve("h200x2").mechanisms["sm-store"]
    return store.latency_s, store.step_latency_s


@pytest.mark.parametrize("n", [72, 576])
def test_all_reduce_traffic_in_one_nvlink_domain_by_hand(n):
    # one NVLink domain of n GPUs, per rank and direction, S = 1 GiB:
    # ring: a reduce-scatter ring then an all-gather ring, n−1 neighbour steps of S/n each: 2·(n−1)/n·S in 2·(n−1)
    #   steps (n = 72: 142/72·S = 1.972 S in 142 steps; n = 576: 1150/576·S = 1.997 S in 1150 steps)
    # two-shot: the same bytes, each phase one direct exchange with every peer: 2 steps
    # one-shot: every peer's whole buffer, (n−1)·S, in 1 step
    # in-network: the switches reduce (ld_reduce) then multicast (st) each rank's chunk: S in, S out, 2 steps
    f = (n - 1) / n
    ring = traffic(Collective.ALL_REDUCE, Algorithm.RING, S, n)
    assert (ring.send_bytes, ring.recv_bytes, ring.num_steps) == (pytest.approx(2 * f * S),) * 2 + (2 * (n - 1),)
    two = traffic(Collective.ALL_REDUCE, Algorithm.TWO_SHOT, S, n)
    assert two.bytes == pytest.approx(2 * f * S) and two.num_steps == 2
    one = traffic(Collective.ALL_REDUCE, Algorithm.ONE_SHOT, S, n)
    assert one.bytes == pytest.approx((n - 1) * S) and one.num_steps == 1
    switch = traffic(Collective.ALL_REDUCE, Algorithm.IN_NETWORK, S, n)
    assert switch.send_bytes == switch.recv_bytes == pytest.approx(S) and switch.num_steps == 2


@pytest.mark.parametrize("preset, n", [("gb200-nvl72", 72), ("gb200-nvl576", 576)])
def test_the_all_reduce_roof_in_one_nvlink_domain_by_hand(preset, n):
    # the link term takes the fewest bytes at their best rate: in-network's S at the switch ports' rate, the NVLink 5
    # link itself, 18 × 50 GB/s = 900 GB/s per direction: t_link = 2^30 B / 900 GB/s = 1.193 ms. The next fewest,
    # two-shot's 2·(n−1)/n·S ≈ 2 S, would need 1.8 TB/s one way to match, above the link. The latency term takes
    # the fewest dependent steps of any algorithm, one-shot's 1, at the smallest α of the mechanisms: the SM store's
    # (1.37 µs, the 2×H200 probe's, carried; a 576-GPU domain's second switch tier could only add to it). So the
    # domain's size moves neither term: 576 GPUs differ from 72 in the ring's bytes and steps (above), not the roof.
    topology = resolve(preset)
    b = analyze(collective(Collective.ALL_REDUCE, n, "bf16", size=S), topology.system(n)).bound
    alpha, _ = _store_latencies()
    assert topology.scaleup.total_bandwidth_Bps == pytest.approx(NVLINK5_Bps)
    assert b.link_tier == "scale-up" and b.link_bytes_per_rank == pytest.approx(S)
    assert b.t_link_s == pytest.approx(S / NVLINK5_Bps)
    assert min(m.latency_s for m in topology.mechanisms.values() if m.available) == alpha
    assert b.t_latency_s == pytest.approx(alpha)
    assert b.t_roof_s == pytest.approx(S / NVLINK5_Bps + alpha) and b.limiter == "link"


def _nccl_all_reduce_s(n: int, algorithms: frozenset[str] | None) -> tuple[float, str]:
    """NCCL's predicted all-reduce of S on n ranks of one 576-GPU domain (NCCL_ALGO as given), and its pair."""
    system = resolve("gb200-nvl576").system(n)
    m = system.mechanisms[Mechanism.NCCL]
    system = dataclasses.replace(
        system, mechanisms={**system.mechanisms, Mechanism.NCCL: dataclasses.replace(m, nccl_run=NcclRun(algorithms))}
    )
    b = analyze(collective(Collective.ALL_REDUCE, n, "bf16", size=S), system).bound
    p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert p.t_s >= b.t_roof_s
    return p.t_s, f"{p.algorithms[0]}/{p.protocols[0]}"


@pytest.mark.parametrize(
    "n, ring_s, ring_pair",
    [
        # NCCL_ALGO=ring: NCCL's model per protocol (rooflines/nccl.py), its bus bandwidth 18 links × 40.1 GB/s =
        # 721.8 GB/s, the bus bytes 2·(n−1)/n·S, and a ring's 2·(n−1) steps:
        # n = 72, 142 steps, 2.118e9 B: LL 6.6 + 142·0.6 = 91.8 µs + 2.118e9 / 282 GB/s (its LL cap) = 7.60 ms;
        #   LL128 14 + 142·1.9 = 283.8 µs + 2.118e9 / (0.92·721.8 = 664.1 GB/s) = 3.47 ms; Simple 8.4 + 142·3.4 =
        #   491.2 µs + 2.118e9 / 721.8 GB/s = 3.43 ms: Simple, which the rack's ring/simple lines price at the
        #   cheaper of 8.4 + 482.8 µs + 2.118e9 / 619.85 GB/s = 3.907 ms and 116.9 + 482.8 µs + 2.118e9 / 684.58 GB/s
        (72, 116.9e-6 + 142 * 3.4e-6 + 2 * 71 / 72 * S / 684.58e9, "ring/simple"),
        # n = 576, 1150 steps, 2.144e9 B: LL 6.6 + 1150·0.6 = 696.6 µs + 2.144e9 / 282 GB/s = 8.30 ms; LL128 14 +
        #   1150·1.9 = 2199 µs + 2.144e9 / 664.1 GB/s = 5.43 ms; Simple 8.4 + 1150·3.4 = 3918 µs + 2.144e9 /
        #   721.8 GB/s = 6.89 ms: LL128, which its one line prices at 2199 µs + 2.144e9 / 497.25 GB/s
        (576, 14e-6 + 1150 * 1.9e-6 + 2 * 575 / 576 * S / 497.25e9, "ring/ll128"),
    ],
)
def test_the_nvl576_nccl_baseline_is_chosen_and_priced_at_its_own_world_size(n, ring_s, ring_pair):
    # by default NCCL runs NVLS on NVLink 5 from 5 ranks (its model: 25 µs of latency against the ring's 2(n−1)
    # steps), which the rack's nvls/simple lines price as the cheaper of 25 µs + S / 298.91 GB/s = 3.617 ms and
    # 607.9 µs + S / 443.41 GB/s = 3.030 ms: the switches do the work, so the same at 72 ranks and at 576
    assert _nccl_all_reduce_s(n, None) == (pytest.approx(607.9e-6 + S / 443.41e9), "nvls/simple")
    assert _nccl_all_reduce_s(n, frozenset({"ring"})) == (pytest.approx(ring_s), ring_pair)


def test_hierarchical_all_reduce_of_8_nvl72_racks_by_hand():
    # gb200-nvl72 --nodes 8: g = 72 GPUs a rack, N = 8 racks joined by a 50 GB/s NIC a GPU, 3 µs a network step.
    # Inside each rack in-network: a reduce-scatter (out 71/72·S of contributions, in its reduced S/72) then an
    # all-gather (out S/72, in 71/72·S): S each way, in 2 steps.
    # Across racks each GPU's rail all-reduces its S/72 shard among 8: a ring's bytes, 2·7/8·S/72 = 0.0243 S, in
    # recursive halving then doubling's 2·⌈log2 8⌉ = 6 steps (a ring would take 2·7 = 14).
    # Link: the rack's S at 900 GB/s, 1.193 ms, outlasts the rail's 0.0243 S at 50 GB/s, 0.522 ms: scale-up binds.
    # Latency: the fewest NVLink steps, 2 (the reduce-scatter's, the all-gather's), at the SM store's α then its
    # step latency, and the rail's 6 steps of 3 µs = 18 µs.
    tiers = hierarchical_traffic(Collective.ALL_REDUCE, S, 72, 8, intra=Algorithm.IN_NETWORK)
    up, out = tiers.scaleup, tiers.scaleout
    assert up.send_bytes == up.recv_bytes == pytest.approx(S) and up.num_steps == 2
    assert out.bytes == pytest.approx(2 * 7 / 8 * S / 72) and out.num_steps == 6 == 2 * math.ceil(math.log2(8))
    system = resolve("gb200-nvl72", nodes=8).system(576)
    assert system.network.peak_bandwidth_Bps == NDR_Bps and system.network.latency_s == NET_STEP_S
    b = analyze(collective(Collective.ALL_REDUCE, 576, "bf16", size=S), system).bound
    alpha, step = _store_latencies()
    assert b.link_tier == "scale-up" and b.t_link_s == pytest.approx(S / NVLINK5_Bps)
    assert 2 * 7 / 8 * S / 72 / NDR_Bps < b.t_link_s
    assert b.t_latency_s == pytest.approx(alpha + step + 6 * NET_STEP_S)


@pytest.mark.parametrize("domains, rail_steps", [(2, 2), (3, 4), (4, 4)])
def test_hierarchical_all_reduce_of_nvl576_domains_by_hand(domains, rail_steps):
    # gb200-nvl576 --nodes N: g = 576 GPUs a domain, joined by a 50 GB/s NIC a GPU, 3 µs a network step.
    # Inside each domain in-network, as in a rack: S each way, 2 steps.
    # Across domains each GPU's rail all-reduces its S/576 shard among N: 2·(N−1)/N·S/576 bytes, in the fewer of a
    # ring's 2·(N−1) steps and recursive halving and doubling's 2·⌈log2 N⌉: N = 2: min(2, 2) = 2; N = 3: min(4, 4)
    # = 4; N = 4: min(6, 4) = 4. The rail's bytes at 50 GB/s (N = 4: 1.5/576·S, 56 µs) stay far below the domain's
    # S at 900 GB/s (1.193 ms): scale-up binds, and the latency is 2 NVLink steps plus the rail's.
    n = 576 * domains
    rail = 2 * (domains - 1) / domains * S / 576
    tiers = hierarchical_traffic(Collective.ALL_REDUCE, S, 576, domains, intra=Algorithm.IN_NETWORK)
    assert tiers.scaleup.bytes == pytest.approx(S) and tiers.scaleup.num_steps == 2
    assert tiers.scaleout.bytes == pytest.approx(rail)
    assert tiers.scaleout.num_steps == rail_steps == min(2 * (domains - 1), 2 * math.ceil(math.log2(domains)))
    system = resolve("gb200-nvl576", nodes=domains).system(n)
    assert system.ranks_per_node == 576 and system.network.peak_bandwidth_Bps == NDR_Bps
    b = analyze(collective(Collective.ALL_REDUCE, n, "bf16", size=S), system).bound
    alpha, step = _store_latencies()
    assert b.link_tier == "scale-up" and b.t_link_s == pytest.approx(S / NVLINK5_Bps)
    assert rail / NDR_Bps < b.t_link_s
    assert b.t_latency_s == pytest.approx(alpha + step + rail_steps * NET_STEP_S)


def _nodes_points(kind: Collective, counts: list[int]) -> list[NodesPoint]:
    """The bound of a 1 GiB `kind` on each count of hgx-h100-8 nodes, 8 ranks a node."""
    systems = [resolve("hgx-h100-8", nodes=n).system(8 * n) for n in counts]
    return [NodesPoint.of(analyze(collective(kind, s.world_size, "bf16", size=S), s).bound) for s in systems]


def test_a_1gib_all_gather_on_hgx_h100_is_nvlink_bound_up_to_4_nodes_and_network_bound_from_8():
    # 8 GPUs a node. Inside it NVLS all-gathers: each rank receives (g−1)/g·S = 7/8·S at the switch ports' 450 GB/s
    # (one-shot by SM loads, 7/8·S at under 400 GB/s, is slower), whatever the number of nodes. Across N nodes each
    # GPU's rail all-gathers its S/8: (N−1)/N·S/8 at its 50 GB/s of NIC. The network takes over where
    # (N−1)/N·S/8/50e9 > 7/8·S/450e9, i.e. (N−1)/N > 7·50/450 = 7/9, N > 4.5: at 4 nodes 3/32·S at 50 GB/s
    # (1.875 ps per byte of S) is still under NVLink's 1.944 ps; at 8 nodes 7/64·S (2.1875 ps) is over.
    counts = [1, 2, 4, 8, 16]
    points = _nodes_points(Collective.ALL_GATHER, counts)
    for n, p in zip(counts, points, strict=True):
        assert p.nodes == n and p.world_size == 8 * n
        assert p.scaleup_s == pytest.approx(7 / 8 * S / 450e9)
        assert p.scaleout_s == pytest.approx((n - 1) / n * S / 8 / 50e9)
    assert network_bound_from(points) == 8
    assert network_bound_from(points[:3]) is None  # 1 to 4 nodes: NVLink-bound at every one


def test_a_1gib_all_reduce_on_hgx_h100_is_network_bound_from_2_nodes():
    # NVLS moves S each way inside the node at 450 GB/s; across 2 nodes each rail all-reduces S/8, 2·(1/2)·S/8 =
    # S/8 at 50 GB/s = S/400e9, already above S/450e9
    points = _nodes_points(Collective.ALL_REDUCE, [1, 2, 4])
    assert points[0].scaleout_s == 0.0 and points[1].scaleout_s == pytest.approx(S / 8 / 50e9)
    assert points[1].scaleup_s == pytest.approx(S / 450e9)
    assert network_bound_from(points) == 2


PRESET_NODES = [("hgx-h100-8", 1), ("hgx-h100-8", 2), ("hgx-h100-8", 16), ("hgx-h100-8", 1024), ("hgx-b200-8", 128)]
PRESET_NODES += [("gb200-nvl72", 1), ("gb200-nvl72", 8), ("dgx-a100-8", 64)]
PRESET_NODES += [("gb200-nvl576", 1), ("gb200-nvl576", 2), ("gb200-nvl576", 4)]


@pytest.mark.parametrize("preset, nodes", PRESET_NODES)
def test_the_roof_is_below_every_prediction_at_every_scale(preset, nodes):
    topology = resolve(preset, nodes=nodes)
    ranks = topology.num_gpus
    for kind in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL,
                 Collective.BROADCAST):  # fmt: skip
        for size in (ranks * 512, ranks * 2**16, ranks * 2**21):
            b = analyze(collective(kind, ranks, "bf16", size=size), topology.system(ranks)).bound
            for p in b.predictions:
                assert p.t_s >= b.t_roof_s * (1 - 1e-9), (kind.value, size, p.mechanism.value, p.t_s, b.t_roof_s)


def _lines_run(args: list[str]) -> int:
    """How many lines of Python the command runs in this process, once warm (its second run)."""
    assert CliRunner().invoke(app, args).exit_code == 0
    count = [0]

    def line(frame, event, arg):
        count[0] += event == "line"
        return line

    before = sys.gettrace()  # a coverage tool's, if any: put back after
    sys.settrace(lambda frame, event, arg: line)
    try:
        done = CliRunner().invoke(app, args)
    finally:
        sys.settrace(before)
    assert done.exit_code == 0, done.output
    return count[0]


# (the command with {n} for the nodes or ranks, n, GPUs per n): each at thousands of GPUs or one NVLink domain of 576
@pytest.mark.parametrize(
    "args, n, gpus_per_n",
    [
        (["bound", "all-reduce", "-t", "hgx-h100-8", "--nodes", "{n}", "--size", "1G", "--json"], 1024, 8),
        (["advise", "all-reduce", "-t", "gb200-nvl72", "--nodes", "{n}", "--size", "1G", "--json"], 8, 72),
        (["advise", "all-to-all", "-t", "hgx-h100-8", "--nodes", "{n}", "--size", "8G"], 1024, 8),
        (["bound", "all-reduce", "-t", "gb200-nvl576", "-n", "{n}", "--size", "1G", "--json"], 576, 1),
        (["advise", "all-reduce", "-t", "gb200-nvl576", "-n", "{n}", "--size", "1G"], 576, 1),
        (["advise", "all-reduce", "-t", "gb200-nvl576", "--nodes", "{n}", "--size", "1G", "--json"], 4, 576),
        (["bound", "all-to-all", "-t", "gb200-nvl576", "--nodes", "{n}", "--size", "9G"], 4, 576),
    ],
)
def test_bound_and_advise_at_thousands_of_gpus_do_no_more_work_than_at_half_as_many(args, n, gpus_per_n):
    # G = n · gpus_per_n GPUs against G/2: work per rank or per step would loop G/2 more times at G, each pass
    # running at least one line, so G/2 more lines; logarithmic rounds add a handful. The bar is half of G/2.
    gpus = n * gpus_per_n
    at_g = _lines_run([a.format(n=n) for a in args])
    at_half = _lines_run([a.format(n=n // 2) for a in args])
    assert at_g - at_half < gpus / 4, (gpus, at_g, at_half)
