"""Per-rank traffic of each collective against the textbook derivations, written out here."""

import math

import pytest

from pkroof.rooflines import Algorithm, Collective, bus_bandwidth_factor, chan_lower_bound, traffic
from pkroof.rooflines.collectives import all_to_allv_traffic, bus_bandwidth_Bps, hierarchical_traffic

S = 2**30  # 1 GiB
RANKS = [2, 4, 8, 72]


@pytest.mark.parametrize("n", RANKS)
def test_ring_all_reduce_moves_2_n_minus_1_over_n_S(n):
    # reduce-scatter ring: n−1 steps of S/n, then all-gather ring: n−1 steps of S/n, each way
    t = traffic(Collective.ALL_REDUCE, Algorithm.RING, S, n)
    assert t.bytes == pytest.approx(2 * (n - 1) / n * S)
    assert t.num_steps == 2 * (n - 1)


@pytest.mark.parametrize("n", RANKS)
def test_in_network_all_reduce_moves_about_S(n):
    # rank i reduces chunk i in the switch (sends its n−1 foreign chunks, S(n−1)/n; receives S/n)
    # then multicasts it (sends S/n; receives the n−1 other reduced chunks): S each way
    t = traffic(Collective.ALL_REDUCE, Algorithm.IN_NETWORK, S, n)
    assert t.send_bytes == pytest.approx((n - 1) / n * S + S / n)
    assert t.recv_bytes == pytest.approx(S / n + (n - 1) / n * S)
    ring = traffic(Collective.ALL_REDUCE, Algorithm.RING, S, n)
    assert t.bytes <= ring.bytes


@pytest.mark.parametrize("n", RANKS)
def test_one_shot_all_reduce_pulls_every_peer_buffer(n):
    t = traffic(Collective.ALL_REDUCE, Algorithm.ONE_SHOT, S, n)
    assert t.recv_bytes == pytest.approx((n - 1) * S)
    assert t.num_steps == 1


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("kind", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL])
def test_chunked_collectives_move_n_minus_1_chunks(kind, n):
    # every rank exchanges n−1 chunks of S/n whichever way it is scheduled
    for alg in (Algorithm.RING, Algorithm.ONE_SHOT):
        assert traffic(kind, alg, S, n).bytes == pytest.approx((n - 1) * S / n)


def test_two_shot_all_reduce_is_direct_reduce_scatter_then_all_gather():
    n = 8
    t = traffic(Collective.ALL_REDUCE, Algorithm.TWO_SHOT, S, n)
    rs = traffic(Collective.REDUCE_SCATTER, Algorithm.ONE_SHOT, S, n)
    ag = traffic(Collective.ALL_GATHER, Algorithm.ONE_SHOT, S, n)
    assert t.bytes == pytest.approx(rs.bytes + ag.bytes)
    assert t.num_steps == 2


def test_rooted_collectives_load_the_root():
    n = 8
    assert traffic(Collective.GATHER, Algorithm.ONE_SHOT, S, n).recv_bytes == pytest.approx(7 / 8 * S)
    assert traffic(Collective.SCATTER, Algorithm.ONE_SHOT, S, n).send_bytes == pytest.approx(7 / 8 * S)
    assert traffic(Collective.BROADCAST, Algorithm.ONE_SHOT, S, n).send_bytes == pytest.approx(7 * S)
    assert traffic(Collective.BROADCAST, Algorithm.RING, S, n).bytes == pytest.approx(S)  # pipelined chain
    assert traffic(Collective.REDUCE, Algorithm.IN_NETWORK, S, n).bytes == pytest.approx(S)
    assert traffic(Collective.SEND_RECV, Algorithm.ONE_SHOT, S, 2).bytes == S


def test_algorithms_that_do_not_exist_say_so():
    assert traffic(Collective.ALL_TO_ALL, Algorithm.IN_NETWORK, S, 8) is None
    assert traffic(Collective.GATHER, Algorithm.RING, S, 8) is None
    assert traffic(Collective.ALL_GATHER, Algorithm.TWO_SHOT, S, 8) is None


def test_busbw_factors_match_nccl_tests():
    # nccl-tests PERFORMANCE.md: allreduce 2(n−1)/n, allgather/reducescatter/alltoall (n−1)/n, bcast/reduce 1
    n = 8
    assert bus_bandwidth_factor(Collective.ALL_REDUCE, n) == pytest.approx(14 / 8)
    for kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        assert bus_bandwidth_factor(kind, n) == pytest.approx(7 / 8)
    for kind in (Collective.BROADCAST, Collective.REDUCE, Collective.SEND_RECV):
        assert bus_bandwidth_factor(kind, n) == 1.0
    # 1 GiB all-reduce in 10 ms: algbw 107.4 GB/s, busbw × 1.75
    assert bus_bandwidth_Bps(Collective.ALL_REDUCE, S, 0.01, n) == pytest.approx(S / 0.01 * 1.75)


@pytest.mark.parametrize("n", RANKS)
def test_busbw_is_the_per_rank_link_rate_of_the_ring(n):
    # the point of busbw: for a ring algorithm, busbw = link bytes per rank / time
    for kind in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        ring = traffic(kind, Algorithm.RING, S, n)
        assert ring.bytes == pytest.approx(bus_bandwidth_factor(kind, n) * S)


def test_chan_lower_bounds():
    # Chan et al. 2007 table: ⌈log2 p⌉α for every rooted/collective op; bandwidth nβ, (p−1)/p nβ, 2(p−1)/p nβ
    lb = chan_lower_bound(Collective.ALL_REDUCE, 8)
    assert (lb.latency_steps, lb.bandwidth_factor, lb.reduction_factor) == (3, 2 * 7 / 8, 7 / 8)
    assert chan_lower_bound(Collective.BROADCAST, 5).latency_steps == math.ceil(math.log2(5)) == 3
    assert chan_lower_bound(Collective.ALL_GATHER, 8).bandwidth_factor == pytest.approx(7 / 8)
    assert chan_lower_bound(Collective.REDUCE, 8).bandwidth_factor == 1.0
    for kind in Collective:  # no algorithm here moves less than Chan's bandwidth bound, except in-network
        for alg in (Algorithm.RING, Algorithm.ONE_SHOT, Algorithm.TWO_SHOT):
            t = traffic(kind, alg, S, 8)
            if t is not None:
                assert t.bytes >= chan_lower_bound(kind, 8).bandwidth_factor * S * (1 - 1e-12), (kind, alg)


def test_hierarchical_all_reduce_splits_into_tiers():
    # 4 nodes × 8 GPUs: RS + AG inside the node (2·7/8·S), all-reduce of S/8 across 4 nodes (2·3/4·S/8)
    tiers = hierarchical_traffic(Collective.ALL_REDUCE, S, 8, 4, intra=Algorithm.ONE_SHOT)
    assert tiers.scaleup.bytes == pytest.approx(2 * 7 / 8 * S)
    assert tiers.scaleout.bytes == pytest.approx(2 * 3 / 4 * S / 8)


def test_hierarchical_all_to_all_sends_off_node_share_through_the_nic():
    tiers = hierarchical_traffic(Collective.ALL_TO_ALL, S, 8, 4, intra=Algorithm.ONE_SHOT)
    assert tiers.scaleout.bytes == pytest.approx(3 / 4 * S)  # 24 of 32 destinations are off-node
    assert tiers.scaleup.bytes == pytest.approx(7 / 32 * S)  # 7 of 32 are local peers


def test_all_to_allv_takes_the_busiest_rank():
    m = [[0, 10, 10], [1, 0, 1], [100, 1, 0]]
    t = all_to_allv_traffic(m)
    assert t.send_bytes == 101  # rank 2 sends 100 + 1
    assert t.recv_bytes == 101  # rank 0 receives 1 + 100


def test_two_level_collectives_exist_for_an_in_node_algorithm_only_where_it_does_them_in_one_node():
    from pkroof.rooflines.collectives import Algorithm, Collective, hierarchical_traffic, traffic

    S, g, N = 64 * 2**20, 8, 2
    # multimem (in-network) reduces or multicasts: nothing of the kind in an all-to-all, a gather or a send, on one
    # node or across two
    for kind in (Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER, Collective.SEND_RECV):
        assert traffic(kind, Algorithm.IN_NETWORK, S, g) is None
        assert hierarchical_traffic(kind, S, g, N, intra=Algorithm.IN_NETWORK) is None
    # the all-to-all by direct (one-shot) copies: of one rank's S, (N-1)/N goes to other nodes through the NIC, and
    # (g-1)/(N g) to the other g-1 GPUs of its own node
    t = hierarchical_traffic(Collective.ALL_TO_ALL, S, g, N, intra=Algorithm.ONE_SHOT)
    assert t.scaleout.send_bytes == S / 2 and t.scaleup.send_bytes == 7 / 16 * S
    # while the all-reduce's in-node steps are the switch's: reduce-scatter (f·S out) + all-gather (S/g out)
    t = hierarchical_traffic(Collective.ALL_REDUCE, S, g, N, intra=Algorithm.IN_NETWORK)
    assert t is not None and t.scaleup.send_bytes == 7 / 8 * S + S / 8
